//go:build amd64

#include "textflag.h"

// func q8kMaxAVX512(x *float32) uint32
//
// The largest of the 256 values' |v| bits (sign cleared) as unsigned
// integers: quantizeRowQ8K's branch-free maximum.
TEXT ·q8kMaxAVX512(SB), NOSPLIT, $0-12
	MOVQ         x+0(FP), SI
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z1
	VPXORD       Z0, Z0, Z0
	MOVQ         $16, CX

mloop:
	VPANDD  (SI), Z1, Z2
	VPMAXUD Z2, Z0, Z0
	ADDQ    $64, SI
	DECQ    CX
	JNZ     mloop
	VEXTRACTI64X4 $1, Z0, Y2
	VPMAXUD       Y2, Y0, Y0
	VEXTRACTI128  $1, Y0, X2
	VPMAXUD       X2, X0, X0
	VPSHUFD       $0x4E, X0, X2
	VPMAXUD       X2, X0, X0
	VPSHUFD       $0xB1, X0, X2
	VPMAXUD       X2, X0, X0
	VMOVD         X0, AX
	MOVL          AX, ret+8(FP)
	VZEROUPPER
	RET

// func q8kBlockAVX512(x *float32, id float32, q *int8, bs *int16)
//
// quantizeScaledQ8K's loop for one block of 256 with id = 1/d: per value
// r = float32(float32(v·id)+1.5·2²³)−1.5·2²³ (round half even), clamped
// to ±127 (VCVTTPS2DQ of the integral r; a NaN gives −2³¹, as Go's
// int32 conversion on amd64), the bytes to q and each 16 values' sum to
// bs: quantizeScaledQ8K's bits.
TEXT ·q8kBlockAVX512(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	VBROADCASTSS id+8(FP), Z1
	MOVQ         q+16(FP), DI
	MOVQ         bs+24(FP), DX
	MOVL         $0x4B400000, AX
	VPBROADCASTD AX, Z3
	MOVL         $127, AX
	VPBROADCASTD AX, Z4
	MOVL         $-127, AX
	VPBROADCASTD AX, Z5
	MOVQ         $16, CX

qloop:
	VMULPS        (SI), Z1, Z2
	VADDPS        Z3, Z2, Z2
	VSUBPS        Z3, Z2, Z2
	VCVTTPS2DQ    Z2, Z2
	VPMINSD       Z4, Z2, Z2
	VPMAXSD       Z5, Z2, Z2
	VPMOVDB       Z2, (DI)
	VEXTRACTI64X4 $1, Z2, Y6
	VPADDD        Y6, Y2, Y2
	VEXTRACTI128  $1, Y2, X6
	VPADDD        X6, X2, X2
	VPSHUFD       $0x4E, X2, X6
	VPADDD        X6, X2, X2
	VPSHUFD       $0xB1, X2, X6
	VPADDD        X6, X2, X2
	VMOVD         X2, AX
	MOVW          AX, (DX)
	ADDQ          $64, SI
	ADDQ          $16, DI
	ADDQ          $2, DX
	DECQ          CX
	JNZ           qloop
	VZEROUPPER
	RET
