//go:build amd64

package cpu

// vq8rowsAVX2 is q8rows on the avx2 path (xc unused): q8i1x4's bits, the
// weight rows read one after the other.
func vq8rowsAVX2(xq []int8, _ []int32, xd []float32, w []byte, stride int, out []float32) {
	nb, rows := len(xd), len(out)
	if rows == 0 {
		return
	}
	if nb == 0 {
		clear(out)
		return
	}
	if stride < nb*34 {
		panic("kernels/cpu: q8rows stride")
	}
	xq = xq[:nb*32]
	w = w[:(rows-1)*stride+nb*34]
	q8rowsAVX2(&xq[0], &xd[0], &w[0], stride, nb, rows, &out[0])
}

//go:noescape
func q8rowsAVX2(xq *int8, xd *float32, w *byte, stride, nb, rows int, out *float32)

// vq8tile4xn is q8tile4x3AVX2 with its arguments checked: four activation
// rows of nb blocks (xq, xd at strides xqs and xds elements) times the
// first nw/3·3 weight rows of w (it returns how many), out[i·os+j].
func vq8tile4xn(xq []int8, xqs int, xd []float32, xds, nb int, w []byte, ws, nw int, out []float32, os int) int {
	n3 := nw / 3 * 3
	if nb == 0 || n3 == 0 {
		return 0
	}
	if xqs < nb*32 || xds < nb || ws < nb*34 || os < n3 {
		panic("kernels/cpu: q8 tile shapes")
	}
	xq, xd, w, out = xq[:3*xqs+nb*32], xd[:3*xds+nb], w[:(n3-1)*ws+nb*34], out[:3*os+n3]
	q8tile4x3AVX2(&xq[0], xqs, &xd[0], xds, &w[0], ws, nb, n3, &out[0], os)
	return n3
}

//go:noescape
func q8tile4x3AVX2(xq *int8, xqs int, xd *float32, xds int, w *byte, ws, nb, nw int, out *float32, os int)

// vq8fdot1x4 is kset.q8dot1x4 on avx2 (the float order): x against four
// Q8_0 rows dequantized in registers, dot4AVX2's bits on the dequantized
// rows (len(x) a multiple of 32, as every Q8_0 row), prefetching the row
// after each in its stream (decode's four streams, matmul.go).
func vq8fdot1x4(x []float32, w0, w1, w2, w3 []byte) (s0, s1, s2, s3 float32) {
	nb := len(x) / 32
	if nb == 0 || len(x) != nb*32 {
		if len(x) == 0 {
			return
		}
		panic("kernels/cpu: q8 row length")
	}
	w0, w1, w2, w3 = w0[:nb*34], w1[:nb*34], w2[:nb*34], w3[:nb*34]
	var out [4]float32
	q8fdot4AVX2(&x[0], &w0[0], &w1[0], &w2[0], &w3[0], nb, &out, nb*34)
	return out[0], out[1], out[2], out[3]
}

// vq8rowFloat is kset.q8row on avx2: the row w dequantized into dst
// (len(dst) values, a multiple of 32).
func vq8rowFloat(dst []float32, w []byte) {
	nb := len(dst) / 32
	if nb == 0 || len(dst) != nb*32 {
		if len(dst) == 0 {
			return
		}
		panic("kernels/cpu: q8 row length")
	}
	w = w[:nb*34]
	q8rowFloatAVX2(&w[0], nb, &dst[0])
}

//go:noescape
func q8fdot4AVX2(x *float32, w0, w1, w2, w3 *byte, nb int, out *[4]float32, pf int)

//go:noescape
func q8rowFloatAVX2(w *byte, nb int, dst *float32)
