//go:build amd64

#include "textflag.h"
#include "treduce_amd64.h"

// Attention value sums (attention.go): o[d] = fma(v_p[d], s[p], o[d]) for p
// ascending, the chain vaxpy4 and vaxpy1 compute per element, with o held
// in registers across all positions. v_p = base + offs[p] (in floats).

// EXPCONSTS loads EXP8's p0…p3 from c (R8) into Y10…Y13.
#define EXPCONSTS \
	VMOVUPS 192(R8), Y10; \
	VMOVUPS 224(R8), Y11; \
	VMOVUPS 256(R8), Y12; \
	VMOVUPS 288(R8), Y13

// EXP8 sets Y4 to expf(x − m) of the 8 floats at (DI)(AX*4) (m in Y15,
// c's constants at R8, p0…p3 in Y10…Y13; p4 read from c): expSubAVX512's
// steps on 8 lanes. Clobbers Y0–Y9.
#define EXP8 \
	VMOVUPS     (DI)(AX*4), Y0 \
	EXP8Y0

// EXP8Y0 is EXP8 on the 8 floats x in Y0.
#define EXP8Y0 \
	VSUBPS      Y15, Y0, Y0 \
	VMOVAPS     Y0, Y7 \
	VCMPPS      $3, Y0, Y0, Y6 \
	VMINPS      0(R8), Y0, Y0 \
	VCMPPS      $1, 32(R8), Y0, Y5 \
	VMULPS      64(R8), Y0, Y1 \
	VADDPS      96(R8), Y1, Y1 \
	VROUNDPS    $9, Y1, Y1 \
	VMULPS      128(R8), Y1, Y2 \
	VSUBPS      Y2, Y0, Y0 \
	VMULPS      160(R8), Y1, Y2 \
	VSUBPS      Y2, Y0, Y0 \
	VMULPS      Y0, Y0, Y3 \
	VMULPS      Y10, Y0, Y4 \
	VADDPS      Y11, Y4, Y4 \
	VMULPS      Y0, Y4, Y4 \
	VADDPS      Y12, Y4, Y4 \
	VMULPS      Y0, Y4, Y4 \
	VADDPS      Y13, Y4, Y4 \
	VMULPS      Y0, Y4, Y4 \
	VADDPS      320(R8), Y4, Y4 \
	VMULPS      Y0, Y4, Y4 \
	VADDPS      352(R8), Y4, Y4 \
	VMULPS      Y3, Y4, Y4 \
	VADDPS      Y0, Y4, Y4 \
	VADDPS      384(R8), Y4, Y4 \
	VCVTTPS2DQ  Y1, Y2 \
	VPCMPGTD    416(R8), Y2, Y8 \
	VADDPS      Y4, Y4, Y9 \
	VBLENDVPS   Y8, Y9, Y4, Y4 \
	VPADDD      Y8, Y2, Y2 \
	VPADDD      416(R8), Y2, Y2 \
	VPSLLD      $23, Y2, Y2 \
	VMULPS      Y2, Y4, Y4 \
	VANDNPS     Y4, Y5, Y4 \
	VBLENDVPS   Y6, Y7, Y4, Y4

// func wsum64AVX512(o *float32, s *float32, base *float32, offs *int, n int)
TEXT ·wsum64AVX512(SB), NOSPLIT, $0-40
	MOVQ    o+0(FP), DI
	MOVQ    s+8(FP), SI
	MOVQ    base+16(FP), R8
	MOVQ    offs+24(FP), R9
	MOVQ    n+32(FP), CX
	VMOVUPS 0(DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	XORQ    AX, AX

loop:
	CMPQ         AX, CX
	JGE          done
	MOVQ         (R9)(AX*8), R10
	LEAQ         (R8)(R10*4), R10
	VBROADCASTSS (SI)(AX*4), Z4
	VFMADD231PS  0(R10), Z4, Z0
	VFMADD231PS  64(R10), Z4, Z1
	VFMADD231PS  128(R10), Z4, Z2
	VFMADD231PS  192(R10), Z4, Z3
	INCQ         AX
	JMP          loop

done:
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VZEROUPPER
	RET

// func wsum32AVX2(o *float32, s *float32, base *float32, offs *int, n int)
TEXT ·wsum32AVX2(SB), NOSPLIT, $0-40
	MOVQ    o+0(FP), DI
	MOVQ    s+8(FP), SI
	MOVQ    base+16(FP), R8
	MOVQ    offs+24(FP), R9
	MOVQ    n+32(FP), CX
	VMOVUPS 0(DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	XORQ    AX, AX

loop:
	CMPQ         AX, CX
	JGE          done
	MOVQ         (R9)(AX*8), R10
	LEAQ         (R8)(R10*4), R10
	VBROADCASTSS (SI)(AX*4), Y4
	VFMADD231PS  0(R10), Y4, Y0
	VFMADD231PS  32(R10), Y4, Y1
	VFMADD231PS  64(R10), Y4, Y2
	VFMADD231PS  96(R10), Y4, Y3
	INCQ         AX
	JMP          loop

done:
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VZEROUPPER
	RET

// EXPCONSTS16 broadcasts expConsts at R8 into Z16…Z28 (hi, lo, log2e, 0.5,
// c1, c2, p0…p5, 1) and zeroes Z29: EXP16's constants.
#define EXPCONSTS16 \
	VBROADCASTSS 0(R8), Z16; \
	VBROADCASTSS 4(R8), Z17; \
	VBROADCASTSS 8(R8), Z18; \
	VBROADCASTSS 12(R8), Z19; \
	VBROADCASTSS 16(R8), Z20; \
	VBROADCASTSS 20(R8), Z21; \
	VBROADCASTSS 24(R8), Z22; \
	VBROADCASTSS 28(R8), Z23; \
	VBROADCASTSS 32(R8), Z24; \
	VBROADCASTSS 36(R8), Z25; \
	VBROADCASTSS 40(R8), Z26; \
	VBROADCASTSS 44(R8), Z27; \
	VBROADCASTSS 48(R8), Z28; \
	VPXORD       Z29, Z29, Z29

// EXP16 sets Z4 to expf(x − m) of the 16 floats x at (DI)(AX*4) (m in
// Z31, expSubAVX512's constants in Z16…Z29): expf's operations one by
// one. Clobbers Z0…Z7.
#define EXP16 \
	VMOVUPS     (DI)(AX*4), Z0; \
	VSUBPS      Z31, Z0, Z0; \
	VCMPPS      $3, Z0, Z0, K1; \
	VMOVAPS     Z0, Z7; \
	VMINPS      Z16, Z0, Z0; \
	VCMPPS      $1, Z17, Z0, K2; \
	VMULPS      Z18, Z0, Z1; \
	VADDPS      Z19, Z1, Z1; \
	VRNDSCALEPS $9, Z1, Z1; \
	VMULPS      Z20, Z1, Z2; \
	VSUBPS      Z2, Z0, Z0; \
	VMULPS      Z21, Z1, Z2; \
	VSUBPS      Z2, Z0, Z0; \
	VMULPS      Z0, Z0, Z3; \
	VMULPS      Z22, Z0, Z4; \
	VADDPS      Z23, Z4, Z4; \
	VMULPS      Z0, Z4, Z4; \
	VADDPS      Z24, Z4, Z4; \
	VMULPS      Z0, Z4, Z4; \
	VADDPS      Z25, Z4, Z4; \
	VMULPS      Z0, Z4, Z4; \
	VADDPS      Z26, Z4, Z4; \
	VMULPS      Z0, Z4, Z4; \
	VADDPS      Z27, Z4, Z4; \
	VMULPS      Z3, Z4, Z4; \
	VADDPS      Z0, Z4, Z4; \
	VADDPS      Z28, Z4, Z4; \
	VSCALEFPS   Z1, Z4, Z4; \
	VMOVAPS     Z29, K2, Z4; \
	VMOVAPS     Z7, K1, Z4

// func expSubAVX512(x *float32, m float32, n int, c *[13]float32)
// x[i] = expf(x[i] − m) for i < n (a multiple of 16), the operations of
// expf (ops.go) one by one in float32 (no fused multiply-add), so the same
// bits; the final y·2^fx is VSCALEFPS, one rounding as expf's.
TEXT ·expSubAVX512(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), DI
	VBROADCASTSS m+8(FP), Z31
	MOVQ         n+16(FP), CX
	MOVQ         c+24(FP), R8
	EXPCONSTS16
	XORQ         AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	EXP16
	VMOVUPS     Z4, (DI)(AX*4)
	ADDQ        $16, AX
	JMP         loop

done:
	VZEROUPPER
	RET

// func expSumAVX512(x *float32, m float32, n int, c *[13]float32, s *[4]float64)
// expSubAVX512 that also sums the results, widened to float64, into s[i
// mod 4] in position order (online's four chains: lanes of positions ≡
// 0…3 mod 4, each from +0; expSumAVX2's sums).
TEXT ·expSumAVX512(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), DI
	VBROADCASTSS m+8(FP), Z31
	MOVQ         n+16(FP), CX
	MOVQ         c+24(FP), R8
	MOVQ         s+32(FP), DX
	EXPCONSTS16
	VXORPD       Y30, Y30, Y30
	XORQ         AX, AX

sumloop:
	CMPQ          AX, CX
	JGE           sumdone
	EXP16
	VMOVUPS       Z4, (DI)(AX*4)
	VCVTPS2PD     Y4, Z8
	VEXTRACTF64X4 $1, Z4, Y9
	VCVTPS2PD     Y9, Z9
	VADDPD        Y8, Y30, Y30
	VEXTRACTF64X4 $1, Z8, Y8
	VADDPD        Y8, Y30, Y30
	VADDPD        Y9, Y30, Y30
	VEXTRACTF64X4 $1, Z9, Y9
	VADDPD        Y9, Y30, Y30
	ADDQ          $16, AX
	JMP           sumloop

sumdone:
	VMOVUPD Y30, (DX)
	VZEROUPPER
	RET

// func scores4AVX512(x0, x1, x2, x3 *float32, base *float32, offs *int, ng int, hd int, out *float32)
// For each of ng groups of four keys (key j of group g at base+offs[4g+j]
// floats), the 4×4 tile of dot4x4AVX512 over hd floats (a multiple of 16):
// the score of query row r and key 4g+j goes to out[64r+4g+j] (rows of the
// attention task's score block, attnKeys floats apart).
TEXT ·scores4AVX512(SB), NOSPLIT, $0-72
	MOVQ x0+0(FP), SI
	MOVQ x1+8(FP), DX
	MOVQ x2+16(FP), BX
	MOVQ x3+24(FP), R12
	MOVQ base+32(FP), R13
	MOVQ offs+40(FP), R14
	MOVQ ng+48(FP), R15
	MOVQ hd+56(FP), CX
	MOVQ out+64(FP), DI

grp:
	TESTQ R15, R15
	JEQ   end
	MOVQ  0(R14), R8
	LEAQ  (R13)(R8*4), R8
	MOVQ  8(R14), R9
	LEAQ  (R13)(R9*4), R9
	MOVQ  16(R14), R10
	LEAQ  (R13)(R10*4), R10
	MOVQ  24(R14), R11
	LEAQ  (R13)(R11*4), R11
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	VXORPS Y12, Y12, Y12
	VXORPS Y13, Y13, Y13
	VXORPS Y14, Y14, Y14
	VXORPS Y15, Y15, Y15
	XORQ AX, AX

sloop:
	CMPQ    AX, CX
	JGE     sdone
	VMOVUPS (R8)(AX*4), Z16
	VMOVUPS (R9)(AX*4), Z17
	VMOVUPS (R10)(AX*4), Z18
	VMOVUPS (R11)(AX*4), Z19
	VMOVUPS (SI)(AX*4), Z20
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z20, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z20, Z3
	VMOVUPS (DX)(AX*4), Z21
	VFMADD231PS Z16, Z21, Z4
	VFMADD231PS Z17, Z21, Z5
	VFMADD231PS Z18, Z21, Z6
	VFMADD231PS Z19, Z21, Z7
	VMOVUPS (BX)(AX*4), Z22
	VFMADD231PS Z16, Z22, Z8
	VFMADD231PS Z17, Z22, Z9
	VFMADD231PS Z18, Z22, Z10
	VFMADD231PS Z19, Z22, Z11
	VMOVUPS (R12)(AX*4), Z23
	VFMADD231PS Z16, Z23, Z12
	VFMADD231PS Z17, Z23, Z13
	VFMADD231PS Z18, Z23, Z14
	VFMADD231PS Z19, Z23, Z15
	ADDQ $16, AX
	JMP  sloop

sdone:
	TREDUCE16SUM
	VMOVUPS       X6, (DI)
	VEXTRACTF32X4 $1, Z6, 256(DI)
	VEXTRACTF32X4 $2, Z6, 512(DI)
	VEXTRACTF32X4 $3, Z6, 768(DI)
	ADDQ $32, R14
	ADDQ $16, DI
	DECQ R15
	JMP  grp

end:
	VZEROUPPER
	RET

// func wsum4x64AVX512(o0, o1, o2, o3 *float32, s0, s1, s2, s3 *float32, base *float32, offs *int, n int)
// wsum64AVX512 for four outputs at once: each value row (64 floats at
// base+offs[p]) is loaded once for the four; every element keeps its chain
// (a fused multiply-add per position, in position order).
TEXT ·wsum4x64AVX512(SB), NOSPLIT, $0-88
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

w4loop:
	CMPQ         AX, CX
	JGE          w4done
	MOVQ         (R9)(AX*8), R10
	LEAQ         (R8)(R10*4), R10
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
	JMP          w4loop

w4done:
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

// func expSubAVX2(x *float32, m float32, n int, c *[14][8]float32)
// x[i] = expf(x[i] − m) for i < n (a multiple of 8), expSubAVX512's steps
// on 8 lanes (c: expConsts broadcast to 8 lanes each, then 127 as an
// int32); the final y·2^fx as expf writes it: y doubled where fx = 128,
// then one multiplication by 2^n built in the exponent field.
TEXT ·expSubAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), DI
	VBROADCASTSS m+8(FP), Y15
	MOVQ         n+16(FP), CX
	MOVQ         c+24(FP), R8
	EXPCONSTS
	XORQ         AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	EXP8
	VMOVUPS     Y4, (DI)(AX*4)
	ADDQ        $8, AX
	JMP         loop

done:
	VZEROUPPER
	RET

// func expSumAVX2(x *float32, m float32, n int, c *[14][8]float32, s *[4]float64)
// expSubAVX2 that also sums the results, widened to float64, into s[i mod
// 4] in position order (online's four chains: lanes of positions ≡ 0…3
// mod 4, each from +0).
TEXT ·expSumAVX2(SB), NOSPLIT, $0-40
	MOVQ         x+0(FP), DI
	VBROADCASTSS m+8(FP), Y15
	MOVQ         n+16(FP), CX
	MOVQ         c+24(FP), R8
	MOVQ         s+32(FP), DX
	VXORPD       Y14, Y14, Y14
	EXPCONSTS
	XORQ         AX, AX

sloop:
	CMPQ        AX, CX
	JGE         sdone
	EXP8
	VMOVUPS     Y4, (DI)(AX*4)
	VCVTPS2PD   X4, Y0
	VADDPD      Y0, Y14, Y14
	VEXTRACTF128 $1, Y4, X1
	VCVTPS2PD   X1, Y1
	VADDPD      Y1, Y14, Y14
	ADDQ        $8, AX
	JMP         sloop

sdone:
	VMOVUPD     Y14, (DX)
	VZEROUPPER
	RET

// func scaleMaxAVX2(x *float32, n int, scale float32, nan *int32) float32
// x[i] = round32(x[i]·scale) for i < n (a multiple of 8, > 0); returns
// their maximum (VMAXPS; which zero of ±0 is unspecified) and sets *nan
// to −1 where one of them is NaN (VMAXPS would not keep it), else 0.
TEXT ·scaleMaxAVX2(SB), NOSPLIT, $0-36
	MOVQ         x+0(FP), DI
	MOVQ         n+8(FP), CX
	VBROADCASTSS scale+16(FP), Y15
	MOVQ         nan+24(FP), DX
	VMULPS       (DI), Y15, Y0
	VMOVUPS      Y0, (DI)
	VCMPPS       $3, Y0, Y0, Y2
	MOVQ         $8, AX

mloop:
	CMPQ        AX, CX
	JGE         mdone
	VMULPS      (DI)(AX*4), Y15, Y1
	VMOVUPS     Y1, (DI)(AX*4)
	VMAXPS      Y1, Y0, Y0
	VCMPPS      $3, Y1, Y1, Y3
	VORPS       Y3, Y2, Y2
	ADDQ        $8, AX
	JMP         mloop

mdone:
	VEXTRACTF128 $1, Y0, X1
	VMAXPS      X1, X0, X0
	VMOVHLPS    X0, X0, X1
	VMAXPS      X1, X0, X0
	VMOVSHDUP   X0, X1
	VMAXSS      X1, X0, X0
	VMOVSS      X0, ret+32(FP)
	VMOVMSKPS   Y2, AX
	NEGL        AX
	SBBL        AX, AX
	MOVL        AX, (DX)
	VZEROUPPER
	RET

// SILU8 sets Y0 to silu(g) = g/(1 + expf(−g − 0)) for the 8 floats g at
// (SI)(AX*4) (Y15 zero, expSubAVX2's constants as EXP8 takes them): the
// Go steps of siluRow on 8 lanes. −g is 0 − g: it differs from the
// negation only for +0 (expf(±0) = 1) and in a NaN's sign (the result is
// then g's NaN either way). Clobbers Y1–Y9.
#define SILU8 \
	VSUBPS      (SI)(AX*4), Y15, Y0 \
	EXP8Y0; \
	VADDPS      384(R8), Y4, Y4 \
	VMOVUPS     (SI)(AX*4), Y0 \
	VDIVPS      Y4, Y0, Y0

// func siluMulAVX2(out, gate, u *float32, n int, c *[14][8]float32, ustep int)
// out[i] = silu(gate[i])·u[i] for i < n (a multiple of 8), siluRow's bits,
// u advancing ustep bytes every 8 values (0: the same 8 values, ones for
// SiLU alone: x·1 is x, NaN included); out may alias gate or u.
TEXT ·siluMulAVX2(SB), NOSPLIT, $0-48
	MOVQ         out+0(FP), DI
	MOVQ         gate+8(FP), SI
	MOVQ         u+16(FP), DX
	MOVQ         n+24(FP), CX
	MOVQ         c+32(FP), R8
	MOVQ         ustep+40(FP), R9
	VXORPS       Y15, Y15, Y15
	EXPCONSTS
	XORQ         AX, AX

mloop:
	CMPQ         AX, CX
	JGE          mdone
	SILU8
	VMULPS       (DX), Y0, Y0
	VMOVUPS      Y0, (DI)(AX*4)
	ADDQ         R9, DX
	ADDQ         $8, AX
	JMP          mloop

mdone:
	VZEROUPPER
	RET
