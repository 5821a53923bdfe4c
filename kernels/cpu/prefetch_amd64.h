// Software prefetch of a decode kernel's weights, shared by the row
// kernels whose distance argument pf (bytes) the Go side picks per CPU:
// pf > 0 prefetches into L1 (PREFETCHT0) pf bytes past B, pf < 0 into L2
// (PREFETCHT2) −pf bytes past it, 0 none. The sign is flipped back after
// use, so PF holds pf again. PFLINES3/4/5 prefetch that many consecutive
// 64-byte lines (a Q4_K super-block's 144 bytes, a Q6_K's 210, two Q4_K
// super-blocks or eight Q8_0 blocks).
//
// Relative jumps (n(PC) counts instructions from the jump itself): TESTQ,
// JEQ past the end, JS to the L2 half, the N lines into L1, JMP past the
// end, NEGQ, the N lines into L2, NEGQ.

// N lines at B+PF, each by the prefetch instruction OP.
#define PF3(OP, B, PF) OP (B)(PF*1); OP 64(B)(PF*1); OP 128(B)(PF*1)
#define PF4(OP, B, PF) PF3(OP, B, PF); OP 192(B)(PF*1)
#define PF5(OP, B, PF) PF4(OP, B, PF); OP 256(B)(PF*1)

#define PFLINES3(B, PF) TESTQ PF, PF; JEQ 11(PC); JS 5(PC); PF3(PREFETCHT0, B, PF); JMP 6(PC); NEGQ PF; PF3(PREFETCHT2, B, PF); NEGQ PF
#define PFLINES4(B, PF) TESTQ PF, PF; JEQ 13(PC); JS 6(PC); PF4(PREFETCHT0, B, PF); JMP 7(PC); NEGQ PF; PF4(PREFETCHT2, B, PF); NEGQ PF
#define PFLINES5(B, PF) TESTQ PF, PF; JEQ 15(PC); JS 7(PC); PF5(PREFETCHT0, B, PF); JMP 8(PC); NEGQ PF; PF5(PREFETCHT2, B, PF); NEGQ PF
