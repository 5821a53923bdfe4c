//go:build amd64

#include "textflag.h"

// Attention value sums (attention.go): o[d] = fma(v_p[d], s[p], o[d]) for p
// ascending, the chain vaxpy4 and vaxpy1 compute per element, with o held
// in registers across all positions. v_p = base + offs[p] (in floats).

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

// func expSubAVX512(x *float32, m float32, n int, c *[13]float32)
// x[i] = expf(x[i] − m) for i < n (a multiple of 16), the operations of
// expf (ops.go) one by one in float32 (no fused multiply-add), so the same
// bits; the final y·2^fx is VSCALEFPS, one rounding as expf's.
TEXT ·expSubAVX512(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), DI
	VBROADCASTSS m+8(FP), Z31
	MOVQ         n+16(FP), CX
	MOVQ         c+24(FP), R8
	VBROADCASTSS 0(R8), Z16  // hi
	VBROADCASTSS 4(R8), Z17  // lo
	VBROADCASTSS 8(R8), Z18  // log2e
	VBROADCASTSS 12(R8), Z19 // 0.5
	VBROADCASTSS 16(R8), Z20 // c1
	VBROADCASTSS 20(R8), Z21 // c2
	VBROADCASTSS 24(R8), Z22 // p0
	VBROADCASTSS 28(R8), Z23 // p1
	VBROADCASTSS 32(R8), Z24 // p2
	VBROADCASTSS 36(R8), Z25 // p3
	VBROADCASTSS 40(R8), Z26 // p4
	VBROADCASTSS 44(R8), Z27 // p5
	VBROADCASTSS 48(R8), Z28 // 1
	VPXORD       Z29, Z29, Z29
	XORQ         AX, AX

loop:
	CMPQ        AX, CX
	JGE         done
	VMOVUPS     (DI)(AX*4), Z0
	VSUBPS      Z31, Z0, Z0
	VCMPPS      $3, Z0, Z0, K1
	VMOVAPS     Z0, Z7
	VMINPS      Z16, Z0, Z0
	VCMPPS      $1, Z17, Z0, K2
	VMULPS      Z18, Z0, Z1
	VADDPS      Z19, Z1, Z1
	VRNDSCALEPS $9, Z1, Z1
	VMULPS      Z20, Z1, Z2
	VSUBPS      Z2, Z0, Z0
	VMULPS      Z21, Z1, Z2
	VSUBPS      Z2, Z0, Z0
	VMULPS      Z0, Z0, Z3
	VMULPS      Z22, Z0, Z4
	VADDPS      Z23, Z4, Z4
	VMULPS      Z0, Z4, Z4
	VADDPS      Z24, Z4, Z4
	VMULPS      Z0, Z4, Z4
	VADDPS      Z25, Z4, Z4
	VMULPS      Z0, Z4, Z4
	VADDPS      Z26, Z4, Z4
	VMULPS      Z0, Z4, Z4
	VADDPS      Z27, Z4, Z4
	VMULPS      Z3, Z4, Z4
	VADDPS      Z0, Z4, Z4
	VADDPS      Z28, Z4, Z4
	VSCALEFPS   Z1, Z4, Z4
	VMOVAPS     Z29, K2, Z4
	VMOVAPS     Z7, K1, Z4
	VMOVUPS     Z4, (DI)(AX*4)
	ADDQ        $16, AX
	JMP         loop

done:
	VZEROUPPER
	RET
