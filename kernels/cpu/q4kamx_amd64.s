//go:build amd64

#include "textflag.h"
#include "prefetch_amd64.h"

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

// Q4V_SCAL: one row's super-block scalars (its header at R8) to R9, as
// q4kvnniScal lays them out.
#define Q4V_SCAL \
	Q4A_SCALES; \
	VMOVQ     AX, X6; \
	VPMOVZXBD X6, Y6; \
	VMOVDQU   Y6, 32(R9); \
	VMOVQ     R13, X7; \
	VPMOVZXBW X7, X7; \
	VMOVDQU   X7, 16(R9); \
	MOVWLZX   0(R8), BX; \
	VMOVD     BX, X8; \
	VCVTPH2PS X8, X8; \
	VMOVSS    X8, 0(R9); \
	MOVWLZX   2(R8), BX; \
	VMOVD     BX, X8; \
	VCVTPH2PS X8, X8; \
	VMOVSS    X8, 4(R9)

// func q4kvnniScal(w *byte, m, nsb int, scal *byte)
//
// The scalars q4kvnniTile reads of m consecutive Q4_K weight rows (nsb
// super-blocks each): per row and super-block, 64 bytes at scal (rows
// 8192 apart): d, dmin as float32, 8 bytes unused, the 8 minimums as
// int16, the 8 scales as int32.
TEXT ·q4kvnniScal(SB), NOSPLIT, $0-32
	MOVQ w+0(FP), R8
	MOVQ scal+24(FP), SI
	MOVQ m+8(FP), R14

vprow:
	MOVQ SI, R9
	MOVQ nsb+16(FP), R15

vpsb:
	Q4V_SCAL
	ADDQ $144, R8
	ADDQ $64, R9
	DECQ R15
	JNZ  vpsb

	ADDQ $8192, SI
	DECQ R14
	JNZ  vprow
	VZEROUPPER
	RET

// func q4kvnniScalX(w *byte, m, nsb int, scal *byte)
//
// q4kvnniScal for m rows (a multiple of 4) in the interleaved layout
// (q4kx.go; w a group's first byte): row r's headers 16·(r mod 4) into
// its group, a super-block 576 bytes on.
TEXT ·q4kvnniScalX(SB), NOSPLIT, $0-32
	MOVQ  w+0(FP), DI
	MOVQ  scal+24(FP), SI
	MOVQ  m+8(FP), R14
	MOVQ  nsb+16(FP), DX
	IMULQ $576, DX // a group's bytes
	XORQ  CX, CX   // the row within its group

xprow:
	MOVQ CX, R8
	SHLQ $4, R8
	ADDQ DI, R8
	MOVQ SI, R9
	MOVQ nsb+16(FP), R15

xpsb:
	Q4V_SCAL
	ADDQ $576, R8
	ADDQ $64, R9
	DECQ R15
	JNZ  xpsb

	ADDQ $8192, SI
	INCQ CX
	CMPQ CX, $4
	JNE  xnext
	XORQ CX, CX
	ADDQ DX, DI

xnext:
	DECQ R14
	JNZ  xprow
	VZEROUPPER
	RET

// func q4kvnniTile(w *byte, wstride, nsb int, scal *byte, xt *int8, xd *float32, xb *int32, ng int, dst *float32, scr *byte, m int, idx *int32, masks *uint32, ld16 int)
//
// The amx order's Q4_K tile on AVX512_VNNI, with q4kamxTile's bits, from
// the Q4_K rows themselves (m rows wstride bytes apart; q4kvnniScal's
// scalars): for each group of 16 activation rows and each super-block,
// four weight rows a pass (the last rows repeated where m is not a
// multiple of 4, never read past row m−1), per 64-value chunk: each
// nibble dword of a row broadcast and masked (low nibbles; high nibbles
// in place, 16 times their value) and multiplied with the 16 activation
// rows' dwords of its 4 values (VPDPBUSD: the sub-block sums in the
// lanes), the high sums shifted back (exact: multiples of 16), each times
// its scale (VPMULLD) and added: isum exactly, one lane an activation row,
// to the slot at scr+64. Then, per weight row, q4kamxTile's float steps
// with the accumulators in memory (scr+1088, 64 bytes a row), and at the
// end their scatter. Locals: 0(SP) the pass's first row, 8(SP) its slot
// rows, 16(SP) the rows left.
#define Q4V_TILE ·q4kvnniTile
#define W(o) o
#define Q4V_SB 144
#include "q4kvnnitile_amd64.h"
#undef Q4V_TILE
#undef W
#undef Q4V_SB

// func q4kvnniTileX(w *byte, wstride, nsb int, scal *byte, xt *int8, xd *float32, xb *int32, ng int, dst *float32, scr *byte, m int, idx *int32, masks *uint32, ld16 int)
//
// q4kvnniTile on weight rows in the interleaved layout (q4kx.go: m a
// multiple of 4, w a group's first byte, wstride a row's bytes): each
// pass's four rows are a group, its reads the same bytes at their
// interleaved places, the same bits.
#define Q4V_X
#define Q4V_TILE ·q4kvnniTileX
#define W(o) ((o)+48*((o)/16))
#define Q4V_SB 576
#include "q4kvnnitile_amd64.h"
#undef Q4V_X
#undef Q4V_TILE
#undef W
#undef Q4V_SB

// VPERMW indices of q4krowsBlk: table k (64 bytes)
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
// The minimums' products: dword lane b of Y10 = m_b·(bs[2b]+bs[2b+1])
// (R13 = mins 0..7, one byte each; R9 = the pair sums as int16 pairs).
#define Q4A_MINS \
	VMOVQ       R13, X8; \
	VPMOVZXBW   X8, X8; \
	VPUNPCKLWD  X8, X8, X9; \
	VPUNPCKHWD  X8, X8, X10; \
	VINSERTI128 $1, X10, Y9, Y9; \
	VMOVDQU     (R9), Y10; \
	VPMADDWD    Y9, Y10, Y10

#define Q4A_ISUM8(Y, X, T, TX) \
	VEXTRACTI128 $1, Y, TX; \
	VPADDD       TX, X, X; \
	VPSHUFD      $0x4E, X, TX; \
	VPADDD       TX, X, X; \
	VPSHUFD      $0xB1, X, TX; \
	VPADDD       TX, X, X

// Q4A_STEPS: the amx order's two float steps of a super-block on the
// accumulator X0, from isum (X1's low lane, already summed) and msum
// (X10's), d and dmin at (R8), the activation scale at (DX); the isum
// lanes converted here.
#define Q4A_STEPS \
	VCVTDQ2PS    X1, X1; \
	VMOVSS       (DX), X11; \
	MOVWLZX      (R8), BX; \
	VMOVD        BX, X12; \
	VCVTPH2PS    X12, X12; \
	VMULSS       X11, X12, X12; \
	MOVWLZX      2(R8), BX; \
	VMOVD        BX, X13; \
	VCVTPH2PS    X13, X13; \
	VMULSS       X11, X13, X13; \
	VFMADD231SS  X12, X1, X0; \
	VFNMADD231SS X13, X10, X0

// Q4A_SB: one super-block of q4krowsBlk (weights at R8, activations at
// SI, their scale at DX, their pair sums at R9) added to X0 in the amx
// order (Z15 the nibble mask, Z24…Z27 q4kascidx; AX, BX, R10…R13 and
// X1…X13, Z28…Z31 clobbered).
#define Q4A_SB \
	Q4A_SCALES; \
	Q4A_MINS; \
	Q4A_ISUM8(Y10, X10, Y11, X11); \
	VCVTDQ2PS   X10, X10; \
	VMOVQ        AX, X6; \
	VPMOVZXBW    X6, X6; \
	VPERMW       Z6, Z24, Z28; \
	VPERMW       Z6, Z25, Z29; \
	VPERMW       Z6, Z26, Z30; \
	VPERMW       Z6, Z27, Z31; \
	VPXORD       Z1, Z1, Z1; \
	VMOVDQU      16(R8), Y4; \
	VPSRLW       $4, Y4, Y5; \
	VINSERTI64X4 $1, Y5, Z4, Z4; \
	VPANDD       Z15, Z4, Z4; \
	VPMADDUBSW   0(SI), Z4, Z4; \
	VPDPWSSD     Z28, Z4, Z1; \
	VMOVDQU      48(R8), Y4; \
	VPSRLW       $4, Y4, Y5; \
	VINSERTI64X4 $1, Y5, Z4, Z4; \
	VPANDD       Z15, Z4, Z4; \
	VPMADDUBSW   64(SI), Z4, Z4; \
	VPDPWSSD     Z29, Z4, Z1; \
	VMOVDQU      80(R8), Y4; \
	VPSRLW       $4, Y4, Y5; \
	VINSERTI64X4 $1, Y5, Z4, Z4; \
	VPANDD       Z15, Z4, Z4; \
	VPMADDUBSW   128(SI), Z4, Z4; \
	VPDPWSSD     Z30, Z4, Z1; \
	VMOVDQU      112(R8), Y4; \
	VPSRLW       $4, Y4, Y5; \
	VINSERTI64X4 $1, Y5, Z4, Z4; \
	VPANDD       Z15, Z4, Z4; \
	VPMADDUBSW   192(SI), Z4, Z4; \
	VPDPWSSD     Z31, Z4, Z1; \
	VEXTRACTI64X4 $1, Z1, Y2; \
	VPADDD       Y2, Y1, Y1; \
	Q4A_ISUM8(Y1, X1, Y2, X2); \
	Q4A_STEPS

// func q4krowsBlk(xq *int8, xd *float32, bs *int16, w *byte, nb int, rows int, out *float32, pf int)
//
// The amx order of Q4_K for one activation row and rows consecutive
// weight rows (the decode kernel; q4kamxTile's bits): the vector order's
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
	PFLINES3(R8, R14)
	Q4A_SB
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

// Q4K_PAIR adds a pair of sub-blocks B and B+1 (32 bytes of nibbles at
// WO(R8), the activations at XO(SI)) to the isum lanes Y1, each
// sub-block's scale word picked from the broadcast scales Y6 by VPSHUFB
// (q4ksc<>).
#define Q4K_PAIR(WO, XO, B) \
	VMOVDQU    WO(R8), Y4; \
	VPSRLW     $4, Y4, Y5; \
	VPAND      Y15, Y4, Y4; \
	VPAND      Y15, Y5, Y5; \
	VPMADDUBSW XO(SI), Y4, Y4; \
	VPMADDUBSW XO+32(SI), Y5, Y5; \
	VPSHUFB    q4ksc<>+(32*B)(SB), Y6, Y7; \
	VPSHUFB    q4ksc<>+(32*B+32)(SB), Y6, Y8; \
	VPMADDWD   Y7, Y4, Y4; \
	VPMADDWD   Y8, Y5, Y5; \
	VPADDD     Y4, Y1, Y1; \
	VPADDD     Y5, Y1, Y1

// q4ksc<>: VPSHUFB masks, 32 bytes for each sub-block b < 8: every word
// the byte b of a broadcast quadword of the 8 scales, zero-extended.
DATA q4ksc<>+0(SB)/8, $0x8000800080008000
DATA q4ksc<>+8(SB)/8, $0x8000800080008000
DATA q4ksc<>+16(SB)/8, $0x8000800080008000
DATA q4ksc<>+24(SB)/8, $0x8000800080008000
DATA q4ksc<>+32(SB)/8, $0x8001800180018001
DATA q4ksc<>+40(SB)/8, $0x8001800180018001
DATA q4ksc<>+48(SB)/8, $0x8001800180018001
DATA q4ksc<>+56(SB)/8, $0x8001800180018001
DATA q4ksc<>+64(SB)/8, $0x8002800280028002
DATA q4ksc<>+72(SB)/8, $0x8002800280028002
DATA q4ksc<>+80(SB)/8, $0x8002800280028002
DATA q4ksc<>+88(SB)/8, $0x8002800280028002
DATA q4ksc<>+96(SB)/8, $0x8003800380038003
DATA q4ksc<>+104(SB)/8, $0x8003800380038003
DATA q4ksc<>+112(SB)/8, $0x8003800380038003
DATA q4ksc<>+120(SB)/8, $0x8003800380038003
DATA q4ksc<>+128(SB)/8, $0x8004800480048004
DATA q4ksc<>+136(SB)/8, $0x8004800480048004
DATA q4ksc<>+144(SB)/8, $0x8004800480048004
DATA q4ksc<>+152(SB)/8, $0x8004800480048004
DATA q4ksc<>+160(SB)/8, $0x8005800580058005
DATA q4ksc<>+168(SB)/8, $0x8005800580058005
DATA q4ksc<>+176(SB)/8, $0x8005800580058005
DATA q4ksc<>+184(SB)/8, $0x8005800580058005
DATA q4ksc<>+192(SB)/8, $0x8006800680068006
DATA q4ksc<>+200(SB)/8, $0x8006800680068006
DATA q4ksc<>+208(SB)/8, $0x8006800680068006
DATA q4ksc<>+216(SB)/8, $0x8006800680068006
DATA q4ksc<>+224(SB)/8, $0x8007800780078007
DATA q4ksc<>+232(SB)/8, $0x8007800780078007
DATA q4ksc<>+240(SB)/8, $0x8007800780078007
DATA q4ksc<>+248(SB)/8, $0x8007800780078007
GLOBL q4ksc<>(SB), RODATA|NOPTR, $256

// Q4K_STEPS: the amx order's two float steps of a super-block on the
// accumulator X0 (Q4A_STEPS's operations): isum and msum, the exact sums
// of the lanes of Y1 and Y10, reduced together (VPHADDD) into lanes 0 and
// 1 of X2 and converted together, d and dmin at (R8) converted together
// and multiplied by the activation scale at (DX) in one instruction.
#define Q4K_STEPS \
	VPHADDD      Y10, Y1, Y2; \
	VEXTRACTI128 $1, Y2, X3; \
	VPADDD       X3, X2, X2; \
	VPHADDD      X2, X2, X2; \
	VCVTDQ2PS    X2, X2; \
	VMOVD        (R8), X12; \
	VCVTPH2PS    X12, X12; \
	VBROADCASTSS (DX), X11; \
	VMULPS       X11, X12, X12; \
	VFMADD231SS  X12, X2, X0; \
	VMOVSHDUP    X2, X3; \
	VMOVSHDUP    X12, X13; \
	VFNMADD231SS X13, X3, X0

// func q4kblkAVX2(xq *int8, xd *float32, bs *int16, w *byte, nb int, out *float32, pf int)
//
// *out = the amx order's product of one Q8_K activation row (xq, xd, bs)
// with the Q4_K weight row w (nb super-blocks), prefetching pf bytes ahead.
TEXT ·q4kblkAVX2(SB), NOSPLIT, $0-56
	MOVQ xq+0(FP), SI
	MOVQ xd+8(FP), DX
	MOVQ bs+16(FP), R9
	MOVQ w+24(FP), R8
	MOVQ nb+32(FP), CX
	MOVQ out+40(FP), DI
	MOVQ pf+48(FP), R14
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	VXORPS       Y0, Y0, Y0

bloop:
	TESTQ CX, CX
	JEQ   bdone
	PFLINES3(R8, R14)
	// The 6-bit scales and mins of the 8 sub-blocks (llama.cpp's utmp):
	// AX = scales 0..7, R13 = mins 0..7, one byte each.
	Q4A_SCALES
	VMOVQ        AX, X6
	VPBROADCASTQ X6, Y6

	// Minimums: lane b = m_b·(bs[2b]+bs[2b+1]).
	Q4A_MINS

	VPXOR Y1, Y1, Y1
	Q4K_PAIR(16, 0, 0)
	Q4K_PAIR(48, 64, 2)
	Q4K_PAIR(80, 128, 4)
	Q4K_PAIR(112, 192, 6)
	Q4K_STEPS
	ADDQ         $144, R8
	ADDQ         $256, SI
	ADDQ         $4, DX
	ADDQ         $32, R9
	DECQ         CX
	JMP          bloop

bdone:
	VMOVSS X0, (DI)
	VZEROUPPER
	RET

// Tables of q4krowsPairBlk: VPERMB indices picking, for the first
// super-block and 64-value chunk c, 16 words of scale 2c then 16 of
// scale 2c+1 (even bytes; the odd ones are zeroed by the mask; the
// second super-block's, whose bytes come 16 on in the unpacked scales,
// are these plus 16), and the minimums as word pairs (the first
// super-block's in the low half, the second's in the high); the scale
// unpacking's shift counts and masks; the nibble shifts (0 for the low
// half, 4 for the high); the dwords 0, 4, 8 and 12 (VPERMD's indices for
// the four lanes used).
DATA q4k2scidx<>+0(SB)/8, $0x0000000000000000
DATA q4k2scidx<>+8(SB)/8, $0x0000000000000000
DATA q4k2scidx<>+16(SB)/8, $0x0000000000000000
DATA q4k2scidx<>+24(SB)/8, $0x0000000000000000
DATA q4k2scidx<>+32(SB)/8, $0x0001000100010001
DATA q4k2scidx<>+40(SB)/8, $0x0001000100010001
DATA q4k2scidx<>+48(SB)/8, $0x0001000100010001
DATA q4k2scidx<>+56(SB)/8, $0x0001000100010001
DATA q4k2scidx<>+64(SB)/8, $0x0002000200020002
DATA q4k2scidx<>+72(SB)/8, $0x0002000200020002
DATA q4k2scidx<>+80(SB)/8, $0x0002000200020002
DATA q4k2scidx<>+88(SB)/8, $0x0002000200020002
DATA q4k2scidx<>+96(SB)/8, $0x0003000300030003
DATA q4k2scidx<>+104(SB)/8, $0x0003000300030003
DATA q4k2scidx<>+112(SB)/8, $0x0003000300030003
DATA q4k2scidx<>+120(SB)/8, $0x0003000300030003
DATA q4k2scidx<>+128(SB)/8, $0x0004000400040004
DATA q4k2scidx<>+136(SB)/8, $0x0004000400040004
DATA q4k2scidx<>+144(SB)/8, $0x0004000400040004
DATA q4k2scidx<>+152(SB)/8, $0x0004000400040004
DATA q4k2scidx<>+160(SB)/8, $0x0005000500050005
DATA q4k2scidx<>+168(SB)/8, $0x0005000500050005
DATA q4k2scidx<>+176(SB)/8, $0x0005000500050005
DATA q4k2scidx<>+184(SB)/8, $0x0005000500050005
DATA q4k2scidx<>+192(SB)/8, $0x0006000600060006
DATA q4k2scidx<>+200(SB)/8, $0x0006000600060006
DATA q4k2scidx<>+208(SB)/8, $0x0006000600060006
DATA q4k2scidx<>+216(SB)/8, $0x0006000600060006
DATA q4k2scidx<>+224(SB)/8, $0x0007000700070007
DATA q4k2scidx<>+232(SB)/8, $0x0007000700070007
DATA q4k2scidx<>+240(SB)/8, $0x0007000700070007
DATA q4k2scidx<>+248(SB)/8, $0x0007000700070007
GLOBL q4k2scidx<>(SB), RODATA|NOPTR, $256
DATA q4k2minidx<>+0(SB)/8, $0x0009000900080008
DATA q4k2minidx<>+8(SB)/8, $0x000b000b000a000a
DATA q4k2minidx<>+16(SB)/8, $0x000d000d000c000c
DATA q4k2minidx<>+24(SB)/8, $0x000f000f000e000e
DATA q4k2minidx<>+32(SB)/8, $0x0019001900180018
DATA q4k2minidx<>+40(SB)/8, $0x001b001b001a001a
DATA q4k2minidx<>+48(SB)/8, $0x001d001d001c001c
DATA q4k2minidx<>+56(SB)/8, $0x001f001f001e001e
GLOBL q4k2minidx<>(SB), RODATA|NOPTR, $64
DATA q4k2sh<>+0(SB)/8, $0x0000000000000000
DATA q4k2sh<>+8(SB)/8, $0x0000000400000000
DATA q4k2sh<>+16(SB)/8, $0x0000000000000000
DATA q4k2sh<>+24(SB)/8, $0x0000000400000000
GLOBL q4k2sh<>(SB), RODATA|NOPTR, $32
DATA q4k2m1<>+0(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA q4k2m1<>+8(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA q4k2m1<>+16(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA q4k2m1<>+24(SB)/8, $0x0f0f0f0f3f3f3f3f
GLOBL q4k2m1<>(SB), RODATA|NOPTR, $32
DATA q4k2m2<>+0(SB)/8, $0x3030303000000000
DATA q4k2m2<>+8(SB)/8, $0x3030303000000000
DATA q4k2m2<>+16(SB)/8, $0x3030303000000000
DATA q4k2m2<>+24(SB)/8, $0x3030303000000000
GLOBL q4k2m2<>(SB), RODATA|NOPTR, $32
DATA q4k2nib<>+0(SB)/8, $0x0000000000000000
DATA q4k2nib<>+8(SB)/8, $0x0000000000000000
DATA q4k2nib<>+16(SB)/8, $0x0000000000000000
DATA q4k2nib<>+24(SB)/8, $0x0000000000000000
DATA q4k2nib<>+32(SB)/8, $0x0004000400040004
DATA q4k2nib<>+40(SB)/8, $0x0004000400040004
DATA q4k2nib<>+48(SB)/8, $0x0004000400040004
DATA q4k2nib<>+56(SB)/8, $0x0004000400040004
GLOBL q4k2nib<>(SB), RODATA|NOPTR, $64
DATA q4k2pick<>+0(SB)/8, $0x0000000400000000
DATA q4k2pick<>+8(SB)/8, $0x0000000c00000008
GLOBL q4k2pick<>(SB), RODATA|NOPTR, $16

// One 64-value chunk of a super-block's weights at WO(W) against the
// activations at XO(SI): 32 bytes broadcast to both halves, the high half
// shifted by 4, both masked to nibbles (low nibbles then high, as in
// Q4A_SB), times the activations, times the sub-blocks' scale words S,
// added to ACC.
#define Q4K2_CHUNK(W, WO, XO, S, ACC) \
	VBROADCASTI64X4 WO(W), Z4; \
	VPSRLVW         Z14, Z4, Z4; \
	VPANDD          Z15, Z4, Z4; \
	VPMADDUBSW      XO(SI), Z4, Z4; \
	VPDPWSSD        S, Z4, ACC

// func q4krowsPairBlk(xq *int8, xd *float32, bs *int16, w *byte, nb int, rows int, out *float32, pf int)
//
// q4krowsBlk (the same bits) two super-blocks at a time (needs
// AVX512_VBMI): both super-blocks' scales and minimums unpacked together
// in vector registers, their isum and msum reduced together, d·d_x and
// dmin·d_x of both in one multiply; then the four float steps in the
// scalar kernel's order, super-block after super-block. The rows are
// read one after the other, each from its start: one sequential stream
// (pairing two rows instead read two interleaved streams, which a Zen 5
// core fetched from memory at a third of one stream's speed). An odd
// super-block at a row's end runs Q4A_SB.
TEXT ·q4krowsPairBlk(SB), NOSPLIT, $0-64
	MOVQ         w+24(FP), R8
	MOVQ         pf+56(FP), R14
	MOVQ         rows+40(FP), R15
	MOVQ         out+48(FP), DI
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Z15
	VMOVDQU64    q4kascidx<>+0(SB), Z24
	VMOVDQU64    q4kascidx<>+64(SB), Z25
	VMOVDQU64    q4kascidx<>+128(SB), Z26
	VMOVDQU64    q4kascidx<>+192(SB), Z27
	VMOVDQU64    q4k2nib<>+0(SB), Z14
	VMOVDQU64    q4k2scidx<>+0(SB), Z16
	VMOVDQU64    q4k2scidx<>+64(SB), Z17
	VMOVDQU64    q4k2scidx<>+128(SB), Z18
	VMOVDQU64    q4k2scidx<>+192(SB), Z19
	MOVL         $0x10101010, AX
	VPBROADCASTD AX, Z23
	VPADDB       Z23, Z16, Z20
	VPADDB       Z23, Z17, Z21
	VPADDB       Z23, Z18, Z22
	VPADDB       Z23, Z19, Z23
	VMOVDQU64    q4k2minidx<>+0(SB), Z3
	VMOVDQU      q4k2pick<>+0(SB), X7
	MOVQ         $0x5555555555555555, AX
	KMOVQ        AX, K1
	TESTQ        R15, R15
	JEQ          end

row:
	MOVQ   xq+0(FP), SI
	MOVQ   xd+8(FP), DX
	MOVQ   bs+16(FP), R9
	VXORPS X0, X0, X0
	MOVQ   nb+32(FP), R10
	SHRQ   $1, R10
	JEQ    tail

pairs:
	LEAQ       144(R8), R11
	PFLINES5(R8, R14)

	// Y6: the first super-block's scales 0…7 and minimums 0…7 (bytes),
	// then the second's (per 128-bit half: the dwords u0, u2, u1, u2 of
	// the 12 scale bytes shifted by 0, 0, 0, 4 and masked, or'd with
	// u0's and u1's top bits).
	VMOVDQU     (R8), X5
	VINSERTI128 $1, (R11), Y5, Y5
	VPSHUFD     $0xED, Y5, Y6
	VPSRLVD     q4k2sh<>+0(SB), Y6, Y6
	VPANDD      q4k2m1<>+0(SB), Y6, Y6
	VPSHUFD     $0x84, Y5, Y9
	VPSRLD      $2, Y9, Y9
	VPANDD      q4k2m2<>+0(SB), Y9, Y9
	VPORD       Y9, Y6, Y6

	// Minimums: dword b of Z8 = m_b·(bs[2b]+bs[2b+1]), the first
	// super-block's, then the second's.
	VPERMB.Z  Z6, Z3, K1, Z8
	VMOVDQU64 (R9), Z9
	VPMADDWD  Z9, Z8, Z8

	VPERMB.Z Z6, Z16, K1, Z28
	VPERMB.Z Z6, Z17, K1, Z29
	VPERMB.Z Z6, Z18, K1, Z30
	VPERMB.Z Z6, Z19, K1, Z31
	VPXORD   Z1, Z1, Z1
	Q4K2_CHUNK(R8, 16, 0, Z28, Z1)
	Q4K2_CHUNK(R8, 48, 64, Z29, Z1)
	Q4K2_CHUNK(R8, 80, 128, Z30, Z1)
	Q4K2_CHUNK(R8, 112, 192, Z31, Z1)
	VPERMB.Z Z6, Z20, K1, Z28
	VPERMB.Z Z6, Z21, K1, Z29
	VPERMB.Z Z6, Z22, K1, Z30
	VPERMB.Z Z6, Z23, K1, Z31
	VPXORD   Z2, Z2, Z2
	Q4K2_CHUNK(R11, 16, 256, Z28, Z2)
	Q4K2_CHUNK(R11, 48, 320, Z29, Z2)
	Q4K2_CHUNK(R11, 80, 384, Z30, Z2)
	Q4K2_CHUNK(R11, 112, 448, Z31, Z2)

	// X4 = isum, isum', msum, msum' (exact, then converted).
	VSHUFI64X2 $0x44, Z2, Z1, Z10
	VSHUFI64X2 $0xEE, Z2, Z1, Z4
	VPADDD     Z4, Z10, Z10
	VSHUFI64X2 $0x88, Z8, Z10, Z4
	VSHUFI64X2 $0xDD, Z8, Z10, Z5
	VPADDD     Z5, Z4, Z4
	VPSHUFD    $0x4E, Z4, Z5
	VPADDD     Z5, Z4, Z4
	VPSHUFD    $0xB1, Z4, Z5
	VPADDD     Z5, Z4, Z4
	VPERMD     Z4, Z7, Z4
	VCVTDQ2PS  X4, X4

	// X11 = round32(d·d_x), round32(d'·d_x'), round32(dmin·d_x),
	// round32(dmin'·d_x').
	MOVL         (R8), AX
	MOVL         (R11), BX
	SHLQ         $32, BX
	ORQ          BX, AX
	VMOVQ        AX, X11
	VCVTPH2PS    X11, X11
	VMOVQ        (DX), X12
	VUNPCKLPS    X12, X12, X12
	VMULPS       X12, X11, X11
	VPERMILPS    $0xD8, X11, X11

	// The scalar kernel's steps, the first super-block's then the second's.
	VFMADD231SS  X11, X4, X0
	VMOVHLPS     X4, X4, X5
	VMOVHLPS     X11, X11, X6
	VFNMADD231SS X6, X5, X0
	VMOVSHDUP    X4, X4
	VMOVSHDUP    X11, X11
	VFMADD231SS  X11, X4, X0
	VMOVSHDUP    X5, X5
	VMOVSHDUP    X6, X6
	VFNMADD231SS X6, X5, X0

	ADDQ $288, R8
	ADDQ $512, SI
	ADDQ $8, DX
	ADDQ $64, R9
	DECQ R10
	JNZ  pairs

tail:
	TESTQ $1, nb+32(FP)
	JEQ   rowdone
	Q4A_SB
	ADDQ  $144, R8

rowdone:
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	DECQ   R15
	JNZ    row

end:
	VZEROUPPER
	RET
