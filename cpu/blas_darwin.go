package cpu

// blasCandidates lists the libraries tried on macOS: Accelerate's cblas.
func blasCandidates() []blasCandidate {
	return []blasCandidate{
		{"/System/Library/Frameworks/Accelerate.framework/Accelerate", "accelerate"},
	}
}
