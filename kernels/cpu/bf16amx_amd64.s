//go:build amd64

#include "textflag.h"

// AMX-BF16 instructions the Go assembler lacks, encoded by hand (VEX C4,
// map 0F38, W0, L0; only registers without REX, so R̄X̄B̄ = 111: C4 E2):
//
//	LDTILECFG (SI)               C4 E2 78 49 06     (NP; modrm 00 000 110)
//	TILERELEASE                  C4 E2 78 49 C0
//	TILEZERO tmmC                C4 E2 7B 49 (C0|C<<3)
//	TILELOADD tmm4, (SI)(DX*1)   C4 E2 7B 4B 24 16  (F2; modrm 00 100 100, SIB index DX base SI)
//	TILELOADD tmmB, (DI)(CX*1)   C4 E2 7B 4B (04|B<<3) 0F (SIB index CX base DI)
//	TDPBF16PS tmmC, tmm4, tmmB   C4 E2 (02|¬B<<3) 5C (C4|C<<3)  (F3; vvvv = ¬B)
//	TILESTORED (BX)(CX*1), tmmC  C4 E2 7A 4B (04|C<<3) 0B (F3; SIB index CX base BX)
//
// objdump -d (GNU binutils 2.40) of the built test binary disassembles each
// as the instruction named here.

#define LDTILECFG_SI BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x06
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0
#define ZERO4 \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD0; \
	BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD8
#define LOADW BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x16
#define LOADX5 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x2C; BYTE $0x0F
#define LOADX6 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x34; BYTE $0x0F
#define DP0_5 BYTE $0xC4; BYTE $0xE2; BYTE $0x52; BYTE $0x5C; BYTE $0xC4
#define DP1_6 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xCC
#define DP2_5 BYTE $0xC4; BYTE $0xE2; BYTE $0x52; BYTE $0x5C; BYTE $0xD4
#define DP3_6 BYTE $0xC4; BYTE $0xE2; BYTE $0x4A; BYTE $0x5C; BYTE $0xDC
#define STORE0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x0B
#define STORE1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x0C; BYTE $0x0B
#define STORE2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x14; BYTE $0x0B
#define STORE3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x1C; BYTE $0x0B

// func bf16amxTile(cfg *byte, w *uint16, wstride, nwg, nk int, xp *uint32, ng, gstride, cx int, out *float32, ostep, wgstep int)
//
// For each of nwg groups of 16 weight rows (the tile configuration's m
// rows; wstride bytes apart, group wg at w + 16·wg·wstride) and each of
// ng ≤ 4 activation groups (B tiles of 16 rows of cx bytes a 32-value
// chunk, chunk kc of group g at xp + g·gstride + 16·cx·kc): C = 0, then
// C += A_kc·B_kc (TDPBF16PS) for kc = 0 … nk−1 in order, stored as m
// rows of cx bytes at out + wg·wgstep + g·ostep.
TEXT ·bf16amxTile(SB), NOSPLIT, $0-96
	MOVQ cfg+0(FP), SI
	LDTILECFG_SI
	MOVQ w+8(FP), R14
	MOVQ wstride+16(FP), DX
	MOVQ nwg+24(FP), R12
	MOVQ ng+48(FP), R11
	MOVQ gstride+56(FP), R10
	MOVQ cx+64(FP), CX
	MOVQ out+72(FP), R13
	MOVQ CX, R9
	SHLQ $4, R9 // a chunk of B: 16 rows of cx bytes

wgroup:
	ZERO4
	MOVQ R14, SI
	MOVQ xp+40(FP), DI
	MOVQ nk+32(FP), R8

chunk:
	LOADW
	MOVQ DI, AX
	LOADX5
	DP0_5
	CMPQ R11, $1
	JEQ  next
	ADDQ R10, DI
	LOADX6
	DP1_6
	CMPQ R11, $2
	JEQ  next
	ADDQ R10, DI
	LOADX5
	DP2_5
	CMPQ R11, $3
	JEQ  next
	ADDQ R10, DI
	LOADX6
	DP3_6

next:
	MOVQ AX, DI
	ADDQ R9, DI
	ADDQ $64, SI
	DECQ R8
	JNZ  chunk

	MOVQ ostep+80(FP), AX
	MOVQ R13, BX
	STORE0
	CMPQ R11, $1
	JEQ  stored
	ADDQ AX, BX
	STORE1
	CMPQ R11, $2
	JEQ  stored
	ADDQ AX, BX
	STORE2
	CMPQ R11, $3
	JEQ  stored
	ADDQ AX, BX
	STORE3

stored:
	ADDQ wgstep+88(FP), R13
	MOVQ DX, AX
	SHLQ $4, AX
	ADDQ AX, R14
	DECQ R12
	JNZ  wgroup

	TILERELEASE
	RET
