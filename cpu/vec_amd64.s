// The AVX2 and AVX-512 elementwise and reduction kernels that need no
// exponential (bf16 widening, scaling, the 4-tap conv, max, sum of squares,
// adds and products) and the MXCSR access of ftz_amd64.go.

#include "textflag.h"

// func bf16AVX2(dst *float32, src *byte, n int)
//
// Widens n bfloat16 values (n a multiple of 16) from src to dst.
TEXT ·bf16AVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   bfdone

bfloop:
	VPMOVZXWD (SI), Y0
	VPMOVZXWD 16(SI), Y1
	VPSLLD $16, Y0, Y0
	VPSLLD $16, Y1, Y1
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	ADDQ $32, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  bfloop

bfdone:
	VZEROUPPER
	RET

// func getMXCSR() uint32
TEXT ·getMXCSR(SB), NOSPLIT, $0-4
	STMXCSR ret+0(FP)
	RET

// func setMXCSR(x uint32)
TEXT ·setMXCSR(SB), NOSPLIT, $0-4
	LDMXCSR x+0(FP)
	RET

// func subScaledAVX2(dst, src *float32, n int, a float32)
//
// dst[i] −= a·src[i] for i < n, n a multiple of 8 (multiply, then subtract:
// no fused rounding, as the scalar loop).
TEXT ·subScaledAVX2(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y1
	SHRQ $3, CX
	JZ   subdone

subloop:
	VMULPS (SI), Y1, Y0
	VMOVUPS (DI), Y2
	VSUBPS Y0, Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  subloop

subdone:
	VZEROUPPER
	RET

// func scaleAVX2(dst, src *float32, n int, a float32)
//
// dst[i] = a·src[i] for i < n, n a multiple of 8. dst may equal src.
TEXT ·scaleAVX2(SB), NOSPLIT, $0-28
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y1
	SHRQ $3, CX
	JZ   scaledone

scaleloop:
	VMULPS (SI), Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  scaleloop

scaledone:
	VZEROUPPER
	RET

// func conv4AVX2(o, w0, w1, w2, w3, x0, x1, x2, x3 *float32, n int)
//
// o[c] = ((w0·x0 + w1·x1) + w2·x2) + w3·x3 at each c < n, n a multiple of
// 8, each product and sum rounded as the scalar loop rounds it.
TEXT ·conv4AVX2(SB), NOSPLIT, $0-80
	MOVQ o+0(FP), DI
	MOVQ w0+8(FP), R8
	MOVQ w1+16(FP), R9
	MOVQ w2+24(FP), R10
	MOVQ w3+32(FP), R11
	MOVQ x0+40(FP), R12
	MOVQ x1+48(FP), R13
	MOVQ x2+56(FP), SI
	MOVQ x3+64(FP), DX
	MOVQ n+72(FP), CX
	SHRQ $3, CX
	JZ   convdone
	XORQ AX, AX

convloop:
	VMOVUPS (R8)(AX*1), Y0
	VMULPS (R12)(AX*1), Y0, Y0
	VMOVUPS (R9)(AX*1), Y1
	VMULPS (R13)(AX*1), Y1, Y1
	VADDPS Y1, Y0, Y0
	VMOVUPS (R10)(AX*1), Y1
	VMULPS (SI)(AX*1), Y1, Y1
	VADDPS Y1, Y0, Y0
	VMOVUPS (R11)(AX*1), Y1
	VMULPS (DX)(AX*1), Y1, Y1
	VADDPS Y1, Y0, Y0
	VMOVUPS Y0, (DI)(AX*1)
	ADDQ $32, AX
	DECQ CX
	JNZ  convloop

convdone:
	VZEROUPPER
	RET

// func maxAVX2(src *float32, n int) float32
//
// The largest of src[:n], n a positive multiple of 8 (VMAXPS: a NaN may be
// skipped where the scalar max would return it).
TEXT ·maxAVX2(SB), NOSPLIT, $0-20
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	VMOVUPS (SI), Y0
	ADDQ $32, SI
	DECQ CX
	JZ   maxreduce

maxloop:
	VMAXPS (SI), Y0, Y0
	ADDQ $32, SI
	DECQ CX
	JNZ  maxloop

maxreduce:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func sumSqAVX2(x *float32, n int) float64
//
// Σ x[i]² for i < n, n a positive multiple of 8, each square and sum in
// float64 (in 8 lanes, then added pairwise).
TEXT ·sumSqAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $3, CX
	VXORPD Y0, Y0, Y0
	VXORPD Y2, Y2, Y2

sqloop:
	VCVTPS2PD (SI), Y1
	VCVTPS2PD 16(SI), Y3
	VFMADD231PD Y1, Y1, Y0
	VFMADD231PD Y3, Y3, Y2
	ADDQ $32, SI
	DECQ CX
	JNZ  sqloop

	VADDPD Y2, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPD X1, X0, X0
	VPERMILPD $1, X0, X1
	VADDSD X1, X0, X0
	VMOVSD X0, ret+16(FP)
	VZEROUPPER
	RET

// func maxAVX512(src *float32, n int) float32
//
// The largest of src[:n], n a positive multiple of 16 (VMAXPS, as maxAVX2).
TEXT ·maxAVX512(SB), NOSPLIT, $0-20
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), CX
	SHRQ $4, CX
	VMOVUPS (SI), Z0
	ADDQ $64, SI
	DECQ CX
	JZ   max5reduce

max5loop:
	VMAXPS (SI), Z0, Z0
	ADDQ $64, SI
	DECQ CX
	JNZ  max5loop

max5reduce:
	VEXTRACTF64X4 $1, Z0, Y1
	VMAXPS Y1, Y0, Y0
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VMOVSS X0, ret+16(FP)
	VZEROUPPER
	RET

// func addAVX2(dst, src *float32, n int)
//
// dst[i] += src[i] for i < n, n a multiple of 8.
TEXT ·addAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   adddone

addloop:
	VMOVUPS (DI), Y0
	VADDPS (SI), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  addloop

adddone:
	VZEROUPPER
	RET

// func mulAVX2(dst, a, b *float32, n int)
//
// dst[i] = a[i]·b[i] for i < n, n a multiple of 8. dst may equal a or b.
TEXT ·mulAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX
	JZ   muldone

mulloop:
	VMOVUPS (SI), Y0
	VMULPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  mulloop

muldone:
	VZEROUPPER
	RET

// func scaleMulAVX2(dst, x, w *float32, n int, s float32)
//
// dst[i] = (x[i]·s)·w[i] for i < n, n a multiple of 8, each product
// rounded. dst may equal x.
TEXT ·scaleMulAVX2(SB), NOSPLIT, $0-36
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ w+16(FP), DX
	MOVQ n+24(FP), CX
	VBROADCASTSS s+32(FP), Y1
	SHRQ $3, CX
	JZ   smdone

smloop:
	VMULPS (SI), Y1, Y0
	VMULPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DX
	ADDQ $32, DI
	DECQ CX
	JNZ  smloop

smdone:
	VZEROUPPER
	RET
