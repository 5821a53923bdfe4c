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

func vq4ki1x1(xq []int8, xd []float32, bs []int16, w []byte) float32 {
	nb := len(xd)
	if nb == 0 {
		return 0
	}
	xq, bs, w = xq[:nb*256], bs[:nb*16], w[:nb*144]
	var out float32
	q4kdotAVX2(&xq[0], &xd[0], &bs[0], &w[0], nb, &out)
	return out
}

func vq6ki1x1(xq []int8, xd []float32, _ []int16, w []byte) float32 {
	nb := len(xd)
	if nb == 0 {
		return 0
	}
	xq, w = xq[:nb*256], w[:nb*210]
	var out float32
	q6kdotAVX2(&xq[0], &xd[0], &w[0], nb, &out)
	return out
}

//go:noescape
func q40dotAVX2(xq *int8, xd *float32, w *byte, nb int, out *float32)

//go:noescape
func q4kdotAVX2(xq *int8, xd *float32, bs *int16, w *byte, nb int, out *float32)

//go:noescape
func q6kdotAVX2(xq *int8, xd *float32, w *byte, nb int, out *float32)
