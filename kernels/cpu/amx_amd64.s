//go:build amd64

#include "textflag.h"

// AMX instructions the Go assembler lacks, encoded by hand (VEX, map 0F38,
// W0, L0; no REX registers, so the VEX R̄X̄B̄ bits are all 1: C4 E2):
//
//	LDTILECFG (SI)            C4 E2 78 49 06        (NP, modrm 00 000 110)
//	TILERELEASE               C4 E2 78 49 C0
//	TILEZERO tmmC             C4 E2 7B 49 C0|C<<3   (F2)
//	TILELOADD tmmT, (SI)(DX)  C4 E2 7B 4B 04|T<<3 16  (F2, SIB index DX base SI)
//	TILELOADD tmmT, (DI)(CX)  C4 E2 7B 4B 04|T<<3 0F  (SIB index CX base DI)
//	TILESTORED (BX)(CX), tmmT C4 E2 7A 4B 04|T<<3 0B  (F3, SIB index CX base BX)
//	TDPBSSD tmmC, tmmA, tmmB  C4 E2 (~B&15)<<3|3 5E C0|C<<3|A  (F2, vvvv = B)
//
// objdump -d (GNU binutils 2.40) of the built test binary disassembles
// every one of them as the instruction named here.


#define LDTILECFG_SI BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0x06
#define TILERELEASE BYTE $0xC4; BYTE $0xE2; BYTE $0x78; BYTE $0x49; BYTE $0xC0
#define TILEZERO_0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC0
#define TILEZERO_1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xC8
#define TILEZERO_2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD0
#define TILEZERO_3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x49; BYTE $0xD8
#define TILELOADD_4_SI_DX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x24; BYTE $0x16
#define TILELOADD_5_SI_DX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x2C; BYTE $0x16
#define TILELOADD_6_DI_CX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x34; BYTE $0x0F
#define TILELOADD_7_DI_CX BYTE $0xC4; BYTE $0xE2; BYTE $0x7B; BYTE $0x4B; BYTE $0x3C; BYTE $0x0F
#define TILESTORED_BX_CX_0 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x04; BYTE $0x0B
#define TILESTORED_BX_CX_1 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x0C; BYTE $0x0B
#define TILESTORED_BX_CX_2 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x14; BYTE $0x0B
#define TILESTORED_BX_CX_3 BYTE $0xC4; BYTE $0xE2; BYTE $0x7A; BYTE $0x4B; BYTE $0x1C; BYTE $0x0B
#define TDPBSSD_0_4_6 BYTE $0xC4; BYTE $0xE2; BYTE $0x4B; BYTE $0x5E; BYTE $0xC4
#define TDPBSSD_1_5_7 BYTE $0xC4; BYTE $0xE2; BYTE $0x43; BYTE $0x5E; BYTE $0xCD
#define TDPBSSD_2_4_6 BYTE $0xC4; BYTE $0xE2; BYTE $0x4B; BYTE $0x5E; BYTE $0xD4
#define TDPBSSD_3_5_7 BYTE $0xC4; BYTE $0xE2; BYTE $0x43; BYTE $0x5E; BYTE $0xDD

// Scratch layout (q8amxScratch bytes, 64-byte aligned): the tile
// configuration, the accumulators acc[j][l] (16 lanes: activation rows),
// and the int32 tiles of a chunk of blocks, ib[b][l][j][r].
#define ACC 64
#define IB 8256

// func q8amxTile(w *byte, stride, nb int, xt *int8, xd *float32, ng int, out *float32, scr *byte, m int)
TEXT ·q8amxTile(SB), NOSPLIT, $32-72
	MOVQ stride+8(FP), DX
	MOVQ scr+56(FP), R10
	MOVQ m+64(FP), R11
	MOVQ R10, SI
	LDTILECFG_SI

group:
	// acc = 0 for the m weight rows.
	VPXORD Z0, Z0, Z0
	MOVQ   R11, CX
	LEAQ   ACC(R10), DI

zero:
	VMOVDQA32 Z0, 0(DI)
	VMOVDQA32 Z0, 64(DI)
	VMOVDQA32 Z0, 128(DI)
	VMOVDQA32 Z0, 192(DI)
	VMOVDQA32 Z0, 256(DI)
	VMOVDQA32 Z0, 320(DI)
	VMOVDQA32 Z0, 384(DI)
	VMOVDQA32 Z0, 448(DI)
	ADDQ      $512, DI
	DECQ      CX
	JNZ       zero

	MOVQ w+0(FP), R12   // the chunk's first block in the weights
	MOVQ xt+24(FP), R13 // in the transposed activations
	MOVQ xd+32(FP), AX
	MOVQ AX, 16(SP)     // in the activation scales
	MOVQ nb+16(FP), AX
	MOVQ AX, 0(SP)      // blocks left

chunk:
	MOVQ 0(SP), R8
	CMPQ R8, $4
	JLE  counted
	MOVQ $4, R8

counted:
	MOVQ R8, 8(SP) // blocks in this chunk

	// The chunk's integer tiles, one per block and lane.
	LEAQ 2(R12), SI
	MOVQ R13, DI
	LEAQ IB(R10), BX
	MOVQ $64, CX

tiles:
	// lane 0
	TILEZERO_0
	TILELOADD_4_SI_DX
	TILELOADD_6_DI_CX
	TDPBSSD_0_4_6
	TILESTORED_BX_CX_0
	ADDQ $4, SI
	ADDQ $64, DI
	ADDQ $1024, BX
	// lane 1
	TILEZERO_1
	TILELOADD_5_SI_DX
	TILELOADD_7_DI_CX
	TDPBSSD_1_5_7
	TILESTORED_BX_CX_1
	ADDQ $4, SI
	ADDQ $64, DI
	ADDQ $1024, BX
	// lane 2
	TILEZERO_2
	TILELOADD_4_SI_DX
	TILELOADD_6_DI_CX
	TDPBSSD_2_4_6
	TILESTORED_BX_CX_2
	ADDQ $4, SI
	ADDQ $64, DI
	ADDQ $1024, BX
	// lane 3
	TILEZERO_3
	TILELOADD_5_SI_DX
	TILELOADD_7_DI_CX
	TDPBSSD_3_5_7
	TILESTORED_BX_CX_3
	ADDQ $4, SI
	ADDQ $64, DI
	ADDQ $1024, BX
	// lane 4
	TILEZERO_0
	TILELOADD_4_SI_DX
	TILELOADD_6_DI_CX
	TDPBSSD_0_4_6
	TILESTORED_BX_CX_0
	ADDQ $4, SI
	ADDQ $64, DI
	ADDQ $1024, BX
	// lane 5
	TILEZERO_1
	TILELOADD_5_SI_DX
	TILELOADD_7_DI_CX
	TDPBSSD_1_5_7
	TILESTORED_BX_CX_1
	ADDQ $4, SI
	ADDQ $64, DI
	ADDQ $1024, BX
	// lane 6
	TILEZERO_2
	TILELOADD_4_SI_DX
	TILELOADD_6_DI_CX
	TDPBSSD_2_4_6
	TILESTORED_BX_CX_2
	ADDQ $4, SI
	ADDQ $64, DI
	ADDQ $1024, BX
	// lane 7
	TILEZERO_3
	TILELOADD_5_SI_DX
	TILELOADD_7_DI_CX
	TDPBSSD_3_5_7
	TILESTORED_BX_CX_3
	ADDQ $4, SI
	ADDQ $64, DI
	ADDQ $1024, BX
	ADDQ $2, SI
	DECQ R8
	JNZ  tiles

	// The float steps, weight row by weight row, block by block in order:
	// scale = round32(d_w·d_x) per activation row, acc_l = fma(float32(int),
	// scale, acc_l), the order of q8rowsVNNI's lanes.
	MOVQ R11, 24(SP)
	MOVQ R12, SI
	LEAQ IB(R10), BX
	LEAQ ACC(R10), CX

rows:
	VMOVAPS 0(CX), Z0
	VMOVAPS 64(CX), Z1
	VMOVAPS 128(CX), Z2
	VMOVAPS 192(CX), Z3
	VMOVAPS 256(CX), Z4
	VMOVAPS 320(CX), Z5
	VMOVAPS 384(CX), Z6
	VMOVAPS 448(CX), Z7
	MOVQ    16(SP), DI
	MOVQ    SI, R9
	MOVQ    BX, AX
	MOVQ    8(SP), R8

blocks:
	VPBROADCASTW (R9), Y16
	VCVTPH2PS    Y16, Z16
	VMULPS       (DI), Z16, Z16
	VCVTDQ2PS   0(AX), Z8
	VFMADD231PS Z16, Z8, Z0
	VCVTDQ2PS   1024(AX), Z9
	VFMADD231PS Z16, Z9, Z1
	VCVTDQ2PS   2048(AX), Z10
	VFMADD231PS Z16, Z10, Z2
	VCVTDQ2PS   3072(AX), Z11
	VFMADD231PS Z16, Z11, Z3
	VCVTDQ2PS   4096(AX), Z12
	VFMADD231PS Z16, Z12, Z4
	VCVTDQ2PS   5120(AX), Z13
	VFMADD231PS Z16, Z13, Z5
	VCVTDQ2PS   6144(AX), Z14
	VFMADD231PS Z16, Z14, Z6
	VCVTDQ2PS   7168(AX), Z15
	VFMADD231PS Z16, Z15, Z7
	ADDQ $34, R9
	ADDQ $64, DI
	ADDQ $8192, AX
	DECQ R8
	JNZ  blocks

	VMOVAPS Z0, 0(CX)
	VMOVAPS Z1, 64(CX)
	VMOVAPS Z2, 128(CX)
	VMOVAPS Z3, 192(CX)
	VMOVAPS Z4, 256(CX)
	VMOVAPS Z5, 320(CX)
	VMOVAPS Z6, 384(CX)
	VMOVAPS Z7, 448(CX)
	ADDQ    DX, SI
	ADDQ    $64, BX
	ADDQ    $512, CX
	DECQ    24(SP)
	JNZ     rows

	// Next chunk.
	MOVQ    8(SP), R8
	IMUL3Q  $34, R8, AX
	ADDQ    AX, R12
	MOVQ    R8, AX
	SHLQ    $9, AX
	ADDQ    AX, R13
	MOVQ    R8, AX
	SHLQ    $6, AX
	ADDQ    AX, 16(SP)
	SUBQ    R8, 0(SP)
	JNZ     chunk

	// Each output's 8 lanes summed as HSUM8:
	// ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)), 16 activation rows a register.
	MOVQ R11, CX
	LEAQ ACC(R10), SI
	MOVQ out+48(FP), DI

sum:
	VMOVAPS 0(SI), Z0
	VMOVAPS 64(SI), Z1
	VMOVAPS 128(SI), Z2
	VMOVAPS 192(SI), Z3
	VADDPS  256(SI), Z0, Z0
	VADDPS  320(SI), Z1, Z1
	VADDPS  384(SI), Z2, Z2
	VADDPS  448(SI), Z3, Z3
	VADDPS  Z2, Z0, Z0
	VADDPS  Z3, Z1, Z1
	VADDPS  Z1, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $512, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     sum

	// Next group of 16 activation rows.
	MOVQ nb+16(FP), AX
	SHLQ $9, AX
	ADDQ AX, xt+24(FP)
	MOVQ nb+16(FP), AX
	SHLQ $6, AX
	ADDQ AX, xd+32(FP)
	ADDQ $1024, out+48(FP)
	DECQ ng+40(FP)
	JNZ  group

	TILERELEASE
	VZEROUPPER
	RET
