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
