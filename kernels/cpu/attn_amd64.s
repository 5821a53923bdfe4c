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
