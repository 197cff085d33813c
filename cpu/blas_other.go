//go:build !linux && !darwin

package cpu

// loadBLAS finds no BLAS on platforms other than Linux and macOS; the
// backend uses the pure-Go GEMM there.
func loadBLAS() *blasLib { return nil }
