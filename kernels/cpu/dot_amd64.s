//go:build amd64

#include "textflag.h"

// Vector kernels of the avx2 and avx512 paths (dot_amd64.go states their
// reduction order). Every function returns the lane sums of the first n
// elements (n a multiple of the lane count); the Go wrappers add the tail.
// Every function ends with VZEROUPPER: SSE code that runs next is slow with
// dirty upper halves.

// HSUM8 reduces the 8 lanes of Y to X's low lane as
// ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)). Clobbers X14.
#define HSUM8(Y, X) \
	VEXTRACTF128 $1, Y, X14; \
	VADDPS       X14, X, X; \
	VMOVHLPS     X, X, X14; \
	VADDPS       X14, X, X; \
	VMOVSHDUP    X, X14; \
	VADDSS       X14, X, X

// HSUM16 reduces the 16 lanes of Z: lanes l and l+8 first, then HSUM8.
#define HSUM16(Z, Y, X) \
	VEXTRACTF64X4 $1, Z, Y14; \
	VADDPS        Y14, Y, Y; \
	HSUM8(Y, X)

// func dot4AVX2(x, w0, w1, w2, w3 *float32, n int, out *[4]float32)
TEXT ·dot4AVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ w0+8(FP), R8
	MOVQ w1+16(FP), R9
	MOVQ w2+24(FP), R10
	MOVQ w3+32(FP), R11
	MOVQ n+40(FP), CX
	MOVQ out+48(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (SI)(AX*4), Y4
	VFMADD231PS (R8)(AX*4), Y4, Y0
	VFMADD231PS (R9)(AX*4), Y4, Y1
	VFMADD231PS (R10)(AX*4), Y4, Y2
	VFMADD231PS (R11)(AX*4), Y4, Y3
	ADDQ        $8, AX
	JMP         loop

done:
	HSUM8(Y0, X0)
	HSUM8(Y1, X1)
	HSUM8(Y2, X2)
	HSUM8(Y3, X3)
	VMOVSS X0, 0(DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	VMOVSS X3, 12(DI)
	VZEROUPPER
	RET

// func dot2x3AVX2(x0, x1, w0, w1, w2 *float32, n int, out *[6]float32)
TEXT ·dot2x3AVX2(SB), NOSPLIT, $0-56
	MOVQ x0+0(FP), SI
	MOVQ x1+8(FP), DX
	MOVQ w0+16(FP), R8
	MOVQ w1+24(FP), R9
	MOVQ w2+32(FP), R10
	MOVQ n+40(FP), CX
	MOVQ out+48(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	XORQ   AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (SI)(AX*4), Y6
	VMOVUPS     (DX)(AX*4), Y7
	VMOVUPS     (R8)(AX*4), Y8
	VFMADD231PS Y8, Y6, Y0
	VFMADD231PS Y8, Y7, Y3
	VMOVUPS     (R9)(AX*4), Y9
	VFMADD231PS Y9, Y6, Y1
	VFMADD231PS Y9, Y7, Y4
	VMOVUPS     (R10)(AX*4), Y10
	VFMADD231PS Y10, Y6, Y2
	VFMADD231PS Y10, Y7, Y5
	ADDQ        $8, AX
	JMP         loop

done:
	HSUM8(Y0, X0)
	HSUM8(Y1, X1)
	HSUM8(Y2, X2)
	HSUM8(Y3, X3)
	HSUM8(Y4, X4)
	HSUM8(Y5, X5)
	VMOVSS X0, 0(DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	VMOVSS X3, 12(DI)
	VMOVSS X4, 16(DI)
	VMOVSS X5, 20(DI)
	VZEROUPPER
	RET

// NEXT4ROWS points BX, DX, R12, R13 at the rows after w0…w3 (R8–R11) in
// their streams, as decode reads them (four rows a quarter of the block
// apart, each followed by the next call's row): 2n bytes on each; PF4ROWS
// prefetches them at element AX (halves), so that the next call's rows
// arrive while this one computes.
#define NEXT4ROWS \
	LEAQ (R8)(CX*2), BX; \
	LEAQ (R9)(CX*2), DX; \
	LEAQ (R10)(CX*2), R12; \
	LEAQ (R11)(CX*2), R13

#define PF4ROWS \
	PREFETCHT0 (BX)(AX*2); \
	PREFETCHT0 (DX)(AX*2); \
	PREFETCHT0 (R12)(AX*2); \
	PREFETCHT0 (R13)(AX*2)

// func f16dot4AVX2(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)
TEXT ·f16dot4AVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ w0+8(FP), R8
	MOVQ w1+16(FP), R9
	MOVQ w2+24(FP), R10
	MOVQ w3+32(FP), R11
	MOVQ n+40(FP), CX
	MOVQ out+48(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	NEXT4ROWS
	XORQ   AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	PF4ROWS
	VMOVUPS     (SI)(AX*4), Y4
	VCVTPH2PS   (R8)(AX*2), Y5
	VFMADD231PS Y5, Y4, Y0
	VCVTPH2PS   (R9)(AX*2), Y6
	VFMADD231PS Y6, Y4, Y1
	VCVTPH2PS   (R10)(AX*2), Y7
	VFMADD231PS Y7, Y4, Y2
	VCVTPH2PS   (R11)(AX*2), Y8
	VFMADD231PS Y8, Y4, Y3
	ADDQ        $8, AX
	JMP         loop

done:
	HSUM8(Y0, X0)
	HSUM8(Y1, X1)
	HSUM8(Y2, X2)
	HSUM8(Y3, X3)
	VMOVSS X0, 0(DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	VMOVSS X3, 12(DI)
	VZEROUPPER
	RET

// func bf16dot4AVX2(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)
TEXT ·bf16dot4AVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ w0+8(FP), R8
	MOVQ w1+16(FP), R9
	MOVQ w2+24(FP), R10
	MOVQ w3+32(FP), R11
	MOVQ n+40(FP), CX
	MOVQ out+48(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	NEXT4ROWS
	XORQ   AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	PF4ROWS
	VMOVUPS     (SI)(AX*4), Y4
	VPMOVZXWD   (R8)(AX*2), Y5
	VPSLLD      $16, Y5, Y5
	VFMADD231PS Y5, Y4, Y0
	VPMOVZXWD   (R9)(AX*2), Y6
	VPSLLD      $16, Y6, Y6
	VFMADD231PS Y6, Y4, Y1
	VPMOVZXWD   (R10)(AX*2), Y7
	VPSLLD      $16, Y7, Y7
	VFMADD231PS Y7, Y4, Y2
	VPMOVZXWD   (R11)(AX*2), Y8
	VPSLLD      $16, Y8, Y8
	VFMADD231PS Y8, Y4, Y3
	ADDQ        $8, AX
	JMP         loop

done:
	HSUM8(Y0, X0)
	HSUM8(Y1, X1)
	HSUM8(Y2, X2)
	HSUM8(Y3, X3)
	VMOVSS X0, 0(DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	VMOVSS X3, 12(DI)
	VZEROUPPER
	RET

// func q8dot4AVX2(xq *int8, xd *float32, w0, w1, w2, w3 *byte, nb int, out *[4]float32)
TEXT ·q8dot4AVX2(SB), NOSPLIT, $0-64
	MOVQ xq+0(FP), SI
	MOVQ xd+8(FP), DX
	MOVQ w0+16(FP), R8
	MOVQ w1+24(FP), R9
	MOVQ w2+32(FP), R10
	MOVQ w3+40(FP), R11
	MOVQ nb+48(FP), CX
	MOVQ out+56(FP), DI
	MOVL         $0x00010001, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	VXORPS       Y2, Y2, Y2
	VXORPS       Y3, Y3, Y3
	XORQ         AX, AX // block
	XORQ         BX, BX // its byte offset in a weight row
	TESTQ        CX, CX
	JEQ          done

loop:
	VMOVDQU      (SI), Y4
	VBROADCASTSS (DX)(AX*4), Y13
	VMOVDQU      2(R8)(BX*1), Y5
	VPSIGNB      Y5, Y4, Y6
	VPABSB       Y5, Y5
	VPMADDUBSW   Y6, Y5, Y5
	VPMADDWD     Y15, Y5, Y5
	VCVTDQ2PS    Y5, Y5
	VPBROADCASTW (R8)(BX*1), X7
	VCVTPH2PS    X7, Y7
	VMULPS       Y13, Y7, Y7
	VFMADD231PS  Y7, Y5, Y0
	VMOVDQU      2(R9)(BX*1), Y5
	VPSIGNB      Y5, Y4, Y6
	VPABSB       Y5, Y5
	VPMADDUBSW   Y6, Y5, Y5
	VPMADDWD     Y15, Y5, Y5
	VCVTDQ2PS    Y5, Y5
	VPBROADCASTW (R9)(BX*1), X7
	VCVTPH2PS    X7, Y7
	VMULPS       Y13, Y7, Y7
	VFMADD231PS  Y7, Y5, Y1
	VMOVDQU      2(R10)(BX*1), Y5
	VPSIGNB      Y5, Y4, Y6
	VPABSB       Y5, Y5
	VPMADDUBSW   Y6, Y5, Y5
	VPMADDWD     Y15, Y5, Y5
	VCVTDQ2PS    Y5, Y5
	VPBROADCASTW (R10)(BX*1), X7
	VCVTPH2PS    X7, Y7
	VMULPS       Y13, Y7, Y7
	VFMADD231PS  Y7, Y5, Y2
	VMOVDQU      2(R11)(BX*1), Y5
	VPSIGNB      Y5, Y4, Y6
	VPABSB       Y5, Y5
	VPMADDUBSW   Y6, Y5, Y5
	VPMADDWD     Y15, Y5, Y5
	VCVTDQ2PS    Y5, Y5
	VPBROADCASTW (R11)(BX*1), X7
	VCVTPH2PS    X7, Y7
	VMULPS       Y13, Y7, Y7
	VFMADD231PS  Y7, Y5, Y3
	ADDQ         $32, SI
	ADDQ         $34, BX
	INCQ         AX
	CMPQ         AX, CX
	JLT          loop

done:
	HSUM8(Y0, X0)
	HSUM8(Y1, X1)
	HSUM8(Y2, X2)
	HSUM8(Y3, X3)
	VMOVSS X0, 0(DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	VMOVSS X3, 12(DI)
	VZEROUPPER
	RET

// func axpy4AVX2(o *float32, w *[4]float32, v0, v1, v2, v3 *float32, n int)
TEXT ·axpy4AVX2(SB), NOSPLIT, $0-56
	MOVQ o+0(FP), DI
	MOVQ w+8(FP), DX
	MOVQ v0+16(FP), R8
	MOVQ v1+24(FP), R9
	MOVQ v2+32(FP), R10
	MOVQ v3+40(FP), R11
	MOVQ n+48(FP), CX
	VBROADCASTSS 0(DX), Y4
	VBROADCASTSS 4(DX), Y5
	VBROADCASTSS 8(DX), Y6
	VBROADCASTSS 12(DX), Y7
	XORQ         AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (DI)(AX*4), Y0
	VFMADD231PS (R8)(AX*4), Y4, Y0
	VFMADD231PS (R9)(AX*4), Y5, Y0
	VFMADD231PS (R10)(AX*4), Y6, Y0
	VFMADD231PS (R11)(AX*4), Y7, Y0
	VMOVUPS     Y0, (DI)(AX*4)
	ADDQ        $8, AX
	JMP         loop

done:
	VZEROUPPER
	RET

// func axpy1AVX2(o *float32, w float32, v *float32, n int)
TEXT ·axpy1AVX2(SB), NOSPLIT, $0-32
	MOVQ         o+0(FP), DI
	VBROADCASTSS w+8(FP), Y4
	MOVQ         v+16(FP), R8
	MOVQ         n+24(FP), CX
	XORQ         AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (DI)(AX*4), Y0
	VFMADD231PS (R8)(AX*4), Y4, Y0
	VMOVUPS     Y0, (DI)(AX*4)
	ADDQ        $8, AX
	JMP         loop

done:
	VZEROUPPER
	RET

// func dot4AVX512(x, w0, w1, w2, w3 *float32, n int, out *[4]float32)
TEXT ·dot4AVX512(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ w0+8(FP), R8
	MOVQ w1+16(FP), R9
	MOVQ w2+24(FP), R10
	MOVQ w3+32(FP), R11
	MOVQ n+40(FP), CX
	MOVQ out+48(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (SI)(AX*4), Z4
	VFMADD231PS (R8)(AX*4), Z4, Z0
	VFMADD231PS (R9)(AX*4), Z4, Z1
	VFMADD231PS (R10)(AX*4), Z4, Z2
	VFMADD231PS (R11)(AX*4), Z4, Z3
	ADDQ        $16, AX
	JMP         loop

done:
	HSUM16(Z0, Y0, X0)
	HSUM16(Z1, Y1, X1)
	HSUM16(Z2, Y2, X2)
	HSUM16(Z3, Y3, X3)
	VMOVSS X0, 0(DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	VMOVSS X3, 12(DI)
	VZEROUPPER
	RET

// func dot2x3AVX512(x0, x1, w0, w1, w2 *float32, n int, out *[6]float32)
TEXT ·dot2x3AVX512(SB), NOSPLIT, $0-56
	MOVQ x0+0(FP), SI
	MOVQ x1+8(FP), DX
	MOVQ w0+16(FP), R8
	MOVQ w1+24(FP), R9
	MOVQ w2+32(FP), R10
	MOVQ n+40(FP), CX
	MOVQ out+48(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	XORQ   AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (SI)(AX*4), Z6
	VMOVUPS     (DX)(AX*4), Z7
	VMOVUPS     (R8)(AX*4), Z8
	VFMADD231PS Z8, Z6, Z0
	VFMADD231PS Z8, Z7, Z3
	VMOVUPS     (R9)(AX*4), Z9
	VFMADD231PS Z9, Z6, Z1
	VFMADD231PS Z9, Z7, Z4
	VMOVUPS     (R10)(AX*4), Z10
	VFMADD231PS Z10, Z6, Z2
	VFMADD231PS Z10, Z7, Z5
	ADDQ        $16, AX
	JMP         loop

done:
	HSUM16(Z0, Y0, X0)
	HSUM16(Z1, Y1, X1)
	HSUM16(Z2, Y2, X2)
	HSUM16(Z3, Y3, X3)
	HSUM16(Z4, Y4, X4)
	HSUM16(Z5, Y5, X5)
	VMOVSS X0, 0(DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	VMOVSS X3, 12(DI)
	VMOVSS X4, 16(DI)
	VMOVSS X5, 20(DI)
	VZEROUPPER
	RET

// func f16dot4AVX512(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)
TEXT ·f16dot4AVX512(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ w0+8(FP), R8
	MOVQ w1+16(FP), R9
	MOVQ w2+24(FP), R10
	MOVQ w3+32(FP), R11
	MOVQ n+40(FP), CX
	MOVQ out+48(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (SI)(AX*4), Z4
	VCVTPH2PS   (R8)(AX*2), Z5
	VFMADD231PS Z5, Z4, Z0
	VCVTPH2PS   (R9)(AX*2), Z6
	VFMADD231PS Z6, Z4, Z1
	VCVTPH2PS   (R10)(AX*2), Z7
	VFMADD231PS Z7, Z4, Z2
	VCVTPH2PS   (R11)(AX*2), Z8
	VFMADD231PS Z8, Z4, Z3
	ADDQ        $16, AX
	JMP         loop

done:
	HSUM16(Z0, Y0, X0)
	HSUM16(Z1, Y1, X1)
	HSUM16(Z2, Y2, X2)
	HSUM16(Z3, Y3, X3)
	VMOVSS X0, 0(DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	VMOVSS X3, 12(DI)
	VZEROUPPER
	RET

// func bf16dot4AVX512(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)
TEXT ·bf16dot4AVX512(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ w0+8(FP), R8
	MOVQ w1+16(FP), R9
	MOVQ w2+24(FP), R10
	MOVQ w3+32(FP), R11
	MOVQ n+40(FP), CX
	MOVQ out+48(FP), DI
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (SI)(AX*4), Z4
	VPMOVZXWD   (R8)(AX*2), Z5
	VPSLLD      $16, Z5, Z5
	VFMADD231PS Z5, Z4, Z0
	VPMOVZXWD   (R9)(AX*2), Z6
	VPSLLD      $16, Z6, Z6
	VFMADD231PS Z6, Z4, Z1
	VPMOVZXWD   (R10)(AX*2), Z7
	VPSLLD      $16, Z7, Z7
	VFMADD231PS Z7, Z4, Z2
	VPMOVZXWD   (R11)(AX*2), Z8
	VPSLLD      $16, Z8, Z8
	VFMADD231PS Z8, Z4, Z3
	ADDQ        $16, AX
	JMP         loop

done:
	HSUM16(Z0, Y0, X0)
	HSUM16(Z1, Y1, X1)
	HSUM16(Z2, Y2, X2)
	HSUM16(Z3, Y3, X3)
	VMOVSS X0, 0(DI)
	VMOVSS X1, 4(DI)
	VMOVSS X2, 8(DI)
	VMOVSS X3, 12(DI)
	VZEROUPPER
	RET

// func axpy4AVX512(o *float32, w *[4]float32, v0, v1, v2, v3 *float32, n int)
TEXT ·axpy4AVX512(SB), NOSPLIT, $0-56
	MOVQ o+0(FP), DI
	MOVQ w+8(FP), DX
	MOVQ v0+16(FP), R8
	MOVQ v1+24(FP), R9
	MOVQ v2+32(FP), R10
	MOVQ v3+40(FP), R11
	MOVQ n+48(FP), CX
	VBROADCASTSS 0(DX), Z4
	VBROADCASTSS 4(DX), Z5
	VBROADCASTSS 8(DX), Z6
	VBROADCASTSS 12(DX), Z7
	XORQ         AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (DI)(AX*4), Z0
	VFMADD231PS (R8)(AX*4), Z4, Z0
	VFMADD231PS (R9)(AX*4), Z5, Z0
	VFMADD231PS (R10)(AX*4), Z6, Z0
	VFMADD231PS (R11)(AX*4), Z7, Z0
	VMOVUPS     Z0, (DI)(AX*4)
	ADDQ        $16, AX
	JMP         loop

done:
	VZEROUPPER
	RET

// func axpy1AVX512(o *float32, w float32, v *float32, n int)
TEXT ·axpy1AVX512(SB), NOSPLIT, $0-32
	MOVQ         o+0(FP), DI
	VBROADCASTSS w+8(FP), Z4
	MOVQ         v+16(FP), R8
	MOVQ         n+24(FP), CX
	XORQ         AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (DI)(AX*4), Z0
	VFMADD231PS (R8)(AX*4), Z4, Z0
	VMOVUPS     Z0, (DI)(AX*4)
	ADDQ        $16, AX
	JMP         loop

done:
	VZEROUPPER
	RET

// func f16rowsAVX2(dst *float32, src *uint16, n int, rows int, stride int)
// f16rowAVX2 of rows rows of n halves each (n a multiple of 16, rows > 0),
// row r read at src + r·stride halves and written at dst + r·n floats.
TEXT ·f16rowsAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	MOVQ rows+24(FP), DX
	MOVQ stride+32(FP), BX
	SHLQ $1, BX

rrow:
	XORQ AX, AX

rloop:
	VCVTPH2PS (SI)(AX*2), Y0
	VCVTPH2PS 16(SI)(AX*2), Y1
	VMOVUPS   Y0, (DI)(AX*4)
	VMOVUPS   Y1, 32(DI)(AX*4)
	ADDQ      $16, AX
	CMPQ      AX, CX
	JLT       rloop
	LEAQ      (DI)(CX*4), DI
	ADDQ      BX, SI
	DECQ      DX
	JNZ       rrow
	VZEROUPPER
	RET

// func f16rowAVX2(dst *float32, src *uint16, n int)
// dst[i] = float32 of the IEEE half src[i] (VCVTPH2PS: exact, f16tab's
// values), n a multiple of 8; 32 values per iteration while they last.
TEXT ·f16rowAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

loop4:
	LEAQ      32(AX), BX
	CMPQ      BX, CX
	JGT       loop1
	VCVTPH2PS (SI)(AX*2), Y0
	VCVTPH2PS 16(SI)(AX*2), Y1
	VCVTPH2PS 32(SI)(AX*2), Y2
	VCVTPH2PS 48(SI)(AX*2), Y3
	VMOVUPS   Y0, (DI)(AX*4)
	VMOVUPS   Y1, 32(DI)(AX*4)
	VMOVUPS   Y2, 64(DI)(AX*4)
	VMOVUPS   Y3, 96(DI)(AX*4)
	MOVQ      BX, AX
	JMP       loop4

loop1:
	CMPQ      AX, CX
	JGE       done
	VCVTPH2PS (SI)(AX*2), Y0
	VMOVUPS   Y0, (DI)(AX*4)
	ADDQ      $8, AX
	JMP       loop1

done:
	VZEROUPPER
	RET

// func bf16rowAVX2(dst *float32, src *uint16, n int)
// dst[i] = the bfloat16 src[i] as float32 (zero-extend, shift left 16),
// n a multiple of 8.
TEXT ·bf16rowAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

loop4:
	LEAQ      32(AX), BX
	CMPQ      BX, CX
	JGT       loop1
	VPMOVZXWD (SI)(AX*2), Y0
	VPMOVZXWD 16(SI)(AX*2), Y1
	VPMOVZXWD 32(SI)(AX*2), Y2
	VPMOVZXWD 48(SI)(AX*2), Y3
	VPSLLD    $16, Y0, Y0
	VPSLLD    $16, Y1, Y1
	VPSLLD    $16, Y2, Y2
	VPSLLD    $16, Y3, Y3
	VMOVDQU   Y0, (DI)(AX*4)
	VMOVDQU   Y1, 32(DI)(AX*4)
	VMOVDQU   Y2, 64(DI)(AX*4)
	VMOVDQU   Y3, 96(DI)(AX*4)
	MOVQ      BX, AX
	JMP       loop4

loop1:
	CMPQ      AX, CX
	JGE       done
	VPMOVZXWD (SI)(AX*2), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)(AX*4)
	ADDQ      $8, AX
	JMP       loop1

done:
	VZEROUPPER
	RET

// func f16rowsAVX512(x *float32, w *uint16, n int, rows int, out *float32)
//
// f16dot4AVX512's lanes (one 16-lane chain, HSUM16) for rows consecutive
// F16 weight rows of n halves each (n a multiple of 16), one row after the
// other: the weights are read as one sequential stream.
TEXT ·f16rowsAVX512(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), R8
	MOVQ n+16(FP), CX
	MOVQ rows+24(FP), R10
	MOVQ out+32(FP), DI
	TESTQ R10, R10
	JEQ   end

row:
	VXORPS Z0, Z0, Z0
	XORQ   AX, AX

loop:
	CMPQ        AX, CX
	JGE         rowdone
	VCVTPH2PS   (R8)(AX*2), Z5
	VFMADD231PS (SI)(AX*4), Z5, Z0
	ADDQ        $16, AX
	JMP         loop

rowdone:
	HSUM16(Z0, Y0, X0)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	LEAQ   (R8)(CX*2), R8
	DECQ   R10
	JNZ    row

end:
	VZEROUPPER
	RET

// F16ROW2STEP32 and F16ROW2STEP16 add 32 (16) products of rows R8 and R9
// at AX to the chains Z0 and Z1 (STEP32 also prefetches both streams
// 4 KB ahead).
#define F16ROW2STEP32 \
	VMOVUPS     (SI)(AX*4), Z4; \
	VCVTPH2PS   (R8)(AX*2), Z5; \
	VCVTPH2PS   (R9)(AX*2), Z6; \
	VFMADD231PS Z5, Z4, Z0; \
	VFMADD231PS Z6, Z4, Z1; \
	VMOVUPS     64(SI)(AX*4), Z7; \
	VCVTPH2PS   32(R8)(AX*2), Z8; \
	VCVTPH2PS   32(R9)(AX*2), Z9; \
	VFMADD231PS Z8, Z7, Z0; \
	VFMADD231PS Z9, Z7, Z1

// func f16rows2AVX512(x *float32, w *uint16, n int, rows int, out *float32, pf int)
//
// f16rowsAVX512's products (each row one 16-lane chain, HSUM16: the same
// bits) computed two rows at a time, row i beside row i+rows/2 (the last
// row of an odd count alone): the weights are read as two sequential
// streams, each prefetched pf bytes ahead where pf > 0 (PREFETCHT0; a
// prefetch past the end of w reads nothing and cannot fault). n is a
// multiple of 16.
TEXT ·f16rows2AVX512(SB), NOSPLIT, $0-48
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), R8
	MOVQ  n+16(FP), CX
	MOVQ  rows+24(FP), R10
	MOVQ  out+32(FP), DI
	LEAQ  (CX)(CX*1), BX  // bytes a row
	MOVQ  CX, DX
	ANDQ  $-32, DX        // elements in steps of 32
	MOVQ  R10, R11
	SHRQ  $1, R11         // pairs
	MOVQ  R11, R12
	IMULQ BX, R12
	LEAQ  (R8)(R12*1), R9 // row rows/2
	LEAQ  (DI)(R11*4), R12
	MOVQ  pf+40(FP), R13

pair:
	TESTQ  R11, R11
	JEQ    last
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	XORQ   AX, AX
	LEAQ   (R8)(R13*1), R14
	LEAQ   (R9)(R13*1), R15
	CMPQ   AX, DX
	JGE    ptail

ploop:
	TESTQ      R13, R13
	JEQ        3(PC)
	PREFETCHT0 (R14)(AX*2)
	PREFETCHT0 (R15)(AX*2)
	F16ROW2STEP32
	ADDQ $32, AX
	CMPQ AX, DX
	JLT  ploop

ptail:
	CMPQ        AX, CX
	JGE         pdone
	VMOVUPS     (SI)(AX*4), Z4
	VCVTPH2PS   (R8)(AX*2), Z5
	VCVTPH2PS   (R9)(AX*2), Z6
	VFMADD231PS Z5, Z4, Z0
	VFMADD231PS Z6, Z4, Z1

pdone:
	HSUM16(Z0, Y0, X0)
	HSUM16(Z1, Y1, X1)
	VMOVSS X0, (DI)
	VMOVSS X1, (R12)
	ADDQ   $4, DI
	ADDQ   $4, R12
	ADDQ   BX, R8
	ADDQ   BX, R9
	DECQ   R11
	JMP    pair

last:
	// An odd count's last row (R9 points at it, R12 at its output).
	TESTQ  $1, R10
	JEQ    end
	VXORPS Z0, Z0, Z0
	XORQ   AX, AX

lloop:
	VCVTPH2PS   (R9)(AX*2), Z5
	VFMADD231PS (SI)(AX*4), Z5, Z0
	ADDQ        $16, AX
	CMPQ        AX, CX
	JLT         lloop
	HSUM16(Z0, Y0, X0)
	VMOVSS      X0, (R12)

end:
	VZEROUPPER
	RET

// F16ROW4STEP16 adds 16 products of the rows at R8, R9, R14 and R15 (x at
// SI) to the chains Z0, Z1, Z2 and Z3, the products at displacement D.
#define F16ROW4STEP16(D) \
	VMOVUPS     (2*D)(SI), Z4; \
	VCVTPH2PS   D(R8), Z5; \
	VCVTPH2PS   D(R9), Z6; \
	VCVTPH2PS   D(R14), Z7; \
	VCVTPH2PS   D(R15), Z8; \
	VFMADD231PS Z5, Z4, Z0; \
	VFMADD231PS Z6, Z4, Z1; \
	VFMADD231PS Z7, Z4, Z2; \
	VFMADD231PS Z8, Z4, Z3

// func f16rows4AVX512(x *float32, w *uint16, n int, quads int, out *float32, pf int)
//
// f16rowsAVX512's products (each row one 16-lane chain, HSUM16: the same
// bits) of the first 4·quads rows of w, four rows at a time: row i beside
// rows i+quads, i+2·quads and i+3·quads, so that the weights are read as
// four sequential streams, each prefetched |pf| bytes ahead (pf > 0 into
// L1, pf < 0 into L2, 0 none; a prefetch past the end of w reads nothing
// and cannot fault). n is a multiple of 16, quads > 0.
TEXT ·f16rows4AVX512(SB), NOSPLIT, $0-48
	MOVQ  w+8(FP), R8
	MOVQ  n+16(FP), CX
	MOVQ  quads+24(FP), R11
	MOVQ  out+32(FP), DI
	MOVQ  pf+40(FP), R13
	LEAQ  (CX)(CX*1), BX // bytes a row
	MOVQ  R11, DX
	IMULQ BX, DX         // bytes of quads rows
	LEAQ  (R8)(DX*1), R9
	LEAQ  (R9)(DX*1), R14
	LEAQ  (R14)(DX*1), R15
	MOVQ  R11, R12
	SHLQ  $2, R12        // bytes between the quarters' outputs

quad:
	MOVQ   x+0(FP), SI
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	MOVQ   CX, DX
	SHRQ   $5, DX        // steps of 32
	JEQ    qtail

qloop:
	TESTQ      R13, R13
	JEQ        13(PC)
	JS         6(PC)
	PREFETCHT0 (R8)(R13*1)
	PREFETCHT0 (R9)(R13*1)
	PREFETCHT0 (R14)(R13*1)
	PREFETCHT0 (R15)(R13*1)
	JMP        7(PC)
	NEGQ       R13
	PREFETCHT2 (R8)(R13*1)
	PREFETCHT2 (R9)(R13*1)
	PREFETCHT2 (R14)(R13*1)
	PREFETCHT2 (R15)(R13*1)
	NEGQ       R13
	F16ROW4STEP16(0)
	F16ROW4STEP16(32)
	ADDQ $128, SI
	ADDQ $64, R8
	ADDQ $64, R9
	ADDQ $64, R14
	ADDQ $64, R15
	DECQ DX
	JNZ  qloop

qtail:
	TESTQ $16, CX
	JEQ   qdone
	F16ROW4STEP16(0)
	ADDQ  $32, R8
	ADDQ  $32, R9
	ADDQ  $32, R14
	ADDQ  $32, R15

qdone:
	HSUM16(Z0, Y0, X0)
	HSUM16(Z1, Y1, X1)
	HSUM16(Z2, Y2, X2)
	HSUM16(Z3, Y3, X3)
	LEAQ   (DI)(R12*2), AX
	VMOVSS X0, (DI)
	VMOVSS X1, (DI)(R12*1)
	VMOVSS X2, (AX)
	VMOVSS X3, (AX)(R12*1)
	ADDQ   $4, DI
	DECQ   R11
	JNZ    quad
	VZEROUPPER
	RET

// BF16ROW2STEP32 is F16ROW2STEP32 on BF16 weights (a 16-bit shift).
#define BF16ROW2STEP32 \
	PREFETCHT0  4096(R8)(AX*2); \
	PREFETCHT0  4096(R9)(AX*2); \
	VMOVUPS     (SI)(AX*4), Z4; \
	VPMOVZXWD   (R8)(AX*2), Z5; \
	VPSLLD      $16, Z5, Z5; \
	VPMOVZXWD   (R9)(AX*2), Z6; \
	VPSLLD      $16, Z6, Z6; \
	VFMADD231PS Z5, Z4, Z0; \
	VFMADD231PS Z6, Z4, Z1; \
	VMOVUPS     64(SI)(AX*4), Z7; \
	VPMOVZXWD   32(R8)(AX*2), Z8; \
	VPSLLD      $16, Z8, Z8; \
	VPMOVZXWD   32(R9)(AX*2), Z9; \
	VPSLLD      $16, Z9, Z9; \
	VFMADD231PS Z8, Z7, Z0; \
	VFMADD231PS Z9, Z7, Z1

// func bf16rows2AVX512(x *float32, w *uint16, n int, rows int, out *float32)
//
// f16rows2AVX512 on BF16 weights (VPMOVZXWD and a 16-bit shift: bf16dot4AVX512's
// values and chains, the same bits), row i beside row i+rows/2 (the last
// row of an odd count alone): the weights are read as two sequential
// streams, each prefetched 4 KB ahead (PREFETCHT0; a prefetch past the
// end of w reads nothing and cannot fault). n is a multiple of 16.
TEXT ·bf16rows2AVX512(SB), NOSPLIT, $0-40
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), R8
	MOVQ  n+16(FP), CX
	MOVQ  rows+24(FP), R10
	MOVQ  out+32(FP), DI
	LEAQ  (CX)(CX*1), BX  // bytes a row
	MOVQ  CX, DX
	ANDQ  $-32, DX        // elements in steps of 32
	MOVQ  R10, R11
	SHRQ  $1, R11         // pairs
	MOVQ  R11, R12
	IMULQ BX, R12
	LEAQ  (R8)(R12*1), R9 // row rows/2
	LEAQ  (DI)(R11*4), R12

pair:
	TESTQ  R11, R11
	JEQ    last
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	XORQ   AX, AX
	CMPQ   AX, DX
	JGE    ptail

ploop:
	BF16ROW2STEP32
	ADDQ $32, AX
	CMPQ AX, DX
	JLT  ploop

ptail:
	CMPQ        AX, CX
	JGE         pdone
	VMOVUPS     (SI)(AX*4), Z4
	VPMOVZXWD   (R8)(AX*2), Z5
	VPSLLD      $16, Z5, Z5
	VPMOVZXWD   (R9)(AX*2), Z6
	VPSLLD      $16, Z6, Z6
	VFMADD231PS Z5, Z4, Z0
	VFMADD231PS Z6, Z4, Z1

pdone:
	HSUM16(Z0, Y0, X0)
	HSUM16(Z1, Y1, X1)
	VMOVSS X0, (DI)
	VMOVSS X1, (R12)
	ADDQ   $4, DI
	ADDQ   $4, R12
	ADDQ   BX, R8
	ADDQ   BX, R9
	DECQ   R11
	JMP    pair

last:
	// An odd count's last row (R9 points at it, R12 at its output).
	TESTQ  $1, R10
	JEQ    end
	VXORPS Z0, Z0, Z0
	XORQ   AX, AX

lloop:
	VPMOVZXWD   (R9)(AX*2), Z5
	VPSLLD      $16, Z5, Z5
	VFMADD231PS (SI)(AX*4), Z5, Z0
	ADDQ        $16, AX
	CMPQ        AX, CX
	JLT         lloop
	HSUM16(Z0, Y0, X0)
	VMOVSS      X0, (R12)

end:
	VZEROUPPER
	RET

// The AVX512_BF16 instructions the Go assembler lacks, encoded by hand
// (EVEX, map 0F38, F3, W0, 512-bit, registers only):
//
//	VDPBF16PS zmmA, zmmB, zmmC     62 P0 P1 P2 52 modrm  (zmmA += pairs of zmmB·zmmC)
//	VCVTNEPS2BF16 ymmA, zmmB       62 P0 P1 P2 72 modrm
//
// VDPBF16PS: lane l += B[2l+1]·C[2l+1], then += B[2l]·C[2l], each sum
// rounded to nearest even (the products of two BF16 values are exact in
// float32), BF16 denormals read as zero, denormal sums flushed to zero.
// VCVTNEPS2BF16 rounds float32 to BF16, nearest even, denormals to zero.
// objdump -d (GNU binutils) of the built test binary disassembles each as
// the instruction named in its comment; TestBF16DP checks both against
// their definition in Go (bf16dp.go).

// One 32-value step of two rows (R8, R9; AX the element index): the
// activations (SI) rounded to BF16 into Z6 (its low half the first 16),
// then Z0 += Z6·row R8, Z1 += Z6·row R9, each row prefetched 4 KB ahead.
#define BF16DP2STEP32 \
	VMOVDQU16   (SI)(AX*2), Z6; \
	VMOVDQU16   (R8)(AX*2), Z8; \
	VMOVDQU16   (R9)(AX*2), Z9; \
	BYTE $0x62; BYTE $0xD2; BYTE $0x4E; BYTE $0x48; BYTE $0x52; BYTE $0xC0; \
	BYTE $0x62; BYTE $0xD2; BYTE $0x4E; BYTE $0x48; BYTE $0x52; BYTE $0xC9

// func bf16dpRowsAVX512(x *uint16, w *uint16, n int, rows int, out *float32)
//
// The BF16 products of one activation row x (rounded to BF16 once a call,
// vbf16dpRows) with rows consecutive BF16 weight rows of n values (n > 0 a
// multiple of 32) in the avx512 path's BF16 order where the CPU has
// AVX512_BF16: 16 lanes from +0, VDPBF16PS per 32 values, then HSUM16;
// row i beside row i+rows/2 as two prefetched streams (as bf16rows2AVX512),
// the last row of an odd count alone. pf > 0 prefetches both streams pf
// bytes ahead.
TEXT ·bf16dpRowsAVX512(SB), NOSPLIT, $0-48
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), R8
	MOVQ  n+16(FP), CX
	MOVQ  rows+24(FP), R10
	MOVQ  out+32(FP), DI
	LEAQ  (CX)(CX*1), BX  // bytes a row
	MOVQ  R10, R11
	SHRQ  $1, R11         // pairs
	MOVQ  R11, R12
	IMULQ BX, R12
	LEAQ  (R8)(R12*1), R9 // row rows/2
	LEAQ  (DI)(R11*4), R12
	MOVQ  pf+40(FP), R13

dppair:
	TESTQ  R11, R11
	JEQ    dplast
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	XORQ   AX, AX
	LEAQ   (R8)(R13*1), R14
	LEAQ   (R9)(R13*1), R15

dploop:
	TESTQ      R13, R13
	JEQ        3(PC)
	PREFETCHT0 (R14)(AX*2)
	PREFETCHT0 (R15)(AX*2)
	BF16DP2STEP32
	ADDQ $32, AX
	CMPQ AX, CX
	JLT  dploop
	HSUM16(Z0, Y0, X0)
	HSUM16(Z1, Y1, X1)
	VMOVSS X0, (DI)
	VMOVSS X1, (R12)
	ADDQ   $4, DI
	ADDQ   $4, R12
	ADDQ   BX, R8
	ADDQ   BX, R9
	DECQ   R11
	JMP    dppair

dplast:
	// An odd count's last row (R9 points at it, R12 at its output).
	TESTQ  $1, R10
	JEQ    dpend
	VXORPS Z0, Z0, Z0
	XORQ   AX, AX

dplloop:
	VMOVDQU16   (SI)(AX*2), Z6
	VMOVDQU16   (R9)(AX*2), Z9
	BYTE $0x62; BYTE $0xD2; BYTE $0x4E; BYTE $0x48; BYTE $0x52; BYTE $0xC1 // VDPBF16PS Z0, Z6, Z9
	ADDQ        $32, AX
	CMPQ        AX, CX
	JLT         dplloop
	HSUM16(Z0, Y0, X0)
	VMOVSS      X0, (R12)

dpend:
	VZEROUPPER
	RET

// func bf16RoundAVX512(dst *uint16, src *float32, n int)
//
// dst[i] = src[i] rounded to BF16 by VCVTNEPS2BF16, n > 0 a multiple of 16.
TEXT ·bf16RoundAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	XORQ AX, AX

rdloop:
	VMOVUPS (SI)(AX*4), Z0
	BYTE $0x62; BYTE $0xF2; BYTE $0x7E; BYTE $0x48; BYTE $0x72; BYTE $0xC8 // VCVTNEPS2BF16 Y1, Z0
	VMOVDQU Y1, (DI)(AX*2)
	ADDQ    $16, AX
	CMPQ    AX, CX
	JLT     rdloop
	VZEROUPPER
	RET

// func cpuid(leaf, sub uint32) (a, b, c, d uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL leaf+0(FP), AX
	MOVL sub+4(FP), CX
	CPUID
	MOVL AX, a+8(FP)
	MOVL BX, b+12(FP)
	MOVL CX, c+16(FP)
	MOVL DX, d+20(FP)
	RET
