//go:build amd64

package cpu

import "unsafe"

// vtile is the register tile of prefill products: out[4r+j] = x[r]·w[j]
// for r < rows (3 on avx2, 4 on avx512), j < 4, each with the order of
// vdot1x4 (lanes, the path's hsum, then the tail in ascending order), so
// the same bits as vdot1x4 gives for that element.
func vtile(wide bool, x *[4][]float32, w *[4][]float32, out *[16]float32) {
	n := len(x[0])
	rows := 3
	if wide {
		rows = 4
	}
	for r := range rows {
		x[r] = x[r][:n]
	}
	for j := range w {
		w[j] = w[j][:n]
	}
	nv := n &^ (lanes(wide) - 1)
	*out = [16]float32{}
	if nv > 0 {
		if wide {
			dot4x4AVX512(&x[0][0], &x[1][0], &x[2][0], &x[3][0], &w[0][0], &w[1][0], &w[2][0], &w[3][0], nv, out)
		} else {
			dot3x4AVX2(&x[0][0], &x[1][0], &x[2][0], &w[0][0], &w[1][0], &w[2][0], &w[3][0], nv, (*[12]float32)(out[:12]))
		}
	}
	for r := range rows {
		xr := x[r]
		for j := range 4 {
			s, wj := out[4*r+j], w[j]
			for i := nv; i < n; i++ {
				s += float32(xr[i] * wj[i])
			}
			out[4*r+j] = s
		}
	}
}

// vtilePF is vtile on avx512 that prefetches the 2n bytes at pf while it
// computes (the weight block the next task converts).
func vtilePF(x *[4][]float32, w *[4][]float32, out *[16]float32, pf unsafe.Pointer) {
	n := len(x[0])
	for r := range 4 {
		x[r] = x[r][:n]
	}
	for j := range w {
		w[j] = w[j][:n]
	}
	nv := n &^ 15
	*out = [16]float32{}
	if nv > 0 {
		dot4x4pfAVX512(&x[0][0], &x[1][0], &x[2][0], &x[3][0], &w[0][0], &w[1][0], &w[2][0], &w[3][0], nv, out, (*byte)(pf))
	}
	for r := range 4 {
		xr := x[r]
		for j := range 4 {
			s, wj := out[4*r+j], w[j]
			for i := nv; i < n; i++ {
				s += float32(xr[i] * wj[i])
			}
			out[4*r+j] = s
		}
	}
}

//go:noescape
func dot4x4pfAVX512(x0, x1, x2, x3, w0, w1, w2, w3 *float32, n int, out *[16]float32, pf *byte)

//go:noescape
func dot3x4AVX2(x0, x1, x2, w0, w1, w2, w3 *float32, n int, out *[12]float32)

//go:noescape
func dot4x4AVX512(x0, x1, x2, x3, w0, w1, w2, w3 *float32, n int, out *[16]float32)
