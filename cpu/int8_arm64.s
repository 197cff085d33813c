#include "textflag.h"

// SDOT Vd.4S, Vn.16B, Vm.16B (dot product extension): each int32 lane of
// Vd += the 4-way dot product of the signed bytes of Vn and Vm. The Go
// assembler has no mnemonic for it; SDOT(d, n, m) is its encoding.
#define SDOT(d, n, m) WORD $(0x4E809400 | (m)<<16 | (n)<<5 | (d))

// func int8Tile4x4SDOT(k int, a *byte, lda int, w *byte, ldw int, c *int32)
//
// c[4r+j] = Σ_{i<k} a[r·lda+i]·w[j·ldw+i] for r, j < 4, a and w int8;
// k is a positive multiple of 16. Rows of a are in V16–V19, channels of w
// in V20–V23, the accumulator of (r, j) in V(4r+j).
TEXT ·int8Tile4x4SDOT(SB), NOSPLIT, $0-48
	MOVD k+0(FP), R9
	MOVD a+8(FP), R0
	MOVD lda+16(FP), R10
	MOVD w+24(FP), R4
	MOVD ldw+32(FP), R11
	MOVD c+40(FP), R8
	ADD  R10, R0, R1
	ADD  R10, R1, R2
	ADD  R10, R2, R3
	ADD  R11, R4, R5
	ADD  R11, R5, R6
	ADD  R11, R6, R7
	LSR  $4, R9, R9
	VEOR V0.B16, V0.B16, V0.B16
	VEOR V1.B16, V1.B16, V1.B16
	VEOR V2.B16, V2.B16, V2.B16
	VEOR V3.B16, V3.B16, V3.B16
	VEOR V4.B16, V4.B16, V4.B16
	VEOR V5.B16, V5.B16, V5.B16
	VEOR V6.B16, V6.B16, V6.B16
	VEOR V7.B16, V7.B16, V7.B16
	VEOR V8.B16, V8.B16, V8.B16
	VEOR V9.B16, V9.B16, V9.B16
	VEOR V10.B16, V10.B16, V10.B16
	VEOR V11.B16, V11.B16, V11.B16
	VEOR V12.B16, V12.B16, V12.B16
	VEOR V13.B16, V13.B16, V13.B16
	VEOR V14.B16, V14.B16, V14.B16
	VEOR V15.B16, V15.B16, V15.B16

sdotloop:
	VLD1.P 16(R0), [V16.B16]
	VLD1.P 16(R1), [V17.B16]
	VLD1.P 16(R2), [V18.B16]
	VLD1.P 16(R3), [V19.B16]
	VLD1.P 16(R4), [V20.B16]
	VLD1.P 16(R5), [V21.B16]
	VLD1.P 16(R6), [V22.B16]
	VLD1.P 16(R7), [V23.B16]
	SDOT(0, 16, 20)
	SDOT(1, 16, 21)
	SDOT(2, 16, 22)
	SDOT(3, 16, 23)
	SDOT(4, 17, 20)
	SDOT(5, 17, 21)
	SDOT(6, 17, 22)
	SDOT(7, 17, 23)
	SDOT(8, 18, 20)
	SDOT(9, 18, 21)
	SDOT(10, 18, 22)
	SDOT(11, 18, 23)
	SDOT(12, 19, 20)
	SDOT(13, 19, 21)
	SDOT(14, 19, 22)
	SDOT(15, 19, 23)
	SUBS $1, R9, R9
	BNE  sdotloop

	VADDP V1.S4, V0.S4, V24.S4
	VADDP V3.S4, V2.S4, V25.S4
	VADDP V25.S4, V24.S4, V24.S4
	VST1.P [V24.S4], 16(R8)
	VADDP V5.S4, V4.S4, V24.S4
	VADDP V7.S4, V6.S4, V25.S4
	VADDP V25.S4, V24.S4, V24.S4
	VST1.P [V24.S4], 16(R8)
	VADDP V9.S4, V8.S4, V24.S4
	VADDP V11.S4, V10.S4, V25.S4
	VADDP V25.S4, V24.S4, V24.S4
	VST1.P [V24.S4], 16(R8)
	VADDP V13.S4, V12.S4, V24.S4
	VADDP V15.S4, V14.S4, V25.S4
	VADDP V25.S4, V24.S4, V24.S4
	VST1.P [V24.S4], 16(R8)
	RET
