//go:build amd64

#include "textflag.h"
#include "treduce_amd64.h"

// The core's arithmetic peaks, for BenchmarkPeak (the bounds doc.go
// states): independent chains that only compute, no memory operand.

// ZEROALL zeroes Y0–Y15 (the chains and their constant operands).
#define ZEROALL \
	ZERO12 \
	VXORPS Y12, Y12, Y12 \
	VXORPS Y13, Y13, Y13 \
	VXORPS Y14, Y14, Y14 \
	VXORPS Y15, Y15, Y15

// func peakFMAAVX2(n int)
//
// n iterations of twelve independent VFMADD231PS (8 lanes): 192·n flops.
TEXT ·peakFMAAVX2(SB), NOSPLIT, $0-8
	MOVQ   n+0(FP), CX
	ZEROALL
	TESTQ  CX, CX
	JEQ    fdone

floop:
	VFMADD231PS Y12, Y13, Y0
	VFMADD231PS Y12, Y13, Y1
	VFMADD231PS Y12, Y13, Y2
	VFMADD231PS Y12, Y13, Y3
	VFMADD231PS Y12, Y13, Y4
	VFMADD231PS Y12, Y13, Y5
	VFMADD231PS Y12, Y13, Y6
	VFMADD231PS Y12, Y13, Y7
	VFMADD231PS Y12, Y13, Y8
	VFMADD231PS Y12, Y13, Y9
	VFMADD231PS Y12, Y13, Y10
	VFMADD231PS Y12, Y13, Y11
	DECQ        CX
	JNZ         floop

fdone:
	VZEROUPPER
	RET

// I8STEP is the int8 dot product's least work per 32 unsigned×signed
// byte products without VNNI (llama.cpp's AVX2 k-quant kernels and ours):
// VPMADDUBSW into 16 words, VPMADDWD by the scales into 8 dwords, VPADDD
// into the accumulator.
#define I8STEP(T, ACC) \
	VPMADDUBSW Y13, Y12, T; \
	VPMADDWD   Y14, T, T; \
	VPADDD     T, ACC, ACC

// func peakI8AVX2(n int)
//
// n iterations of six independent I8STEP chains: 192·n multiply-adds.
TEXT ·peakI8AVX2(SB), NOSPLIT, $0-8
	MOVQ   n+0(FP), CX
	ZEROALL
	TESTQ  CX, CX
	JEQ    idone

iloop:
	I8STEP(Y6, Y0)
	I8STEP(Y7, Y1)
	I8STEP(Y8, Y2)
	I8STEP(Y9, Y3)
	I8STEP(Y10, Y4)
	I8STEP(Y11, Y5)
	DECQ CX
	JNZ  iloop

idone:
	VZEROUPPER
	RET

// func peakFMACvtAVX2(n int)
//
// peakFMAAVX2's twelve chains with four VCVTPH2PS an iteration, the 3×4
// F16 tile's mix (four weight vectors converted to twelve multiply-adds):
// 192·n flops.
TEXT ·peakFMACvtAVX2(SB), NOSPLIT, $0-8
	MOVQ   n+0(FP), CX
	ZEROALL
	TESTQ  CX, CX
	JEQ    cdone

cloop:
	VCVTPH2PS X15, Y14
	VFMADD231PS Y12, Y13, Y0
	VFMADD231PS Y12, Y13, Y1
	VFMADD231PS Y12, Y13, Y2
	VCVTPH2PS X15, Y14
	VFMADD231PS Y12, Y13, Y3
	VFMADD231PS Y12, Y13, Y4
	VFMADD231PS Y12, Y13, Y5
	VCVTPH2PS X15, Y14
	VFMADD231PS Y12, Y13, Y6
	VFMADD231PS Y12, Y13, Y7
	VFMADD231PS Y12, Y13, Y8
	VCVTPH2PS X15, Y14
	VFMADD231PS Y12, Y13, Y9
	VFMADD231PS Y12, Y13, Y10
	VFMADD231PS Y12, Y13, Y11
	DECQ        CX
	JNZ         cloop

cdone:
	VZEROUPPER
	RET

// ZEROZ zeroes Z0–Z19 (the AVX-512 chains and their operands).
#define ZEROZ \
	VPXORD Z0, Z0, Z0; VPXORD Z1, Z1, Z1; VPXORD Z2, Z2, Z2; VPXORD Z3, Z3, Z3; \
	VPXORD Z4, Z4, Z4; VPXORD Z5, Z5, Z5; VPXORD Z6, Z6, Z6; VPXORD Z7, Z7, Z7; \
	VPXORD Z8, Z8, Z8; VPXORD Z9, Z9, Z9; VPXORD Z10, Z10, Z10; VPXORD Z11, Z11, Z11; \
	VPXORD Z12, Z12, Z12; VPXORD Z13, Z13, Z13; VPXORD Z14, Z14, Z14; VPXORD Z15, Z15, Z15; \
	VPXORD Z16, Z16, Z16; VPXORD Z17, Z17, Z17; VPXORD Z18, Z18, Z18; VPXORD Z19, Z19, Z19

// func peakFMAAVX512(n int)
//
// n iterations of twelve independent VFMADD231PS (16 lanes): 384·n flops.
TEXT ·peakFMAAVX512(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	ZEROZ
	TESTQ CX, CX
	JEQ   zfdone

zfloop:
	VFMADD231PS Z16, Z17, Z0
	VFMADD231PS Z16, Z17, Z1
	VFMADD231PS Z16, Z17, Z2
	VFMADD231PS Z16, Z17, Z3
	VFMADD231PS Z16, Z17, Z4
	VFMADD231PS Z16, Z17, Z5
	VFMADD231PS Z16, Z17, Z6
	VFMADD231PS Z16, Z17, Z7
	VFMADD231PS Z16, Z17, Z8
	VFMADD231PS Z16, Z17, Z9
	VFMADD231PS Z16, Z17, Z10
	VFMADD231PS Z16, Z17, Z11
	DECQ        CX
	JNZ         zfloop

zfdone:
	VZEROUPPER
	RET

// func peakFMACvtAVX512(n int)
//
// n iterations of sixteen independent VFMADD231PS (16 lanes) and four
// VCVTPH2PS of 16 values, the 4×4 F16 tile's mix: 512·n flops.
TEXT ·peakFMACvtAVX512(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	ZEROZ
	TESTQ CX, CX
	JEQ   zcdone

zcloop:
	VCVTPH2PS   Y19, Z18
	VFMADD231PS Z16, Z17, Z0
	VFMADD231PS Z16, Z17, Z1
	VFMADD231PS Z16, Z17, Z2
	VFMADD231PS Z16, Z17, Z3
	VCVTPH2PS   Y19, Z18
	VFMADD231PS Z16, Z17, Z4
	VFMADD231PS Z16, Z17, Z5
	VFMADD231PS Z16, Z17, Z6
	VFMADD231PS Z16, Z17, Z7
	VCVTPH2PS   Y19, Z18
	VFMADD231PS Z16, Z17, Z8
	VFMADD231PS Z16, Z17, Z9
	VFMADD231PS Z16, Z17, Z10
	VFMADD231PS Z16, Z17, Z11
	VCVTPH2PS   Y19, Z18
	VFMADD231PS Z16, Z17, Z12
	VFMADD231PS Z16, Z17, Z13
	VFMADD231PS Z16, Z17, Z14
	VFMADD231PS Z16, Z17, Z15
	DECQ        CX
	JNZ         zcloop

zcdone:
	VZEROUPPER
	RET

// func peakVNNI(n int)
//
// n iterations of twelve independent VPDPBUSD (64 byte products each):
// 768·n multiply-adds.
TEXT ·peakVNNI(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	ZEROZ
	TESTQ CX, CX
	JEQ   vdone

vloop:
	VPDPBUSD Z16, Z17, Z0
	VPDPBUSD Z16, Z17, Z1
	VPDPBUSD Z16, Z17, Z2
	VPDPBUSD Z16, Z17, Z3
	VPDPBUSD Z16, Z17, Z4
	VPDPBUSD Z16, Z17, Z5
	VPDPBUSD Z16, Z17, Z6
	VPDPBUSD Z16, Z17, Z7
	VPDPBUSD Z16, Z17, Z8
	VPDPBUSD Z16, Z17, Z9
	VPDPBUSD Z16, Z17, Z10
	VPDPBUSD Z16, Z17, Z11
	DECQ     CX
	JNZ      vloop

vdone:
	VZEROUPPER
	RET
