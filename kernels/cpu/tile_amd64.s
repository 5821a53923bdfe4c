//go:build amd64

#include "textflag.h"
#include "treduce_amd64.h"

// Register-tiled float products for prefill: every output element has the
// lane order of dot4AVX2 / dot4AVX512 (dot_amd64.go) and the same final
// reduction, so a tile gives the bits the one-row kernels give and batch
// invariance holds whatever tile computes an element.

// TSUM8 is HSUM8 of dot_amd64.s with X14 as its temporary.
#define TSUM8(Y, X) \
	VEXTRACTF128 $1, Y, X14; \
	VADDPS       X14, X, X; \
	VMOVHLPS     X, X, X14; \
	VADDPS       X14, X, X; \
	VMOVSHDUP    X, X14; \
	VADDSS       X14, X, X

#define TSUM16(Z, Y, X) \
	VEXTRACTF64X4 $1, Z, Y14; \
	VADDPS        Y14, Y, Y; \
	TSUM8(Y, X)

// TREDUCE16 is TREDUCE16SUM (treduce_amd64.h) of the 4×4 tile Z0…Z15
// (Z(4r+j) row r, weight row j), stored as four rows of 4 floats at
// DI + r·R15. Clobbers Z0…Z7, Z16…Z25 and AX.
#define TREDUCE16 \
	TREDUCE16SUM; \
	VMOVUPS    X6, (DI); \
	VEXTRACTF32X4 $1, Z6, X7; \
	VMOVUPS    X7, (DI)(R15*1); \
	VEXTRACTF32X4 $2, Z6, X7; \
	VMOVUPS    X7, (DI)(R15*2); \
	LEAQ       (DI)(R15*2), AX; \
	ADDQ       R15, AX; \
	VEXTRACTF32X4 $3, Z6, X7; \
	VMOVUPS    X7, (AX)

// tredIdx: the lane of TREDUCE16SUM's sums holding output 4r+j (its own
// inverse).
DATA ·tredIdx+0(SB)/4, $0
DATA ·tredIdx+4(SB)/4, $4
DATA ·tredIdx+8(SB)/4, $8
DATA ·tredIdx+12(SB)/4, $12
DATA ·tredIdx+16(SB)/4, $1
DATA ·tredIdx+20(SB)/4, $5
DATA ·tredIdx+24(SB)/4, $9
DATA ·tredIdx+28(SB)/4, $13
DATA ·tredIdx+32(SB)/4, $2
DATA ·tredIdx+36(SB)/4, $6
DATA ·tredIdx+40(SB)/4, $10
DATA ·tredIdx+44(SB)/4, $14
DATA ·tredIdx+48(SB)/4, $3
DATA ·tredIdx+52(SB)/4, $7
DATA ·tredIdx+56(SB)/4, $11
DATA ·tredIdx+60(SB)/4, $15
GLOBL ·tredIdx(SB), RODATA|NOPTR, $64

// STEP3X4 adds the products of 8 values of the activation rows at SI, DX,
// BX (element AX) with the same values of the four weight rows at R8–R11,
// WLOAD with scale S loading them as float32, to the 3×4 tile Y0…Y11
// (Y(4r+j): activation row r, weight row j); clobbers Y12–Y15.
#define STEP3X4(WLOAD, S) \
	VMOVUPS (SI)(AX*4), Y12; \
	VMOVUPS (DX)(AX*4), Y13; \
	VMOVUPS (BX)(AX*4), Y15; \
	WLOAD (R8)(AX*S), Y14; \
	VFMADD231PS Y14, Y12, Y0; \
	VFMADD231PS Y14, Y13, Y4; \
	VFMADD231PS Y14, Y15, Y8; \
	WLOAD (R9)(AX*S), Y14; \
	VFMADD231PS Y14, Y12, Y1; \
	VFMADD231PS Y14, Y13, Y5; \
	VFMADD231PS Y14, Y15, Y9; \
	WLOAD (R10)(AX*S), Y14; \
	VFMADD231PS Y14, Y12, Y2; \
	VFMADD231PS Y14, Y13, Y6; \
	VFMADD231PS Y14, Y15, Y10; \
	WLOAD (R11)(AX*S), Y14; \
	VFMADD231PS Y14, Y12, Y3; \
	VFMADD231PS Y14, Y13, Y7; \
	VFMADD231PS Y14, Y15, Y11

// RED4 stores the lane sums of A, B, C and D (one row's four outputs) to
// the 16 bytes at M, each with TSUM8's bits: ((l0+l4)+(l2+l6))+((l1+l5)+
// (l3+l7)), the four reduced together (the halves, then the lanes two
// apart, then the adjacent ones). Clobbers Y12–Y15.
#define RED4(A, B, C, D, M) \
	VPERM2F128 $0x20, B, A, Y12 \
	VPERM2F128 $0x31, B, A, Y13 \
	VADDPS     Y13, Y12, Y12 \
	VPERM2F128 $0x20, D, C, Y13 \
	VPERM2F128 $0x31, D, C, Y14 \
	VADDPS     Y14, Y13, Y13 \
	VUNPCKLPD  Y13, Y12, Y14 \
	VUNPCKHPD  Y13, Y12, Y15 \
	VADDPS     Y15, Y14, Y14 \
	VHADDPS    Y14, Y14, Y14 \
	VEXTRACTF128 $1, Y14, X15 \
	VUNPCKLPS  X15, X14, X14 \
	VMOVUPS    X14, M

// XN3_FLOAT is the body of the avx2 float 3×n tiles (dot3xnAVX2,
// f16dot3xnAVX2): dot3x4AVX2 for nw/4 groups of four weight rows in one
// call, WLOAD with scale S loading 8 weights of a row as float32 (VMOVUPS,
// 4: float32 rows; VCVTPH2PS, 2: F16 rows converted in registers, exact).
// Group g's 3×4 outputs go to out + r·ostride + 16g + 4j (bytes), each
// with dot3x4AVX2's lanes and TSUM8's sum (RED4); each group prefetches
// the 2n bytes at pf + g·pfstep, or with pfstep 0 nothing (a loop without
// the PREFETCHT0: one load operation fewer a step where there is nothing
// left to prefetch). Labels are local to the function that expands it.
#define XN3_FLOAT(WLOAD, S) \
	MOVQ x0+0(FP), SI \
	MOVQ x1+8(FP), DX \
	MOVQ x2+16(FP), BX \
	MOVQ w+24(FP), R8 \
	MOVQ n+48(FP), CX \
	MOVQ out+56(FP), DI \
	MOVQ ostride+64(FP), R15 \
	MOVQ pf+72(FP), R13 \
	MOVQ nw+40(FP), R14 \
	SHRQ $2, R14 \
x3group: \
	MOVQ wstride+32(FP), AX \
	LEAQ (R8)(AX*1), R9 \
	LEAQ (R8)(AX*2), R10 \
	LEAQ (R9)(AX*2), R11 \
	ZERO12 \
	XORQ AX, AX \
	CMPQ pfstep+80(FP), $0 \
	JEQ  x3loopn \
x3loop: \
	PREFETCHT0 (R13)(AX*2) \
	STEP3X4(WLOAD, S) \
	ADDQ $8, AX \
	CMPQ AX, CX \
	JLT  x3loop \
	JMP  x3red \
x3loopn: \
	STEP3X4(WLOAD, S) \
	ADDQ $8, AX \
	CMPQ AX, CX \
	JLT  x3loopn \
x3red: \
	RED4(Y0, Y1, Y2, Y3, (DI)) \
	RED4(Y4, Y5, Y6, Y7, (DI)(R15*1)) \
	RED4(Y8, Y9, Y10, Y11, (DI)(R15*2)) \
	ADDQ $16, DI \
	MOVQ wstride+32(FP), AX \
	LEAQ (R8)(AX*4), R8 \
	ADDQ pfstep+80(FP), R13 \
	DECQ R14 \
	JNZ  x3group \
	VZEROUPPER \
	RET

// XN_FLOAT is the body of the float 4×n tiles (dot4xnAVX512,
// f16dot4xnAVX512): WLOAD with scale S loads 16 weights of a row as
// float32 (VMOVUPS, 4: float32 rows; VCVTPH2PS, 2: F16 rows converted in
// registers). Labels are local to the function that expands it.
#define XN_FLOAT(WLOAD, S) \
	MOVQ x0+0(FP), SI \
	MOVQ x1+8(FP), DX \
	MOVQ x2+16(FP), BX \
	MOVQ x3+24(FP), R12 \
	MOVQ w+32(FP), R8 \
	MOVQ n+56(FP), CX \
	MOVQ out+64(FP), DI \
	MOVQ ostride+72(FP), R15 \
	MOVQ pf+80(FP), R13 \
	MOVQ nw+48(FP), R14 \
	SHRQ $2, R14 \
xngroup: \
	MOVQ wstride+40(FP), AX \
	LEAQ (R8)(AX*1), R9 \
	LEAQ (R8)(AX*2), R10 \
	LEAQ (R9)(AX*2), R11 \
	ZERO12 \
	VXORPS Y12, Y12, Y12 \
	VXORPS Y13, Y13, Y13 \
	VXORPS Y14, Y14, Y14 \
	VXORPS Y15, Y15, Y15 \
	XORQ AX, AX \
xnloop: \
	PREFETCHT0 (R13)(AX*2) \
	WLOAD (R8)(AX*S), Z16 \
	WLOAD (R9)(AX*S), Z17 \
	WLOAD (R10)(AX*S), Z18 \
	WLOAD (R11)(AX*S), Z19 \
	VMOVUPS (SI)(AX*4), Z20 \
	VFMADD231PS Z16, Z20, Z0 \
	VFMADD231PS Z17, Z20, Z1 \
	VFMADD231PS Z18, Z20, Z2 \
	VFMADD231PS Z19, Z20, Z3 \
	VMOVUPS (DX)(AX*4), Z21 \
	VFMADD231PS Z16, Z21, Z4 \
	VFMADD231PS Z17, Z21, Z5 \
	VFMADD231PS Z18, Z21, Z6 \
	VFMADD231PS Z19, Z21, Z7 \
	VMOVUPS (BX)(AX*4), Z22 \
	VFMADD231PS Z16, Z22, Z8 \
	VFMADD231PS Z17, Z22, Z9 \
	VFMADD231PS Z18, Z22, Z10 \
	VFMADD231PS Z19, Z22, Z11 \
	VMOVUPS (R12)(AX*4), Z23 \
	VFMADD231PS Z16, Z23, Z12 \
	VFMADD231PS Z17, Z23, Z13 \
	VFMADD231PS Z18, Z23, Z14 \
	VFMADD231PS Z19, Z23, Z15 \
	ADDQ $16, AX \
	CMPQ AX, CX \
	JLT  xnloop \
	TREDUCE16 \
	ADDQ $16, DI \
	MOVQ wstride+40(FP), AX \
	LEAQ (R8)(AX*4), R8 \
	ADDQ pfstep+88(FP), R13 \
	DECQ R14 \
	JNZ  xngroup \
	VZEROUPPER \
	RET

// func dot3x4AVX2(x0, x1, x2, w0, w1, w2, w3 *float32, n int, out *[12]float32)
TEXT ·dot3x4AVX2(SB), NOSPLIT, $0-72
	MOVQ x0+0(FP), SI
	MOVQ x1+8(FP), DX
	MOVQ x2+16(FP), BX
	MOVQ w0+24(FP), R8
	MOVQ w1+32(FP), R9
	MOVQ w2+40(FP), R10
	MOVQ w3+48(FP), R11
	MOVQ n+56(FP), CX
	MOVQ out+64(FP), DI
	ZERO12
	XORQ AX, AX

loop:
	CMPQ    AX, CX
	JGE     done
	STEP3X4(VMOVUPS, 4)
	ADDQ $8, AX
	JMP  loop

done:
	TSUM8(Y0, X0)
	VMOVSS X0, 0(DI)
	TSUM8(Y1, X1)
	VMOVSS X1, 4(DI)
	TSUM8(Y2, X2)
	VMOVSS X2, 8(DI)
	TSUM8(Y3, X3)
	VMOVSS X3, 12(DI)
	TSUM8(Y4, X4)
	VMOVSS X4, 16(DI)
	TSUM8(Y5, X5)
	VMOVSS X5, 20(DI)
	TSUM8(Y6, X6)
	VMOVSS X6, 24(DI)
	TSUM8(Y7, X7)
	VMOVSS X7, 28(DI)
	TSUM8(Y8, X8)
	VMOVSS X8, 32(DI)
	TSUM8(Y9, X9)
	VMOVSS X9, 36(DI)
	TSUM8(Y10, X10)
	VMOVSS X10, 40(DI)
	TSUM8(Y11, X11)
	VMOVSS X11, 44(DI)
	VZEROUPPER
	RET

// func dot4x4AVX512(x0, x1, x2, x3, w0, w1, w2, w3 *float32, n int, out *[16]float32)
TEXT ·dot4x4AVX512(SB), NOSPLIT, $0-80
	MOVQ x0+0(FP), SI
	MOVQ x1+8(FP), DX
	MOVQ x2+16(FP), BX
	MOVQ x3+24(FP), R12
	MOVQ w0+32(FP), R8
	MOVQ w1+40(FP), R9
	MOVQ w2+48(FP), R10
	MOVQ w3+56(FP), R11
	MOVQ n+64(FP), CX
	MOVQ out+72(FP), DI
	ZERO12
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	XORQ AX, AX

loop:
	CMPQ    AX, CX
	JGE     done
	VMOVUPS (R8)(AX*4), Z16
	VMOVUPS (R9)(AX*4), Z17
	VMOVUPS (R10)(AX*4), Z18
	VMOVUPS (R11)(AX*4), Z19
	VMOVUPS (SI)(AX*4), Z20
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z20, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z20, Z3
	VMOVUPS (DX)(AX*4), Z21
	VFMADD231PS Z16, Z21, Z4
	VFMADD231PS Z17, Z21, Z5
	VFMADD231PS Z18, Z21, Z6
	VFMADD231PS Z19, Z21, Z7
	VMOVUPS (BX)(AX*4), Z22
	VFMADD231PS Z16, Z22, Z8
	VFMADD231PS Z17, Z22, Z9
	VFMADD231PS Z18, Z22, Z10
	VFMADD231PS Z19, Z22, Z11
	VMOVUPS (R12)(AX*4), Z23
	VFMADD231PS Z16, Z23, Z12
	VFMADD231PS Z17, Z23, Z13
	VFMADD231PS Z18, Z23, Z14
	VFMADD231PS Z19, Z23, Z15
	ADDQ $16, AX
	JMP  loop

done:
	VMOVAPS Z14, Z24
	VMOVAPS Z15, Z25
	TSUM16(Z0, Y0, X0)
	VMOVSS X0, 0(DI)
	TSUM16(Z1, Y1, X1)
	VMOVSS X1, 4(DI)
	TSUM16(Z2, Y2, X2)
	VMOVSS X2, 8(DI)
	TSUM16(Z3, Y3, X3)
	VMOVSS X3, 12(DI)
	TSUM16(Z4, Y4, X4)
	VMOVSS X4, 16(DI)
	TSUM16(Z5, Y5, X5)
	VMOVSS X5, 20(DI)
	TSUM16(Z6, Y6, X6)
	VMOVSS X6, 24(DI)
	TSUM16(Z7, Y7, X7)
	VMOVSS X7, 28(DI)
	TSUM16(Z8, Y8, X8)
	VMOVSS X8, 32(DI)
	TSUM16(Z9, Y9, X9)
	VMOVSS X9, 36(DI)
	TSUM16(Z10, Y10, X10)
	VMOVSS X10, 40(DI)
	TSUM16(Z11, Y11, X11)
	VMOVSS X11, 44(DI)
	TSUM16(Z12, Y12, X12)
	VMOVSS X12, 48(DI)
	TSUM16(Z13, Y13, X13)
	VMOVSS X13, 52(DI)
	VMOVAPS Z24, Z0
	TSUM16(Z0, Y0, X0)
	VMOVSS  X0, 56(DI)
	VMOVAPS Z25, Z0
	TSUM16(Z0, Y0, X0)
	VMOVSS  X0, 60(DI)
	VZEROUPPER
	RET

// func dot4x4pfAVX512(x0, x1, x2, x3, w0, w1, w2, w3 *float32, n int, out *[16]float32, pf *byte)
//
// dot4x4AVX512 that also prefetches the 2n bytes at pf (the next weight
// block, PREFETCHT0 never faults) while it computes: the same bits.
TEXT ·dot4x4pfAVX512(SB), NOSPLIT, $0-88
	MOVQ x0+0(FP), SI
	MOVQ x1+8(FP), DX
	MOVQ x2+16(FP), BX
	MOVQ x3+24(FP), R12
	MOVQ w0+32(FP), R8
	MOVQ w1+40(FP), R9
	MOVQ w2+48(FP), R10
	MOVQ w3+56(FP), R11
	MOVQ n+64(FP), CX
	MOVQ out+72(FP), DI
	MOVQ pf+80(FP), R13
	ZERO12
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	XORQ AX, AX

pfloop:
	CMPQ    AX, CX
	JGE     pfdone
	PREFETCHT0 (R13)(AX*2)
	VMOVUPS (R8)(AX*4), Z16
	VMOVUPS (R9)(AX*4), Z17
	VMOVUPS (R10)(AX*4), Z18
	VMOVUPS (R11)(AX*4), Z19
	VMOVUPS (SI)(AX*4), Z20
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z20, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z20, Z3
	VMOVUPS (DX)(AX*4), Z21
	VFMADD231PS Z16, Z21, Z4
	VFMADD231PS Z17, Z21, Z5
	VFMADD231PS Z18, Z21, Z6
	VFMADD231PS Z19, Z21, Z7
	VMOVUPS (BX)(AX*4), Z22
	VFMADD231PS Z16, Z22, Z8
	VFMADD231PS Z17, Z22, Z9
	VFMADD231PS Z18, Z22, Z10
	VFMADD231PS Z19, Z22, Z11
	VMOVUPS (R12)(AX*4), Z23
	VFMADD231PS Z16, Z23, Z12
	VFMADD231PS Z17, Z23, Z13
	VFMADD231PS Z18, Z23, Z14
	VFMADD231PS Z19, Z23, Z15
	ADDQ $16, AX
	JMP  pfloop

pfdone:
	VMOVAPS Z14, Z24
	VMOVAPS Z15, Z25
	TSUM16(Z0, Y0, X0)
	VMOVSS X0, 0(DI)
	TSUM16(Z1, Y1, X1)
	VMOVSS X1, 4(DI)
	TSUM16(Z2, Y2, X2)
	VMOVSS X2, 8(DI)
	TSUM16(Z3, Y3, X3)
	VMOVSS X3, 12(DI)
	TSUM16(Z4, Y4, X4)
	VMOVSS X4, 16(DI)
	TSUM16(Z5, Y5, X5)
	VMOVSS X5, 20(DI)
	TSUM16(Z6, Y6, X6)
	VMOVSS X6, 24(DI)
	TSUM16(Z7, Y7, X7)
	VMOVSS X7, 28(DI)
	TSUM16(Z8, Y8, X8)
	VMOVSS X8, 32(DI)
	TSUM16(Z9, Y9, X9)
	VMOVSS X9, 36(DI)
	TSUM16(Z10, Y10, X10)
	VMOVSS X10, 40(DI)
	TSUM16(Z11, Y11, X11)
	VMOVSS X11, 44(DI)
	TSUM16(Z12, Y12, X12)
	VMOVSS X12, 48(DI)
	TSUM16(Z13, Y13, X13)
	VMOVSS X13, 52(DI)
	VMOVAPS Z24, Z0
	TSUM16(Z0, Y0, X0)
	VMOVSS  X0, 56(DI)
	VMOVAPS Z25, Z0
	TSUM16(Z0, Y0, X0)
	VMOVSS  X0, 60(DI)
	VZEROUPPER
	RET

// func dot4xnAVX512(x0, x1, x2, x3, w *float32, wstride, nw, n int, out *float32, ostride int, pf *byte, pfstep int)
//
// dot4x4pfAVX512 for nw/4 groups of four weight rows (w, rows wstride
// bytes apart) in one call: group g's 4×4 outputs to out + r·ostride +
// 16g + 4j (bytes), each the bits dot4x4AVX512 gives it; each group
// prefetches the 2n bytes at pf + g·pfstep (the next weight block; pfstep
// 0 prefetches the same lines again). n > 0 a multiple of 16, nw of 4.
TEXT ·dot4xnAVX512(SB), NOSPLIT, $0-96
	XN_FLOAT(VMOVUPS, 4)

// func f16dot4xnAVX512(x0, x1, x2, x3 *float32, w *uint16, wstride, nw, n int, out *float32, ostride int, pf *byte, pfstep int)
//
// dot4xnAVX512 on F16 weight rows read in place, each 16 values converted
// in registers (VCVTPH2PS: exact, the values the scratch conversion gives),
// so the same bits, without the block's conversion to float32: group g's 4×4 outputs to out + r·ostride +
// 16g + 4j (bytes), each the bits dot4x4AVX512 gives it; each group
// prefetches the 2n bytes at pf + g·pfstep (the next weight block; pfstep
// 0 prefetches the same lines again). n > 0 a multiple of 16, nw of 4.
TEXT ·f16dot4xnAVX512(SB), NOSPLIT, $0-96
	XN_FLOAT(VCVTPH2PS, 2)

// func bf16dp4xnAVX512(x0, x1, x2, x3, w *uint16, wstride, nw, n int, out *float32, ostride int)
//
// The avx512 path's BF16 order (VDPBF16PS, dot_amd64.s) for 4 activation
// rows already rounded to BF16 (x0…x3) and nw/4 groups of four BF16
// weight rows (w, rows wstride bytes apart), in one call: group g's 4×4
// outputs to out + r·ostride + 16g + 4j (bytes), each the lanes and
// HSUM16 bf16dpRowsAVX512 gives it (the same bits). n > 0 a multiple of
// 32, nw of 4.
TEXT ·bf16dp4xnAVX512(SB), NOSPLIT, $0-80
	MOVQ x0+0(FP), SI
	MOVQ x1+8(FP), DX
	MOVQ x2+16(FP), BX
	MOVQ x3+24(FP), R12
	MOVQ w+32(FP), R8
	MOVQ n+56(FP), CX
	MOVQ out+64(FP), DI
	MOVQ ostride+72(FP), R15
	MOVQ nw+48(FP), R14
	SHRQ $2, R14

bfgroup:
	MOVQ wstride+40(FP), AX
	LEAQ (R8)(AX*1), R9
	LEAQ (R8)(AX*2), R10
	LEAQ (R9)(AX*2), R11
	ZERO12
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	XORQ AX, AX

bfloop:
	VMOVDQU16 (R8)(AX*2), Z16
	VMOVDQU16 (R9)(AX*2), Z17
	VMOVDQU16 (R10)(AX*2), Z18
	VMOVDQU16 (R11)(AX*2), Z19
	VMOVDQU16 (SI)(AX*2), Z20
	BYTE $0x62; BYTE $0xB2; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xC0 // VDPBF16PS Z0, Z20, Z16
	BYTE $0x62; BYTE $0xB2; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xC9 // VDPBF16PS Z1, Z20, Z17
	BYTE $0x62; BYTE $0xB2; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xD2 // VDPBF16PS Z2, Z20, Z18
	BYTE $0x62; BYTE $0xB2; BYTE $0x5E; BYTE $0x40; BYTE $0x52; BYTE $0xDB // VDPBF16PS Z3, Z20, Z19
	VMOVDQU16 (DX)(AX*2), Z21
	BYTE $0x62; BYTE $0xB2; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xE0 // VDPBF16PS Z4, Z21, Z16
	BYTE $0x62; BYTE $0xB2; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xE9 // VDPBF16PS Z5, Z21, Z17
	BYTE $0x62; BYTE $0xB2; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xF2 // VDPBF16PS Z6, Z21, Z18
	BYTE $0x62; BYTE $0xB2; BYTE $0x56; BYTE $0x40; BYTE $0x52; BYTE $0xFB // VDPBF16PS Z7, Z21, Z19
	VMOVDQU16 (BX)(AX*2), Z22
	BYTE $0x62; BYTE $0x32; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xC0 // VDPBF16PS Z8, Z22, Z16
	BYTE $0x62; BYTE $0x32; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xC9 // VDPBF16PS Z9, Z22, Z17
	BYTE $0x62; BYTE $0x32; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xD2 // VDPBF16PS Z10, Z22, Z18
	BYTE $0x62; BYTE $0x32; BYTE $0x4E; BYTE $0x40; BYTE $0x52; BYTE $0xDB // VDPBF16PS Z11, Z22, Z19
	VMOVDQU16 (R12)(AX*2), Z23
	BYTE $0x62; BYTE $0x32; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xE0 // VDPBF16PS Z12, Z23, Z16
	BYTE $0x62; BYTE $0x32; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xE9 // VDPBF16PS Z13, Z23, Z17
	BYTE $0x62; BYTE $0x32; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xF2 // VDPBF16PS Z14, Z23, Z18
	BYTE $0x62; BYTE $0x32; BYTE $0x46; BYTE $0x40; BYTE $0x52; BYTE $0xFB // VDPBF16PS Z15, Z23, Z19
	ADDQ $32, AX
	CMPQ AX, CX
	JLT  bfloop

	TREDUCE16

	ADDQ $16, DI
	MOVQ wstride+40(FP), AX
	LEAQ (R8)(AX*4), R8
	DECQ R14
	JNZ  bfgroup
	VZEROUPPER
	RET

// func scores3AVX2(x0, x1, x2 *float32, base *float32, offs *int, ng int, hd int, out *float32)
// Per group g < ng of four keys (at base+offs[4g+j], in floats), the 3×4
// tile of dot3x4AVX2 over hd floats (a multiple of 8), its lane sums in
// TSUM8's order (RED4): the score of query row r and key 4g+j goes to
// out[64r+4g+j] (rows of the attention task's score block, attnKeys floats
// apart).
TEXT ·scores3AVX2(SB), NOSPLIT, $0-64
	MOVQ x0+0(FP), SI
	MOVQ x1+8(FP), DX
	MOVQ x2+16(FP), BX
	MOVQ base+24(FP), R13
	MOVQ offs+32(FP), R14
	MOVQ ng+40(FP), R15
	MOVQ hd+48(FP), CX
	MOVQ out+56(FP), DI

sgrp:
	TESTQ R15, R15
	JEQ   send
	MOVQ  0(R14), R8
	LEAQ  (R13)(R8*4), R8
	MOVQ  8(R14), R9
	LEAQ  (R13)(R9*4), R9
	MOVQ  16(R14), R10
	LEAQ  (R13)(R10*4), R10
	MOVQ  24(R14), R11
	LEAQ  (R13)(R11*4), R11
	ZERO12
	XORQ AX, AX

s3loop:
	STEP3X4(VMOVUPS, 4)
	ADDQ $8, AX
	CMPQ AX, CX
	JLT  s3loop

	RED4(Y0, Y1, Y2, Y3, (DI))
	RED4(Y4, Y5, Y6, Y7, 256(DI))
	RED4(Y8, Y9, Y10, Y11, 512(DI))
	ADDQ $32, R14
	ADDQ $16, DI
	DECQ R15
	JMP  sgrp

send:
	VZEROUPPER
	RET

// func dot3xnAVX2(x0, x1, x2 *float32, w *float32, wstride, nw, n int, out *float32, ostride int, pf *byte, pfstep int)
//
// XN3_FLOAT on float32 weight rows (wstride, ostride in bytes): n > 0 a
// multiple of 8, nw of 4.
TEXT ·dot3xnAVX2(SB), NOSPLIT, $0-88
	XN3_FLOAT(VMOVUPS, 4)

// func f16dot3xnAVX2(x0, x1, x2 *float32, w *uint16, wstride, nw, n int, out *float32, ostride int, pf *byte, pfstep int)
//
// XN3_FLOAT on F16 weight rows converted in registers: the bits of
// converting the block to float32 first and running dot3xnAVX2.
TEXT ·f16dot3xnAVX2(SB), NOSPLIT, $0-88
	XN3_FLOAT(VCVTPH2PS, 2)
