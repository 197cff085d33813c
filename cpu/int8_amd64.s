#include "textflag.h"

// Int8 kernels for amd64; see int8.go for what each computes.

// One weight channel of the 3×3 avx2 tile: Y12 = 32 bytes of the channel's
// weights, Y13 = |w| (unsigned), and for each row r (activations Y9–Y11)
// acc_r += vpmaddwd(vpmaddubsw(|w|, x_r with w's sign), ones). Every int16
// pair sum of vpmaddubsw is |w|·|x| + |w|·|x| ≤ 2·128·127 = 32512: no
// saturation for w in [−128, 127], x in [−127, 127].
#define AVX2_CH(wsrc, acc0, acc1, acc2) \
	VMOVDQU    wsrc, Y12;       \
	VPABSB     Y12, Y13;        \
	VPSIGNB    Y12, Y9, Y14;    \
	VPMADDUBSW Y14, Y13, Y14;   \
	VPMADDWD   Y15, Y14, Y14;   \
	VPADDD     Y14, acc0, acc0; \
	VPSIGNB    Y12, Y10, Y14;   \
	VPMADDUBSW Y14, Y13, Y14;   \
	VPMADDWD   Y15, Y14, Y14;   \
	VPADDD     Y14, acc1, acc1; \
	VPSIGNB    Y12, Y11, Y14;   \
	VPMADDUBSW Y14, Y13, Y14;   \
	VPMADDWD   Y15, Y14, Y14;   \
	VPADDD     Y14, acc2, acc2

// ROW3 stores the three dwords of a row of sums, lanes 0–2 of src, at
// (p); ROW3ADD adds them to the dwords there (xt scratch).
#define ROW3(src, p) \
	VMOVQ   src, (p); \
	VPEXTRD $2, src, 8(p)

#define ROW3ADD(src, xt, p) \
	VMOVQ   (p), xt;           \
	VPINSRD $2, 8(p), xt, xt;  \
	VPADDD  xt, src, src;      \
	VMOVQ   src, (p);          \
	VPEXTRD $2, src, 8(p)

// func int8Panel3x3AVX2(k int, a *byte, lda int, w *byte, ldw int, nt int, c *int32, ldc int, add bool)
//
// For t < nt, r, j < 3: the sum s = Σ_{i<k} a[r·lda+i]·w[(3t+j)·ldw+i] (a,
// w int8) is stored at c[r·ldc+3t+j], or with add added to it; k is a
// positive multiple of 32, nt positive.
TEXT ·int8Panel3x3AVX2(SB), NOSPLIT, $0-65
	MOVQ k+0(FP), R11
	MOVQ a+8(FP), R12
	MOVQ lda+16(FP), R8
	MOVQ w+24(FP), DI
	MOVQ ldw+32(FP), R9
	MOVQ nt+40(FP), BX
	MOVQ c+48(FP), DX
	MOVQ ldc+56(FP), R10
	MOVBLZX add+64(FP), R13
	SHLQ $2, R10                // ldc in bytes
	SHRQ $5, R11                // steps of 32 columns
	LEAQ (R9)(R9*2), R14        // 3 channels of w
	MOVQ R11, AX
	SHLQ $5, AX
	SUBQ AX, R14                // from the end of a tile to the next one
	MOVL         $0x00010001, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15

paneltile:
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	VPXOR Y4, Y4, Y4
	VPXOR Y5, Y5, Y5
	VPXOR Y6, Y6, Y6
	VPXOR Y7, Y7, Y7
	VPXOR Y8, Y8, Y8
	MOVQ  R12, SI
	MOVQ  R11, CX

panelloop:
	VMOVDQU (SI), Y9
	VMOVDQU (SI)(R8*1), Y10
	VMOVDQU (SI)(R8*2), Y11
	AVX2_CH((DI), Y0, Y3, Y6)
	AVX2_CH((DI)(R9*1), Y1, Y4, Y7)
	AVX2_CH((DI)(R9*2), Y2, Y5, Y8)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  panelloop

	// X0 = s00 s01 s02 s10, X4 = s11 s12 s20 s21, X8 = s22.
	VPHADDD      Y1, Y0, Y0
	VPHADDD      Y3, Y2, Y2
	VPHADDD      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X9
	VPADDD       X9, X0, X0
	VPHADDD      Y5, Y4, Y4
	VPHADDD      Y7, Y6, Y6
	VPHADDD      Y6, Y4, Y4
	VEXTRACTI128 $1, Y4, X9
	VPADDD       X9, X4, X4
	VEXTRACTI128 $1, Y8, X9
	VPADDD       X9, X8, X8
	VPHADDD      X8, X8, X8
	VPHADDD      X8, X8, X8
	VPALIGNR     $12, X0, X4, X1 // s10 s11 s12 s20
	VPALIGNR     $8, X4, X8, X2  // s20 s21 s22 s22
	LEAQ         (DX)(R10*1), SI
	LEAQ         (SI)(R10*1), AX
	TESTQ        R13, R13
	JNZ          paneladd
	ROW3(X0, DX)
	ROW3(X1, SI)
	ROW3(X2, AX)
	JMP          panelnext

paneladd:
	ROW3ADD(X0, X9, DX)
	ROW3ADD(X1, X9, SI)
	ROW3ADD(X2, X9, AX)

panelnext:
	ADDQ R14, DI
	ADDQ $12, DX
	DECQ BX
	JNZ  paneltile
	VZEROUPPER
	RET

// One weight channel of the 4×6 avx512-vnni tile: Z28 = 64 bytes of the
// channel's weights (signed), and for each row r (offset activations
// Z24–Z27, unsigned) acc_r += 4-way dot products (vpdpbusd, int32,
// wrapping).
#define VNNI_CH(wsrc, acc0, acc1, acc2, acc3) \
	VMOVDQU32 wsrc, Z28;       \
	VPDPBUSD  Z28, Z24, acc0; \
	VPDPBUSD  Z28, Z25, acc1; \
	VPDPBUSD  Z28, Z26, acc2; \
	VPDPBUSD  Z28, Z27, acc3

// Adds the upper half of a 16-lane accumulator to its lower half.
#define FOLD(z, y) \
	VEXTRACTI64X4 $1, z, Y27; \
	VPADDD        Y27, y, y

// Horizontal sums of four 8-lane accumulators A, B, C, D (any of Y0–Y23)
// into the four dwords at dst, with EVEX forms only (Y24–Y26 scratch).
#define RED4(A, B, C, D, dst) \
	VPUNPCKLDQ    B, A, Y24;     \
	VPUNPCKHDQ    B, A, Y25;     \
	VPADDD        Y25, Y24, Y24; \
	VPUNPCKLDQ    D, C, Y25;     \
	VPUNPCKHDQ    D, C, Y26;     \
	VPADDD        Y26, Y25, Y25; \
	VPUNPCKLQDQ   Y25, Y24, Y26; \
	VPUNPCKHQDQ   Y25, Y24, Y24; \
	VPADDD        Y26, Y24, Y24; \
	VEXTRACTI32X4 $1, Y24, X25;  \
	VPADDD        X25, X24, X24; \
	VMOVDQU32     X24, dst

// func int8Tile4x6VNNI(k int, a *byte, lda int, w *byte, ldw int, c *int32)
//
// c[6r+j] = Σ_{i<k} a[r·lda+i]·w[j·ldw+i] for r < 4, j < 6, a unsigned
// (offset activations) and w signed, in wrapping int32; k is a positive
// multiple of 64. Accumulator of (r, j) is Z(6r+j).
TEXT ·int8Tile4x6VNNI(SB), NOSPLIT, $0-48
	MOVQ k+0(FP), CX
	MOVQ a+8(FP), SI
	MOVQ lda+16(FP), R8
	MOVQ w+24(FP), DI
	MOVQ ldw+32(FP), R9
	MOVQ c+40(FP), DX
	LEAQ (R8)(R8*2), R10
	ADDQ SI, R10                // row 3 of a
	LEAQ (R9)(R9*2), R11
	ADDQ DI, R11                // channel 3 of w
	SHRQ $6, CX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23

vnniloop:
	VMOVDQU32 (SI), Z24
	VMOVDQU32 (SI)(R8*1), Z25
	VMOVDQU32 (SI)(R8*2), Z26
	VMOVDQU32 (R10), Z27
	VNNI_CH((DI), Z0, Z6, Z12, Z18)
	VNNI_CH((DI)(R9*1), Z1, Z7, Z13, Z19)
	VNNI_CH((DI)(R9*2), Z2, Z8, Z14, Z20)
	VNNI_CH((R11), Z3, Z9, Z15, Z21)
	VNNI_CH((R11)(R9*1), Z4, Z10, Z16, Z22)
	VNNI_CH((R11)(R9*2), Z5, Z11, Z17, Z23)
	ADDQ $64, SI
	ADDQ $64, R10
	ADDQ $64, DI
	ADDQ $64, R11
	DECQ CX
	JNZ  vnniloop

	FOLD(Z0, Y0)
	FOLD(Z1, Y1)
	FOLD(Z2, Y2)
	FOLD(Z3, Y3)
	FOLD(Z4, Y4)
	FOLD(Z5, Y5)
	FOLD(Z6, Y6)
	FOLD(Z7, Y7)
	FOLD(Z8, Y8)
	FOLD(Z9, Y9)
	FOLD(Z10, Y10)
	FOLD(Z11, Y11)
	FOLD(Z12, Y12)
	FOLD(Z13, Y13)
	FOLD(Z14, Y14)
	FOLD(Z15, Y15)
	FOLD(Z16, Y16)
	FOLD(Z17, Y17)
	FOLD(Z18, Y18)
	FOLD(Z19, Y19)
	FOLD(Z20, Y20)
	FOLD(Z21, Y21)
	FOLD(Z22, Y22)
	FOLD(Z23, Y23)
	RED4(Y0, Y1, Y2, Y3, (DX))
	RED4(Y4, Y5, Y6, Y7, 16(DX))
	RED4(Y8, Y9, Y10, Y11, 32(DX))
	RED4(Y12, Y13, Y14, Y15, 48(DX))
	RED4(Y16, Y17, Y18, Y19, 64(DX))
	RED4(Y20, Y21, Y22, Y23, 80(DX))
	VZEROUPPER
	RET

// func int8OutAVX2(out *float32, acc *int32, cs *float32, n int, rs float32)
//
// out[j] = (float32(acc[j])·rs)·cs[j] for j < n, n a positive multiple of
// 8: the conversion rounds to nearest even, each multiply rounds, as in
// tensor.Int8Output.
TEXT ·int8OutAVX2(SB), NOSPLIT, $0-36
	MOVQ         out+0(FP), DI
	MOVQ         acc+8(FP), SI
	MOVQ         cs+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS rs+32(FP), Y15
	SHRQ         $3, CX

outloop:
	VCVTDQ2PS (SI), Y0
	VMULPS    Y15, Y0, Y0
	VMULPS    (DX), Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DX
	ADDQ      $32, DI
	DECQ      CX
	JNZ       outloop
	VZEROUPPER
	RET

DATA absmask<>+0(SB)/4, $0x7fffffff
GLOBL absmask<>(SB), RODATA|NOPTR, $4

// func absMaxAVX2(x *float32, n int) uint32
//
// Returns max over i < n of the bits of x[i] with the sign cleared (they
// order as the magnitudes, NaN and infinities above every finite value);
// n is a positive multiple of 32.
TEXT ·absMaxAVX2(SB), NOSPLIT, $0-20
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VPBROADCASTD absmask<>(SB), Y15
	VPXOR        Y0, Y0, Y0
	VPXOR        Y1, Y1, Y1
	VPXOR        Y2, Y2, Y2
	VPXOR        Y3, Y3, Y3
	SHRQ         $5, CX

maxloop:
	VPAND   (SI), Y15, Y4
	VPAND   32(SI), Y15, Y5
	VPAND   64(SI), Y15, Y6
	VPAND   96(SI), Y15, Y7
	VPMAXUD Y4, Y0, Y0
	VPMAXUD Y5, Y1, Y1
	VPMAXUD Y6, Y2, Y2
	VPMAXUD Y7, Y3, Y3
	ADDQ    $128, SI
	DECQ    CX
	JNZ     maxloop

	VPMAXUD      Y1, Y0, Y0
	VPMAXUD      Y3, Y2, Y2
	VPMAXUD      Y2, Y0, Y0
	VEXTRACTI128 $1, Y0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0x4e, X0, X1
	VPMAXUD      X1, X0, X0
	VPSHUFD      $0xb1, X0, X1
	VPMAXUD      X1, X0, X0
	VMOVD        X0, AX
	MOVL         AX, ret+16(FP)
	VZEROUPPER
	RET

// The order that puts the dwords of vpackssdw/vpacksswb's lane-interleaved
// result back in sequence.
DATA packperm<>+0(SB)/4, $0
DATA packperm<>+4(SB)/4, $4
DATA packperm<>+8(SB)/4, $1
DATA packperm<>+12(SB)/4, $5
DATA packperm<>+16(SB)/4, $2
DATA packperm<>+20(SB)/4, $6
DATA packperm<>+24(SB)/4, $3
DATA packperm<>+28(SB)/4, $7
GLOBL packperm<>(SB), RODATA|NOPTR, $32

DATA minus127<>+0(SB)/4, $0x81818181
GLOBL minus127<>(SB), RODATA|NOPTR, $4

// func quantizeAVX2(dst *byte, x *float32, n int, inv float32, xor uint32)
//
// dst[i] = byte(clamp(rint(x[i]·inv), −127, 127)) ^ xor for i < n (xor
// repeats one byte), n a positive multiple of 32: the multiply rounds,
// vroundps rounds half to even, the packs saturate (the clamp at −127
// follows; neither binds for x[i]·inv within ±127.5).
TEXT ·quantizeAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS inv+24(FP), Y15
	MOVL         xor+28(FP), AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	VMOVDQU      packperm<>(SB), Y13
	VPBROADCASTD minus127<>(SB), Y12
	SHRQ         $5, CX

qloop:
	VMULPS     (SI), Y15, Y0
	VMULPS     32(SI), Y15, Y1
	VMULPS     64(SI), Y15, Y2
	VMULPS     96(SI), Y15, Y3
	VROUNDPS   $8, Y0, Y0
	VROUNDPS   $8, Y1, Y1
	VROUNDPS   $8, Y2, Y2
	VROUNDPS   $8, Y3, Y3
	VCVTTPS2DQ Y0, Y0
	VCVTTPS2DQ Y1, Y1
	VCVTTPS2DQ Y2, Y2
	VCVTTPS2DQ Y3, Y3
	VPACKSSDW  Y1, Y0, Y0
	VPACKSSDW  Y3, Y2, Y2
	VPACKSSWB  Y2, Y0, Y0
	VPERMD     Y0, Y13, Y0
	VPMAXSB    Y12, Y0, Y0
	VPXOR      Y14, Y0, Y0
	VMOVDQU    Y0, (DI)
	ADDQ       $128, SI
	ADDQ       $32, DI
	DECQ       CX
	JNZ        qloop
	VZEROUPPER
	RET
