//go:build amd64

#include "textflag.h"

// The amx path's Q4_K kernels (q4kamx_amd64.go). AMX instructions the Go
// assembler lacks, encoded by hand as in amx_amd64.s (VEX C4, map 0F38,
// W0, L0, registers without REX; mod 10 with a 32-bit displacement):
//
//	LDTILECFG (SI)                     C4 E2 78 49 06
//	TILERELEASE                        C4 E2 78 49 C0
//	TILEZERO tmm0                      C4 E2 7B 49 C0     (modrm 11 000 000)
//	TILEZERO tmm1                      C4 E2 7B 49 C8     (modrm 11 001 000)
//	TILELOADD tmm4, d32(DI)(CX*1)      C4 E2 7B 4B A4 0F d32 (modrm 10 100 100, SIB index CX base DI)
//	TILELOADD tmm2, d32(SI)(DX*1)      C4 E2 7B 4B 94 16 d32 (modrm 10 010 100, SIB index DX base SI)
//	TILELOADD tmm3, d32(SI)(DX*1)      C4 E2 7B 4B 9C 16 d32 (modrm 10 011 100)
//	TDPBUSD tmm0, tmm2, tmm4           C4 E2 59 5E C2     (66; vvvv = ¬4; modrm 11 000 010)
//	TDPBUSD tmm1, tmm3, tmm4           C4 E2 59 5E CB     (66; vvvv = ¬4; modrm 11 001 011)
//	TILESTORED d32(BX)(CX*1), tmm0     C4 E2 7A 4B 84 0B d32 (F3; modrm 10 000 100, SIB index CX base BX)
//	TILESTORED d32(BX)(CX*1), tmm1     C4 E2 7A 4B 8C 0B d32 (modrm 10 001 100)
//
// TDPBUSD multiplies its first source's bytes as unsigned (the weights'
// nibble products, 0…255 and 0…3) by its second's as signed (the
// activations). objdump -d (GNU binutils) of the built test binary
// disassembles each as the instruction named here.

#define Q4A_LDTILECFG_SI BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x06
#define Q4A_TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0

#define Q4A_CHUNK(b0, b1, a0, a1, h0, h1) \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0xA4; BYTE $0x0F; BYTE $b0; BYTE $b1; BYTE $0x00; BYTE $0x00; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x94; BYTE $0x16; BYTE $a0; BYTE $a1; BYTE $0x00; BYTE $0x00; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x9C; BYTE $0x16; BYTE $h0; BYTE $h1; BYTE $0x00; BYTE $0x00; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x59; BYTE $0x5E; BYTE $0xC2; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x59; BYTE $0x5E; BYTE $0xCB

// One super-block's integers for m weight rows × 16 activation rows:
// tmm0 = tmm1 = 0; per 64-value chunk c, tmm4 = the activations' 16
// dwords (1024c(DI), 64 bytes a dword), tmm2 = the weights' low product
// bytes (64c(SI), stride DX), tmm3 = their high bytes (256+64c(SI)),
// tmm0 += tmm2·tmm4, tmm1 += tmm3·tmm4; stored to (BX) and 1024(BX), 64
// bytes a weight row.
#define Q4A_INTS \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8; \
	Q4A_CHUNK(0x00, 0x00, 0x00, 0x00, 0x00, 0x01); \
	Q4A_CHUNK(0x00, 0x04, 0x40, 0x00, 0x40, 0x01); \
	Q4A_CHUNK(0x00, 0x08, 0x80, 0x00, 0x80, 0x01); \
	Q4A_CHUNK(0x00, 0x0C, 0xC0, 0x00, 0xC0, 0x01); \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x84; BYTE $0x0B; BYTE $0x00; BYTE $0x00; BYTE $0x00; BYTE $0x00; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x8C; BYTE $0x0B; BYTE $0x00; BYTE $0x04; BYTE $0x00; BYTE $0x00

// The 6-bit scales and minimums of the Q4_K super-block at (R8) (llama.cpp's
// utmp): AX = scales 0…7, R13 = minimums 0…7, one byte each.
#define Q4A_SCALES \
	MOVL  4(R8), AX; \
	MOVL  8(R8), BX; \
	MOVL  12(R8), R10; \
	MOVL  R10, R11; \
	SHRL  $4, R11; \
	ANDL  $0x0f0f0f0f, R11; \
	MOVL  BX, R12; \
	SHRL  $6, R12; \
	ANDL  $0x03030303, R12; \
	SHLL  $4, R12; \
	ORL   R12, R11; \
	MOVL  BX, R13; \
	ANDL  $0x3f3f3f3f, R13; \
	ANDL  $0x0f0f0f0f, R10; \
	MOVL  AX, R12; \
	SHRL  $6, R12; \
	ANDL  $0x03030303, R12; \
	SHLL  $4, R12; \
	ORL   R12, R10; \
	ANDL  $0x3f3f3f3f, AX; \
	SHLQ  $32, R10; \
	ORQ   R10, AX; \
	SHLQ  $32, R11; \
	ORQ   R11, R13

// One 64-value chunk c of the weights: the 32 bytes at 16+32c(R8), low
// nibbles times scale 2c, high nibbles times scale 2c+1 (words, ≤ 945),
// their low bytes to 64c(DI) (sub-block 2c, then 2c+1) and their high
// bytes to 256+64c(DI).
#define Q4A_PACK(c) \
	VPMOVZXBW    (16+32*c)(R8), Z1; \
	VPANDD       Z15, Z1, Z2; \
	VPSRLW       $4, Z1, Z3; \
	VPBROADCASTW (4*c)(SP), Z4; \
	VPBROADCASTW (4*c+2)(SP), Z5; \
	VPMULLW      Z4, Z2, Z2; \
	VPMULLW      Z5, Z3, Z3; \
	VPMOVWB      Z2, (64*c)(DI); \
	VPMOVWB      Z3, (64*c+32)(DI); \
	VPSRLW       $8, Z2, Z2; \
	VPSRLW       $8, Z3, Z3; \
	VPMOVWB      Z2, (256+64*c)(DI); \
	VPMOVWB      Z3, (256+64*c+32)(DI)

// func q4kamxPack(w *byte, m, nsb int, pk *byte, scal *byte)
//
// Repacks m consecutive Q4_K weight rows (nsb super-blocks each) for
// q4kamxTile: per row and super-block, 512 bytes at pk (rows 512·nsb
// apart): the 256 products sc·q's low bytes then their high bytes, in
// value order; and 32 bytes at scal (rows 4096 apart): d, dmin as float32,
// 8 bytes unused, the 8 minimums as int16.
TEXT ·q4kamxPack(SB), NOSPLIT, $16-40
	MOVQ         w+0(FP), R8
	MOVQ         pk+24(FP), DI
	MOVQ         scal+32(FP), SI
	MOVL         $0x000F000F, AX
	VPBROADCASTD AX, Z15
	MOVQ         m+8(FP), R14

prow:
	MOVQ SI, R9
	MOVQ nsb+16(FP), R15

psb:
	Q4A_SCALES
	VMOVQ      AX, X6
	VPMOVZXBW  X6, X6
	VMOVDQU    X6, 0(SP)
	VMOVQ      R13, X7
	VPMOVZXBW  X7, X7
	VMOVDQU    X7, 16(R9)
	MOVWLZX    0(R8), BX
	VMOVD      BX, X8
	VCVTPH2PS  X8, X8
	VMOVSS     X8, 0(R9)
	MOVWLZX    2(R8), BX
	VMOVD      BX, X8
	VCVTPH2PS  X8, X8
	VMOVSS     X8, 4(R9)
	Q4A_PACK(0)
	Q4A_PACK(1)
	Q4A_PACK(2)
	Q4A_PACK(3)
	ADDQ $144, R8
	ADDQ $512, DI
	ADDQ $32, R9
	DECQ R15
	JNZ  psb

	ADDQ $4096, SI
	DECQ R14
	JNZ  prow
	VZEROUPPER
	RET

// The float steps of weight row j (accumulator ACC, temporaries T1…T4) for
// the super-block whose integers are at (R10) (low sums) and 1024(R10)
// (high sums), its scalars at (R9) (rows 4096 apart), the 16 activation
// rows in the lanes (Z16 their scales, Z17…Z20 their sub-block sum pairs):
//
//	isum = lo + hi<<8 (exact), msum = Σ m_j·B_j (VPDPWSSD, exact)
//	acc = fma(float32(isum), round32(d·d_x), acc)
//	acc = fma(−float32(msum), round32(dmin·d_x), acc)
#define Q4A_FSTEP(j, ACC, T1, T2, T3, T4) \
	VPSLLD        $8, (1024+64*j)(R10), T1; \
	VPADDD        (64*j)(R10), T1, T1; \
	VCVTDQ2PS     T1, T1; \
	VPXORD        T2, T2, T2; \
	VPDPWSSD.BCST (4096*j+16)(R9), Z17, T2; \
	VPDPWSSD.BCST (4096*j+20)(R9), Z18, T2; \
	VPDPWSSD.BCST (4096*j+24)(R9), Z19, T2; \
	VPDPWSSD.BCST (4096*j+28)(R9), Z20, T2; \
	VCVTDQ2PS     T2, T2; \
	VMULPS.BCST   (4096*j)(R9), Z16, T3; \
	VMULPS.BCST   (4096*j+4)(R9), Z16, T4; \
	VFMADD231PS   T3, T1, ACC; \
	VFNMADD231PS  T4, T2, ACC

#define Q4A_SCATTER(Z) \
	KMOVW       K1, K2; \
	VSCATTERDPS Z, K2, (DI)(Z31*1); \
	ADDQ        $4, DI

// func q4kamxTile(pk *byte, pstride, nsb int, scal *byte, xt *int8, xd *float32, xb *int32, ng int, dst *float32, scr *byte, m int, idx *int32, masks *uint32, ld16 int)
TEXT ·q4kamxTile(SB), NOSPLIT, $0-112
	MOVQ pstride+8(FP), DX
	MOVQ m+80(FP), R11
	MOVQ scr+72(FP), SI
	Q4A_LDTILECFG_SI
	MOVQ $64, CX

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
	MOVQ pk+0(FP), SI    // the weights of super-block b+1
	MOVQ xt+32(FP), DI   // the activations of super-block b+1
	MOVQ scal+24(FP), R9 // the weight rows' scalars of super-block b
	MOVQ xd+40(FP), R12  // the activation rows' scales of super-block b
	MOVQ xb+48(FP), R13  // their sub-block sum pairs of super-block b
	MOVQ scr+72(FP), BX
	ADDQ $64, BX         // the slot super-block b+1's integers go to
	LEAQ 2048(BX), R10   // the slot of super-block b's
	MOVQ nsb+16(FP), R8

	Q4A_INTS
	ADDQ  $512, SI
	ADDQ  $4096, DI
	XCHGQ BX, R10

sblock:
	// Super-block b+1's integers, while super-block b's float steps run.
	CMPQ R8, $1
	JEQ  floats
	Q4A_INTS
	ADDQ $512, SI
	ADDQ $4096, DI

floats:
	VMOVUPS   (R12), Z16
	VMOVDQU32 0(R13), Z17
	VMOVDQU32 64(R13), Z18
	VMOVDQU32 128(R13), Z19
	VMOVDQU32 192(R13), Z20
	Q4A_FSTEP(0, Z0, Z21, Z22, Z23, Z24)
	CMPQ R11, $1
	JEQ  next
	Q4A_FSTEP(1, Z1, Z25, Z26, Z27, Z28)
	CMPQ R11, $2
	JEQ  next
	Q4A_FSTEP(2, Z2, Z21, Z22, Z23, Z24)
	CMPQ R11, $3
	JEQ  next
	Q4A_FSTEP(3, Z3, Z25, Z26, Z27, Z28)
	CMPQ R11, $4
	JEQ  next
	Q4A_FSTEP(4, Z4, Z21, Z22, Z23, Z24)
	CMPQ R11, $5
	JEQ  next
	Q4A_FSTEP(5, Z5, Z25, Z26, Z27, Z28)
	CMPQ R11, $6
	JEQ  next
	Q4A_FSTEP(6, Z6, Z21, Z22, Z23, Z24)
	CMPQ R11, $7
	JEQ  next
	Q4A_FSTEP(7, Z7, Z25, Z26, Z27, Z28)
	CMPQ R11, $8
	JEQ  next
	Q4A_FSTEP(8, Z8, Z21, Z22, Z23, Z24)
	CMPQ R11, $9
	JEQ  next
	Q4A_FSTEP(9, Z9, Z25, Z26, Z27, Z28)
	CMPQ R11, $10
	JEQ  next
	Q4A_FSTEP(10, Z10, Z21, Z22, Z23, Z24)
	CMPQ R11, $11
	JEQ  next
	Q4A_FSTEP(11, Z11, Z25, Z26, Z27, Z28)
	CMPQ R11, $12
	JEQ  next
	Q4A_FSTEP(12, Z12, Z21, Z22, Z23, Z24)
	CMPQ R11, $13
	JEQ  next
	Q4A_FSTEP(13, Z13, Z25, Z26, Z27, Z28)
	CMPQ R11, $14
	JEQ  next
	Q4A_FSTEP(14, Z14, Z21, Z22, Z23, Z24)
	CMPQ R11, $15
	JEQ  next
	Q4A_FSTEP(15, Z15, Z25, Z26, Z27, Z28)

next:
	ADDQ  $32, R9
	ADDQ  $64, R12
	ADDQ  $256, R13
	XCHGQ BX, R10
	DECQ  R8
	JNZ   sblock

	// Weight row j's outputs, one a lane, scattered down column j of the
	// group's rows (idx: r·ld bytes), the rows outside the task masked.
	MOVQ      dst+64(FP), DI
	MOVQ      masks+96(FP), AX
	KMOVW     (AX), K1
	MOVQ      idx+88(FP), AX
	VMOVDQU32 (AX), Z31
	Q4A_SCATTER(Z0)
	CMPQ R11, $1
	JEQ  stored
	Q4A_SCATTER(Z1)
	CMPQ R11, $2
	JEQ  stored
	Q4A_SCATTER(Z2)
	CMPQ R11, $3
	JEQ  stored
	Q4A_SCATTER(Z3)
	CMPQ R11, $4
	JEQ  stored
	Q4A_SCATTER(Z4)
	CMPQ R11, $5
	JEQ  stored
	Q4A_SCATTER(Z5)
	CMPQ R11, $6
	JEQ  stored
	Q4A_SCATTER(Z6)
	CMPQ R11, $7
	JEQ  stored
	Q4A_SCATTER(Z7)
	CMPQ R11, $8
	JEQ  stored
	Q4A_SCATTER(Z8)
	CMPQ R11, $9
	JEQ  stored
	Q4A_SCATTER(Z9)
	CMPQ R11, $10
	JEQ  stored
	Q4A_SCATTER(Z10)
	CMPQ R11, $11
	JEQ  stored
	Q4A_SCATTER(Z11)
	CMPQ R11, $12
	JEQ  stored
	Q4A_SCATTER(Z12)
	CMPQ R11, $13
	JEQ  stored
	Q4A_SCATTER(Z13)
	CMPQ R11, $14
	JEQ  stored
	Q4A_SCATTER(Z14)
	CMPQ R11, $15
	JEQ  stored
	Q4A_SCATTER(Z15)

stored:
	// The next group of 16 activation rows.
	MOVQ nsb+16(FP), AX
	SHLQ $12, AX
	ADDQ AX, xt+32(FP)
	MOVQ nsb+16(FP), AX
	SHLQ $6, AX
	ADDQ AX, xd+40(FP)
	MOVQ nsb+16(FP), AX
	SHLQ $8, AX
	ADDQ AX, xb+48(FP)
	MOVQ ld16+104(FP), AX
	ADDQ AX, dst+64(FP)
	ADDQ $4, masks+96(FP)
	DECQ ng+56(FP)
	JNZ  group

	Q4A_TILERELEASE
	VZEROUPPER
	RET

// VPERMW indices of q4krowsBlk (as q4krowsVNNI's): table k (64 bytes)
// holds 16 words 2k then 16 words 2k+1.
DATA q4kascidx<>+0(SB)/8, $0x0000000000000000
DATA q4kascidx<>+8(SB)/8, $0x0000000000000000
DATA q4kascidx<>+16(SB)/8, $0x0000000000000000
DATA q4kascidx<>+24(SB)/8, $0x0000000000000000
DATA q4kascidx<>+32(SB)/8, $0x0001000100010001
DATA q4kascidx<>+40(SB)/8, $0x0001000100010001
DATA q4kascidx<>+48(SB)/8, $0x0001000100010001
DATA q4kascidx<>+56(SB)/8, $0x0001000100010001
DATA q4kascidx<>+64(SB)/8, $0x0002000200020002
DATA q4kascidx<>+72(SB)/8, $0x0002000200020002
DATA q4kascidx<>+80(SB)/8, $0x0002000200020002
DATA q4kascidx<>+88(SB)/8, $0x0002000200020002
DATA q4kascidx<>+96(SB)/8, $0x0003000300030003
DATA q4kascidx<>+104(SB)/8, $0x0003000300030003
DATA q4kascidx<>+112(SB)/8, $0x0003000300030003
DATA q4kascidx<>+120(SB)/8, $0x0003000300030003
DATA q4kascidx<>+128(SB)/8, $0x0004000400040004
DATA q4kascidx<>+136(SB)/8, $0x0004000400040004
DATA q4kascidx<>+144(SB)/8, $0x0004000400040004
DATA q4kascidx<>+152(SB)/8, $0x0004000400040004
DATA q4kascidx<>+160(SB)/8, $0x0005000500050005
DATA q4kascidx<>+168(SB)/8, $0x0005000500050005
DATA q4kascidx<>+176(SB)/8, $0x0005000500050005
DATA q4kascidx<>+184(SB)/8, $0x0005000500050005
DATA q4kascidx<>+192(SB)/8, $0x0006000600060006
DATA q4kascidx<>+200(SB)/8, $0x0006000600060006
DATA q4kascidx<>+208(SB)/8, $0x0006000600060006
DATA q4kascidx<>+216(SB)/8, $0x0006000600060006
DATA q4kascidx<>+224(SB)/8, $0x0007000700070007
DATA q4kascidx<>+232(SB)/8, $0x0007000700070007
DATA q4kascidx<>+240(SB)/8, $0x0007000700070007
DATA q4kascidx<>+248(SB)/8, $0x0007000700070007
GLOBL q4kascidx<>(SB), RODATA|NOPTR, $256

// Y (8 int32 lanes) summed into X's lane 0, exactly (integers), with T.
#define Q4A_ISUM8(Y, X, T, TX) \
	VEXTRACTI128 $1, Y, TX; \
	VPADDD       TX, X, X; \
	VPSHUFD      $0x4E, X, TX; \
	VPADDD       TX, X, X; \
	VPSHUFD      $0xB1, X, TX; \
	VPADDD       TX, X, X

// func q4krowsBlk(xq *int8, xd *float32, bs *int16, w *byte, nb int, rows int, out *float32, pf int)
//
// The amx path's Q4_K order for one activation row and rows consecutive
// weight rows (the decode kernel; q4kamxTile's bits): q4krowsVNNI's
// integer lanes, summed exactly into the super-block's isum and msum, then
// acc = fma(float32(isum), round32(d·d_x), acc) and
// acc = fma(−float32(msum), round32(dmin·d_x), acc), super-blocks in order.
// pf > 0 prefetches each super-block's lines pf bytes ahead (kqPrefetch).
TEXT ·q4krowsBlk(SB), NOSPLIT, $0-64
	MOVQ w+24(FP), R8
	MOVQ pf+56(FP), R14
	MOVQ rows+40(FP), R15
	MOVQ out+48(FP), DI
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Z15
	VMOVDQU64    q4kascidx<>+0(SB), Z24
	VMOVDQU64    q4kascidx<>+64(SB), Z25
	VMOVDQU64    q4kascidx<>+128(SB), Z26
	VMOVDQU64    q4kascidx<>+192(SB), Z27
	TESTQ        R15, R15
	JEQ          end

row:
	MOVQ   xq+0(FP), SI
	MOVQ   xd+8(FP), DX
	MOVQ   bs+16(FP), R9
	MOVQ   nb+32(FP), CX
	VXORPS X0, X0, X0
	TESTQ  CX, CX
	JEQ    rowdone

loop:
	TESTQ      R14, R14
	JEQ        nopf
	PREFETCHT0 (R8)(R14*1)
	PREFETCHT0 64(R8)(R14*1)
	PREFETCHT0 128(R8)(R14*1)

nopf:
	Q4A_SCALES

	// Minimums: lane b = m_b·(bs[2b]+bs[2b+1]), summed: msum.
	VMOVQ       R13, X8
	VPMOVZXBW   X8, X8
	VPUNPCKLWD  X8, X8, X9
	VPUNPCKHWD  X8, X8, X10
	VINSERTI128 $1, X10, Y9, Y9
	VMOVDQU     (R9), Y10
	VPMADDWD    Y9, Y10, Y10
	Q4A_ISUM8(Y10, X10, Y11, X11)
	VCVTDQ2PS   X10, X10

	VMOVQ        AX, X6
	VPMOVZXBW    X6, X6
	VPERMW       Z6, Z24, Z28
	VPERMW       Z6, Z25, Z29
	VPERMW       Z6, Z26, Z30
	VPERMW       Z6, Z27, Z31
	VPXORD       Z1, Z1, Z1
	VMOVDQU      16(R8), Y4
	VPSRLW       $4, Y4, Y5
	VINSERTI64X4 $1, Y5, Z4, Z4
	VPANDD       Z15, Z4, Z4
	VPMADDUBSW   0(SI), Z4, Z4
	VPDPWSSD     Z28, Z4, Z1
	VMOVDQU      48(R8), Y4
	VPSRLW       $4, Y4, Y5
	VINSERTI64X4 $1, Y5, Z4, Z4
	VPANDD       Z15, Z4, Z4
	VPMADDUBSW   64(SI), Z4, Z4
	VPDPWSSD     Z29, Z4, Z1
	VMOVDQU      80(R8), Y4
	VPSRLW       $4, Y4, Y5
	VINSERTI64X4 $1, Y5, Z4, Z4
	VPANDD       Z15, Z4, Z4
	VPMADDUBSW   128(SI), Z4, Z4
	VPDPWSSD     Z30, Z4, Z1
	VMOVDQU      112(R8), Y4
	VPSRLW       $4, Y4, Y5
	VINSERTI64X4 $1, Y5, Z4, Z4
	VPANDD       Z15, Z4, Z4
	VPMADDUBSW   192(SI), Z4, Z4
	VPDPWSSD     Z31, Z4, Z1
	VEXTRACTI64X4 $1, Z1, Y2
	VPADDD       Y2, Y1, Y1
	Q4A_ISUM8(Y1, X1, Y2, X2)
	VCVTDQ2PS    X1, X1
	VMOVSS       (DX), X11
	MOVWLZX      (R8), BX
	VMOVD        BX, X12
	VCVTPH2PS    X12, X12
	VMULSS       X11, X12, X12
	MOVWLZX      2(R8), BX
	VMOVD        BX, X13
	VCVTPH2PS    X13, X13
	VMULSS       X11, X13, X13
	VFMADD231SS  X12, X1, X0
	VFNMADD231SS X13, X10, X0
	ADDQ         $144, R8
	ADDQ         $256, SI
	ADDQ         $4, DX
	ADDQ         $32, R9
	DECQ         CX
	JNZ          loop

rowdone:
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	DECQ   R15
	JNZ    row

end:
	VZEROUPPER
	RET
