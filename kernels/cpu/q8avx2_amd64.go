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
