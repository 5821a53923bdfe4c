//go:build amd64

#include "textflag.h"

// The amx order's Q4_K decode, four weight rows at a time (q4krows4Blk,
// q4kamx_amd64.go).

// Per 128-bit lane (one row's first 16 bytes: d, dmin, the 12 scale
// bytes at 4…15): the bytes picked for the scales (0…7) and minimums
// (8…15), their masks and the minimums as words.
DATA q4r4<>+0(SB)/8, $0x0f0e0d0c07060504
DATA q4r4<>+8(SB)/8, $0x0f0e0d0c0b0a0908
DATA q4r4<>+16(SB)/8, $0x0f0e0d0c07060504
DATA q4r4<>+24(SB)/8, $0x0f0e0d0c0b0a0908
DATA q4r4<>+32(SB)/8, $0x0f0e0d0c07060504
DATA q4r4<>+40(SB)/8, $0x0f0e0d0c0b0a0908
DATA q4r4<>+48(SB)/8, $0x0f0e0d0c07060504
DATA q4r4<>+56(SB)/8, $0x0f0e0d0c0b0a0908
DATA q4r4<>+64(SB)/8, $0x0706050480808080
DATA q4r4<>+72(SB)/8, $0x0b0a090880808080
DATA q4r4<>+80(SB)/8, $0x0706050480808080
DATA q4r4<>+88(SB)/8, $0x0b0a090880808080
DATA q4r4<>+96(SB)/8, $0x0706050480808080
DATA q4r4<>+104(SB)/8, $0x0b0a090880808080
DATA q4r4<>+112(SB)/8, $0x0706050480808080
DATA q4r4<>+120(SB)/8, $0x0b0a090880808080
DATA q4r4<>+128(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA q4r4<>+136(SB)/8, $0x000000003f3f3f3f
DATA q4r4<>+144(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA q4r4<>+152(SB)/8, $0x000000003f3f3f3f
DATA q4r4<>+160(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA q4r4<>+168(SB)/8, $0x000000003f3f3f3f
DATA q4r4<>+176(SB)/8, $0x0f0f0f0f3f3f3f3f
DATA q4r4<>+184(SB)/8, $0x000000003f3f3f3f
DATA q4r4<>+192(SB)/8, $0x0000000000000000
DATA q4r4<>+200(SB)/8, $0x0f0f0f0f00000000
DATA q4r4<>+208(SB)/8, $0x0000000000000000
DATA q4r4<>+216(SB)/8, $0x0f0f0f0f00000000
DATA q4r4<>+224(SB)/8, $0x0000000000000000
DATA q4r4<>+232(SB)/8, $0x0f0f0f0f00000000
DATA q4r4<>+240(SB)/8, $0x0000000000000000
DATA q4r4<>+248(SB)/8, $0x0f0f0f0f00000000
DATA q4r4<>+256(SB)/8, $0x800b800a80098008
DATA q4r4<>+264(SB)/8, $0x800f800e800d800c
DATA q4r4<>+272(SB)/8, $0x800b800a80098008
DATA q4r4<>+280(SB)/8, $0x800f800e800d800c
DATA q4r4<>+288(SB)/8, $0x800b800a80098008
DATA q4r4<>+296(SB)/8, $0x800f800e800d800c
DATA q4r4<>+304(SB)/8, $0x800b800a80098008
DATA q4r4<>+312(SB)/8, $0x800f800e800d800c
GLOBL q4r4<>(SB), RODATA|NOPTR, $320

// The words of d (0…3) and dmin (4…7) of the four rows.
DATA q4r4dw<>+0(SB)/8, $0x0018001000080000
DATA q4r4dw<>+8(SB)/8, $0x0019001100090001
DATA q4r4dw<>+16(SB)/8, $0x0000000000000000
DATA q4r4dw<>+24(SB)/8, $0x0000000000000000
DATA q4r4dw<>+32(SB)/8, $0x0000000000000000
DATA q4r4dw<>+40(SB)/8, $0x0000000000000000
DATA q4r4dw<>+48(SB)/8, $0x0000000000000000
DATA q4r4dw<>+56(SB)/8, $0x0000000000000000
GLOBL q4r4dw<>(SB), RODATA|NOPTR, $64

// Lane sums of isum (dword 0 of each lane) and msum (dword 1) into
// dwords 0…3 and 4…7.
DATA q4r4red<>+0(SB)/8, $0x0000000400000000
DATA q4r4red<>+8(SB)/8, $0x0000000c00000008
DATA q4r4red<>+16(SB)/8, $0x0000000500000001
DATA q4r4red<>+24(SB)/8, $0x0000000d00000009
DATA q4r4red<>+32(SB)/8, $0x0000000000000000
DATA q4r4red<>+40(SB)/8, $0x0000000000000000
DATA q4r4red<>+48(SB)/8, $0x0000000000000000
DATA q4r4red<>+56(SB)/8, $0x0000000000000000
GLOBL q4r4red<>(SB), RODATA|NOPTR, $64

// The scale words of a chunk's two sub-blocks, per 128-bit lane: words
// 0…3 byte 2k of the lane (sub-block 2k's scale), words 4…7 byte 2k+1,
// for chunks k = 0…3 (64 bytes each).
DATA q4r4sc<>+0(SB)/8, $0x8000800080008000
DATA q4r4sc<>+8(SB)/8, $0x8001800180018001
DATA q4r4sc<>+16(SB)/8, $0x8000800080008000
DATA q4r4sc<>+24(SB)/8, $0x8001800180018001
DATA q4r4sc<>+32(SB)/8, $0x8000800080008000
DATA q4r4sc<>+40(SB)/8, $0x8001800180018001
DATA q4r4sc<>+48(SB)/8, $0x8000800080008000
DATA q4r4sc<>+56(SB)/8, $0x8001800180018001
DATA q4r4sc<>+64(SB)/8, $0x8002800280028002
DATA q4r4sc<>+72(SB)/8, $0x8003800380038003
DATA q4r4sc<>+80(SB)/8, $0x8002800280028002
DATA q4r4sc<>+88(SB)/8, $0x8003800380038003
DATA q4r4sc<>+96(SB)/8, $0x8002800280028002
DATA q4r4sc<>+104(SB)/8, $0x8003800380038003
DATA q4r4sc<>+112(SB)/8, $0x8002800280028002
DATA q4r4sc<>+120(SB)/8, $0x8003800380038003
DATA q4r4sc<>+128(SB)/8, $0x8004800480048004
DATA q4r4sc<>+136(SB)/8, $0x8005800580058005
DATA q4r4sc<>+144(SB)/8, $0x8004800480048004
DATA q4r4sc<>+152(SB)/8, $0x8005800580058005
DATA q4r4sc<>+160(SB)/8, $0x8004800480048004
DATA q4r4sc<>+168(SB)/8, $0x8005800580058005
DATA q4r4sc<>+176(SB)/8, $0x8004800480048004
DATA q4r4sc<>+184(SB)/8, $0x8005800580058005
DATA q4r4sc<>+192(SB)/8, $0x8006800680068006
DATA q4r4sc<>+200(SB)/8, $0x8007800780078007
DATA q4r4sc<>+208(SB)/8, $0x8006800680068006
DATA q4r4sc<>+216(SB)/8, $0x8007800780078007
DATA q4r4sc<>+224(SB)/8, $0x8006800680068006
DATA q4r4sc<>+232(SB)/8, $0x8007800780078007
DATA q4r4sc<>+240(SB)/8, $0x8006800680068006
DATA q4r4sc<>+248(SB)/8, $0x8007800780078007
GLOBL q4r4sc<>(SB), RODATA|NOPTR, $256

// Q4F_T4: the four rows' 64 bytes at O (two chunks' quant bytes), loaded
// whole and transposed by 128-bit lanes: Z4, Z5, Z6, Z7 hold the 16 bytes
// at O, O+16, O+32, O+48 of rows 0…3 in lanes 0…3.
#define Q4F_T4(O) \
	VMOVDQU64  O(R8), Z4; \
	VMOVDQU64  O(R8)(R11*1), Z5; \
	VMOVDQU64  O(R8)(R11*2), Z6; \
	VMOVDQU64  O(R12), Z7; \
	VSHUFI64X2 $0x44, Z5, Z4, Z8; \
	VSHUFI64X2 $0xEE, Z5, Z4, Z9; \
	VSHUFI64X2 $0x44, Z7, Z6, Z10; \
	VSHUFI64X2 $0xEE, Z7, Z6, Z11; \
	VSHUFI64X2 $0x88, Z10, Z8, Z4; \
	VSHUFI64X2 $0xDD, Z10, Z8, Z5; \
	VSHUFI64X2 $0x88, Z11, Z9, Z6; \
	VSHUFI64X2 $0xDD, Z11, Z9, Z7

// Q4F_CHUNK: a 64-value chunk of the four rows (their quant bytes' first
// and second 16 in P and Q, one row a lane; the activations at X…X+63):
// the low nibbles are sub-block 2k's values, the high 2k+1's, taken in
// place (16 times their value); each sub-block's exact sums (VPDPBUSD
// against the activations' matching 16 bytes in every lane; the high sums
// shifted back, exact), packed to words (each |sum| ≤ 8·15·128), times the
// sub-block scales (VPSHUFB of Z2 by the chunk's selector SC) by one
// VPDPWSSD into isum (Z1).
#define Q4F_CHUNK(P, Q, X, SC) \
	VBROADCASTI32X4 X(SI), Z16; \
	VBROADCASTI32X4 (X+16)(SI), Z17; \
	VBROADCASTI32X4 (X+32)(SI), Z18; \
	VBROADCASTI32X4 (X+48)(SI), Z19; \
	VPANDND         P, Z15, Z8; \
	VPANDND         Q, Z15, Z9; \
	VPANDD          Z15, P, P; \
	VPANDD          Z15, Q, Q; \
	VPXORD          Z10, Z10, Z10; \
	VPXORD          Z11, Z11, Z11; \
	VPDPBUSD        Z16, P, Z10; \
	VPDPBUSD        Z17, Q, Z10; \
	VPDPBUSD        Z18, Z8, Z11; \
	VPDPBUSD        Z19, Z9, Z11; \
	VPSRAD          $4, Z11, Z11; \
	VPACKSSDW       Z11, Z10, Z12; \
	VPSHUFB         SC, Z2, Z13; \
	VPDPWSSD        Z13, Z12, Z1

// Q4F_PF576: the 576 bytes at R14 (four rows' super-block) prefetched,
// R14 moved past them.
#define Q4F_PF576 \
	PREFETCHT0 (R14); \
	PREFETCHT0 64(R14); \
	PREFETCHT0 128(R14); \
	PREFETCHT0 192(R14); \
	PREFETCHT0 256(R14); \
	PREFETCHT0 320(R14); \
	PREFETCHT0 384(R14); \
	PREFETCHT0 448(R14); \
	PREFETCHT0 512(R14); \
	ADDQ       $576, R14

// Q4F_ARGS: a group's start on the activations (SI: quants, DX: scales,
// R9: 16-value sums) and its super-block count (CX).
#define Q4F_ARGS \
	MOVQ xq+0(FP), SI; \
	MOVQ xd+8(FP), DX; \
	MOVQ bs+16(FP), R9; \
	MOVQ nb+32(FP), CX

// Q4F_CONSTS: the kernels' constants (Z14, Z15, Z20…Z30, K2).
#define Q4F_CONSTS \
	MOVL         $0x0F0F0F0F, AX; \
	VPBROADCASTD AX, Z15; \
	MOVL         $0x03030303, AX; \
	VPBROADCASTD AX, Z14; \
	VMOVDQU64    q4r4<>+0(SB), Z20; \
	VMOVDQU64    q4r4<>+64(SB), Z21; \
	VMOVDQU64    q4r4<>+128(SB), Z22; \
	VMOVDQU64    q4r4<>+192(SB), Z23; \
	VMOVDQU64    q4r4<>+256(SB), Z24; \
	VMOVDQU64    q4r4dw<>(SB), Z25; \
	VMOVDQU64    q4r4red<>(SB), Z26; \
	VMOVDQU64    q4r4sc<>+0(SB), Z27; \
	VMOVDQU64    q4r4sc<>+64(SB), Z28; \
	VMOVDQU64    q4r4sc<>+128(SB), Z29; \
	VMOVDQU64    q4r4sc<>+192(SB), Z30; \
	MOVW         $0x2222, AX; \
	KMOVW        AX, K2

// Q4F_HEAD: the four rows' headers in Z3's lanes (d, dmin, the 12 scale
// bytes) unpacked: Z2 per lane bytes 0…7 the scales, 8…15 the minimums;
// msum (Z31) the minimums (words) by the activations' 32-value sums at
// R9; isum (Z1) cleared.
#define Q4F_HEAD \
	VPSHUFB        Z20, Z3, Z2; \
	VPSHUFB        Z21, Z3, Z12; \
	VPSRLW         $4, Z2, Z13; \
	VPANDD         Z22, Z2, Z2; \
	VPANDD         Z23, Z13, Z13; \
	VPSRLW         $6, Z12, Z12; \
	VPANDD         Z14, Z12, Z12; \
	VPSLLW         $4, Z12, Z12; \
	VPTERNLOGD     $0xFE, Z13, Z12, Z2; \
	VMOVDQU        (R9), Y10; \
	VEXTRACTI128   $1, Y10, X11; \
	VPHADDW        X11, X10, X10; \
	VSHUFI32X4     $0, Z10, Z10, Z10; \
	VPSHUFB        Z24, Z2, Z11; \
	VPMADDWD       Z10, Z11, Z31; \
	VPXORD         Z1, Z1, Z1

// Q4F_TAIL: each lane's isum and msum, then the two float steps of the
// four rows (d·d_x and dmin·d_x, the activation scale at DX) into X0.
#define Q4F_TAIL \
	VPSHUFD        $0x4E, Z1, Z10; \
	VPADDD         Z10, Z1, Z1; \
	VPSHUFD        $0xB1, Z1, Z10; \
	VPADDD         Z10, Z1, Z1; \
	VPSHUFD        $0x4E, Z31, Z10; \
	VPADDD         Z10, Z31, Z31; \
	VPSHUFD        $0xB1, Z31, Z10; \
	VPADDD         Z10, Z31, Z31; \
	VPBLENDMD      Z31, Z1, K2, Z1; \
	VPERMD         Z1, Z26, Z1; \
	VCVTDQ2PS      Y1, Y1; \
	VPERMW         Z3, Z25, Z10; \
	VCVTPH2PS      X10, Y10; \
	VBROADCASTSS   (DX), Y11; \
	VMULPS         Y11, Y10, Y10; \
	VFMADD231PS    X10, X1, X0; \
	VEXTRACTF128   $1, Y1, X1; \
	VEXTRACTF128   $1, Y10, X10; \
	VFNMADD231PS   X10, X1, X0

// func q4krows4Blk(xq *int8, xd *float32, bs *int16, w *byte, nb, rows int, out *float32)
//
// q4krowsBlk's products (the amx order, the same bits) for rows (a
// multiple of 4) consecutive Q4_K weight rows, four at a time, each
// 128-bit lane of a zmm one row: per super-block the four rows' first 16
// bytes (d, dmin, scales) in one zmm, their 6-bit scales and minimums
// unpacked by VPSHUFB and masks for the four at once; per two 64-value
// chunks each row's 64 quant bytes loaded whole and the four transposed
// by 128-bit lanes (Q4F_T4: on Zen 4 sixteen 16-byte loads or inserts
// into lanes cost more than four whole loads and eight VSHUFI64X2); per
// chunk the nibbles against the activations' matching 16 bytes broadcast
// to every lane (VPDPBUSD into each sub-block's exact sums, 8 products a
// dword), packed to words, times the sub-blocks' scales by one VPDPWSSD
// into isum; msum by VPMADDWD of the
// minimums with the activations' 32-value sums; then each lane's sums,
// and the two float steps of the four rows in one register's lanes. Rows
// of a few KB read four at a time are too short a stream for the hardware
// prefetchers (8.5 GB/s from memory on Zen 4 against 24.7 with this), so
// each super-block step prefetches the next group's bytes in memory
// order, as many as the step reads.
TEXT ·q4krows4Blk(SB), NOSPLIT, $0-56
	MOVQ         w+24(FP), R8
	MOVQ         nb+32(FP), R11
	IMULQ        $144, R11        // bytes a row
	MOVQ         rows+40(FP), R15
	SHRQ         $2, R15
	MOVQ         out+48(FP), DI
	Q4F_CONSTS
	TESTQ        R15, R15
	JEQ          end

group:
	Q4F_ARGS
	LEAQ   (R8)(R11*2), R12
	ADDQ   R11, R12          // row 3
	MOVQ   R8, R13           // the group's row 0
	LEAQ   (R8)(R11*4), R14  // the next group
	VXORPS X0, X0, X0

sb:
	// The next group's bytes, in memory order, as fast as this group's
	// are read: four rows of a few KB interleaved are too short a stream
	// for the hardware prefetchers.
	Q4F_PF576
	// The four rows' headers into Z3's lanes.
	VMOVDQU        (R8), X3
	VINSERTI32X4   $1, (R8)(R11*1), Z3, Z3
	VINSERTI32X4   $2, (R8)(R11*2), Z3, Z3
	VINSERTI32X4   $3, (R12), Z3, Z3
	Q4F_HEAD
	Q4F_T4(16)
	Q4F_CHUNK(Z4, Z5, 0, Z27)
	Q4F_CHUNK(Z6, Z7, 64, Z28)
	Q4F_T4(80)
	Q4F_CHUNK(Z4, Z5, 128, Z29)
	Q4F_CHUNK(Z6, Z7, 192, Z30)
	Q4F_TAIL
	ADDQ           $144, R8
	ADDQ           $144, R12
	ADDQ           $256, SI
	ADDQ           $4, DX
	ADDQ           $32, R9
	DECQ           CX
	JNZ            sb

	VMOVUPS X0, (DI)
	ADDQ    $16, DI
	LEAQ    (R13)(R11*4), R8
	DECQ    R15
	JNZ     group

end:
	VZEROUPPER
	RET

// func q4krows4X(xq *int8, xd *float32, bs *int16, w *byte, nb, groups int, out *float32)
//
// q4krows4Blk on rows interleaved four at a time (q4kInterleave): per
// group of four rows and super-block, nine 64-byte pieces, piece j the
// four rows' bytes 16j…16j+15 in lanes 0…3 — the rows' headers and each
// chunk's quant bytes arrive by whole aligned loads, the groups one
// sequential stream. The same operations on the same lanes otherwise:
// the same bits.
TEXT ·q4krows4X(SB), NOSPLIT, $0-56
	MOVQ         w+24(FP), R8
	MOVQ         groups+40(FP), R15
	MOVQ         out+48(FP), DI
	Q4F_CONSTS
	TESTQ        R15, R15
	JEQ          xend

xgroup:
	Q4F_ARGS
	VXORPS X0, X0, X0

xsb:
	VMOVDQU64      (R8), Z3
	Q4F_HEAD
	VMOVDQU64      64(R8), Z4
	VMOVDQU64      128(R8), Z5
	VMOVDQU64      192(R8), Z6
	VMOVDQU64      256(R8), Z7
	Q4F_CHUNK(Z4, Z5, 0, Z27)
	Q4F_CHUNK(Z6, Z7, 64, Z28)
	VMOVDQU64      320(R8), Z4
	VMOVDQU64      384(R8), Z5
	VMOVDQU64      448(R8), Z6
	VMOVDQU64      512(R8), Z7
	Q4F_CHUNK(Z4, Z5, 128, Z29)
	Q4F_CHUNK(Z6, Z7, 192, Z30)
	Q4F_TAIL
	ADDQ           $576, R8
	ADDQ           $256, SI
	ADDQ           $4, DX
	ADDQ           $32, R9
	DECQ           CX
	JNZ            xsb

	VMOVUPS X0, (DI)
	ADDQ    $16, DI
	DECQ    R15
	JNZ     xgroup

xend:
	VZEROUPPER
	RET

// Q4X_OUT: piece J of a group's super-block (64 bytes at J·64(SI)) to
// its four rows (16 bytes at J·16 of each: DI, DI+rb, DI+2rb, R12).
#define Q4X_OUT(J) \
	VMOVDQU (J*64)(SI), X0; \
	VMOVDQU (J*64+16)(SI), X1; \
	VMOVDQU (J*64+32)(SI), X2; \
	VMOVDQU (J*64+48)(SI), X3; \
	VMOVDQU X0, (J*16)(DI); \
	VMOVDQU X1, (J*16)(DI)(R11*1); \
	VMOVDQU X2, (J*16)(DI)(R11*2); \
	VMOVDQU X3, (J*16)(R12)

// func q4kDeint(dst, src *byte, groups, nb int)
//
// The interleaved layout's groups at src (q4kx.go) back to their rows,
// one after the other at dst, prefetching the bytes that follow the
// groups (the next block's, in memory order) as they go: a block's copy
// then finds its rows in cache as the tile's own prefetch of the next
// block had.
TEXT ·q4kDeint(SB), NOSPLIT, $0-32
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  groups+16(FP), R15
	MOVQ  nb+24(FP), R11
	IMULQ $144, R11 // bytes a row
	LEAQ  (SI)(R11*4), R14
	MOVQ  R15, AX
	DECQ  AX
	IMULQ R11, AX
	LEAQ  (R14)(AX*4), R14 // the bytes after the groups
	TESTQ R15, R15
	JEQ   ddone

dgroup:
	MOVQ nb+24(FP), CX
	MOVQ DI, R13
	LEAQ (DI)(R11*2), R12
	ADDQ R11, R12

dsb:
	Q4F_PF576
	Q4X_OUT(0)
	Q4X_OUT(1)
	Q4X_OUT(2)
	Q4X_OUT(3)
	Q4X_OUT(4)
	Q4X_OUT(5)
	Q4X_OUT(6)
	Q4X_OUT(7)
	Q4X_OUT(8)
	ADDQ       $576, SI
	ADDQ       $144, DI
	ADDQ       $144, R12
	DECQ       CX
	JNZ        dsb

	LEAQ (R13)(R11*4), DI
	DECQ R15
	JNZ  dgroup

ddone:
	RET
