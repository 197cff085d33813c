package cpu

import "golang.org/x/sys/cpu"

// haveKernel reports whether kern6x16 can run here (AVX2 and FMA).
var haveKernel = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// kern6x16 computes a 6×16 block of a GEMM from packed panels (see
// kernel_amd64.s).
//
//go:noescape
func kern6x16(k int, a, b, c *float32)

// haveAVX512 reports whether the 16-lane softmax loops of vec_amd64.s can
// run here (AVX-512F, with the OS saving its registers).
var haveAVX512 = haveKernel && cpu.X86.HasAVX512F
