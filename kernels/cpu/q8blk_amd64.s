//go:build amd64

#include "textflag.h"

// The quad order's Q8_0 kernels on AVX512_VNNI (q8blk_amd64.go).

// QPAIR: the block's 32 quants of the rows at offs[OA/8] (low half) and
// offs[OB/8] (high half), biased to unsigned, into Z.
#define QPAIR(OA, OB, Y, Z) \
	MOVQ         OA(SI), AX; \
	MOVQ         OB(SI), DX; \
	VMOVDQU      2(BX)(AX*1), Y; \
	VINSERTI64X4 $1, 2(BX)(DX*1), Z, Z; \
	VPXORD       Z31, Z, Z

// QROWW: word K of X = the block's scale of the row at offs[O/8].
#define QROWW(O, K, X) \
	MOVQ    O(SI), AX; \
	VPINSRW $K, (BX)(AX*1), X, X

// QSCALES: the block's scales (F16) of the 8 rows at offs[O/8…] into X.
#define QSCALES(O, X) \
	MOVQ    O(SI), AX; \
	MOVWLZX (BX)(AX*1), DX; \
	VMOVD   DX, X; \
	QROWW(O+8, 1, X); \
	QROWW(O+16, 2, X); \
	QROWW(O+24, 3, X); \
	QROWW(O+32, 4, X); \
	QROWW(O+40, 5, X); \
	QROWW(O+48, 6, X); \
	QROWW(O+56, 7, X)

// func q8blkPack(w *byte, offs *int64, nb int, pk *byte, next int)
//
// For each block, 576 bytes at pk (64-byte aligned): 8 zmm, dword k of
// the 16 weight rows (row j in lane j, at w+offs[j]) biased to unsigned
// (w+128), then the 16 rows' scales as float32. Rows are loaded in pairs,
// row j in the low half and j+4 in the high one (j < 4; j+4 and j+8 for
// the pairs 4…7), so that two unpack stages and one 128-bit shuffle leave
// row j in lane j. Sixteen rows of a few KB read a block of each at a time
// are too short a stream for the hardware prefetchers, so each block step
// prefetches 544 bytes of the next call's rows (w+next on), in memory
// order: the rows' bytes as fast as they are read.
TEXT ·q8blkPack(SB), NOSPLIT, $0-40
	MOVQ         w+0(FP), BX
	MOVQ         offs+8(FP), SI
	MOVQ         nb+16(FP), CX
	MOVQ         pk+24(FP), DI
	MOVQ         next+32(FP), R8
	ADDQ         BX, R8
	MOVL         $0x80808080, AX
	VPBROADCASTD AX, Z31

pack:
	PREFETCHT0   (R8)
	PREFETCHT0   64(R8)
	PREFETCHT0   128(R8)
	PREFETCHT0   192(R8)
	PREFETCHT0   256(R8)
	PREFETCHT0   320(R8)
	PREFETCHT0   384(R8)
	PREFETCHT0   448(R8)
	PREFETCHT0   512(R8)
	ADDQ         $544, R8
	QPAIR(0, 32, Y0, Z0)
	QPAIR(8, 40, Y1, Z1)
	QPAIR(16, 48, Y2, Z2)
	QPAIR(24, 56, Y3, Z3)
	QPAIR(64, 96, Y4, Z4)
	QPAIR(72, 104, Y5, Z5)
	QPAIR(80, 112, Y6, Z6)
	QPAIR(88, 120, Y7, Z7)
	VPUNPCKLDQ   Z1, Z0, Z8
	VPUNPCKHDQ   Z1, Z0, Z9
	VPUNPCKLDQ   Z3, Z2, Z10
	VPUNPCKHDQ   Z3, Z2, Z11
	VPUNPCKLDQ   Z5, Z4, Z12
	VPUNPCKHDQ   Z5, Z4, Z13
	VPUNPCKLDQ   Z7, Z6, Z14
	VPUNPCKHDQ   Z7, Z6, Z15
	VPUNPCKLQDQ  Z10, Z8, Z0
	VPUNPCKHQDQ  Z10, Z8, Z1
	VPUNPCKLQDQ  Z11, Z9, Z2
	VPUNPCKHQDQ  Z11, Z9, Z3
	VPUNPCKLQDQ  Z14, Z12, Z4
	VPUNPCKHQDQ  Z14, Z12, Z5
	VPUNPCKLQDQ  Z15, Z13, Z6
	VPUNPCKHQDQ  Z15, Z13, Z7
	VSHUFI64X2   $0x88, Z4, Z0, Z8
	VSHUFI64X2   $0xDD, Z4, Z0, Z12
	VSHUFI64X2   $0x88, Z5, Z1, Z9
	VSHUFI64X2   $0xDD, Z5, Z1, Z13
	VSHUFI64X2   $0x88, Z6, Z2, Z10
	VSHUFI64X2   $0xDD, Z6, Z2, Z14
	VSHUFI64X2   $0x88, Z7, Z3, Z11
	VSHUFI64X2   $0xDD, Z7, Z3, Z15
	VMOVDQA32    Z8, 0(DI)
	VMOVDQA32    Z9, 64(DI)
	VMOVDQA32    Z10, 128(DI)
	VMOVDQA32    Z11, 192(DI)
	VMOVDQA32    Z12, 256(DI)
	VMOVDQA32    Z13, 320(DI)
	VMOVDQA32    Z14, 384(DI)
	VMOVDQA32    Z15, 448(DI)
	QSCALES(0, X0)
	QSCALES(64, X1)
	VINSERTI128  $1, X1, Y0, Y0
	VCVTPH2PS    Y0, Z0
	VMOVAPS      Z0, 512(DI)
	ADDQ         $34, BX
	ADDQ         $576, DI
	DECQ         CX
	JNZ          pack
	VZEROUPPER
	RET

// QK: dword k of the 16 packed weight rows (W) against the 4 activation
// rows' dword k, broadcast, into their exact sums Z4…Z7.
#define QK(k, W) \
	VMOVDQA32     (64*k)(BX), W; \
	VPDPBUSD.BCST (64*k)(SI), W, Z4; \
	VPDPBUSD.BCST (64*k+4)(SI), W, Z5; \
	VPDPBUSD.BCST (64*k+8)(SI), W, Z6; \
	VPDPBUSD.BCST (64*k+12)(SI), W, Z7

// QF: a row's float step, A = fma(float32(I), round32(d_w·d_x), A).
#define QF(I, off, T, A) \
	VCVTDQ2PS   I, I; \
	VMULPS.BCST off(DX), Z2, T; \
	VFMADD231PS T, I, A

// QBLOCK: one block of the 4 rows into their accumulators A0…A3.
#define QBLOCK(A0, A1, A2, A3) \
	VPBROADCASTD 0(R8), Z4; \
	VPBROADCASTD 4(R8), Z5; \
	VPBROADCASTD 8(R8), Z6; \
	VPBROADCASTD 12(R8), Z7; \
	QK(0, Z0); \
	QK(1, Z1); \
	QK(2, Z0); \
	QK(3, Z1); \
	QK(4, Z0); \
	QK(5, Z1); \
	QK(6, Z0); \
	QK(7, Z1); \
	VMOVAPS      512(BX), Z2; \
	QF(Z4, 0, Z3, A0); \
	QF(Z5, 4, Z8, A1); \
	QF(Z6, 8, Z3, A2); \
	QF(Z7, 12, Z8, A3); \
	ADDQ         $576, BX; \
	ADDQ         $512, SI; \
	ADDQ         $64, DX; \
	ADDQ         $64, R8

// QSUM: a row's (a0 + a1) + (a2 + a3) into a0.
#define QSUM(A0, A1, A2, A3) \
	VADDPS A1, A0, A0; \
	VADDPS A3, A2, A2; \
	VADDPS A2, A0, A0

// func q8quadTile(pk *byte, nb int, xt *int8, xd *float32, xc *int32, dst *float32, ld4 int, rmask int, cmask int)
//
// 4 activation rows (of a 16-row group of q8acts.t, td, tc, from row 0 of
// the pointers given) × the 16 packed weight rows (q8blkPack): per block
// b, the exact sums in Z4+r from −128·Σx (tc), VPDPBUSD of the biased
// weights with each activation dword broadcast, then a_{b mod 4} =
// fma(float32(sum), round32(d_w·d_x), a_{b mod 4}), row r's a_c in
// Z16+4r+c; at the end (a0 + a1) + (a2 + a3). Row r is stored (its lanes
// in cmask) to dst+r·ld4 where rmask has bit r.
TEXT ·q8quadTile(SB), NOSPLIT, $0-72
	MOVQ pk+0(FP), BX
	MOVQ nb+8(FP), CX
	MOVQ xt+16(FP), SI
	MOVQ xd+24(FP), DX
	MOVQ xc+32(FP), R8
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z26, Z26, Z26
	VPXORD Z27, Z27, Z27
	VPXORD Z28, Z28, Z28
	VPXORD Z29, Z29, Z29
	VPXORD Z30, Z30, Z30
	VPXORD Z31, Z31, Z31
	MOVQ   CX, R9
	SHRQ   $2, R9
	JEQ    qtail

quad:
	QBLOCK(Z16, Z20, Z24, Z28)
	QBLOCK(Z17, Z21, Z25, Z29)
	QBLOCK(Z18, Z22, Z26, Z30)
	QBLOCK(Z19, Z23, Z27, Z31)
	DECQ   R9
	JNZ    quad

qtail:
	ANDQ   $3, CX
	JEQ    qsum
	QBLOCK(Z16, Z20, Z24, Z28)
	DECQ   CX
	JEQ    qsum
	QBLOCK(Z17, Z21, Z25, Z29)
	DECQ   CX
	JEQ    qsum
	QBLOCK(Z18, Z22, Z26, Z30)

qsum:
	QSUM(Z16, Z17, Z18, Z19)
	QSUM(Z20, Z21, Z22, Z23)
	QSUM(Z24, Z25, Z26, Z27)
	QSUM(Z28, Z29, Z30, Z31)
	MOVQ  dst+40(FP), DI
	MOVQ  ld4+48(FP), AX
	MOVQ  rmask+56(FP), R9
	MOVQ  cmask+64(FP), R10
	KMOVW R10, K1
	BTQ   $0, R9
	JCC   2(PC)
	VMOVUPS Z16, K1, (DI)
	ADDQ  AX, DI
	BTQ   $1, R9
	JCC   2(PC)
	VMOVUPS Z20, K1, (DI)
	ADDQ  AX, DI
	BTQ   $2, R9
	JCC   2(PC)
	VMOVUPS Z24, K1, (DI)
	ADDQ  AX, DI
	BTQ   $3, R9
	JCC   2(PC)
	VMOVUPS Z28, K1, (DI)
	VZEROUPPER
	RET
