// The AVX2 and AVX-512 kernels built on exp32 (fastmath.go): SiLU, sigmoid,
// the flushed exponential and the softmax's exp-sum, each with exactly the
// float32 operations of its Go version. expc holds exp32's constants, eight
// lanes of each; flushc the flush threshold.

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
