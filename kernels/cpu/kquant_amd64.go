//go:build amd64

package cpu

// Go wrappers of kquant_amd64.s: lengths checked here, so the assembly
// reads only inside the slices.

func vq40i1x1(xq []int8, xd []float32, w []byte) float32 {
	nb := len(xd)
	if nb == 0 {
		return 0
	}
	xq, w = xq[:nb*32], w[:nb*18]
	var out float32
	q40dotAVX2(&xq[0], &xd[0], &w[0], nb, &out)
	return out
}

// kqPrefetch is how far ahead (bytes) the Q4_K and Q6_K decode kernels
// prefetch their weights (each super-block's lines, the same bits; a
// positive distance into L1, a negative one into L2: prefetch_amd64.h).
// Intel: 4 KB into L2. Into L1 (2 KB) had gained 18–43% tok/cpu-s on the
// Xeons of earlier measurements (doc.go); into L2 gained again on an
// Intel Xeon of family 6 model 167 (AMX, AVX512-FP16; path amx), where a
// core reads 15 GB/s from memory and L1 prefetches hold its few line
// fill buffers: 8 layers d=1536 GQA decode, alternated, Q4_K
// 1 thread 36–38 → 43–47 tok/s, 2 threads 64 → 73, Q6_K 28 → 32–33 (2 and
// 8 KB into L2 within noise of 4; PREFETCHNTA 28). 4 KB into L1 on AMD
// from Zen 5 (family 26) on, where one row kernel streaming a Q4_K matrix
// from memory ran 25 GB/s without it and 29–31 with 4–8 KB (d=1536 GQA
// decode at 2 threads: Q4_K 150–155 → 169–181 tok/s, Q6_K 114–130 →
// 133–144, alternated); 0 (none) elsewhere, where it was not measured.
var kqPrefetch = func() int {
	switch {
	case isIntel:
		return -4096
	case zen5On:
		return 4096
	}
	return 0
}()

// vq6krows sets out[r] = vq6ki1x1(xq, xd, nil, row r of w) for the
// len(out) consecutive Q6_K weight rows of w, in one call (q6krowsVNNI:
// the same bits).
func vq6krows(xq []int8, xd []float32, _ []int16, w []byte, out []float32) {
	nb, rows := len(xd), len(out)
	if rows == 0 {
		return
	}
	if nb == 0 {
		clear(out)
		return
	}
	if len(w) != rows*nb*210 {
		panic("kernels/cpu: q6k rows shapes")
	}
	xq = xq[:nb*256]
	q6krowsVNNI(&xq[0], &xd[0], &w[0], nb, rows, &out[0], kqPrefetch)
}

// kqPrefetchAVX2 is how far ahead (bytes) avx2's Q4_K and Q6_K kernels
// prefetch their weights (each super-block's lines, past the row's end
// into the next row's: a task's rows lie one after the other; positive
// into L1, negative into L2, as kqPrefetch). AMD EPYC Zen 1, d=768, 1
// thread, decode tok/s without it, 1 KB, 2 KB into L1: Q4_K 165, 175, 176
// (with the lanes' order Q4_K had before q4kblkAVX2); Q6_K 120, 132, 133
// (4 KB: 132–133). Intel: 4 KB into L2 (kqPrefetch's Xeon with
// CLOISON_CPU=avx2, d=1536 GQA, 1 thread: Q4_K 35 → 40–41 tok/s, Q6_K 25
// → 29–30 against 2 KB into L1).
var kqPrefetchAVX2 = func() int {
	if isIntel {
		return -4096
	}
	return 2048
}()

// vq6krowsAVX2 is q6krows on avx2: q6ki1x1 of each row, one after the
// other (the prefetch runs ahead into the next; bs unused).
func vq6krowsAVX2(xq []int8, xd []float32, _ []int16, w []byte, out []float32) {
	nb := len(xd)
	if nb == 0 {
		clear(out)
		return
	}
	xq, w = xq[:nb*256], w[:len(out)*nb*210]
	for r := range out {
		q6kdotAVX2(&xq[0], &xd[0], &w[r*nb*210], nb, &out[r], kqPrefetchAVX2)
	}
}

func vq6ki1x1(xq []int8, xd []float32, _ []int16, w []byte) float32 {
	nb := len(xd)
	if nb == 0 {
		return 0
	}
	xq, w = xq[:nb*256], w[:nb*210]
	var out float32
	q6kdotAVX2(&xq[0], &xd[0], &w[0], nb, &out, kqPrefetchAVX2)
	return out
}

//go:noescape
func q40dotAVX2(xq *int8, xd *float32, w *byte, nb int, out *float32)

//go:noescape
func q6kdotAVX2(xq *int8, xd *float32, w *byte, nb int, out *float32, pf int)

//go:noescape
func q6krowsVNNI(xq *int8, xd *float32, w *byte, nb int, rows int, out *float32, pf int)
