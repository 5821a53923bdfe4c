//go:build amd64

package cpu

import "unsafe"

// vq8tile is the Q8_0 prefill tile of the avx512 path with VNNI:
// out[4r+j] = the product of activation row r (Q8 blocks xq[r], xd[r]) with
// weight row w[j], for 4 rows of each. VPDPBUSD multiplies the activations
// biased to unsigned (xq+128) by the signed weights, starting from
// −128·Σw (itself VPDPBUSD of 128 with w): each lane holds the exact
// integer Σ xq·w of its 4 products, the integer q8dot4VNNI and q8dot4AVX2
// compute, and the float steps (round32(d_w·d_x), fma, hsum8) are theirs,
// so every element has the bits of the one-row kernels. Each weight block
// is loaded and its scale converted once for 4 activation rows.
func vq8tile(xq *[4][]int8, xd *[4][]float32, w *[4][]byte, out *[16]float32) {
	nb := len(xd[0])
	if nb == 0 {
		*out = [16]float32{}
		return
	}
	for i := range 4 {
		xq[i], xd[i], w[i] = xq[i][:nb*32], xd[i][:nb], w[i][:nb*34]
	}
	q8tileVNNI(&xq[0][0], &xq[1][0], &xq[2][0], &xq[3][0], &xd[0][0], &xd[1][0], &xd[2][0], &xd[3][0],
		&w[0][0], &w[1][0], &w[2][0], &w[3][0], nb, out)
}

//go:noescape
func q8tileVNNI(x0, x1, x2, x3 *int8, d0, d1, d2, d3 *float32, w0, w1, w2, w3 *byte, nb int, out *[16]float32)

// vq8pack8 packs the 8 Q8_0 weight rows at w[j·stride:] for vq8tile4x8:
// per block, rows 2p and 2p+1 interleaved dword by dword (lane 2k of a zmm
// holds row 2p's dword k, lane 2k+1 row 2p+1's), each lane's −128·Σ of its
// 4 weights (the start of its VPDPBUSD with the activations biased to
// unsigned), then the rows' scales as float32. pk must hold
// nb·q8packBytes bytes and start 64-byte aligned. A task packs its weight
// rows once for all its activation rows, in a pooled scratch: the weights
// in memory are read as stored (no repacked copy).
func vq8pack8(w []byte, stride, nb int, pk []byte) {
	if nb == 0 {
		return
	}
	if stride < nb*34 || len(pk) < nb*q8packBytes || uintptr(unsafe.Pointer(&pk[0]))%64 != 0 {
		panic("kernels/cpu: q8pack8 arguments")
	}
	w = w[:7*stride+nb*34]
	q8pack8VNNI(&w[0], stride, nb, &pk[0])
}

// vq8dup sets u (2·len(q) bytes) to q's dwords doubled (dword k at 2k and
// 2k+1) and biased to unsigned (q+128): an activation row as vq8tile4x8
// reads it, once per product.
func vq8dup(q []int8, u []byte) {
	if len(q)%32 != 0 || len(u) < 2*len(q) {
		panic("kernels/cpu: q8dup lengths")
	}
	if len(q) == 0 {
		return
	}
	q8dupVNNI(&q[0], len(q), &u[0])
}

// vq8tile4x8 is the Q8_0 tile of 4 activation rows × 8 weight rows on the
// avx512 path with VNNI: out[8r+j] = the product of activation row r (the
// rows xu[r·2·cols:] of q8acts.u, doubled by vq8dup, and xd[r·nb:], cols =
// 32·nb) with weight row j of the block packed by vq8pack8. Two weight rows
// share a zmm, and each lane holds the integer of q8rowsVNNI's lane, Σ of
// its 4 products (VPDPBUSD of the biased activations with the weights from
// −128·Σw), converted, fused-multiply-added with round32(d_x·d_w) in block
// order, the 8 lanes of an output summed as hsum8. Every output element so
// has the bits of the one-row kernels (q8rows, q8i1x4) whatever the batch.
// Per output and block the loop spends one VPDPBUSD, conversion, multiply
// and FMA on half a zmm, where q8tileVNNI spends them on a whole ymm.
func vq8tile4x8(xu []byte, xd []float32, pk []byte, out *[32]float32) {
	nb := len(xd) / 4
	if nb == 0 {
		*out = [32]float32{}
		return
	}
	cols := nb * 32
	if len(pk) < nb*q8packBytes || uintptr(unsafe.Pointer(&pk[0]))%64 != 0 {
		panic("kernels/cpu: q8tile4x8 pack")
	}
	xu, xd = xu[:8*cols], xd[:4*nb]
	q8tile4x8VNNI(&xu[0], &xd[0], &pk[0], cols, nb, out)
}

//go:noescape
func q8pack8VNNI(w *byte, stride, nb int, pk *byte)

//go:noescape
func q8dupVNNI(q *int8, n int, u *byte)

//go:noescape
func q8tile4x8VNNI(xu *byte, xd *float32, pk *byte, cols, nb int, out *[32]float32)
