// Software prefetch of a decode kernel's weights, shared by the row
// kernels whose distance argument pf (bytes) the Go side picks per CPU:
// pf > 0 prefetches into L1 (PREFETCHT0) pf bytes past B, pf < 0 into L2
// (PREFETCHT2) −pf bytes past it, 0 none. The sign is flipped back after
// use, so PF holds pf again. PFLINES3/4/5 prefetch that many consecutive
// 64-byte lines (a Q4_K super-block's 144 bytes, a Q6_K's 210, two Q4_K
// super-blocks or eight Q8_0 blocks).
//
// Relative jumps (n(PC) counts instructions from the jump itself): TESTQ,
// JEQ past the end, JS to the L2 half, the L1 lines, JMP past the end,
// NEGQ, the L2 lines, NEGQ.

#define PFLINES3(B, PF) \
	TESTQ      PF, PF; \
	JEQ        11(PC); \
	JS         5(PC); \
	PREFETCHT0 (B)(PF*1); \
	PREFETCHT0 64(B)(PF*1); \
	PREFETCHT0 128(B)(PF*1); \
	JMP        6(PC); \
	NEGQ       PF; \
	PREFETCHT2 (B)(PF*1); \
	PREFETCHT2 64(B)(PF*1); \
	PREFETCHT2 128(B)(PF*1); \
	NEGQ       PF

#define PFLINES4(B, PF) \
	TESTQ      PF, PF; \
	JEQ        13(PC); \
	JS         6(PC); \
	PREFETCHT0 (B)(PF*1); \
	PREFETCHT0 64(B)(PF*1); \
	PREFETCHT0 128(B)(PF*1); \
	PREFETCHT0 192(B)(PF*1); \
	JMP        7(PC); \
	NEGQ       PF; \
	PREFETCHT2 (B)(PF*1); \
	PREFETCHT2 64(B)(PF*1); \
	PREFETCHT2 128(B)(PF*1); \
	PREFETCHT2 192(B)(PF*1); \
	NEGQ       PF

#define PFLINES5(B, PF) \
	TESTQ      PF, PF; \
	JEQ        15(PC); \
	JS         7(PC); \
	PREFETCHT0 (B)(PF*1); \
	PREFETCHT0 64(B)(PF*1); \
	PREFETCHT0 128(B)(PF*1); \
	PREFETCHT0 192(B)(PF*1); \
	PREFETCHT0 256(B)(PF*1); \
	JMP        8(PC); \
	NEGQ       PF; \
	PREFETCHT2 (B)(PF*1); \
	PREFETCHT2 64(B)(PF*1); \
	PREFETCHT2 128(B)(PF*1); \
	PREFETCHT2 192(B)(PF*1); \
	PREFETCHT2 256(B)(PF*1); \
	NEGQ       PF
