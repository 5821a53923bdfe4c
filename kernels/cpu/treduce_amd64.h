// Macros the tile kernels share (tile_amd64.s, attn_amd64.s, peak_amd64.s).

// ZERO12 clears Y0…Y11 (a tile's accumulators).
#define ZERO12 \
	VXORPS Y0, Y0, Y0 \
	VXORPS Y1, Y1, Y1 \
	VXORPS Y2, Y2, Y2 \
	VXORPS Y3, Y3, Y3 \
	VXORPS Y4, Y4, Y4 \
	VXORPS Y5, Y5, Y5 \
	VXORPS Y6, Y6, Y6 \
	VXORPS Y7, Y7, Y7 \
	VXORPS Y8, Y8, Y8 \
	VXORPS Y9, Y9, Y9 \
	VXORPS Y10, Y10, Y10 \
	VXORPS Y11, Y11, Y11

// TREDUCE16SUM sums the 16 lanes of each of Z0…Z15 (a 4×4 tile, Z(4r+j)
// row r, column j) exactly as TSUM16 (tile_amd64.s) does (lanes l and l+8, then ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)),
// each sum's first operand the lower lanes), sixteen at once: four rounds
// of 128-bit or element shuffles and adds carry each accumulator's own
// tree (TestVectorKernels, the 4×n tiles against the one-row kernels;
// TestAttention*, the score tile against the decode kernel), the results
// transposed into row order (VPERMPS, tredIdx): Z6 lane 4r+j holds
// Z(4r+j)'s sum. Clobbers Z0…Z7 and Z16…Z25.
#define TREDUCE16SUM \
	VSHUFF32X4 $0x44, Z1, Z0, Z24; \
	VSHUFF32X4 $0xEE, Z1, Z0, Z25; \
	VADDPS     Z25, Z24, Z16; \
	VSHUFF32X4 $0x44, Z3, Z2, Z24; \
	VSHUFF32X4 $0xEE, Z3, Z2, Z25; \
	VADDPS     Z25, Z24, Z17; \
	VSHUFF32X4 $0x44, Z5, Z4, Z24; \
	VSHUFF32X4 $0xEE, Z5, Z4, Z25; \
	VADDPS     Z25, Z24, Z18; \
	VSHUFF32X4 $0x44, Z7, Z6, Z24; \
	VSHUFF32X4 $0xEE, Z7, Z6, Z25; \
	VADDPS     Z25, Z24, Z19; \
	VSHUFF32X4 $0x44, Z9, Z8, Z24; \
	VSHUFF32X4 $0xEE, Z9, Z8, Z25; \
	VADDPS     Z25, Z24, Z20; \
	VSHUFF32X4 $0x44, Z11, Z10, Z24; \
	VSHUFF32X4 $0xEE, Z11, Z10, Z25; \
	VADDPS     Z25, Z24, Z21; \
	VSHUFF32X4 $0x44, Z13, Z12, Z24; \
	VSHUFF32X4 $0xEE, Z13, Z12, Z25; \
	VADDPS     Z25, Z24, Z22; \
	VSHUFF32X4 $0x44, Z15, Z14, Z24; \
	VSHUFF32X4 $0xEE, Z15, Z14, Z25; \
	VADDPS     Z25, Z24, Z23; \
	VSHUFF32X4 $0x88, Z17, Z16, Z24; \
	VSHUFF32X4 $0xDD, Z17, Z16, Z25; \
	VADDPS     Z25, Z24, Z0; \
	VSHUFF32X4 $0x88, Z19, Z18, Z24; \
	VSHUFF32X4 $0xDD, Z19, Z18, Z25; \
	VADDPS     Z25, Z24, Z1; \
	VSHUFF32X4 $0x88, Z21, Z20, Z24; \
	VSHUFF32X4 $0xDD, Z21, Z20, Z25; \
	VADDPS     Z25, Z24, Z2; \
	VSHUFF32X4 $0x88, Z23, Z22, Z24; \
	VSHUFF32X4 $0xDD, Z23, Z22, Z25; \
	VADDPS     Z25, Z24, Z3; \
	VSHUFPS    $0x44, Z1, Z0, Z24; \
	VSHUFPS    $0xEE, Z1, Z0, Z25; \
	VADDPS     Z25, Z24, Z4; \
	VSHUFPS    $0x44, Z3, Z2, Z24; \
	VSHUFPS    $0xEE, Z3, Z2, Z25; \
	VADDPS     Z25, Z24, Z5; \
	VSHUFPS    $0x88, Z5, Z4, Z24; \
	VSHUFPS    $0xDD, Z5, Z4, Z25; \
	VADDPS     Z25, Z24, Z6; \
	VMOVDQU32  ·tredIdx(SB), Z7; \
	VPERMPS    Z6, Z7, Z6
