// The gated delta rule's AVX2 and AVX-512 kernels: the chunked form's
// triangular solve and the recurrent form's one step over a head's state
// (delta.go, recurrent.go).

#include "textflag.h"

// func triSolve64AVX2(x *float32, ldx int, a *float32, lda int, n int)
//
// Forward substitution on a block of 64 columns: for 1 ≤ i < n, row i of x
// −= Σ_{j<i} a[i·lda+j] · row j of x, j ascending (multiply, then subtract,
// as subScaled). Rows of x are ldx floats apart, rows of a lda floats.
TEXT ·triSolve64AVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), DI
	MOVQ ldx+8(FP), R8
	SHLQ $2, R8
	MOVQ a+16(FP), SI
	MOVQ lda+24(FP), R9
	SHLQ $2, R9
	MOVQ n+32(FP), CX
	CMPQ CX, $1
	JLE  tsdone
	MOVQ $1, R10
	MOVQ DI, R11
	ADDQ R8, R11
	MOVQ SI, R12
	ADDQ R9, R12

tsrow:
	VMOVUPS 0(R11), Y0
	VMOVUPS 32(R11), Y1
	VMOVUPS 64(R11), Y2
	VMOVUPS 96(R11), Y3
	VMOVUPS 128(R11), Y4
	VMOVUPS 160(R11), Y5
	VMOVUPS 192(R11), Y6
	VMOVUPS 224(R11), Y7
	MOVQ    DI, R13
	XORQ    R14, R14

tscol:
	VBROADCASTSS (R12)(R14*4), Y8
	VMULPS       0(R13), Y8, Y9
	VMULPS       32(R13), Y8, Y10
	VMULPS       64(R13), Y8, Y11
	VMULPS       96(R13), Y8, Y12
	VSUBPS       Y9, Y0, Y0
	VSUBPS       Y10, Y1, Y1
	VSUBPS       Y11, Y2, Y2
	VSUBPS       Y12, Y3, Y3
	VMULPS       128(R13), Y8, Y13
	VMULPS       160(R13), Y8, Y14
	VMULPS       192(R13), Y8, Y15
	VMULPS       224(R13), Y8, Y9
	VSUBPS       Y13, Y4, Y4
	VSUBPS       Y14, Y5, Y5
	VSUBPS       Y15, Y6, Y6
	VSUBPS       Y9, Y7, Y7
	ADDQ         R8, R13
	INCQ         R14
	CMPQ         R14, R10
	JLT          tscol

	VMOVUPS Y0, 0(R11)
	VMOVUPS Y1, 32(R11)
	VMOVUPS Y2, 64(R11)
	VMOVUPS Y3, 96(R11)
	VMOVUPS Y4, 128(R11)
	VMOVUPS Y5, 160(R11)
	VMOVUPS Y6, 192(R11)
	VMOVUPS Y7, 224(R11)
	ADDQ    R8, R11
	ADDQ    R9, R12
	INCQ    R10
	CMPQ    R10, CX
	JLT     tsrow

tsdone:
	VZEROUPPER
	RET

// func deltaStepAVX2(st *float32, dk, dv int, k, q, v *float32, beta float32, o, kn *float32, dn float32, kv *float32)
//
// One position of the recurrent delta rule over the state st ([dk, dv], dv a
// positive multiple of 16), as deltaStep, one block of 16 columns at a time:
// unless k is nil, δ = β·(v − kv) and, for each state row i, x = s + k[i]·δ
// and o += q[i]·x (o written, not read); then s = x·dn and, unless kn is
// nil, kv += kn[i]·s (kv written from zero). Products are rounded before
// their sums, in the order of the tests' plain Go deltaStepRef, so the bits
// agree.
TEXT ·deltaStepAVX2(SB), NOSPLIT, $0-88
	MOVQ st+0(FP), DI
	MOVQ dk+8(FP), R8
	MOVQ dv+16(FP), R9
	MOVQ k+24(FP), R10
	MOVQ q+32(FP), R11
	MOVQ v+40(FP), R12
	VBROADCASTSS beta+48(FP), Y14
	MOVQ o+56(FP), R13
	MOVQ kn+64(FP), R14
	VBROADCASTSS dn+72(FP), Y15
	MOVQ kv+80(FP), R15
	MOVQ R9, BX
	SHLQ $2, BX        // row stride in bytes
	XORQ DX, DX        // column offset of the block, in bytes

dsblock:
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	TESTQ R10, R10
	JZ    dsnodelta
	VMOVUPS (R12)(DX*1), Y0
	VMOVUPS 32(R12)(DX*1), Y1
	VSUBPS (R15)(DX*1), Y0, Y0
	VSUBPS 32(R15)(DX*1), Y1, Y1
	VMULPS Y14, Y0, Y0
	VMULPS Y14, Y1, Y1

dsnodelta:
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	LEAQ (DI)(DX*1), SI // this block of row 0
	XORQ CX, CX         // row i

dsrow:
	VMOVUPS (SI), Y6
	VMOVUPS 32(SI), Y7
	TESTQ R10, R10
	JZ    dsdecay
	VBROADCASTSS (R10)(CX*4), Y8
	VBROADCASTSS (R11)(CX*4), Y9
	VMULPS Y0, Y8, Y10
	VMULPS Y1, Y8, Y11
	VADDPS Y10, Y6, Y6
	VADDPS Y11, Y7, Y7
	VMULPS Y6, Y9, Y10
	VMULPS Y7, Y9, Y11
	VADDPS Y10, Y2, Y2
	VADDPS Y11, Y3, Y3

dsdecay:
	VMULPS Y15, Y6, Y6
	VMULPS Y15, Y7, Y7
	TESTQ R14, R14
	JZ    dsstore
	VBROADCASTSS (R14)(CX*4), Y12
	VMULPS Y6, Y12, Y10
	VMULPS Y7, Y12, Y11
	VADDPS Y10, Y4, Y4
	VADDPS Y11, Y5, Y5

dsstore:
	VMOVUPS Y6, (SI)
	VMOVUPS Y7, 32(SI)
	ADDQ BX, SI
	INCQ CX
	CMPQ CX, R8
	JL   dsrow

	TESTQ R10, R10
	JZ    dskv
	VMOVUPS Y2, (R13)(DX*1)
	VMOVUPS Y3, 32(R13)(DX*1)

dskv:
	VMOVUPS Y4, (R15)(DX*1)
	VMOVUPS Y5, 32(R15)(DX*1)
	ADDQ $64, DX
	CMPQ DX, BX
	JL   dsblock

	VZEROUPPER
	RET

// func deltaStepAVX512(st *float32, dk, dv int, k, q, v *float32, beta float32, o, kn *float32, dn float32, kv *float32)
//
// deltaStepAVX2 in blocks of 32 columns (two 16-lane registers), dv a
// positive multiple of 32; the same operations in the same order, so the
// same bits.
TEXT ·deltaStepAVX512(SB), NOSPLIT, $0-88
	MOVQ st+0(FP), DI
	MOVQ dk+8(FP), R8
	MOVQ dv+16(FP), R9
	MOVQ k+24(FP), R10
	MOVQ q+32(FP), R11
	MOVQ v+40(FP), R12
	VBROADCASTSS beta+48(FP), Z14
	MOVQ o+56(FP), R13
	MOVQ kn+64(FP), R14
	VBROADCASTSS dn+72(FP), Z15
	MOVQ kv+80(FP), R15
	MOVQ R9, BX
	SHLQ $2, BX        // row stride in bytes
	XORQ DX, DX        // column offset of the block, in bytes

dzblock:
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	TESTQ R10, R10
	JZ    dznodelta
	VMOVUPS (R12)(DX*1), Z0
	VMOVUPS 64(R12)(DX*1), Z1
	VSUBPS (R15)(DX*1), Z0, Z0
	VSUBPS 64(R15)(DX*1), Z1, Z1
	VMULPS Z14, Z0, Z0
	VMULPS Z14, Z1, Z1

dznodelta:
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	LEAQ (DI)(DX*1), SI // this block of row 0
	XORQ CX, CX         // row i

dzrow:
	VMOVUPS (SI), Z6
	VMOVUPS 64(SI), Z7
	TESTQ R10, R10
	JZ    dzdecay
	VBROADCASTSS (R10)(CX*4), Z8
	VBROADCASTSS (R11)(CX*4), Z9
	VMULPS Z0, Z8, Z10
	VMULPS Z1, Z8, Z11
	VADDPS Z10, Z6, Z6
	VADDPS Z11, Z7, Z7
	VMULPS Z6, Z9, Z10
	VMULPS Z7, Z9, Z11
	VADDPS Z10, Z2, Z2
	VADDPS Z11, Z3, Z3

dzdecay:
	VMULPS Z15, Z6, Z6
	VMULPS Z15, Z7, Z7
	TESTQ R14, R14
	JZ    dzstore
	VBROADCASTSS (R14)(CX*4), Z12
	VMULPS Z6, Z12, Z10
	VMULPS Z7, Z12, Z11
	VADDPS Z10, Z4, Z4
	VADDPS Z11, Z5, Z5

dzstore:
	VMOVUPS Z6, (SI)
	VMOVUPS Z7, 64(SI)
	ADDQ BX, SI
	INCQ CX
	CMPQ CX, R8
	JL   dzrow

	TESTQ R10, R10
	JZ    dzkv
	VMOVUPS Z2, (R13)(DX*1)
	VMOVUPS Z3, 64(R13)(DX*1)

dzkv:
	VMOVUPS Z4, (R15)(DX*1)
	VMOVUPS Z5, 64(R15)(DX*1)
	ADDQ $128, DX
	CMPQ DX, BX
	JL   dzblock

	VZEROUPPER
	RET
