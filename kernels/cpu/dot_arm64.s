//go:build arm64

#include "textflag.h"

// NEON kernels of the neon path (dot_arm64.go has their order and
// wrappers). Register numbers in the macros below are V registers: the Go
// assembler has no mnemonic for these instructions, so they are encoded
// here (A64 encodings; the qemu-aarch64 runs of make arm64-check execute
// every one of them).

// FADDP Vd.4S, Vn.4S, Vm.4S: (n0+n1, n2+n3, m0+m1, m2+m3)
#define FADDP4S(m, n, d) WORD $(0x6E20D400 | (m)<<16 | (n)<<5 | (d))
// FADDP Sd, Vn.2S: n0+n1
#define FADDPS(n, d) WORD $(0x7E30D800 | (n)<<5 | (d))
// FMUL Vd.4S, Vn.4S, Vm.4S
#define FMUL4S(m, n, d) WORD $(0x6E20DC00 | (m)<<16 | (n)<<5 | (d))
// FCVTL Vd.4S, Vn.4H (exact: every half is a float32)
#define FCVTL4S(n, d) WORD $(0x0E217800 | (n)<<5 | (d))
// FCVTL2 Vd.4S, Vn.8H
#define FCVTL24S(n, d) WORD $(0x4E217800 | (n)<<5 | (d))
// SHLL Vd.4S, Vn.4H, #16 (BF16 to float32)
#define SHLL4S(n, d) WORD $(0x2E613800 | (n)<<5 | (d))
// SHLL2 Vd.4S, Vn.8H, #16
#define SHLL24S(n, d) WORD $(0x6E613800 | (n)<<5 | (d))
// SCVTF Vd.4S, Vn.4S
#define SCVTF4S(n, d) WORD $(0x4E21D800 | (n)<<5 | (d))
// SDOT Vd.4S, Vn.16B, Vm.16B (ASIMDDP)
#define SDOT4S(m, n, d) WORD $(0x4E809400 | (m)<<16 | (n)<<5 | (d))
// SMULL Vd.8H, Vn.8B, Vm.8B
#define SMULL8H(m, n, d) WORD $(0x0E20C000 | (m)<<16 | (n)<<5 | (d))
// SMULL2 Vd.8H, Vn.16B, Vm.16B
#define SMULL28H(m, n, d) WORD $(0x4E20C000 | (m)<<16 | (n)<<5 | (d))
// SADALP Vd.4S, Vn.8H
#define SADALP4S(n, d) WORD $(0x4E606800 | (n)<<5 | (d))

// Q8ARGS loads the arguments of q8dot4SDOT and q8dot4NEON.
#define Q8ARGS \
	MOVD xq+0(FP), R0; \
	MOVD xd+8(FP), R1; \
	MOVD w0+16(FP), R2; \
	MOVD w1+24(FP), R3; \
	MOVD w2+32(FP), R4; \
	MOVD w3+40(FP), R5; \
	MOVD nb+48(FP), R6; \
	MOVD out+56(FP), R7; \
	VEOR V31.B16, V31.B16, V31.B16

// Q40ARGS loads the arguments of q40dotSDOT and q40dotNEON.
#define Q40ARGS \
	MOVD xq+0(FP), R0; \
	MOVD xd+8(FP), R1; \
	MOVD w+16(FP), R2; \
	MOVD nb+24(FP), R6; \
	MOVD out+32(FP), R7; \
	VEOR V31.B16, V31.B16, V31.B16; \
	VMOVI $15, V9.B16; \
	VMOVI $8, V10.B16

// Q6KARGS loads the arguments of q6ksubSDOT and q6ksubNEON.
#define Q6KARGS \
	MOVD  xq+0(FP), R0; \
	MOVD  ql+8(FP), R2; \
	MOVD  qh+16(FP), R3; \
	MOVD  out+24(FP), R7; \
	VMOVI $15, V28.B16; \
	VMOVI $3, V29.B16; \
	VMOVI $32, V30.B16

// HSUM4 leaves (l0+l1)+(l2+l3) of Vv in Sv.
#define HSUM4(v) FADDP4S(v, v, v); FADDPS(v, v)

#define ZERO4(a, b, c, d) \
	VEOR a.B16, a.B16, a.B16; \
	VEOR b.B16, b.B16, b.B16; \
	VEOR c.B16, c.B16, c.B16; \
	VEOR d.B16, d.B16, d.B16

// func dot4NEON(x, w0, w1, w2, w3 *float32, n int, out *[4]float32)
TEXT ·dot4NEON(SB), NOSPLIT, $0-56
	MOVD x+0(FP), R0
	MOVD w0+8(FP), R1
	MOVD w1+16(FP), R2
	MOVD w2+24(FP), R3
	MOVD w3+32(FP), R4
	MOVD n+40(FP), R5
	MOVD out+48(FP), R6
	ZERO4(V16, V17, V18, V19)
	CBZ  R5, dot4done

dot4loop:
	VLD1.P 16(R0), [V0.S4]
	VLD1.P 16(R1), [V1.S4]
	VLD1.P 16(R2), [V2.S4]
	VLD1.P 16(R3), [V3.S4]
	VLD1.P 16(R4), [V4.S4]
	VFMLA  V0.S4, V1.S4, V16.S4
	VFMLA  V0.S4, V2.S4, V17.S4
	VFMLA  V0.S4, V3.S4, V18.S4
	VFMLA  V0.S4, V4.S4, V19.S4
	SUBS   $4, R5
	BNE    dot4loop

dot4done:
	HSUM4(16)
	HSUM4(17)
	HSUM4(18)
	HSUM4(19)
	FMOVS F16, 0(R6)
	FMOVS F17, 4(R6)
	FMOVS F18, 8(R6)
	FMOVS F19, 12(R6)
	RET

// func f16dot4NEON(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)
TEXT ·f16dot4NEON(SB), NOSPLIT, $0-56
	MOVD x+0(FP), R0
	MOVD w0+8(FP), R1
	MOVD w1+16(FP), R2
	MOVD w2+24(FP), R3
	MOVD w3+32(FP), R4
	MOVD n+40(FP), R5
	MOVD out+48(FP), R6
	ZERO4(V16, V17, V18, V19)
	CBZ  R5, f16done

f16loop:
	VLD1.P 16(R0), [V0.S4]
	VLD1.P 8(R1), [V1.H4]
	VLD1.P 8(R2), [V2.H4]
	VLD1.P 8(R3), [V3.H4]
	VLD1.P 8(R4), [V4.H4]
	FCVTL4S(1, 1)
	FCVTL4S(2, 2)
	FCVTL4S(3, 3)
	FCVTL4S(4, 4)
	VFMLA  V0.S4, V1.S4, V16.S4
	VFMLA  V0.S4, V2.S4, V17.S4
	VFMLA  V0.S4, V3.S4, V18.S4
	VFMLA  V0.S4, V4.S4, V19.S4
	SUBS   $4, R5
	BNE    f16loop

f16done:
	HSUM4(16)
	HSUM4(17)
	HSUM4(18)
	HSUM4(19)
	FMOVS F16, 0(R6)
	FMOVS F17, 4(R6)
	FMOVS F18, 8(R6)
	FMOVS F19, 12(R6)
	RET

// func bf16dot4NEON(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)
TEXT ·bf16dot4NEON(SB), NOSPLIT, $0-56
	MOVD x+0(FP), R0
	MOVD w0+8(FP), R1
	MOVD w1+16(FP), R2
	MOVD w2+24(FP), R3
	MOVD w3+32(FP), R4
	MOVD n+40(FP), R5
	MOVD out+48(FP), R6
	ZERO4(V16, V17, V18, V19)
	CBZ  R5, bf16done

bf16loop:
	VLD1.P 16(R0), [V0.S4]
	VLD1.P 8(R1), [V1.H4]
	VLD1.P 8(R2), [V2.H4]
	VLD1.P 8(R3), [V3.H4]
	VLD1.P 8(R4), [V4.H4]
	SHLL4S(1, 1)
	SHLL4S(2, 2)
	SHLL4S(3, 3)
	SHLL4S(4, 4)
	VFMLA  V0.S4, V1.S4, V16.S4
	VFMLA  V0.S4, V2.S4, V17.S4
	VFMLA  V0.S4, V3.S4, V18.S4
	VFMLA  V0.S4, V4.S4, V19.S4
	SUBS   $4, R5
	BNE    bf16loop

bf16done:
	HSUM4(16)
	HSUM4(17)
	HSUM4(18)
	HSUM4(19)
	FMOVS F16, 0(R6)
	FMOVS F17, 4(R6)
	FMOVS F18, 8(R6)
	FMOVS F19, 12(R6)
	RET

// func tile4NEON(x *[4]*float32, w *[4]*float32, n int, out *[16]float32)
// out[4i+j] = x[i]·w[j] with dot4NEON's lanes: V(16+4i+j) accumulates it.
TEXT ·tile4NEON(SB), NOSPLIT, $0-32
	MOVD x+0(FP), R8
	MOVD w+8(FP), R9
	MOVD n+16(FP), R10
	MOVD out+24(FP), R11
	MOVD 0(R8), R0
	MOVD 8(R8), R1
	MOVD 16(R8), R2
	MOVD 24(R8), R3
	MOVD 0(R9), R4
	MOVD 8(R9), R5
	MOVD 16(R9), R6
	MOVD 24(R9), R7
	ZERO4(V16, V17, V18, V19)
	ZERO4(V20, V21, V22, V23)
	ZERO4(V24, V25, V26, V27)
	ZERO4(V28, V29, V30, V31)
	CBZ  R10, tiledone

tileloop:
	VLD1.P 16(R4), [V4.S4]
	VLD1.P 16(R5), [V5.S4]
	VLD1.P 16(R6), [V6.S4]
	VLD1.P 16(R7), [V7.S4]
	VLD1.P 16(R0), [V0.S4]
	VLD1.P 16(R1), [V1.S4]
	VLD1.P 16(R2), [V2.S4]
	VLD1.P 16(R3), [V3.S4]
	VFMLA  V0.S4, V4.S4, V16.S4
	VFMLA  V0.S4, V5.S4, V17.S4
	VFMLA  V0.S4, V6.S4, V18.S4
	VFMLA  V0.S4, V7.S4, V19.S4
	VFMLA  V1.S4, V4.S4, V20.S4
	VFMLA  V1.S4, V5.S4, V21.S4
	VFMLA  V1.S4, V6.S4, V22.S4
	VFMLA  V1.S4, V7.S4, V23.S4
	VFMLA  V2.S4, V4.S4, V24.S4
	VFMLA  V2.S4, V5.S4, V25.S4
	VFMLA  V2.S4, V6.S4, V26.S4
	VFMLA  V2.S4, V7.S4, V27.S4
	VFMLA  V3.S4, V4.S4, V28.S4
	VFMLA  V3.S4, V5.S4, V29.S4
	VFMLA  V3.S4, V6.S4, V30.S4
	VFMLA  V3.S4, V7.S4, V31.S4
	SUBS   $4, R10
	BNE    tileloop

tiledone:
	HSUM4(16)
	HSUM4(17)
	HSUM4(18)
	HSUM4(19)
	HSUM4(20)
	HSUM4(21)
	HSUM4(22)
	HSUM4(23)
	HSUM4(24)
	HSUM4(25)
	HSUM4(26)
	HSUM4(27)
	HSUM4(28)
	HSUM4(29)
	HSUM4(30)
	HSUM4(31)
	FMOVS F16, 0(R11)
	FMOVS F17, 4(R11)
	FMOVS F18, 8(R11)
	FMOVS F19, 12(R11)
	FMOVS F20, 16(R11)
	FMOVS F21, 20(R11)
	FMOVS F22, 24(R11)
	FMOVS F23, 28(R11)
	FMOVS F24, 32(R11)
	FMOVS F25, 36(R11)
	FMOVS F26, 40(R11)
	FMOVS F27, 44(R11)
	FMOVS F28, 48(R11)
	FMOVS F29, 52(R11)
	FMOVS F30, 56(R11)
	FMOVS F31, 60(R11)
	RET

// func f16rowNEON(dst *float32, src *uint16, n int)
TEXT ·f16rowNEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	CBZ  R2, f16rowdone

f16rowloop:
	VLD1.P 16(R1), [V0.H8]
	FCVTL4S(0, 1)
	FCVTL24S(0, 2)
	VST1.P [V1.S4, V2.S4], 32(R0)
	SUBS   $8, R2
	BNE    f16rowloop

f16rowdone:
	RET

// func bf16rowNEON(dst *float32, src *uint16, n int)
TEXT ·bf16rowNEON(SB), NOSPLIT, $0-24
	MOVD dst+0(FP), R0
	MOVD src+8(FP), R1
	MOVD n+16(FP), R2
	CBZ  R2, bf16rowdone

bf16rowloop:
	VLD1.P 16(R1), [V0.H8]
	SHLL4S(0, 1)
	SHLL24S(0, 2)
	VST1.P [V1.S4, V2.S4], 32(R0)
	SUBS   $8, R2
	BNE    bf16rowloop

bf16rowdone:
	RET

// Q8LOAD loads block b's activations (V0, V1), d_x broadcast (V2), the
// four weight scales (V3.H[0..3]) and quants (V4/V5, V6/V7, V12/V13,
// V14/V15), advancing every pointer to the next block.
#define Q8LOAD \
	VLD1.P  32(R0), [V0.B16, V1.B16]; \
	VLD1R.P 4(R1), [V2.S4]; \
	VLD1.P  2(R2), V3.H[0]; \
	VLD1.P  2(R3), V3.H[1]; \
	VLD1.P  2(R4), V3.H[2]; \
	VLD1.P  2(R5), V3.H[3]; \
	VLD1.P  32(R2), [V4.B16, V5.B16]; \
	VLD1.P  32(R3), [V6.B16, V7.B16]; \
	VLD1.P  32(R4), [V12.B16, V13.B16]; \
	VLD1.P  32(R5), [V14.B16, V15.B16]

// Q8SCALE adds float32(Σ of row r's block, lane r of V18) ·
// round32(d_w·d_x) to lane r of V31.
#define Q8SCALE \
	VADDP   V9.S4, V8.S4, V16.S4; \
	VADDP   V11.S4, V10.S4, V17.S4; \
	VADDP   V17.S4, V16.S4, V18.S4; \
	SCVTF4S(18, 18); \
	FCVTL4S(3, 3); \
	FMUL4S(2, 3, 3); \
	VFMLA   V18.S4, V3.S4, V31.S4

// func q8dot4SDOT(xq *int8, xd *float32, w0, w1, w2, w3 *byte, nb int, out *[4]float32)
TEXT ·q8dot4SDOT(SB), NOSPLIT, $0-64
	Q8ARGS
	CBZ R6, sdotdone

sdotloop:
	Q8LOAD
	ZERO4(V8, V9, V10, V11)
	SDOT4S(0, 4, 8)
	SDOT4S(1, 5, 8)
	SDOT4S(0, 6, 9)
	SDOT4S(1, 7, 9)
	SDOT4S(0, 12, 10)
	SDOT4S(1, 13, 10)
	SDOT4S(0, 14, 11)
	SDOT4S(1, 15, 11)
	Q8SCALE
	SUBS $1, R6
	BNE  sdotloop

sdotdone:
	VST1 [V31.S4], (R7)
	RET

// Q8ROW sums the 32 products of weights Vlo/Vhi with the activations
// (V0/V1) into the four int32 lanes of Vacc (SMULL to int16, |w·q| ≤
// 128·127, then SADALP).
#define Q8ROW(lo, hi, acc) \
	SMULL8H(0, lo, 20); \
	SMULL28H(0, lo, 21); \
	SMULL8H(1, hi, 22); \
	SMULL28H(1, hi, 23); \
	SADALP4S(20, acc); \
	SADALP4S(21, acc); \
	SADALP4S(22, acc); \
	SADALP4S(23, acc)

// func q8dot4NEON(xq *int8, xd *float32, w0, w1, w2, w3 *byte, nb int, out *[4]float32)
TEXT ·q8dot4NEON(SB), NOSPLIT, $0-64
	Q8ARGS
	CBZ R6, q8done

q8loop:
	Q8LOAD
	ZERO4(V8, V9, V10, V11)
	Q8ROW(4, 5, 8)
	Q8ROW(6, 7, 9)
	Q8ROW(12, 13, 10)
	Q8ROW(14, 15, 11)
	Q8SCALE
	SUBS $1, R6
	BNE  q8loop

q8done:
	VST1 [V31.S4], (R7)
	RET

// Q40LOAD loads block b's activations (V0, V1), d_x broadcast (V2), the
// weight scale (V3.H[0]) and quants as int8 q−8 (V4: elements 0..15 from
// the low nibbles, V5: 16..31 from the high ones; V9 holds 0x0F, V10 8),
// advancing every pointer to the next block.
#define Q40LOAD \
	VLD1.P  32(R0), [V0.B16, V1.B16]; \
	VLD1R.P 4(R1), [V2.S4]; \
	VLD1.P  2(R2), V3.H[0]; \
	VLD1.P  16(R2), [V6.B16]; \
	VAND    V9.B16, V6.B16, V4.B16; \
	VUSHR   $4, V6.B16, V5.B16; \
	VSUB    V10.B16, V4.B16, V4.B16; \
	VSUB    V10.B16, V5.B16, V5.B16

// Q40SCALE adds float32(Σ of the block, the lanes of V8) ·
// round32(d_w·d_x) to lane 0 of V31 (the other lanes are not used).
#define Q40SCALE \
	VADDV   V8.S4, V8; \
	SCVTF4S(8, 8); \
	FCVTL4S(3, 3); \
	FMUL4S(2, 3, 3); \
	VFMLA   V8.S4, V3.S4, V31.S4

// func q40dotSDOT(xq *int8, xd *float32, w *byte, nb int, out *float32)
TEXT ·q40dotSDOT(SB), NOSPLIT, $0-40
	Q40ARGS
	CBZ R6, q40sdone

q40sloop:
	Q40LOAD
	VEOR V8.B16, V8.B16, V8.B16
	SDOT4S(0, 4, 8)
	SDOT4S(1, 5, 8)
	Q40SCALE
	SUBS $1, R6
	BNE  q40sloop

q40sdone:
	FMOVS F31, 0(R7)
	RET

// func q40dotNEON(xq *int8, xd *float32, w *byte, nb int, out *float32)
TEXT ·q40dotNEON(SB), NOSPLIT, $0-40
	Q40ARGS
	CBZ R6, q40done

q40loop:
	Q40LOAD
	VEOR V8.B16, V8.B16, V8.B16
	Q8ROW(4, 5, 8)
	Q40SCALE
	SUBS $1, R6
	BNE  q40loop

q40done:
	FMOVS F31, 0(R7)
	RET

// Q4KPAIR sums sub-blocks 2p (low nibbles of the 32 bytes at R2) and 2p+1
// (high nibbles) of a Q4_K super-block with their 32 activations (R0),
// storing the two int32 sums at R7; CALC(w, x, acc) adds Σ w·x of 16 bytes
// to the lanes of acc.
#define Q4KPAIR(CALC) \
	VLD1.P 32(R2), [V6.B16, V7.B16]; \
	VLD1.P 64(R0), [V0.B16, V1.B16, V2.B16, V3.B16]; \
	VAND   V9.B16, V6.B16, V4.B16; \
	VAND   V9.B16, V7.B16, V5.B16; \
	VUSHR  $4, V6.B16, V6.B16; \
	VUSHR  $4, V7.B16, V7.B16; \
	VEOR   V8.B16, V8.B16, V8.B16; \
	VEOR   V10.B16, V10.B16, V10.B16; \
	CALC(4, 0, 8); \
	CALC(5, 1, 8); \
	CALC(6, 2, 10); \
	CALC(7, 3, 10); \
	VADDV  V8.S4, V8; \
	VADDV  V10.S4, V10; \
	FMOVS  F8, 0(R7); \
	FMOVS  F10, 4(R7); \
	ADD    $8, R7

#define SDOTCALC(w, x, acc) SDOT4S(x, w, acc)

// SMULLCALC: SMULL/SADALP (|w·x| ≤ 32·127), temporaries V24, V25.
#define SMULLCALC(w, x, acc) \
	SMULL8H(x, w, 24); \
	SMULL28H(x, w, 25); \
	SADALP4S(24, acc); \
	SADALP4S(25, acc)

// func q4ksubSDOT(xq *int8, qs *byte, out *[8]int32)
TEXT ·q4ksubSDOT(SB), NOSPLIT, $0-24
	MOVD  xq+0(FP), R0
	MOVD  qs+8(FP), R2
	MOVD  out+16(FP), R7
	VMOVI $15, V9.B16
	Q4KPAIR(SDOTCALC)
	Q4KPAIR(SDOTCALC)
	Q4KPAIR(SDOTCALC)
	Q4KPAIR(SDOTCALC)
	RET

// func q4ksubNEON(xq *int8, qs *byte, out *[8]int32)
TEXT ·q4ksubNEON(SB), NOSPLIT, $0-24
	MOVD  xq+0(FP), R0
	MOVD  qs+8(FP), R2
	MOVD  out+16(FP), R7
	VMOVI $15, V9.B16
	Q4KPAIR(SMULLCALC)
	Q4KPAIR(SMULLCALC)
	Q4KPAIR(SMULLCALC)
	Q4KPAIR(SMULLCALC)
	RET

// Q6KSUM2(CALC, x0, x1) sums the 16 quants of V6 with activations Vx0 and
// those of V7 with Vx1, storing the two int32 sums at R7.
#define Q6KSUM2(CALC, x0, x1) \
	VSUB   V30.B16, V6.B16, V6.B16; \
	VSUB   V30.B16, V7.B16, V7.B16; \
	VEOR   V10.B16, V10.B16, V10.B16; \
	VEOR   V11.B16, V11.B16, V11.B16; \
	CALC(6, x0, 10); \
	CALC(7, x1, 11); \
	VADDV  V10.S4, V10; \
	VADDV  V11.S4, V11; \
	FMOVS  F10, 0(R7); \
	FMOVS  F11, 4(R7); \
	ADD    $8, R7

// Q6KHALF sums the eight 16-value sub-blocks of one 128-value half of a
// Q6_K super-block: ql (64 bytes at R2) in V0..V3, qh (32 bytes at R3) in
// V4, V5, activations (R0) in V16..V23; V28 = 0x0F, V29 = 3, V30 = 32.
#define Q6KHALF(CALC) \
	VLD1.P 64(R2), [V0.B16, V1.B16, V2.B16, V3.B16]; \
	VLD1.P 32(R3), [V4.B16, V5.B16]; \
	VLD1.P 64(R0), [V16.B16, V17.B16, V18.B16, V19.B16]; \
	VLD1.P 64(R0), [V20.B16, V21.B16, V22.B16, V23.B16]; \
	VAND   V28.B16, V0.B16, V6.B16; \
	VAND   V28.B16, V1.B16, V7.B16; \
	VAND   V29.B16, V4.B16, V8.B16; \
	VAND   V29.B16, V5.B16, V9.B16; \
	VSHL   $4, V8.B16, V8.B16; \
	VSHL   $4, V9.B16, V9.B16; \
	VORR   V8.B16, V6.B16, V6.B16; \
	VORR   V9.B16, V7.B16, V7.B16; \
	Q6KSUM2(CALC, 16, 17); \
	VAND   V28.B16, V2.B16, V6.B16; \
	VAND   V28.B16, V3.B16, V7.B16; \
	VUSHR  $2, V4.B16, V8.B16; \
	VUSHR  $2, V5.B16, V9.B16; \
	VAND   V29.B16, V8.B16, V8.B16; \
	VAND   V29.B16, V9.B16, V9.B16; \
	VSHL   $4, V8.B16, V8.B16; \
	VSHL   $4, V9.B16, V9.B16; \
	VORR   V8.B16, V6.B16, V6.B16; \
	VORR   V9.B16, V7.B16, V7.B16; \
	Q6KSUM2(CALC, 18, 19); \
	VUSHR  $4, V0.B16, V6.B16; \
	VUSHR  $4, V1.B16, V7.B16; \
	VUSHR  $4, V4.B16, V8.B16; \
	VUSHR  $4, V5.B16, V9.B16; \
	VAND   V29.B16, V8.B16, V8.B16; \
	VAND   V29.B16, V9.B16, V9.B16; \
	VSHL   $4, V8.B16, V8.B16; \
	VSHL   $4, V9.B16, V9.B16; \
	VORR   V8.B16, V6.B16, V6.B16; \
	VORR   V9.B16, V7.B16, V7.B16; \
	Q6KSUM2(CALC, 20, 21); \
	VUSHR  $4, V2.B16, V6.B16; \
	VUSHR  $4, V3.B16, V7.B16; \
	VUSHR  $6, V4.B16, V8.B16; \
	VUSHR  $6, V5.B16, V9.B16; \
	VSHL   $4, V8.B16, V8.B16; \
	VSHL   $4, V9.B16, V9.B16; \
	VORR   V8.B16, V6.B16, V6.B16; \
	VORR   V9.B16, V7.B16, V7.B16; \
	Q6KSUM2(CALC, 22, 23)

// func q6ksubSDOT(xq *int8, ql, qh *byte, out *[16]int32)
TEXT ·q6ksubSDOT(SB), NOSPLIT, $0-32
	Q6KARGS
	Q6KHALF(SDOTCALC)
	Q6KHALF(SDOTCALC)
	RET

// func q6ksubNEON(xq *int8, ql, qh *byte, out *[16]int32)
TEXT ·q6ksubNEON(SB), NOSPLIT, $0-32
	Q6KARGS
	Q6KHALF(SMULLCALC)
	Q6KHALF(SMULLCALC)
	RET
