package doctor

// Int8 is the kernel of MatMul over int8 weights this machine runs.
type Int8 struct {
	Check
	// Kernel names it ("" when there is none).
	Kernel string `json:"kernel"`
}

// checkInt8 reports the int8 kernel. This build has no int8 weights yet:
// the check says so rather than guess. (Where the CPU backend can name its
// int8 kernel, this reports that name.)
func checkInt8() Int8 {
	return Int8{Check: failedf("not available in this build")}
}
