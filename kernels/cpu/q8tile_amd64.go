//go:build amd64

package cpu

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
