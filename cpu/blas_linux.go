package cpu

// blasCandidates lists the libraries tried on Linux, in order.
func blasCandidates() []blasCandidate {
	return []blasCandidate{
		{"libopenblas.so.0", "openblas"},
		{"libopenblas.so", "openblas"},
		{"libblas.so.3", "blas"},
	}
}
