//go:build amd64

#include "textflag.h"
#include "prefetch_amd64.h"

// AMX instructions the Go assembler lacks, encoded by hand (VEX C4, map
// 0F38, W0, L0; only registers without REX, so R̄X̄B̄ = 111: C4 E2):
//
//	LDTILECFG (SI)              C4 E2 78 49 06     (NP; modrm 00 000 110)
//	TILERELEASE                 C4 E2 78 49 C0     (NP; modrm 11 000 000)
//	TILEZERO tmm0               C4 E2 7B 49 C0     (F2; modrm 11 000 000)
//	TILELOADD tmm4, (SI)(DX*1)  C4 E2 7B 4B 24 16  (F2; modrm 00 100 100, SIB index DX base SI)
//	TILELOADD tmm6, (DI)(CX*1)  C4 E2 7B 4B 34 0F  (F2; modrm 00 110 100, SIB index CX base DI)
//	TDPBSSD tmm0, tmm4, tmm6    C4 E2 4B 5E C4     (F2; vvvv = ¬6; modrm 11 000 100)
//	TILESTORED (BX)(CX*1), tmm0 C4 E2 7A 4B 04 0B  (F3; modrm 00 000 100, SIB index CX base BX)
//
// objdump -d (GNU binutils 2.40) of the built test binary disassembles each
// as the instruction named here.

#define LDTILECFG_SI BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x06
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0

// One block's integers: tmm0 = 0; tmm4 = the m weight rows' 32 quants
// (stride DX); tmm6 = the block's 8 dwords of the 16 activation rows (64
// bytes a dword); tmm0 += tmm4·tmm6 (TDPBSSD: each element the exact
// Σ w·q of the block); stored to (BX), 64 bytes a weight row.
#define BLOCK_INTS \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x16; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x34; BYTE $0x0F; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x4B; BYTE $0x5E; BYTE $0xC4; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x0B

// The offsets of 16 consecutive Q8_0 blocks' scales.
DATA blk34x16<>+0(SB)/4, $0
DATA blk34x16<>+4(SB)/4, $34
DATA blk34x16<>+8(SB)/4, $68
DATA blk34x16<>+12(SB)/4, $102
DATA blk34x16<>+16(SB)/4, $136
DATA blk34x16<>+20(SB)/4, $170
DATA blk34x16<>+24(SB)/4, $204
DATA blk34x16<>+28(SB)/4, $238
DATA blk34x16<>+32(SB)/4, $272
DATA blk34x16<>+36(SB)/4, $306
DATA blk34x16<>+40(SB)/4, $340
DATA blk34x16<>+44(SB)/4, $374
DATA blk34x16<>+48(SB)/4, $408
DATA blk34x16<>+52(SB)/4, $442
DATA blk34x16<>+56(SB)/4, $476
DATA blk34x16<>+60(SB)/4, $510
GLOBL blk34x16<>(SB), RODATA|NOPTR, $64

// func q8amxTile(w *byte, stride, nb int, xt *int8, xd *float32, ng int, dst *float32, scr *byte, m int, dw *float32, idx *int32, masks *uint32, ld16 int)
TEXT ·q8amxTile(SB), NOSPLIT, $0-104
	// The weight rows' scales as float32, dw[1024j+b]: row by row, 16
	// blocks a gather (one sequential stream a row, which also brings the
	// row's quants into the cache for the tiles).
	MOVQ      w+0(FP), SI
	MOVQ      dw+72(FP), DI
	MOVQ      stride+8(FP), DX
	MOVQ      m+64(FP), R8
	VMOVDQU32 blk34x16<>(SB), Z20
	MOVL      $0xffff, BX

srow:
	MOVQ SI, R9
	MOVQ DI, R10
	MOVQ nb+16(FP), CX

s16:
	CMPQ       CX, $16
	JLT        stail
	KMOVW      BX, K2
	VPGATHERDD (R9)(Z20*1), K2, Z21
	VPMOVDW    Z21, Y21
	VCVTPH2PS  Y21, Z21
	VMOVUPS    Z21, (R10)
	ADDQ       $544, R9
	ADDQ       $64, R10
	SUBQ       $16, CX
	JMP        s16

stail:
	TESTQ      CX, CX
	JEQ        snext
	MOVQ       $1, AX
	SHLQ       CX, AX
	DECQ       AX
	KMOVW      AX, K2
	VPXORD     Z21, Z21, Z21
	VPGATHERDD (R9)(Z20*1), K2, Z21
	VPMOVDW    Z21, Y21
	VCVTPH2PS  Y21, Z21
	VMOVUPS    Z21, (R10)

snext:
	ADDQ DX, SI
	ADDQ $4096, DI
	DECQ R8
	JNZ  srow

	MOVQ stride+8(FP), DX
	MOVQ m+64(FP), R11
	MOVQ scr+56(FP), SI
	LDTILECFG_SI
	MOVQ $64, CX
	MOVQ R11, R12
	IMULQ DX, R12
	ADDQ w+0(FP), R12 // the next call's weight rows (prefetched on through the groups)

group:

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
	MOVQ w+0(FP), SI
	ADDQ $2, SI         // the weight rows' quants of block b+1
	MOVQ xt+24(FP), DI  // block b+1 of the activation rows
	MOVQ xd+32(FP), AX  // the activation rows' scales of block b
	MOVQ dw+72(FP), R9  // the weight rows' scales of block b
	MOVQ scr+56(FP), BX
	ADDQ $64, BX        // the slot block b+1's integers go to
	LEAQ 1024(BX), R10  // the slot of block b's
	MOVQ nb+16(FP), R8

	BLOCK_INTS
	ADDQ  $34, SI
	ADDQ  $512, DI
	XCHGQ BX, R10

block:
	// 544 bytes of the next calls' rows (in memory order: one call's share
	// of them a block step, the next group of activation rows going on
	// where this one stopped).
	PREFETCHT2 (R12)
	PREFETCHT2 64(R12)
	PREFETCHT2 128(R12)
	PREFETCHT2 192(R12)
	PREFETCHT2 256(R12)
	PREFETCHT2 320(R12)
	PREFETCHT2 384(R12)
	PREFETCHT2 448(R12)
	PREFETCHT2 512(R12)
	ADDQ $544, R12
	// Block b+1's integers, while block b's float steps run.
	CMPQ R8, $1
	JEQ  floats
	BLOCK_INTS
	ADDQ $34, SI
	ADDQ $512, DI

floats:
	// acc_j = fma(float32(Σ w·q), round32(d_w·d_x), acc_j), the 16
	// activation rows in the lanes.
	VMOVUPS (AX), Z16

	VMULPS.BCST 0(R9), Z16, Z17
	VCVTDQ2PS   0(R10), Z24
	VFMADD231PS Z17, Z24, Z0
	CMPQ        R11, $1
	JEQ         next
	VMULPS.BCST 4096(R9), Z16, Z18
	VCVTDQ2PS   64(R10), Z25
	VFMADD231PS Z18, Z25, Z1
	CMPQ        R11, $2
	JEQ         next
	VMULPS.BCST 8192(R9), Z16, Z19
	VCVTDQ2PS   128(R10), Z26
	VFMADD231PS Z19, Z26, Z2
	CMPQ        R11, $3
	JEQ         next
	VMULPS.BCST 12288(R9), Z16, Z20
	VCVTDQ2PS   192(R10), Z27
	VFMADD231PS Z20, Z27, Z3
	CMPQ        R11, $4
	JEQ         next
	VMULPS.BCST 16384(R9), Z16, Z21
	VCVTDQ2PS   256(R10), Z28
	VFMADD231PS Z21, Z28, Z4
	CMPQ        R11, $5
	JEQ         next
	VMULPS.BCST 20480(R9), Z16, Z22
	VCVTDQ2PS   320(R10), Z29
	VFMADD231PS Z22, Z29, Z5
	CMPQ        R11, $6
	JEQ         next
	VMULPS.BCST 24576(R9), Z16, Z23
	VCVTDQ2PS   384(R10), Z30
	VFMADD231PS Z23, Z30, Z6
	CMPQ        R11, $7
	JEQ         next
	VMULPS.BCST 28672(R9), Z16, Z17
	VCVTDQ2PS   448(R10), Z24
	VFMADD231PS Z17, Z24, Z7
	CMPQ        R11, $8
	JEQ         next
	VMULPS.BCST 32768(R9), Z16, Z18
	VCVTDQ2PS   512(R10), Z25
	VFMADD231PS Z18, Z25, Z8
	CMPQ        R11, $9
	JEQ         next
	VMULPS.BCST 36864(R9), Z16, Z19
	VCVTDQ2PS   576(R10), Z26
	VFMADD231PS Z19, Z26, Z9
	CMPQ        R11, $10
	JEQ         next
	VMULPS.BCST 40960(R9), Z16, Z20
	VCVTDQ2PS   640(R10), Z27
	VFMADD231PS Z20, Z27, Z10
	CMPQ        R11, $11
	JEQ         next
	VMULPS.BCST 45056(R9), Z16, Z21
	VCVTDQ2PS   704(R10), Z28
	VFMADD231PS Z21, Z28, Z11
	CMPQ        R11, $12
	JEQ         next
	VMULPS.BCST 49152(R9), Z16, Z22
	VCVTDQ2PS   768(R10), Z29
	VFMADD231PS Z22, Z29, Z12
	CMPQ        R11, $13
	JEQ         next
	VMULPS.BCST 53248(R9), Z16, Z23
	VCVTDQ2PS   832(R10), Z30
	VFMADD231PS Z23, Z30, Z13
	CMPQ        R11, $14
	JEQ         next
	VMULPS.BCST 57344(R9), Z16, Z17
	VCVTDQ2PS   896(R10), Z24
	VFMADD231PS Z17, Z24, Z14
	CMPQ        R11, $15
	JEQ         next
	VMULPS.BCST 61440(R9), Z16, Z18
	VCVTDQ2PS   960(R10), Z25
	VFMADD231PS Z18, Z25, Z15

next:
	ADDQ  $64, AX
	ADDQ  $4, R9
	XCHGQ BX, R10
	DECQ  R8
	JNZ   block

	// Weight row j's outputs, one a lane, scattered down column j of the
	// group's rows (idx: r·ld bytes), the rows outside the task masked.
	MOVQ      dst+48(FP), DI
	MOVQ      masks+88(FP), AX
	KMOVW     (AX), K1
	MOVQ      idx+80(FP), AX
	VMOVDQU32 (AX), Z31
	KMOVW       K1, K2
	VSCATTERDPS Z0, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $1
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z1, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $2
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z2, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $3
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z3, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $4
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z4, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $5
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z5, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $6
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z6, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $7
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z7, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $8
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z8, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $9
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z9, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $10
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z10, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $11
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z11, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $12
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z12, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $13
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z13, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $14
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z14, K2, (DI)(Z31*1)
	ADDQ        $4, DI
	CMPQ        R11, $15
	JEQ         stored
	KMOVW       K1, K2
	VSCATTERDPS Z15, K2, (DI)(Z31*1)

stored:
	// The next group of 16 activation rows.
	MOVQ nb+16(FP), AX
	SHLQ $9, AX
	ADDQ AX, xt+24(FP)
	MOVQ nb+16(FP), AX
	SHLQ $6, AX
	ADDQ AX, xd+32(FP)
	MOVQ ld16+96(FP), AX
	ADDQ AX, dst+48(FP)
	ADDQ $4, masks+88(FP)
	DECQ ng+40(FP)
	JNZ  group

	TILERELEASE
	VZEROUPPER
	RET

// The offsets of 8 consecutive Q8_0 blocks' scales.
DATA blk34<>+0(SB)/4, $0
DATA blk34<>+4(SB)/4, $34
DATA blk34<>+8(SB)/4, $68
DATA blk34<>+12(SB)/4, $102
DATA blk34<>+16(SB)/4, $136
DATA blk34<>+20(SB)/4, $170
DATA blk34<>+24(SB)/4, $204
DATA blk34<>+28(SB)/4, $238
GLOBL blk34<>(SB), RODATA|NOPTR, $32

// One block's 8 lanes into Y: VPDPBUSD of the weights biased to unsigned
// with the activations, from their −128·Σq lanes (exact Σ w·q by lane).
#define BLANES(off, Y) \
	VMOVDQU  (32*off)(R9)(R11*1), Y; \
	VPXOR    (2+34*off)(R8)(R14*1), Y12, Y5; \
	VPDPBUSD (32*off)(SI)(R11*1), Y5, Y

// BLANES4: four blocks' lanes (BLANES), pairwise summed into A and C.
#define BLANES4(o0, o1, o2, o3, A, B, C, D) \
	BLANES(o0, A); \
	BLANES(o1, B); \
	BLANES(o2, C); \
	BLANES(o3, D); \
	VPHADDD B, A, A; \
	VPHADDD D, C, C

// BLOCK8SUMS: eight blocks' exact sums (BLANES4, their lanes summed by a
// VPHADDD tree), converted, in Y3's lanes in block order.
#define BLOCK8SUMS \
	BLANES4(0, 1, 2, 3, Y1, Y2, Y3, Y4); \
	BLANES4(4, 5, 6, 7, Y2, Y4, Y6, Y7); \
	VPHADDD      Y3, Y1, Y1; \
	VPHADDD      Y6, Y2, Y2; \
	VPERM2I128   $0x20, Y2, Y1, Y3; \
	VPERM2I128   $0x31, Y2, Y1, Y4; \
	VPADDD       Y4, Y3, Y3; \
	VCVTDQ2PS    Y3, Y3

// BLOCK1SUM: one block's exact sum, converted, in X6's low lane.
#define BLOCK1SUM \
	VMOVDQU      (R9)(R11*1), Y6; \
	VPXOR        2(R8)(R14*1), Y12, Y5; \
	VPDPBUSD     (SI)(R11*1), Y5, Y6; \
	VEXTRACTI128 $1, Y6, X8; \
	VPADDD       X8, X6, X6; \
	VPSHUFD      $0x4E, X6, X8; \
	VPADDD       X8, X6, X6; \
	VPSHUFD      $0xB1, X6, X8; \
	VPADDD       X8, X6, X6; \
	VCVTDQ2PS    X6, X6

// func q8rowsBlk(xq *int8, xc *int32, xd *float32, w *byte, stride, nb, rows int, out *float32, pf int)
//
// The amx order for one activation row and rows weight rows, one weight
// row after the other (one sequential stream, as q8rowsVNNI): per block,
// VPDPBUSD of the weights biased to unsigned with the activations from
// their −128·Σq lanes (xc), the 8 lanes summed (integers: exact in any
// order), converted, and acc = fma(float32(sum), round32(d_w·d_x), acc),
// blocks in order. Eight blocks at a time: their lanes summed by a
// VPHADDD tree into one register of 8 block sums, their scales gathered,
// then the 8 fused multiply-adds in order.
TEXT ·q8rowsBlk(SB), NOSPLIT, $64-72
	MOVQ xq+0(FP), SI
	MOVQ xc+8(FP), R9
	MOVQ xd+16(FP), DX
	MOVQ w+24(FP), R8
	MOVQ stride+32(FP), AX
	MOVQ nb+40(FP), CX
	MOVQ rows+48(FP), R10
	MOVQ out+56(FP), DI
	MOVQ pf+64(FP), R15
	MOVL         $0x80808080, R11
	VMOVD        R11, X12
	VPBROADCASTD X12, Y12
	VMOVDQU      blk34<>(SB), Y15

brow:
	VXORPS X0, X0, X0
	XORQ   R11, R11 // 32·block
	XORQ   R13, R13 // block
	XORQ   R14, R14 // 34·block
	MOVQ   CX, R12
	SHRQ   $3, R12
	JEQ    btail

b8:
	LEAQ         (R8)(R14*1), BX
	PFLINES5(BX, R15)
	BLOCK8SUMS
	VMOVDQU      Y3, 0(SP)
	// The 8 blocks' scales, round32(d_w·d_x).
	LEAQ         (R8)(R14*1), BX
	VPCMPEQD     Y6, Y6, Y6
	VPXOR        Y7, Y7, Y7
	VPGATHERDD   Y6, (BX)(Y15*1), Y7
	VPMOVDW      Y7, X7
	VCVTPH2PS    X7, Y7
	VMULPS       (DX)(R13*4), Y7, Y7
	VMOVUPS      Y7, 32(SP)
	VMOVSS       0(SP), X1
	VFMADD231SS  32(SP), X1, X0
	VMOVSS       4(SP), X1
	VFMADD231SS  36(SP), X1, X0
	VMOVSS       8(SP), X1
	VFMADD231SS  40(SP), X1, X0
	VMOVSS       12(SP), X1
	VFMADD231SS  44(SP), X1, X0
	VMOVSS       16(SP), X1
	VFMADD231SS  48(SP), X1, X0
	VMOVSS       20(SP), X1
	VFMADD231SS  52(SP), X1, X0
	VMOVSS       24(SP), X1
	VFMADD231SS  56(SP), X1, X0
	VMOVSS       28(SP), X1
	VFMADD231SS  60(SP), X1, X0
	ADDQ         $256, R11
	ADDQ         $272, R14
	ADDQ         $8, R13
	DECQ         R12
	JNZ          b8

btail:
	CMPQ R13, CX
	JGE  browdone

bblock:
	BLOCK1SUM
	VPBROADCASTW (R8)(R14*1), X7
	VCVTPH2PS    X7, X7
	VMULSS       (DX)(R13*4), X7, X7
	VFMADD231SS  X7, X6, X0
	ADDQ         $32, R11
	ADDQ         $34, R14
	INCQ         R13
	CMPQ         R13, CX
	JLT          bblock

browdone:
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	ADDQ   AX, R8
	DECQ   R10
	JNZ    brow
	VZEROUPPER
	RET

// func q8quadRows(xq *int8, xc *int32, xd *float32, w *byte, stride, nb, rows int, out *float32, pf int)
//
// The quad order (q8blk_amd64.go) for one activation row and rows weight
// rows, one weight row after the other: each block's exact sum as in
// q8rowsBlk (eight blocks at a time by BLANES and a VPHADDD tree, their
// scales by VPINSRW), then a_{b mod 4} = fma(float32(sum), round32(d_w·d_x),
// a_{b mod 4}) in the 4 lanes of X0 (blocks 8i…8i+3, then 8i+4…8i+7: two
// fused multiply-adds), a tail block in its lane alone (a masked one);
// the row's result (a0 + a1) + (a2 + a3). pf > 0 prefetches the weights
// pf bytes ahead.
TEXT ·q8quadRows(SB), NOSPLIT, $0-72
	MOVQ xq+0(FP), SI
	MOVQ xc+8(FP), R9
	MOVQ xd+16(FP), DX
	MOVQ w+24(FP), R8
	MOVQ stride+32(FP), AX
	MOVQ nb+40(FP), CX
	MOVQ rows+48(FP), R10
	MOVQ out+56(FP), DI
	MOVQ pf+64(FP), R15
	MOVL         $0x80808080, R11
	VMOVD        R11, X12
	VPBROADCASTD X12, Y12

qrow:
	VXORPS X0, X0, X0
	XORQ   R11, R11 // 32·block
	XORQ   R13, R13 // block
	XORQ   R14, R14 // 34·block
	MOVQ   CX, R12
	SHRQ   $3, R12
	JEQ    qrtail

qr8:
	LEAQ         (R8)(R14*1), BX
	PFLINES5(BX, R15)
	BLOCK8SUMS
	// The 8 blocks' scales, round32(d_w·d_x).
	MOVWLZX      (R8)(R14*1), BX
	VMOVD        BX, X7
	VPINSRW      $1, 34(R8)(R14*1), X7, X7
	VPINSRW      $2, 68(R8)(R14*1), X7, X7
	VPINSRW      $3, 102(R8)(R14*1), X7, X7
	VPINSRW      $4, 136(R8)(R14*1), X7, X7
	VPINSRW      $5, 170(R8)(R14*1), X7, X7
	VPINSRW      $6, 204(R8)(R14*1), X7, X7
	VPINSRW      $7, 238(R8)(R14*1), X7, X7
	VCVTPH2PS    X7, Y7
	VMULPS       (DX)(R13*4), Y7, Y7
	VFMADD231PS  X7, X3, X0
	VEXTRACTF128 $1, Y3, X4
	VEXTRACTF128 $1, Y7, X5
	VFMADD231PS  X5, X4, X0
	ADDQ         $256, R11
	ADDQ         $272, R14
	ADDQ         $8, R13
	DECQ         R12
	JNZ          qr8

qrtail:
	CMPQ R13, CX
	JGE  qrowdone

qrblock:
	BLOCK1SUM
	VPBROADCASTW (R8)(R14*1), X7
	VCVTPH2PS    X7, X7
	VMULSS       (DX)(R13*4), X7, X7
	// Into lane block mod 4 alone.
	MOVQ         R13, BX
	ANDQ         $3, BX
	XORL         R12, R12
	BTSL         BX, R12
	KMOVW        R12, K1
	VBROADCASTSS X6, X6
	VBROADCASTSS X7, X7
	VFMADD231PS  X7, X6, K1, X0
	ADDQ         $32, R11
	ADDQ         $34, R14
	INCQ         R13
	CMPQ         R13, CX
	JLT          qrblock

qrowdone:
	VMOVSHDUP X0, X1
	VADDPS    X1, X0, X1
	VMOVHLPS  X1, X1, X2
	VADDSS    X2, X1, X1
	VMOVSS    X1, (DI)
	ADDQ      $4, DI
	ADDQ      AX, R8
	DECQ      R10
	JNZ       qrow
	VZEROUPPER
	RET
