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

// vtile4xn computes out[r·os+j] = x[r]·w[j·ws:][:n] for r < 4 and j <
// nw&^3 (n = len(x[0]), a multiple of 16), each with vtile's bits
// (dot4x4AVX512's lanes and sum), in one call: the avx512 path's prefill
// over a task's weight block. It prefetches 2n bytes of pf per group of
// four weight rows while there are that many. It returns the weight rows
// done (nw&^3).
func vtile4xn(x *[4][]float32, w []float32, ws, nw int, out []float32, os int, pf []byte) int {
	n := len(x[0])
	nw &^= 3
	if nw == 0 || n == 0 || n&15 != 0 {
		return 0
	}
	for r := range 4 {
		x[r] = x[r][:n]
	}
	_ = w[(nw-1)*ws+n-1]
	_ = out[3*os+nw-1]
	pfp, step := unsafe.Pointer(&x[0][0]), 0
	if len(pf) >= nw/4*2*n {
		pfp, step = unsafe.Pointer(&pf[0]), 2*n
	}
	dot4xnAVX512(&x[0][0], &x[1][0], &x[2][0], &x[3][0], &w[0], 4*ws, nw, n, &out[0], 4*os, (*byte)(pfp), step)
	return nw
}

//go:noescape
func dot4xnAVX512(x0, x1, x2, x3, w *float32, wstride, nw, n int, out *float32, ostride int, pf *byte, pfstep int)

// vf16tile4xn is vtile4xn on F16 weight rows (w, rows ws halves apart)
// converted in registers (f16dot4xnAVX512): the same bits as converting
// the block to float32 first.
func vf16tile4xn(x *[4][]float32, w []uint16, ws, nw int, out []float32, os int, pf []byte) int {
	n := len(x[0])
	nw &^= 3
	if nw == 0 || n == 0 || n&15 != 0 {
		return 0
	}
	for r := range 4 {
		x[r] = x[r][:n]
	}
	_ = w[(nw-1)*ws+n-1]
	_ = out[3*os+nw-1]
	pfp, step := unsafe.Pointer(&x[0][0]), 0
	if len(pf) >= nw/4*2*n {
		pfp, step = unsafe.Pointer(&pf[0]), 2*n
	}
	f16dot4xnAVX512(&x[0][0], &x[1][0], &x[2][0], &x[3][0], &w[0], 2*ws, nw, n, &out[0], 4*os, (*byte)(pfp), step)
	return nw
}

//go:noescape
func f16dot4xnAVX512(x0, x1, x2, x3 *float32, w *uint16, wstride, nw, n int, out *float32, ostride int, pf *byte, pfstep int)

// vtile3xn is kset.tilexn on avx2 (three activation rows, x[3] unused):
// out[r·os+j] = x[r]·w[j·ws:][:n] for r < 3 and j < nw&^3 in one call
// (dot3xnAVX2), each with dot3x4AVX2's bits; n a multiple of 8 (else
// nothing is done and it returns 0). pf as vtile4xn.
func vtile3xn(x *[4][]float32, w []float32, ws, nw int, out []float32, os int, pf []byte) int {
	return tile3xn(x, w, ws, nw, out, os, pf, 4, dot3xnAVX2)
}

// vf16tile3xn is vtile3xn on F16 weight rows converted in registers
// (f16dot3xnAVX2): the bits of converting the block to float32 first.
func vf16tile3xn(x *[4][]float32, w []uint16, ws, nw int, out []float32, os int, pf []byte) int {
	return tile3xn(x, w, ws, nw, out, os, pf, 2, f16dot3xnAVX2)
}

// tile3xn checks a 3×n tile call on weight rows of elem-byte elements and
// makes it.
func tile3xn[T float32 | uint16](x *[4][]float32, w []T, ws, nw int, out []float32, os int, pf []byte, elem int,
	kernel func(x0, x1, x2 *float32, w *T, wstride, nw, n int, out *float32, ostride int, pf *byte, pfstep int)) int {
	n, nw := tile3xnShape(x, nw)
	if nw == 0 {
		return 0
	}
	_ = w[(nw-1)*ws+n-1]
	_ = out[2*os+nw-1]
	pfp, step := tilePrefetch(x, pf, nw, n)
	kernel(&x[0][0], &x[1][0], &x[2][0], &w[0], elem*ws, nw, n, &out[0], 4*os, pfp, step)
	return nw
}

// tile3xnShape checks the three activation rows of a 3×n tile and returns
// their length and the weight rows done (nw&^3; 0: none, n not a multiple
// of 8).
func tile3xnShape(x *[4][]float32, nw int) (n, done int) {
	n = len(x[0])
	nw &^= 3
	if nw == 0 || n == 0 || n&7 != 0 {
		return n, 0
	}
	for r := range 3 {
		x[r] = x[r][:n]
	}
	return n, nw
}

// tilePrefetch is the prefetch base and step of a 3×n tile call over nw
// weight rows of n values: pf, 2n bytes a group of four, when it holds
// them all, else the first activation row with step 0 (the tile then
// prefetches nothing).
func tilePrefetch(x *[4][]float32, pf []byte, nw, n int) (*byte, int) {
	if len(pf) >= nw/4*2*n {
		return &pf[0], 2 * n
	}
	return (*byte)(unsafe.Pointer(&x[0][0])), 0
}

//go:noescape
func dot3xnAVX2(x0, x1, x2 *float32, w *float32, wstride, nw, n int, out *float32, ostride int, pf *byte, pfstep int)

//go:noescape
func f16dot3xnAVX2(x0, x1, x2 *float32, w *uint16, wstride, nw, n int, out *float32, ostride int, pf *byte, pfstep int)
