package cpu

// BLAS names the system BLAS the backend calls: "openblas", "accelerate",
// "blas" (another cblas, e.g. the one STARTLUX_BLAS names), or "" when the
// pure-Go GEMM runs instead.
func (b *Backend) BLAS() string {
	if b.blas == nil {
		return ""
	}
	return b.blas.name
}
