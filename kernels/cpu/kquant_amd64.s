//go:build amd64

#include "textflag.h"
#include "prefetch_amd64.h"

// Integer products of Q4_0, Q4_K and Q6_K weights (kquant.go states their
// order), AVX2. Each returns one row's sum; HSUM8 as in dot_amd64.s.

#define KHSUM8(Y, X) \
	VEXTRACTF128 $1, Y, X14; \
	VADDPS       X14, X, X; \
	VMOVHLPS     X, X, X14; \
	VADDPS       X14, X, X; \
	VMOVSHDUP    X, X14; \
	VADDSS       X14, X, X

// func q40dotAVX2(xq *int8, xd *float32, w *byte, nb int, out *float32)
TEXT ·q40dotAVX2(SB), NOSPLIT, $0-40
	MOVQ xq+0(FP), SI
	MOVQ xd+8(FP), DX
	MOVQ w+16(FP), R8
	MOVQ nb+24(FP), CX
	MOVQ out+32(FP), DI
	MOVL         $0x00010001, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X14
	VPBROADCASTD X14, Y14
	MOVL         $0x08080808, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	VXORPS       Y0, Y0, Y0

loop:
	TESTQ        CX, CX
	JEQ          done
	VMOVDQU      2(R8), X5
	VPSRLW       $4, X5, X6
	VINSERTI128  $1, X6, Y5, Y5
	VPAND        Y14, Y5, Y5
	VPSUBB       Y13, Y5, Y5
	VMOVDQU      (SI), Y4
	VPSIGNB      Y5, Y4, Y6
	VPABSB       Y5, Y5
	VPMADDUBSW   Y6, Y5, Y5
	VPMADDWD     Y15, Y5, Y5
	VCVTDQ2PS    Y5, Y5
	MOVWLZX      (R8), BX
	VMOVD        BX, X7
	VCVTPH2PS    X7, X7
	VMULSS       (DX), X7, X7
	VBROADCASTSS X7, Y7
	VFMADD231PS  Y7, Y5, Y0
	ADDQ         $18, R8
	ADDQ         $32, SI
	ADDQ         $4, DX
	DECQ         CX
	JMP          loop

done:
	KHSUM8(Y0, X0)
	VMOVSS X0, (DI)
	VZEROUPPER
	RET

// q6ksc<>: the VPSHUFB mask that spreads a broadcast dword of two scale
// words over the lanes: word 0 in the low 128 bits, word 1 in the high.
DATA q6ksc<>+0(SB)/8, $0x0100010001000100
DATA q6ksc<>+8(SB)/8, $0x0100010001000100
DATA q6ksc<>+16(SB)/8, $0x0302030203020302
DATA q6ksc<>+24(SB)/8, $0x0302030203020302
GLOBL q6ksc<>(SB), RODATA|NOPTR, $32

// func q6kdotAVX2(xq *int8, xd *float32, w *byte, nb int, out *float32, pf int)
TEXT ·q6kdotAVX2(SB), NOSPLIT, $32-48
	MOVQ xq+0(FP), SI
	MOVQ xd+8(FP), DX
	MOVQ w+16(FP), R8
	MOVQ nb+24(FP), CX
	MOVQ out+32(FP), DI
	MOVQ pf+40(FP), R14
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	MOVL         $0x30303030, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Y13
	MOVL         $0x20202020, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Y12
	VXORPS       Y0, Y0, Y0

loop:
	TESTQ CX, CX
	JEQ   done
	PFLINES4(R8, R14)
	VPXOR Y1, Y1, Y1
	// The 16 scales as words in the frame: dword c = chunk c's two.
	VPMOVSXBW   192(R8), Y3
	VMOVDQU     Y3, 0(SP)
	VMOVDQU 0(R8), Y4
	VMOVDQU 32(R8), Y5
	VMOVDQU 128(R8), Y6
	VPAND       Y15, Y4, Y8
	VPSLLW      $4, Y6, Y9
	VPAND       Y13, Y9, Y9
	VPOR        Y9, Y8, Y8
	VMOVDQU     0(SI), Y7
	VPMADDUBSW  Y7, Y8, Y8
	VPMADDUBSW  Y7, Y12, Y7
	VPSUBW      Y7, Y8, Y8
	VPBROADCASTD 0(SP), Y2
	VPSHUFB     q6ksc<>(SB), Y2, Y2
	VPMADDWD    Y2, Y8, Y8
	VPADDD      Y8, Y1, Y1
	VPAND       Y15, Y5, Y8
	VPSLLW      $2, Y6, Y9
	VPAND       Y13, Y9, Y9
	VPOR        Y9, Y8, Y8
	VMOVDQU     32(SI), Y7
	VPMADDUBSW  Y7, Y8, Y8
	VPMADDUBSW  Y7, Y12, Y7
	VPSUBW      Y7, Y8, Y8
	VPBROADCASTD 4(SP), Y2
	VPSHUFB     q6ksc<>(SB), Y2, Y2
	VPMADDWD    Y2, Y8, Y8
	VPADDD      Y8, Y1, Y1
	VPSRLW      $4, Y4, Y8
	VPAND       Y15, Y8, Y8
	VPAND       Y13, Y6, Y9
	VPOR        Y9, Y8, Y8
	VMOVDQU     64(SI), Y7
	VPMADDUBSW  Y7, Y8, Y8
	VPMADDUBSW  Y7, Y12, Y7
	VPSUBW      Y7, Y8, Y8
	VPBROADCASTD 8(SP), Y2
	VPSHUFB     q6ksc<>(SB), Y2, Y2
	VPMADDWD    Y2, Y8, Y8
	VPADDD      Y8, Y1, Y1
	VPSRLW      $4, Y5, Y8
	VPAND       Y15, Y8, Y8
	VPSRLW      $2, Y6, Y9
	VPAND       Y13, Y9, Y9
	VPOR        Y9, Y8, Y8
	VMOVDQU     96(SI), Y7
	VPMADDUBSW  Y7, Y8, Y8
	VPMADDUBSW  Y7, Y12, Y7
	VPSUBW      Y7, Y8, Y8
	VPBROADCASTD 12(SP), Y2
	VPSHUFB     q6ksc<>(SB), Y2, Y2
	VPMADDWD    Y2, Y8, Y8
	VPADDD      Y8, Y1, Y1
	VMOVDQU 64(R8), Y4
	VMOVDQU 96(R8), Y5
	VMOVDQU 160(R8), Y6
	VPAND       Y15, Y4, Y8
	VPSLLW      $4, Y6, Y9
	VPAND       Y13, Y9, Y9
	VPOR        Y9, Y8, Y8
	VMOVDQU     128(SI), Y7
	VPMADDUBSW  Y7, Y8, Y8
	VPMADDUBSW  Y7, Y12, Y7
	VPSUBW      Y7, Y8, Y8
	VPBROADCASTD 16(SP), Y2
	VPSHUFB     q6ksc<>(SB), Y2, Y2
	VPMADDWD    Y2, Y8, Y8
	VPADDD      Y8, Y1, Y1
	VPAND       Y15, Y5, Y8
	VPSLLW      $2, Y6, Y9
	VPAND       Y13, Y9, Y9
	VPOR        Y9, Y8, Y8
	VMOVDQU     160(SI), Y7
	VPMADDUBSW  Y7, Y8, Y8
	VPMADDUBSW  Y7, Y12, Y7
	VPSUBW      Y7, Y8, Y8
	VPBROADCASTD 20(SP), Y2
	VPSHUFB     q6ksc<>(SB), Y2, Y2
	VPMADDWD    Y2, Y8, Y8
	VPADDD      Y8, Y1, Y1
	VPSRLW      $4, Y4, Y8
	VPAND       Y15, Y8, Y8
	VPAND       Y13, Y6, Y9
	VPOR        Y9, Y8, Y8
	VMOVDQU     192(SI), Y7
	VPMADDUBSW  Y7, Y8, Y8
	VPMADDUBSW  Y7, Y12, Y7
	VPSUBW      Y7, Y8, Y8
	VPBROADCASTD 24(SP), Y2
	VPSHUFB     q6ksc<>(SB), Y2, Y2
	VPMADDWD    Y2, Y8, Y8
	VPADDD      Y8, Y1, Y1
	VPSRLW      $4, Y5, Y8
	VPAND       Y15, Y8, Y8
	VPSRLW      $2, Y6, Y9
	VPAND       Y13, Y9, Y9
	VPOR        Y9, Y8, Y8
	VMOVDQU     224(SI), Y7
	VPMADDUBSW  Y7, Y8, Y8
	VPMADDUBSW  Y7, Y12, Y7
	VPSUBW      Y7, Y8, Y8
	VPBROADCASTD 28(SP), Y2
	VPSHUFB     q6ksc<>(SB), Y2, Y2
	VPMADDWD    Y2, Y8, Y8
	VPADDD      Y8, Y1, Y1
	VCVTDQ2PS    Y1, Y1
	MOVWLZX      208(R8), BX
	VMOVD        BX, X10
	VCVTPH2PS    X10, X10
	VMULSS       (DX), X10, X10
	VBROADCASTSS X10, Y10
	VFMADD231PS  Y10, Y1, Y0
	ADDQ         $210, R8
	ADDQ         $256, SI
	ADDQ         $4, DX
	DECQ         CX
	JMP          loop

done:
	KHSUM8(Y0, X0)
	VMOVSS X0, (DI)
	VZEROUPPER
	RET

// VPERMW indices of q6krowsVNNI: table p (64 bytes) holds 8 words each
// of 4p, 4p+1, 4p+2, 4p+3 (the scales of the four 16-value sub-blocks of
// a zmm of 64 values); then the per-word shifts that move the two high
// bits of a qh byte to bits 4–5 for the two chunks of a zmm: left 4 and 2
// (chunks 4k, 4k+1), right 0 and 2 (chunks 4k+2, 4k+3).
DATA q6kscidx<>+0(SB)/8, $0x0000000000000000
DATA q6kscidx<>+8(SB)/8, $0x0000000000000000
DATA q6kscidx<>+16(SB)/8, $0x0001000100010001
DATA q6kscidx<>+24(SB)/8, $0x0001000100010001
DATA q6kscidx<>+32(SB)/8, $0x0002000200020002
DATA q6kscidx<>+40(SB)/8, $0x0002000200020002
DATA q6kscidx<>+48(SB)/8, $0x0003000300030003
DATA q6kscidx<>+56(SB)/8, $0x0003000300030003
DATA q6kscidx<>+64(SB)/8, $0x0004000400040004
DATA q6kscidx<>+72(SB)/8, $0x0004000400040004
DATA q6kscidx<>+80(SB)/8, $0x0005000500050005
DATA q6kscidx<>+88(SB)/8, $0x0005000500050005
DATA q6kscidx<>+96(SB)/8, $0x0006000600060006
DATA q6kscidx<>+104(SB)/8, $0x0006000600060006
DATA q6kscidx<>+112(SB)/8, $0x0007000700070007
DATA q6kscidx<>+120(SB)/8, $0x0007000700070007
DATA q6kscidx<>+128(SB)/8, $0x0008000800080008
DATA q6kscidx<>+136(SB)/8, $0x0008000800080008
DATA q6kscidx<>+144(SB)/8, $0x0009000900090009
DATA q6kscidx<>+152(SB)/8, $0x0009000900090009
DATA q6kscidx<>+160(SB)/8, $0x000a000a000a000a
DATA q6kscidx<>+168(SB)/8, $0x000a000a000a000a
DATA q6kscidx<>+176(SB)/8, $0x000b000b000b000b
DATA q6kscidx<>+184(SB)/8, $0x000b000b000b000b
DATA q6kscidx<>+192(SB)/8, $0x000c000c000c000c
DATA q6kscidx<>+200(SB)/8, $0x000c000c000c000c
DATA q6kscidx<>+208(SB)/8, $0x000d000d000d000d
DATA q6kscidx<>+216(SB)/8, $0x000d000d000d000d
DATA q6kscidx<>+224(SB)/8, $0x000e000e000e000e
DATA q6kscidx<>+232(SB)/8, $0x000e000e000e000e
DATA q6kscidx<>+240(SB)/8, $0x000f000f000f000f
DATA q6kscidx<>+248(SB)/8, $0x000f000f000f000f
DATA q6kscidx<>+256(SB)/8, $0x0004000400040004
DATA q6kscidx<>+264(SB)/8, $0x0004000400040004
DATA q6kscidx<>+272(SB)/8, $0x0004000400040004
DATA q6kscidx<>+280(SB)/8, $0x0004000400040004
DATA q6kscidx<>+288(SB)/8, $0x0002000200020002
DATA q6kscidx<>+296(SB)/8, $0x0002000200020002
DATA q6kscidx<>+304(SB)/8, $0x0002000200020002
DATA q6kscidx<>+312(SB)/8, $0x0002000200020002
DATA q6kscidx<>+320(SB)/8, $0x0000000000000000
DATA q6kscidx<>+328(SB)/8, $0x0000000000000000
DATA q6kscidx<>+336(SB)/8, $0x0000000000000000
DATA q6kscidx<>+344(SB)/8, $0x0000000000000000
DATA q6kscidx<>+352(SB)/8, $0x0002000200020002
DATA q6kscidx<>+360(SB)/8, $0x0002000200020002
DATA q6kscidx<>+368(SB)/8, $0x0002000200020002
DATA q6kscidx<>+376(SB)/8, $0x0002000200020002
GLOBL q6kscidx<>(SB), RODATA|NOPTR, $384

// Q6KHALF computes the integer lanes of one half (128 values) of a Q6_K
// super-block into Z1: QL, QH, SC the offsets of its ql (64 bytes), qh (32
// bytes) and scales in the block at R8, XQ the offset of its activations
// at SI, ZA and ZB the scale words of its two zmm (VPERMW'd). Per zmm of
// 64 values (two of q6kdotAVX2's chunks): the 6-bit quants
// (ql & 15) | (qh shifted & 0x30), VPMADDUBSW with the activations less
// VPMADDUBSW of 32 with them (the same int16 pairs), VPDPWSSD with the
// sub-block scales (the same int32 per lane as VPMADDWD and VPADDD).
#define Q6KHALF(QL, QH, XQ, ZA, ZB) \
	VMOVDQU64       QL(R8), Z4; \
	VBROADCASTI64X4 QH(R8), Z5; \
	VPSLLVW         Z11, Z5, Z7; \
	VPANDD          Z13, Z7, Z7; \
	VPTERNLOGD      $0xF8, Z15, Z4, Z7; \
	VPMADDUBSW      XQ(SI), Z7, Z7; \
	VPMADDUBSW      XQ(SI), Z12, Z8; \
	VPSUBW          Z8, Z7, Z7; \
	VPDPWSSD        ZA, Z7, Z1; \
	VPSRLW          $4, Z4, Z4; \
	VPSRLVW         Z10, Z5, Z7; \
	VPANDD          Z13, Z7, Z7; \
	VPTERNLOGD      $0xF8, Z15, Z4, Z7; \
	VPMADDUBSW      XQ+64(SI), Z7, Z7; \
	VPMADDUBSW      XQ+64(SI), Z12, Z8; \
	VPSUBW          Z8, Z7, Z7; \
	VPDPWSSD        ZB, Z7, Z1

// func q6krowsVNNI(xq *int8, xd *float32, w *byte, nb int, rows int, out *float32)
//
// q6kdotAVX2 for rows consecutive weight rows (nb super-blocks each, w
// contiguous), out[r] for each, in one call (AVX-512 BW + VNNI): a zmm
// holds two of its 32-value chunks (chunk 2k in the low half, 2k+1 in the
// high), whose int32 lanes are added at the end of the super-block. The
// integers are exact, so lane l holds q6kdotAVX2's integer and the float
// step is its own: the same bits.
TEXT ·q6krowsVNNI(SB), NOSPLIT, $0-56
	MOVQ w+16(FP), R8
	MOVQ rows+32(FP), R15
	MOVQ out+40(FP), DI
	MOVQ pf+48(FP), R14
	MOVL         $0x0F0F0F0F, AX
	VMOVD        AX, X15
	VPBROADCASTD X15, Z15
	MOVL         $0x30303030, AX
	VMOVD        AX, X13
	VPBROADCASTD X13, Z13
	MOVL         $0x20202020, AX
	VMOVD        AX, X12
	VPBROADCASTD X12, Z12
	VMOVDQU64    q6kscidx<>+0(SB), Z24
	VMOVDQU64    q6kscidx<>+64(SB), Z25
	VMOVDQU64    q6kscidx<>+128(SB), Z26
	VMOVDQU64    q6kscidx<>+192(SB), Z27
	VMOVDQU64    q6kscidx<>+256(SB), Z11
	VMOVDQU64    q6kscidx<>+320(SB), Z10
	TESTQ        R15, R15
	JEQ          end

row:
	MOVQ   xq+0(FP), SI
	MOVQ   xd+8(FP), DX
	MOVQ   nb+24(FP), CX
	VXORPS Y0, Y0, Y0
	TESTQ  CX, CX
	JEQ    rowdone

loop:
	PFLINES4(R8, R14)

	VPMOVSXBW 192(R8), Y6
	VPERMW    Z6, Z24, Z28
	VPERMW    Z6, Z25, Z29
	VPERMW    Z6, Z26, Z30
	VPERMW    Z6, Z27, Z31
	VPXORD    Z1, Z1, Z1
	Q6KHALF(0, 128, 0, Z28, Z29)
	Q6KHALF(64, 160, 128, Z30, Z31)
	VEXTRACTI64X4 $1, Z1, Y2
	VPADDD        Y2, Y1, Y1
	VCVTDQ2PS     Y1, Y1
	MOVWLZX       208(R8), BX
	VMOVD         BX, X9
	VCVTPH2PS     X9, X9
	VMULSS        (DX), X9, X9
	VBROADCASTSS  X9, Y9
	VFMADD231PS   Y9, Y1, Y0
	ADDQ          $210, R8
	ADDQ          $256, SI
	ADDQ          $4, DX
	DECQ          CX
	JNZ           loop

rowdone:
	KHSUM8(Y0, X0)
	VMOVSS X0, (DI)
	ADDQ   $4, DI
	DECQ   R15
	JNZ    row

end:
	VZEROUPPER
	RET
