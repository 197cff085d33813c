package cpu

import "golang.org/x/sys/cpu"

// archInt8Kernels returns the arm64 kernels, best first.
func archInt8Kernels() []int8Kernel {
	return []int8Kernel{
		{name: "neon-sdot", env: "sdot", mr: 4, nr: 4, kv: 16, ok: cpu.ARM64.HasASIMDDP, tile: int8TileSDOT},
	}
}

// int8TileSDOT is the 4×4 neon-sdot tile (kv 16).
func int8TileSDOT(k int, a []byte, lda int, w []byte, ldw int, c []int32) {
	_, _, _ = a[3*lda+k-1], w[3*ldw+k-1], c[15]
	int8Tile4x4SDOT(k, &a[0], lda, &w[0], ldw, &c[0])
}

// int8Tile4x4SDOT is in int8_arm64.s.
//
//go:noescape
func int8Tile4x4SDOT(k int, a *byte, lda int, w *byte, ldw int, c *int32)
