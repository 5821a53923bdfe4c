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

// vq8tile4x8 is the Q8_0 tile of 4 activation rows × 8 weight rows on the
// avx512 path with VNNI: out[8r+j] = the product of activation row r (the
// rows xq[r·cols:], xc[r·cols/4:], xd[r·nb:] of q8acts, cols = 32·nb) with
// the weight row at w[j·stride:]. Two weight rows share a zmm, their
// blocks' dwords interleaved in registers (no repacked copy of the
// weights), and each lane is a lane of q8rowsVNNI: VPDPBUSD of the weights
// biased to unsigned with the activations from −128·Σq (xc), converted,
// fused-multiply-added with round32(d_x·d_w) in block order, the 8 lanes
// of an output summed as hsum8. Every output element so has the bits of
// the one-row kernels (q8rows, q8i1x4) whatever the batch. A weight block
// is loaded, interleaved and its 8 scales converted once for 4 rows, and
// the scale products are computed 8 at a time: per output and block the
// loop spends one VPDPBUSD, conversion and FMA on half a zmm, where
// q8tileVNNI spends them and a multiply on a ymm.
func vq8tile4x8(xq []int8, xc []int32, xd []float32, w []byte, stride int, out *[32]float32) {
	nb := len(xd) / 4
	if nb == 0 {
		*out = [32]float32{}
		return
	}
	cols := nb * 32
	if stride < nb*34 {
		panic("kernels/cpu: q8tile4x8 stride")
	}
	xq, xc, xd = xq[:4*cols], xc[:cols], xd[:4*nb]
	w = w[:7*stride+nb*34]
	q8tile4x8VNNI(&xq[0], &xc[0], &xd[0], &w[0], cols, stride, nb, out)
}

//go:noescape
func q8tile4x8VNNI(xq *int8, xc *int32, xd *float32, w *byte, cols, stride, nb int, out *[32]float32)
