//go:build amd64

#include "textflag.h"

// Decode attention (attention.go, flashDecode): one query row's vectors of
// one kv head read each key block once from L1 and the arena in place,
// float32 or IEEE halves converted in registers (VCVTPH2PS, exact).

// perm16 puts the lanes of the transposed reduction below back in key
// order: lane 4k+j holds key k+4j.
DATA perm16<>+0(SB)/4, $0
DATA perm16<>+4(SB)/4, $4
DATA perm16<>+8(SB)/4, $8
DATA perm16<>+12(SB)/4, $12
DATA perm16<>+16(SB)/4, $1
DATA perm16<>+20(SB)/4, $5
DATA perm16<>+24(SB)/4, $9
DATA perm16<>+28(SB)/4, $13
DATA perm16<>+32(SB)/4, $2
DATA perm16<>+36(SB)/4, $6
DATA perm16<>+40(SB)/4, $10
DATA perm16<>+44(SB)/4, $14
DATA perm16<>+48(SB)/4, $3
DATA perm16<>+52(SB)/4, $7
DATA perm16<>+56(SB)/4, $11
DATA perm16<>+60(SB)/4, $15
GLOBL perm16<>(SB), RODATA|NOPTR, $64

// RED16 reduces the sixteen accumulators Z0…Z15 (key j in Zj) to Z0, the
// sixteen sums in key order, each summed as TSUM16 (tile_amd64.s) sums one accumulator
// (lanes i and i+8, then i and i+4, i and i+2, i and i+1): the two halves
// of two keys side by side, added, four times, then VPERMPS.
#define RED1(A, B, C) \
	VSHUFF64X2 $0x44, B, A, Z24; \
	VSHUFF64X2 $0xEE, B, A, Z25; \
	VADDPS     Z25, Z24, C

#define RED2(A, B, C) \
	VSHUFF32X4 $0x88, B, A, Z24; \
	VSHUFF32X4 $0xDD, B, A, Z25; \
	VADDPS     Z25, Z24, C

#define RED3(A, B, C) \
	VSHUFPS $0x44, B, A, Z24; \
	VSHUFPS $0xEE, B, A, Z25; \
	VADDPS  Z25, Z24, C

#define RED4(A, B, C) \
	VSHUFPS $0x88, B, A, Z24; \
	VSHUFPS $0xDD, B, A, Z25; \
	VADDPS  Z25, Z24, C

#define RED16 \
	RED1(Z0, Z1, Z16); \
	RED1(Z2, Z3, Z17); \
	RED1(Z4, Z5, Z18); \
	RED1(Z6, Z7, Z19); \
	RED1(Z8, Z9, Z20); \
	RED1(Z10, Z11, Z21); \
	RED1(Z12, Z13, Z22); \
	RED1(Z14, Z15, Z23); \
	RED2(Z16, Z17, Z0); \
	RED2(Z18, Z19, Z1); \
	RED2(Z20, Z21, Z2); \
	RED2(Z22, Z23, Z3); \
	RED3(Z0, Z1, Z4); \
	RED3(Z2, Z3, Z5); \
	RED4(Z4, Z5, Z6); \
	VMOVUPS perm16<>(SB), Z7; \
	VPERMPS Z6, Z7, Z0

// func scores16AVX512(q *float32, base *float32, offs *int, ng, hd, nq int, out *float32, ostride int)
// For each of ng groups of sixteen keys (key j of group g at
// base+offs[16g+j] elements) and each of nq query vectors (vector i at
// q+i·hd floats): out[i·ostride + 16g + j] = q_i·key, each key's
// products in one sixteen-lane accumulator over hd (a multiple of 16) in
// order and summed as TSUM16 (tile_amd64.s) (dot4x4AVX512's bits). offs must hold 32
// entries past the last group (prefetches of the keys two groups on).
TEXT ·scores16AVX512(SB), NOSPLIT, $0-64
	MOVQ base+8(FP), R13
	MOVQ offs+16(FP), R14
	MOVQ ng+24(FP), R15
	MOVQ hd+32(FP), CX
	MOVQ out+48(FP), BX

grp:
	TESTQ R15, R15
	JEQ   end
	MOVQ  q+0(FP), SI
	MOVQ  BX, DI
	MOVQ  nq+40(FP), R11

qv:
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
	XORQ AX, AX

chunk:
	CMPQ    AX, CX
	JGE     red
	VMOVUPS (SI)(AX*4), Z16
	LEAQ    (R13)(AX*4), R12
	MOVQ 0(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z0
	MOVQ 256(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 8(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z1
	MOVQ 264(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 16(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z2
	MOVQ 272(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 24(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z3
	MOVQ 280(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 32(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z4
	MOVQ 288(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 40(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z5
	MOVQ 296(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 48(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z6
	MOVQ 304(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 56(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z7
	MOVQ 312(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 64(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z8
	MOVQ 320(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 72(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z9
	MOVQ 328(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 80(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z10
	MOVQ 336(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 88(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z11
	MOVQ 344(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 96(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z12
	MOVQ 352(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 104(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z13
	MOVQ 360(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 112(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z14
	MOVQ 368(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 120(R14), R10
	VFMADD231PS (R12)(R10*4), Z16, Z15
	MOVQ 376(R14), R9
	PREFETCHT0 (R12)(R9*4)
	ADDQ $16, AX
	JMP  chunk

red:
	RED16
	VMOVUPS Z0, (DI)
	MOVQ    hd+32(FP), R8
	LEAQ    (SI)(R8*4), SI
	MOVQ    ostride+56(FP), R8
	LEAQ    (DI)(R8*4), DI
	DECQ    R11
	JNZ     qv
	ADDQ    $128, R14
	ADDQ    $64, BX
	DECQ    R15
	JMP     grp

end:
	VZEROUPPER
	RET

// func scores16F16AVX512(q *float32, base *uint16, offs *int, ng, hd, nq int, out *float32, ostride int)
// For each of ng groups of sixteen keys (key j of group g at
// base+offs[16g+j] elements, halves) and each of nq query vectors (vector i at
// q+i·hd floats): out[i·ostride + 16g + j] = q_i·key, each key's
// products in one sixteen-lane accumulator over hd (a multiple of 16) in
// order and summed as TSUM16 (tile_amd64.s) (dot4x4AVX512's bits). offs must hold 32
// entries past the last group (prefetches of the keys two groups on).
TEXT ·scores16F16AVX512(SB), NOSPLIT, $0-64
	MOVQ base+8(FP), R13
	MOVQ offs+16(FP), R14
	MOVQ ng+24(FP), R15
	MOVQ hd+32(FP), CX
	MOVQ out+48(FP), BX

grp:
	TESTQ R15, R15
	JEQ   end
	MOVQ  q+0(FP), SI
	MOVQ  BX, DI
	MOVQ  nq+40(FP), R11

qv:
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
	XORQ AX, AX

chunk:
	CMPQ    AX, CX
	JGE     red
	VMOVUPS (SI)(AX*4), Z16
	LEAQ    (R13)(AX*2), R12
	MOVQ 0(R14), R10
	VCVTPH2PS (R12)(R10*2), Z17
	VFMADD231PS Z17, Z16, Z0
	MOVQ 256(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 8(R14), R10
	VCVTPH2PS (R12)(R10*2), Z18
	VFMADD231PS Z18, Z16, Z1
	MOVQ 264(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 16(R14), R10
	VCVTPH2PS (R12)(R10*2), Z19
	VFMADD231PS Z19, Z16, Z2
	MOVQ 272(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 24(R14), R10
	VCVTPH2PS (R12)(R10*2), Z20
	VFMADD231PS Z20, Z16, Z3
	MOVQ 280(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 32(R14), R10
	VCVTPH2PS (R12)(R10*2), Z17
	VFMADD231PS Z17, Z16, Z4
	MOVQ 288(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 40(R14), R10
	VCVTPH2PS (R12)(R10*2), Z18
	VFMADD231PS Z18, Z16, Z5
	MOVQ 296(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 48(R14), R10
	VCVTPH2PS (R12)(R10*2), Z19
	VFMADD231PS Z19, Z16, Z6
	MOVQ 304(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 56(R14), R10
	VCVTPH2PS (R12)(R10*2), Z20
	VFMADD231PS Z20, Z16, Z7
	MOVQ 312(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 64(R14), R10
	VCVTPH2PS (R12)(R10*2), Z17
	VFMADD231PS Z17, Z16, Z8
	MOVQ 320(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 72(R14), R10
	VCVTPH2PS (R12)(R10*2), Z18
	VFMADD231PS Z18, Z16, Z9
	MOVQ 328(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 80(R14), R10
	VCVTPH2PS (R12)(R10*2), Z19
	VFMADD231PS Z19, Z16, Z10
	MOVQ 336(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 88(R14), R10
	VCVTPH2PS (R12)(R10*2), Z20
	VFMADD231PS Z20, Z16, Z11
	MOVQ 344(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 96(R14), R10
	VCVTPH2PS (R12)(R10*2), Z17
	VFMADD231PS Z17, Z16, Z12
	MOVQ 352(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 104(R14), R10
	VCVTPH2PS (R12)(R10*2), Z18
	VFMADD231PS Z18, Z16, Z13
	MOVQ 360(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 112(R14), R10
	VCVTPH2PS (R12)(R10*2), Z19
	VFMADD231PS Z19, Z16, Z14
	MOVQ 368(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 120(R14), R10
	VCVTPH2PS (R12)(R10*2), Z20
	VFMADD231PS Z20, Z16, Z15
	MOVQ 376(R14), R9
	PREFETCHT0 (R12)(R9*2)
	ADDQ $16, AX
	JMP  chunk

red:
	RED16
	VMOVUPS Z0, (DI)
	MOVQ    hd+32(FP), R8
	LEAQ    (SI)(R8*4), SI
	MOVQ    ostride+56(FP), R8
	LEAQ    (DI)(R8*4), DI
	DECQ    R11
	JNZ     qv
	ADDQ    $128, R14
	ADDQ    $64, BX
	DECQ    R15
	JMP     grp

end:
	VZEROUPPER
	RET

// func wsum4x64F16AVX512(o0, o1, o2, o3 *float32, s0, s1, s2, s3 *float32, base *uint16, offs *int, n int)
// wsum4x64AVX512 on halves: o_r[d] = fma(v_p[d], s_r[p], o_r[d]) for p
// ascending, d < 64, v_p = the 64 halves at base+offs[p] converted exactly;
// offs must hold 8 entries past n (prefetches).
TEXT ·wsum4x64F16AVX512(SB), NOSPLIT, $0-88
	MOVQ s0+32(FP), SI
	MOVQ s1+40(FP), DX
	MOVQ s2+48(FP), BX
	MOVQ s3+56(FP), R12
	MOVQ base+64(FP), R8
	MOVQ offs+72(FP), R9
	MOVQ n+80(FP), CX
	MOVQ o0+0(FP), DI
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	MOVQ o1+8(FP), DI
	VMOVUPS 0(DI), Z4
	VMOVUPS 64(DI), Z5
	VMOVUPS 128(DI), Z6
	VMOVUPS 192(DI), Z7
	MOVQ o2+16(FP), DI
	VMOVUPS 0(DI), Z8
	VMOVUPS 64(DI), Z9
	VMOVUPS 128(DI), Z10
	VMOVUPS 192(DI), Z11
	MOVQ o3+24(FP), DI
	VMOVUPS 0(DI), Z12
	VMOVUPS 64(DI), Z13
	VMOVUPS 128(DI), Z14
	VMOVUPS 192(DI), Z15
	XORQ AX, AX

h4loop:
	CMPQ         AX, CX
	JGE          h4done
	MOVQ         (R9)(AX*8), R10
	LEAQ         (R8)(R10*2), R10
	MOVQ         64(R9)(AX*8), R11
	LEAQ         (R8)(R11*2), R11
	PREFETCHT0   0(R11)
	PREFETCHT0   64(R11)
	VCVTPH2PS    0(R10), Z16
	VCVTPH2PS    32(R10), Z17
	VCVTPH2PS    64(R10), Z18
	VCVTPH2PS    96(R10), Z19
	VBROADCASTSS (SI)(AX*4), Z20
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VBROADCASTSS (DX)(AX*4), Z21
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	VBROADCASTSS (BX)(AX*4), Z22
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z17, Z22, Z9
	VFMADD231PS  Z18, Z22, Z10
	VFMADD231PS  Z19, Z22, Z11
	VBROADCASTSS (R12)(AX*4), Z23
	VFMADD231PS  Z16, Z23, Z12
	VFMADD231PS  Z17, Z23, Z13
	VFMADD231PS  Z18, Z23, Z14
	VFMADD231PS  Z19, Z23, Z15
	INCQ         AX
	JMP          h4loop

h4done:
	MOVQ o0+0(FP), DI
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	MOVQ o1+8(FP), DI
	VMOVUPS Z4, 0(DI)
	VMOVUPS Z5, 64(DI)
	VMOVUPS Z6, 128(DI)
	VMOVUPS Z7, 192(DI)
	MOVQ o2+16(FP), DI
	VMOVUPS Z8, 0(DI)
	VMOVUPS Z9, 64(DI)
	VMOVUPS Z10, 128(DI)
	VMOVUPS Z11, 192(DI)
	MOVQ o3+24(FP), DI
	VMOVUPS Z12, 0(DI)
	VMOVUPS Z13, 64(DI)
	VMOVUPS Z14, 128(DI)
	VMOVUPS Z15, 192(DI)
	VZEROUPPER
	RET

// func wsum4x64pAVX512(o0, o1, o2, o3 *float32, s0, s1, s2, s3 *float32, base *float32, offs *int, n int)
// wsum4x64AVX512 with prefetches of the values eight positions on (offs
// must hold 8 entries past n): the same operations, the same bits.
TEXT ·wsum4x64pAVX512(SB), NOSPLIT, $0-88
	MOVQ s0+32(FP), SI
	MOVQ s1+40(FP), DX
	MOVQ s2+48(FP), BX
	MOVQ s3+56(FP), R12
	MOVQ base+64(FP), R8
	MOVQ offs+72(FP), R9
	MOVQ n+80(FP), CX
	MOVQ o0+0(FP), DI
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	MOVQ o1+8(FP), DI
	VMOVUPS 0(DI), Z4
	VMOVUPS 64(DI), Z5
	VMOVUPS 128(DI), Z6
	VMOVUPS 192(DI), Z7
	MOVQ o2+16(FP), DI
	VMOVUPS 0(DI), Z8
	VMOVUPS 64(DI), Z9
	VMOVUPS 128(DI), Z10
	VMOVUPS 192(DI), Z11
	MOVQ o3+24(FP), DI
	VMOVUPS 0(DI), Z12
	VMOVUPS 64(DI), Z13
	VMOVUPS 128(DI), Z14
	VMOVUPS 192(DI), Z15
	XORQ AX, AX

p4loop:
	CMPQ         AX, CX
	JGE          p4done
	MOVQ         (R9)(AX*8), R10
	LEAQ         (R8)(R10*4), R10
	MOVQ         64(R9)(AX*8), R11
	LEAQ         (R8)(R11*4), R11
	PREFETCHT0   0(R11)
	PREFETCHT0   64(R11)
	PREFETCHT0   128(R11)
	PREFETCHT0   192(R11)
	VMOVUPS      0(R10), Z16
	VMOVUPS      64(R10), Z17
	VMOVUPS      128(R10), Z18
	VMOVUPS      192(R10), Z19
	VBROADCASTSS (SI)(AX*4), Z20
	VFMADD231PS  Z16, Z20, Z0
	VFMADD231PS  Z17, Z20, Z1
	VFMADD231PS  Z18, Z20, Z2
	VFMADD231PS  Z19, Z20, Z3
	VBROADCASTSS (DX)(AX*4), Z21
	VFMADD231PS  Z16, Z21, Z4
	VFMADD231PS  Z17, Z21, Z5
	VFMADD231PS  Z18, Z21, Z6
	VFMADD231PS  Z19, Z21, Z7
	VBROADCASTSS (BX)(AX*4), Z22
	VFMADD231PS  Z16, Z22, Z8
	VFMADD231PS  Z17, Z22, Z9
	VFMADD231PS  Z18, Z22, Z10
	VFMADD231PS  Z19, Z22, Z11
	VBROADCASTSS (R12)(AX*4), Z23
	VFMADD231PS  Z16, Z23, Z12
	VFMADD231PS  Z17, Z23, Z13
	VFMADD231PS  Z18, Z23, Z14
	VFMADD231PS  Z19, Z23, Z15
	INCQ         AX
	JMP          p4loop

p4done:
	MOVQ o0+0(FP), DI
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	MOVQ o1+8(FP), DI
	VMOVUPS Z4, 0(DI)
	VMOVUPS Z5, 64(DI)
	VMOVUPS Z6, 128(DI)
	VMOVUPS Z7, 192(DI)
	MOVQ o2+16(FP), DI
	VMOVUPS Z8, 0(DI)
	VMOVUPS Z9, 64(DI)
	VMOVUPS Z10, 128(DI)
	VMOVUPS Z11, 192(DI)
	MOVQ o3+24(FP), DI
	VMOVUPS Z12, 0(DI)
	VMOVUPS Z13, 64(DI)
	VMOVUPS Z14, 128(DI)
	VMOVUPS Z15, 192(DI)
	VZEROUPPER
	RET

// avx2 (decodeK2): groups of eight keys in ymm, each key's products in one
// eight-lane accumulator reduced as HSUM8 (lanes i and i+4, i and i+2, i
// and i+1: dot4AVX2's bits), values four vectors × 16 floats at a time.

// perm8 puts the lanes of RED8's tree back in key order: lane 4h+j holds
// key h+2j.
DATA perm8<>+0(SB)/4, $0
DATA perm8<>+4(SB)/4, $4
DATA perm8<>+8(SB)/4, $1
DATA perm8<>+12(SB)/4, $5
DATA perm8<>+16(SB)/4, $2
DATA perm8<>+20(SB)/4, $6
DATA perm8<>+24(SB)/4, $3
DATA perm8<>+28(SB)/4, $7
GLOBL perm8<>(SB), RODATA|NOPTR, $32

#define R8A(A, B, C) \
	VPERM2F128 $0x20, B, A, Y10; \
	VPERM2F128 $0x31, B, A, Y11; \
	VADDPS     Y11, Y10, C

#define R8B(A, B, C) \
	VSHUFPS $0x44, B, A, Y10; \
	VSHUFPS $0xEE, B, A, Y11; \
	VADDPS  Y11, Y10, C

#define R8C(A, B, C) \
	VSHUFPS $0x88, B, A, Y10; \
	VSHUFPS $0xDD, B, A, Y11; \
	VADDPS  Y11, Y10, C

// RED8 reduces Y0…Y7 (key j in Yj) to Y0, the eight sums in key order.
#define RED8 \
	R8A(Y0, Y1, Y8); \
	R8A(Y2, Y3, Y9); \
	R8A(Y4, Y5, Y12); \
	R8A(Y6, Y7, Y13); \
	R8B(Y8, Y9, Y0); \
	R8B(Y12, Y13, Y1); \
	R8C(Y0, Y1, Y2); \
	VMOVUPS perm8<>(SB), Y3; \
	VPERMPS Y2, Y3, Y0

// func scores8AVX2(q *float32, base *float32, offs *int, ng, hd, nq int, out *float32, ostride int)
// scores16AVX512 on avx2: groups of eight keys, out[i·ostride + 8g + j];
// offs must hold 16 entries past the last group.
TEXT ·scores8AVX2(SB), NOSPLIT, $0-64
	MOVQ base+8(FP), R13
	MOVQ offs+16(FP), R14
	MOVQ ng+24(FP), R15
	MOVQ hd+32(FP), CX
	MOVQ out+48(FP), BX

grp:
	TESTQ R15, R15
	JEQ   end
	MOVQ  q+0(FP), SI
	MOVQ  BX, DI
	MOVQ  nq+40(FP), R11

qv:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX

chunk:
	CMPQ    AX, CX
	JGE     red
	VMOVUPS (SI)(AX*4), Y8
	LEAQ    (R13)(AX*4), R12
	MOVQ 0(R14), R10
	VFMADD231PS (R12)(R10*4), Y8, Y0
	MOVQ 128(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 8(R14), R10
	VFMADD231PS (R12)(R10*4), Y8, Y1
	MOVQ 136(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 16(R14), R10
	VFMADD231PS (R12)(R10*4), Y8, Y2
	MOVQ 144(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 24(R14), R10
	VFMADD231PS (R12)(R10*4), Y8, Y3
	MOVQ 152(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 32(R14), R10
	VFMADD231PS (R12)(R10*4), Y8, Y4
	MOVQ 160(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 40(R14), R10
	VFMADD231PS (R12)(R10*4), Y8, Y5
	MOVQ 168(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 48(R14), R10
	VFMADD231PS (R12)(R10*4), Y8, Y6
	MOVQ 176(R14), R9
	PREFETCHT0 (R12)(R9*4)
	MOVQ 56(R14), R10
	VFMADD231PS (R12)(R10*4), Y8, Y7
	MOVQ 184(R14), R9
	PREFETCHT0 (R12)(R9*4)
	ADDQ $8, AX
	JMP  chunk

red:
	RED8
	VMOVUPS Y0, (DI)
	MOVQ    hd+32(FP), R8
	LEAQ    (SI)(R8*4), SI
	MOVQ    ostride+56(FP), R8
	LEAQ    (DI)(R8*4), DI
	DECQ    R11
	JNZ     qv
	ADDQ    $64, R14
	ADDQ    $32, BX
	DECQ    R15
	JMP     grp

end:
	VZEROUPPER
	RET

// func scores8F16AVX2(q *float32, base *uint16, offs *int, ng, hd, nq int, out *float32, ostride int)
// scores16AVX512 on avx2: groups of eight keys, out[i·ostride + 8g + j];
// offs must hold 16 entries past the last group.
TEXT ·scores8F16AVX2(SB), NOSPLIT, $0-64
	MOVQ base+8(FP), R13
	MOVQ offs+16(FP), R14
	MOVQ ng+24(FP), R15
	MOVQ hd+32(FP), CX
	MOVQ out+48(FP), BX

grp:
	TESTQ R15, R15
	JEQ   end
	MOVQ  q+0(FP), SI
	MOVQ  BX, DI
	MOVQ  nq+40(FP), R11

qv:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ AX, AX

chunk:
	CMPQ    AX, CX
	JGE     red
	VMOVUPS (SI)(AX*4), Y8
	LEAQ    (R13)(AX*2), R12
	MOVQ 0(R14), R10
	VCVTPH2PS (R12)(R10*2), Y9
	VFMADD231PS Y9, Y8, Y0
	MOVQ 128(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 8(R14), R10
	VCVTPH2PS (R12)(R10*2), Y9
	VFMADD231PS Y9, Y8, Y1
	MOVQ 136(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 16(R14), R10
	VCVTPH2PS (R12)(R10*2), Y9
	VFMADD231PS Y9, Y8, Y2
	MOVQ 144(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 24(R14), R10
	VCVTPH2PS (R12)(R10*2), Y9
	VFMADD231PS Y9, Y8, Y3
	MOVQ 152(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 32(R14), R10
	VCVTPH2PS (R12)(R10*2), Y9
	VFMADD231PS Y9, Y8, Y4
	MOVQ 160(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 40(R14), R10
	VCVTPH2PS (R12)(R10*2), Y9
	VFMADD231PS Y9, Y8, Y5
	MOVQ 168(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 48(R14), R10
	VCVTPH2PS (R12)(R10*2), Y9
	VFMADD231PS Y9, Y8, Y6
	MOVQ 176(R14), R9
	PREFETCHT0 (R12)(R9*2)
	MOVQ 56(R14), R10
	VCVTPH2PS (R12)(R10*2), Y9
	VFMADD231PS Y9, Y8, Y7
	MOVQ 184(R14), R9
	PREFETCHT0 (R12)(R9*2)
	ADDQ $8, AX
	JMP  chunk

red:
	RED8
	VMOVUPS Y0, (DI)
	MOVQ    hd+32(FP), R8
	LEAQ    (SI)(R8*4), SI
	MOVQ    ostride+56(FP), R8
	LEAQ    (DI)(R8*4), DI
	DECQ    R11
	JNZ     qv
	ADDQ    $64, R14
	ADDQ    $32, BX
	DECQ    R15
	JMP     grp

end:
	VZEROUPPER
	RET

// func wsum4x16AVX2(o0, o1, o2, o3 *float32, s0, s1, s2, s3 *float32, base *float32, offs *int, n int)
// Four outputs' 16 elements: o_r[d] = fma(v_p[d], s_r[p], o_r[d]) for p
// ascending (wsum's chain), v_p at base+offs[p];
// offs must hold 8 entries past n (prefetches).
TEXT ·wsum4x16AVX2(SB), NOSPLIT, $0-88
	MOVQ s0+32(FP), SI
	MOVQ s1+40(FP), DX
	MOVQ s2+48(FP), BX
	MOVQ s3+56(FP), R12
	MOVQ base+64(FP), R8
	MOVQ offs+72(FP), R9
	MOVQ n+80(FP), CX
	MOVQ o0+0(FP), DI
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	MOVQ o1+8(FP), DI
	VMOVUPS 0(DI), Y2
	VMOVUPS 32(DI), Y3
	MOVQ o2+16(FP), DI
	VMOVUPS 0(DI), Y4
	VMOVUPS 32(DI), Y5
	MOVQ o3+24(FP), DI
	VMOVUPS 0(DI), Y6
	VMOVUPS 32(DI), Y7
	XORQ AX, AX

loop:
	CMPQ         AX, CX
	JGE          done
	MOVQ         (R9)(AX*8), R10
	LEAQ         (R8)(R10*4), R10
	MOVQ         64(R9)(AX*8), R11
	LEAQ         (R8)(R11*4), R11
	PREFETCHT0   0(R11)
	VMOVUPS      0(R10), Y8
	VMOVUPS      32(R10), Y9
	VBROADCASTSS (SI)(AX*4), Y10
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VBROADCASTSS (DX)(AX*4), Y10
	VFMADD231PS  Y8, Y10, Y2
	VFMADD231PS  Y9, Y10, Y3
	VBROADCASTSS (BX)(AX*4), Y10
	VFMADD231PS  Y8, Y10, Y4
	VFMADD231PS  Y9, Y10, Y5
	VBROADCASTSS (R12)(AX*4), Y10
	VFMADD231PS  Y8, Y10, Y6
	VFMADD231PS  Y9, Y10, Y7
	INCQ         AX
	JMP          loop

done:
	MOVQ o0+0(FP), DI
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	MOVQ o1+8(FP), DI
	VMOVUPS Y2, 0(DI)
	VMOVUPS Y3, 32(DI)
	MOVQ o2+16(FP), DI
	VMOVUPS Y4, 0(DI)
	VMOVUPS Y5, 32(DI)
	MOVQ o3+24(FP), DI
	VMOVUPS Y6, 0(DI)
	VMOVUPS Y7, 32(DI)
	VZEROUPPER
	RET

// func wsum4x16F16AVX2(o0, o1, o2, o3 *float32, s0, s1, s2, s3 *float32, base *uint16, offs *int, n int)
// Four outputs' 16 elements: o_r[d] = fma(v_p[d], s_r[p], o_r[d]) for p
// ascending (wsum's chain), v_p at base+offs[p] (halves, converted exactly);
// offs must hold 8 entries past n (prefetches).
TEXT ·wsum4x16F16AVX2(SB), NOSPLIT, $0-88
	MOVQ s0+32(FP), SI
	MOVQ s1+40(FP), DX
	MOVQ s2+48(FP), BX
	MOVQ s3+56(FP), R12
	MOVQ base+64(FP), R8
	MOVQ offs+72(FP), R9
	MOVQ n+80(FP), CX
	MOVQ o0+0(FP), DI
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	MOVQ o1+8(FP), DI
	VMOVUPS 0(DI), Y2
	VMOVUPS 32(DI), Y3
	MOVQ o2+16(FP), DI
	VMOVUPS 0(DI), Y4
	VMOVUPS 32(DI), Y5
	MOVQ o3+24(FP), DI
	VMOVUPS 0(DI), Y6
	VMOVUPS 32(DI), Y7
	XORQ AX, AX

loop:
	CMPQ         AX, CX
	JGE          done
	MOVQ         (R9)(AX*8), R10
	LEAQ         (R8)(R10*2), R10
	MOVQ         64(R9)(AX*8), R11
	LEAQ         (R8)(R11*2), R11
	PREFETCHT0   0(R11)
	VCVTPH2PS    0(R10), Y8
	VCVTPH2PS    16(R10), Y9
	VBROADCASTSS (SI)(AX*4), Y10
	VFMADD231PS  Y8, Y10, Y0
	VFMADD231PS  Y9, Y10, Y1
	VBROADCASTSS (DX)(AX*4), Y10
	VFMADD231PS  Y8, Y10, Y2
	VFMADD231PS  Y9, Y10, Y3
	VBROADCASTSS (BX)(AX*4), Y10
	VFMADD231PS  Y8, Y10, Y4
	VFMADD231PS  Y9, Y10, Y5
	VBROADCASTSS (R12)(AX*4), Y10
	VFMADD231PS  Y8, Y10, Y6
	VFMADD231PS  Y9, Y10, Y7
	INCQ         AX
	JMP          loop

done:
	MOVQ o0+0(FP), DI
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	MOVQ o1+8(FP), DI
	VMOVUPS Y2, 0(DI)
	VMOVUPS Y3, 32(DI)
	MOVQ o2+16(FP), DI
	VMOVUPS Y4, 0(DI)
	VMOVUPS Y5, 32(DI)
	MOVQ o3+24(FP), DI
	VMOVUPS Y6, 0(DI)
	VMOVUPS Y7, 32(DI)
	VZEROUPPER
	RET

// func toHalfAVX2(dst *uint16, src *float32, n int)
// dst[i] = the nearest half of src[i], ties to even (VCVTPS2PH, rounding
// from the immediate), for n a multiple of 8; a NaN is first made the
// quiet NaN of its sign without payload, so that it converts to
// sign|0x7e00 as kernels.F32ToF16 gives.
TEXT ·toHalfAVX2(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVL         $0x80000000, AX
	MOVL         AX, X13
	VBROADCASTSS X13, Y13
	MOVL         $0x7fc00000, AX
	MOVL         AX, X12
	VBROADCASTSS X12, Y12
	XORQ         AX, AX

hloop:
	CMPQ       AX, CX
	JGE        hdone
	VMOVUPS    (SI)(AX*4), Y0
	VCMPPS     $3, Y0, Y0, Y1
	VANDPS     Y13, Y0, Y2
	VORPS      Y12, Y2, Y2
	VBLENDVPS  Y1, Y2, Y0, Y0
	VCVTPS2PH  $0, Y0, X3
	VMOVDQU    X3, (DI)(AX*2)
	ADDQ       $8, AX
	JMP        hloop

hdone:
	VZEROUPPER
	RET
