//go:build amd64

package cpu

func init() {
	if hasAVX2 {
		q6kTile4 = vq6ktile4
	}
}

// vq6ktile4 checks the lengths (four activation rows at strides xqs and
// xds elements, nb = xds super-blocks per weight row, len(w)/(nb·210)
// weight rows, four output rows at stride os; bs unused) so that the
// assembly reads and writes only inside the slices.
func vq6ktile4(xq []int8, xqs int, xd []float32, xds int, _ []int16, _ int, w []byte, out []float32, os int) {
	nb := xds
	nw := len(w) / (nb * 210)
	if nb == 0 || nw == 0 {
		return
	}
	if xqs < nb*256 || os < nw || len(w) != nw*nb*210 {
		panic("kernels/cpu: q6k tile shapes")
	}
	xq, xd, out = xq[:3*xqs+nb*256], xd[:3*xds+nb], out[:3*os+nw]
	q6ktile4AVX2(&xq[0], xqs, &xd[0], 4*xds, &w[0], nb, nw, &out[0], 4*os)
}

//go:noescape
func q6ktile4AVX2(xq *int8, xqs int, xd *float32, xds int, w *byte, nb int, nw int, out *float32, os int)
