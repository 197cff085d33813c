#include "textflag.h"

DATA expc<>+0(SB)/4, $0x42b0c0a5
DATA expc<>+4(SB)/4, $0x42b0c0a5
DATA expc<>+8(SB)/4, $0x42b0c0a5
DATA expc<>+12(SB)/4, $0x42b0c0a5
DATA expc<>+16(SB)/4, $0x42b0c0a5
DATA expc<>+20(SB)/4, $0x42b0c0a5
DATA expc<>+24(SB)/4, $0x42b0c0a5
DATA expc<>+28(SB)/4, $0x42b0c0a5
DATA expc<>+32(SB)/4, $0xc2aeac50
DATA expc<>+36(SB)/4, $0xc2aeac50
DATA expc<>+40(SB)/4, $0xc2aeac50
DATA expc<>+44(SB)/4, $0xc2aeac50
DATA expc<>+48(SB)/4, $0xc2aeac50
DATA expc<>+52(SB)/4, $0xc2aeac50
DATA expc<>+56(SB)/4, $0xc2aeac50
DATA expc<>+60(SB)/4, $0xc2aeac50
DATA expc<>+64(SB)/4, $0x3fb8aa3b
DATA expc<>+68(SB)/4, $0x3fb8aa3b
DATA expc<>+72(SB)/4, $0x3fb8aa3b
DATA expc<>+76(SB)/4, $0x3fb8aa3b
DATA expc<>+80(SB)/4, $0x3fb8aa3b
DATA expc<>+84(SB)/4, $0x3fb8aa3b
DATA expc<>+88(SB)/4, $0x3fb8aa3b
DATA expc<>+92(SB)/4, $0x3fb8aa3b
DATA expc<>+96(SB)/4, $0x4b400000
DATA expc<>+100(SB)/4, $0x4b400000
DATA expc<>+104(SB)/4, $0x4b400000
DATA expc<>+108(SB)/4, $0x4b400000
DATA expc<>+112(SB)/4, $0x4b400000
DATA expc<>+116(SB)/4, $0x4b400000
DATA expc<>+120(SB)/4, $0x4b400000
DATA expc<>+124(SB)/4, $0x4b400000
DATA expc<>+128(SB)/4, $0x3f318000
DATA expc<>+132(SB)/4, $0x3f318000
DATA expc<>+136(SB)/4, $0x3f318000
DATA expc<>+140(SB)/4, $0x3f318000
DATA expc<>+144(SB)/4, $0x3f318000
DATA expc<>+148(SB)/4, $0x3f318000
DATA expc<>+152(SB)/4, $0x3f318000
DATA expc<>+156(SB)/4, $0x3f318000
DATA expc<>+160(SB)/4, $0xb95e8083
DATA expc<>+164(SB)/4, $0xb95e8083
DATA expc<>+168(SB)/4, $0xb95e8083
DATA expc<>+172(SB)/4, $0xb95e8083
DATA expc<>+176(SB)/4, $0xb95e8083
DATA expc<>+180(SB)/4, $0xb95e8083
DATA expc<>+184(SB)/4, $0xb95e8083
DATA expc<>+188(SB)/4, $0xb95e8083
DATA expc<>+192(SB)/4, $0x39506967
DATA expc<>+196(SB)/4, $0x39506967
DATA expc<>+200(SB)/4, $0x39506967
DATA expc<>+204(SB)/4, $0x39506967
DATA expc<>+208(SB)/4, $0x39506967
DATA expc<>+212(SB)/4, $0x39506967
DATA expc<>+216(SB)/4, $0x39506967
DATA expc<>+220(SB)/4, $0x39506967
DATA expc<>+224(SB)/4, $0x3ab743ce
DATA expc<>+228(SB)/4, $0x3ab743ce
DATA expc<>+232(SB)/4, $0x3ab743ce
DATA expc<>+236(SB)/4, $0x3ab743ce
DATA expc<>+240(SB)/4, $0x3ab743ce
DATA expc<>+244(SB)/4, $0x3ab743ce
DATA expc<>+248(SB)/4, $0x3ab743ce
DATA expc<>+252(SB)/4, $0x3ab743ce
DATA expc<>+256(SB)/4, $0x3c088908
DATA expc<>+260(SB)/4, $0x3c088908
DATA expc<>+264(SB)/4, $0x3c088908
DATA expc<>+268(SB)/4, $0x3c088908
DATA expc<>+272(SB)/4, $0x3c088908
DATA expc<>+276(SB)/4, $0x3c088908
DATA expc<>+280(SB)/4, $0x3c088908
DATA expc<>+284(SB)/4, $0x3c088908
DATA expc<>+288(SB)/4, $0x3d2aa9c1
DATA expc<>+292(SB)/4, $0x3d2aa9c1
DATA expc<>+296(SB)/4, $0x3d2aa9c1
DATA expc<>+300(SB)/4, $0x3d2aa9c1
DATA expc<>+304(SB)/4, $0x3d2aa9c1
DATA expc<>+308(SB)/4, $0x3d2aa9c1
DATA expc<>+312(SB)/4, $0x3d2aa9c1
DATA expc<>+316(SB)/4, $0x3d2aa9c1
DATA expc<>+320(SB)/4, $0x3e2aaaaa
DATA expc<>+324(SB)/4, $0x3e2aaaaa
DATA expc<>+328(SB)/4, $0x3e2aaaaa
DATA expc<>+332(SB)/4, $0x3e2aaaaa
DATA expc<>+336(SB)/4, $0x3e2aaaaa
DATA expc<>+340(SB)/4, $0x3e2aaaaa
DATA expc<>+344(SB)/4, $0x3e2aaaaa
DATA expc<>+348(SB)/4, $0x3e2aaaaa
DATA expc<>+352(SB)/4, $0x3f000000
DATA expc<>+356(SB)/4, $0x3f000000
DATA expc<>+360(SB)/4, $0x3f000000
DATA expc<>+364(SB)/4, $0x3f000000
DATA expc<>+368(SB)/4, $0x3f000000
DATA expc<>+372(SB)/4, $0x3f000000
DATA expc<>+376(SB)/4, $0x3f000000
DATA expc<>+380(SB)/4, $0x3f000000
DATA expc<>+384(SB)/4, $0x3f800000
DATA expc<>+388(SB)/4, $0x3f800000
DATA expc<>+392(SB)/4, $0x3f800000
DATA expc<>+396(SB)/4, $0x3f800000
DATA expc<>+400(SB)/4, $0x3f800000
DATA expc<>+404(SB)/4, $0x3f800000
DATA expc<>+408(SB)/4, $0x3f800000
DATA expc<>+412(SB)/4, $0x3f800000
DATA expc<>+416(SB)/4, $0x7fffff
DATA expc<>+420(SB)/4, $0x7fffff
DATA expc<>+424(SB)/4, $0x7fffff
DATA expc<>+428(SB)/4, $0x7fffff
DATA expc<>+432(SB)/4, $0x7fffff
DATA expc<>+436(SB)/4, $0x7fffff
DATA expc<>+440(SB)/4, $0x7fffff
DATA expc<>+444(SB)/4, $0x7fffff
DATA expc<>+448(SB)/4, $0x400000
DATA expc<>+452(SB)/4, $0x400000
DATA expc<>+456(SB)/4, $0x400000
DATA expc<>+460(SB)/4, $0x400000
DATA expc<>+464(SB)/4, $0x400000
DATA expc<>+468(SB)/4, $0x400000
DATA expc<>+472(SB)/4, $0x400000
DATA expc<>+476(SB)/4, $0x400000
DATA expc<>+480(SB)/4, $0x3f800000
DATA expc<>+484(SB)/4, $0x3f800000
DATA expc<>+488(SB)/4, $0x3f800000
DATA expc<>+492(SB)/4, $0x3f800000
DATA expc<>+496(SB)/4, $0x3f800000
DATA expc<>+500(SB)/4, $0x3f800000
DATA expc<>+504(SB)/4, $0x3f800000
DATA expc<>+508(SB)/4, $0x3f800000
DATA expc<>+512(SB)/4, $0x80000000
DATA expc<>+516(SB)/4, $0x80000000
DATA expc<>+520(SB)/4, $0x80000000
DATA expc<>+524(SB)/4, $0x80000000
DATA expc<>+528(SB)/4, $0x80000000
DATA expc<>+532(SB)/4, $0x80000000
DATA expc<>+536(SB)/4, $0x80000000
DATA expc<>+540(SB)/4, $0x80000000
GLOBL expc<>(SB), RODATA|NOPTR, $544

// func siluAVX2(dst, src *float32, n int)
//
// dst[i] = src[i] / (1 + exp32(−src[i])) for i < n, n a multiple of 8, with
// exactly the float32 operations of exp32 and silu (so the results equal
// theirs bit for bit). dst may equal src.
TEXT ·siluAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   siludone

siluloop:
	VMOVUPS (SI), Y0
	VXORPS expc<>+512(SB), Y0, Y8
	VMINPS expc<>+0(SB), Y8, Y1
	VMAXPS expc<>+32(SB), Y1, Y1
	VMULPS expc<>+64(SB), Y1, Y2
	VADDPS expc<>+96(SB), Y2, Y2
	VSUBPS expc<>+96(SB), Y2, Y3
	VMULPS expc<>+128(SB), Y3, Y4
	VSUBPS Y4, Y1, Y5
	VMULPS expc<>+160(SB), Y3, Y4
	VSUBPS Y4, Y5, Y5
	VMULPS Y5, Y5, Y6
	VMULPS expc<>+192(SB), Y5, Y7
	VADDPS expc<>+224(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+256(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+288(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+320(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+352(SB), Y7, Y7
	VMULPS Y6, Y7, Y7
	VADDPS Y5, Y7, Y7
	VADDPS expc<>+384(SB), Y7, Y7
	VPAND expc<>+416(SB), Y2, Y2
	VPSUBD expc<>+448(SB), Y2, Y2
	VPSLLD $23, Y2, Y2
	VPADDD expc<>+480(SB), Y2, Y2
	VMULPS Y2, Y7, Y7
	VADDPS expc<>+384(SB), Y7, Y7
	VDIVPS Y7, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  siluloop

siludone:
	VZEROUPPER
	RET

// func sigmoidAVX2(dst, src *float32, n int)
//
// dst[i] = 1 / (1 + exp32(−src[i])) for i < n, n a multiple of 8, bit for
// bit as sigmoid. dst may equal src.
TEXT ·sigmoidAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   sigdone
	VMOVUPS expc<>+384(SB), Y9

sigloop:
	VMOVUPS (SI), Y0
	VXORPS expc<>+512(SB), Y0, Y8
	VMINPS expc<>+0(SB), Y8, Y1
	VMAXPS expc<>+32(SB), Y1, Y1
	VMULPS expc<>+64(SB), Y1, Y2
	VADDPS expc<>+96(SB), Y2, Y2
	VSUBPS expc<>+96(SB), Y2, Y3
	VMULPS expc<>+128(SB), Y3, Y4
	VSUBPS Y4, Y1, Y5
	VMULPS expc<>+160(SB), Y3, Y4
	VSUBPS Y4, Y5, Y5
	VMULPS Y5, Y5, Y6
	VMULPS expc<>+192(SB), Y5, Y7
	VADDPS expc<>+224(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+256(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+288(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+320(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+352(SB), Y7, Y7
	VMULPS Y6, Y7, Y7
	VADDPS Y5, Y7, Y7
	VADDPS expc<>+384(SB), Y7, Y7
	VPAND expc<>+416(SB), Y2, Y2
	VPSUBD expc<>+448(SB), Y2, Y2
	VPSLLD $23, Y2, Y2
	VPADDD expc<>+480(SB), Y2, Y2
	VMULPS Y2, Y7, Y7
	VADDPS Y9, Y7, Y7
	VDIVPS Y7, Y9, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  sigloop

sigdone:
	VZEROUPPER
	RET

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

// func expFlushAVX2(dst, src *float32, n int)
//
// dst[i] = 0 if src[i] < −60, else exp32(src[i]), for i < n, n a multiple of
// 8; bit for bit as expFlush. dst may equal src.
TEXT ·expFlushAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $3, CX
	JZ   expdone
	VBROADCASTSS flushc<>+0(SB), Y10

exploop:
	VMOVUPS (SI), Y0
	VMINPS expc<>+0(SB), Y0, Y1
	VMAXPS expc<>+32(SB), Y1, Y1
	VMULPS expc<>+64(SB), Y1, Y2
	VADDPS expc<>+96(SB), Y2, Y2
	VSUBPS expc<>+96(SB), Y2, Y3
	VMULPS expc<>+128(SB), Y3, Y4
	VSUBPS Y4, Y1, Y5
	VMULPS expc<>+160(SB), Y3, Y4
	VSUBPS Y4, Y5, Y5
	VMULPS Y5, Y5, Y6
	VMULPS expc<>+192(SB), Y5, Y7
	VADDPS expc<>+224(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+256(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+288(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+320(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+352(SB), Y7, Y7
	VMULPS Y6, Y7, Y7
	VADDPS Y5, Y7, Y7
	VADDPS expc<>+384(SB), Y7, Y7
	VPAND expc<>+416(SB), Y2, Y2
	VPSUBD expc<>+448(SB), Y2, Y2
	VPSLLD $23, Y2, Y2
	VPADDD expc<>+480(SB), Y2, Y2
	VMULPS Y2, Y7, Y7
	VCMPPS $1, Y10, Y0, Y8
	VANDNPS Y7, Y8, Y7
	VMOVUPS Y7, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  exploop

expdone:
	VZEROUPPER
	RET

DATA flushc<>+0(SB)/4, $0xc2700000
GLOBL flushc<>(SB), RODATA|NOPTR, $4

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

// func expSubSumAVX2(dst, src *float32, n int, m float32, sum *[8]float32)
//
// dst[i] = expFlush(src[i] − m) for i < n, n a multiple of 8, bit for bit as
// the scalar subtraction then expFlush; sum[l] receives the sum of the
// results in lane l (elements i ≡ l mod 8). dst may equal src.
TEXT ·expSubSumAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS m+24(FP), Y9
	MOVQ sum+32(FP), DX
	VXORPS Y11, Y11, Y11
	SHRQ $3, CX
	JZ   esdone
	VBROADCASTSS flushc<>+0(SB), Y10

esloop:
	VMOVUPS (SI), Y0
	VSUBPS Y9, Y0, Y0
	VMINPS expc<>+0(SB), Y0, Y1
	VMAXPS expc<>+32(SB), Y1, Y1
	VMULPS expc<>+64(SB), Y1, Y2
	VADDPS expc<>+96(SB), Y2, Y2
	VSUBPS expc<>+96(SB), Y2, Y3
	VMULPS expc<>+128(SB), Y3, Y4
	VSUBPS Y4, Y1, Y5
	VMULPS expc<>+160(SB), Y3, Y4
	VSUBPS Y4, Y5, Y5
	VMULPS Y5, Y5, Y6
	VMULPS expc<>+192(SB), Y5, Y7
	VADDPS expc<>+224(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+256(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+288(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+320(SB), Y7, Y7
	VMULPS Y5, Y7, Y7
	VADDPS expc<>+352(SB), Y7, Y7
	VMULPS Y6, Y7, Y7
	VADDPS Y5, Y7, Y7
	VADDPS expc<>+384(SB), Y7, Y7
	VPAND expc<>+416(SB), Y2, Y2
	VPSUBD expc<>+448(SB), Y2, Y2
	VPSLLD $23, Y2, Y2
	VPADDD expc<>+480(SB), Y2, Y2
	VMULPS Y2, Y7, Y7
	VCMPPS $1, Y10, Y0, Y8
	VANDNPS Y7, Y8, Y7
	VMOVUPS Y7, (DI)
	VADDPS Y7, Y11, Y11
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ  esloop

esdone:
	VMOVUPS Y11, (DX)
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

// func expSubSumAVX512(dst, src *float32, n int, m float32, sum *[16]float32)
//
// expSubSumAVX2 in 16 lanes: dst[i] = expFlush(src[i] − m) for i < n, n a
// multiple of 16, bit for bit as the scalar subtraction then expFlush (the
// same operations as expFlushAVX2); sum[l] receives the sum of the results
// in lane l. dst may equal src.
TEXT ·expSubSumAVX512(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS m+24(FP), Z9
	MOVQ sum+32(FP), DX
	VPXORD Z11, Z11, Z11
	SHRQ $4, CX
	JZ   es5done
	VBROADCASTSS flushc<>+0(SB), Z10
	VBROADCASTSS expc<>+0(SB), Z16
	VBROADCASTSS expc<>+32(SB), Z17
	VBROADCASTSS expc<>+64(SB), Z18
	VBROADCASTSS expc<>+96(SB), Z19
	VBROADCASTSS expc<>+128(SB), Z20
	VBROADCASTSS expc<>+160(SB), Z21
	VBROADCASTSS expc<>+192(SB), Z22
	VBROADCASTSS expc<>+224(SB), Z23
	VBROADCASTSS expc<>+256(SB), Z24
	VBROADCASTSS expc<>+288(SB), Z25
	VBROADCASTSS expc<>+320(SB), Z26
	VBROADCASTSS expc<>+352(SB), Z27
	VBROADCASTSS expc<>+384(SB), Z28
	VBROADCASTSS expc<>+416(SB), Z29
	VBROADCASTSS expc<>+448(SB), Z30
	VBROADCASTSS expc<>+480(SB), Z31

es5loop:
	VMOVUPS (SI), Z0
	VSUBPS Z9, Z0, Z0
	VMINPS Z16, Z0, Z1
	VMAXPS Z17, Z1, Z1
	VMULPS Z18, Z1, Z2
	VADDPS Z19, Z2, Z2
	VSUBPS Z19, Z2, Z3
	VMULPS Z20, Z3, Z4
	VSUBPS Z4, Z1, Z5
	VMULPS Z21, Z3, Z4
	VSUBPS Z4, Z5, Z5
	VMULPS Z5, Z5, Z6
	VMULPS Z22, Z5, Z7
	VADDPS Z23, Z7, Z7
	VMULPS Z5, Z7, Z7
	VADDPS Z24, Z7, Z7
	VMULPS Z5, Z7, Z7
	VADDPS Z25, Z7, Z7
	VMULPS Z5, Z7, Z7
	VADDPS Z26, Z7, Z7
	VMULPS Z5, Z7, Z7
	VADDPS Z27, Z7, Z7
	VMULPS Z6, Z7, Z7
	VADDPS Z5, Z7, Z7
	VADDPS Z28, Z7, Z7
	VPANDD Z29, Z2, Z2
	VPSUBD Z30, Z2, Z2
	VPSLLD $23, Z2, Z2
	VPADDD Z31, Z2, Z2
	VMULPS Z2, Z7, Z7
	VCMPPS $1, Z10, Z0, K1
	VPXORD Z7, Z7, K1, Z7
	VMOVUPS Z7, (DI)
	VADDPS Z7, Z11, Z11
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  es5loop

es5done:
	VMOVUPS Z11, (DX)
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

// func siluAVX512(dst, src *float32, n int)
//
// siluAVX2 in 16 lanes: dst[i] = src[i] / (1 + exp32(−src[i])) for i < n, n
// a multiple of 16, with the same operations (so the same bits). dst may
// equal src.
TEXT ·siluAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $4, CX
	JZ   silu5done
	VBROADCASTSS expc<>+512(SB), Z15
	VBROADCASTSS expc<>+0(SB), Z16
	VBROADCASTSS expc<>+32(SB), Z17
	VBROADCASTSS expc<>+64(SB), Z18
	VBROADCASTSS expc<>+96(SB), Z19
	VBROADCASTSS expc<>+128(SB), Z20
	VBROADCASTSS expc<>+160(SB), Z21
	VBROADCASTSS expc<>+192(SB), Z22
	VBROADCASTSS expc<>+224(SB), Z23
	VBROADCASTSS expc<>+256(SB), Z24
	VBROADCASTSS expc<>+288(SB), Z25
	VBROADCASTSS expc<>+320(SB), Z26
	VBROADCASTSS expc<>+352(SB), Z27
	VBROADCASTSS expc<>+384(SB), Z28
	VBROADCASTSS expc<>+416(SB), Z29
	VBROADCASTSS expc<>+448(SB), Z30
	VBROADCASTSS expc<>+480(SB), Z31

silu5loop:
	VMOVUPS (SI), Z0
	VPXORD Z15, Z0, Z8
	VMINPS Z16, Z8, Z1
	VMAXPS Z17, Z1, Z1
	VMULPS Z18, Z1, Z2
	VADDPS Z19, Z2, Z2
	VSUBPS Z19, Z2, Z3
	VMULPS Z20, Z3, Z4
	VSUBPS Z4, Z1, Z5
	VMULPS Z21, Z3, Z4
	VSUBPS Z4, Z5, Z5
	VMULPS Z5, Z5, Z6
	VMULPS Z22, Z5, Z7
	VADDPS Z23, Z7, Z7
	VMULPS Z5, Z7, Z7
	VADDPS Z24, Z7, Z7
	VMULPS Z5, Z7, Z7
	VADDPS Z25, Z7, Z7
	VMULPS Z5, Z7, Z7
	VADDPS Z26, Z7, Z7
	VMULPS Z5, Z7, Z7
	VADDPS Z27, Z7, Z7
	VMULPS Z6, Z7, Z7
	VADDPS Z5, Z7, Z7
	VADDPS Z28, Z7, Z7
	VPANDD Z29, Z2, Z2
	VPSUBD Z30, Z2, Z2
	VPSLLD $23, Z2, Z2
	VPADDD Z31, Z2, Z2
	VMULPS Z2, Z7, Z7
	VADDPS Z28, Z7, Z7
	VDIVPS Z7, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	DECQ CX
	JNZ  silu5loop

silu5done:
	VZEROUPPER
	RET

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
