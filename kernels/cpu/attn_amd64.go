//go:build amd64

package cpu

import "math"

// vwsum sets o += Σ_p s[p]·data[offs[p]:][:len(o)] with the per-element
// chain of vaxpy4/vaxpy1 (fused multiply-adds in position order), o kept in
// registers: 64-float chunks on avx512, 32 on avx2. It reports false (and
// does nothing) when len(o) is not a multiple of the chunk.
func vwsum(wide bool, o, s, data []float32, offs []int) bool {
	chunk := 32
	if wide {
		chunk = 64
	}
	hd, n := len(o), len(offs)
	if hd == 0 || hd%chunk != 0 || len(s) < n {
		return false
	}
	if n == 0 {
		return true
	}
	for _, off := range offs {
		if off < 0 || off+hd > len(data) {
			panic("kernels/cpu: attention value outside the arena")
		}
	}
	for c := 0; c < hd; c += chunk {
		if wide {
			wsum64AVX512(&o[c], &s[0], &data[c], &offs[0], n)
		} else {
			wsum32AVX2(&o[c], &s[0], &data[c], &offs[0], n)
		}
	}
	return true
}

//go:noescape
func wsum64AVX512(o *float32, s *float32, base *float32, offs *int, n int)

//go:noescape
func wsum32AVX2(o *float32, s *float32, base *float32, offs *int, n int)

// expConsts are expf's constants as float32, converted exactly as expf's
// expressions convert them.
var expConsts = func() *[13]float32 {
	const (
		hi    = 88.72283
		lo    = -87.33654
		log2e = 1.44269504088896341
		c1    = 0.693359375
		c2    = -2.12194440e-4
	)
	return &[13]float32{hi, lo, log2e, 0.5, c1, c2, 1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3,
		4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1, 1}
}()

// vexpSub sets x[i] = expf(x[i] − m): 16 lanes at a time, the tail with
// expf; the same bits as expf everywhere.
func vexpSub(x []float32, m float32) {
	nv := len(x) &^ 15
	if nv > 0 {
		expSubAVX512(&x[0], m, nv, expConsts)
	}
	for i := nv; i < len(x); i++ {
		x[i] = expf(x[i] - m)
	}
}

//go:noescape
func expSubAVX512(x *float32, m float32, n int, c *[13]float32)

// expConsts8 are expConsts broadcast to 8 lanes, then 127 as an int32.
var expConsts8 = func() *[14][8]float32 {
	var c [14][8]float32
	for i := range c {
		v := math.Float32frombits(127)
		if i < len(expConsts) {
			v = expConsts[i]
		}
		for l := range c[i] {
			c[i][l] = v
		}
	}
	return &c
}()

// vexpSum is kset.expSum on avx512: expSubAVX512's exponentials with the
// block sum of online's order, the first len(x)&^15 in one pass.
func vexpSum(x []float32, m float32) float64 {
	var s [4]float64
	nv := len(x) &^ 15
	if nv > 0 {
		expSumAVX512(&x[0], m, nv, expConsts, &s)
	}
	return expSumTail(x, m, nv, s)
}

// expSumTail ends kset.expSum after a kernel took the first nv weights
// into the lanes s: the rest with expf, the block sum in online's order.
func expSumTail(x []float32, m float32, nv int, s [4]float64) float64 {
	for i := nv; i < len(x); i++ {
		x[i] = expf(x[i] - m)
	}
	return blockSum(x[nv:], s)
}

//go:noescape
func expSumAVX512(x *float32, m float32, n int, c *[13]float32, s *[4]float64)

// vexpSubAVX2 is vexpSub on 8 lanes (the avx2 path).
func vexpSubAVX2(x []float32, m float32) {
	nv := len(x) &^ 7
	if nv > 0 {
		expSubAVX2(&x[0], m, nv, expConsts8)
	}
	for i := nv; i < len(x); i++ {
		x[i] = expf(x[i] - m)
	}
}

//go:noescape
func expSubAVX2(x *float32, m float32, n int, c *[14][8]float32)

// vsiluAVX2 is kset.silu on avx2: siluRow's steps on 8 lanes
// (siluMulAVX2); returns the values done (a multiple of 8).
func vsiluAVX2(out, g, u []float32) int {
	n := len(out) &^ 7
	if n == 0 {
		return 0
	}
	g = g[:n]
	if u == nil {
		siluMulAVX2(&out[0], &g[0], &ones8[0], n, expConsts8, 0)
		return n
	}
	u = u[:n]
	siluMulAVX2(&out[0], &g[0], &u[0], n, expConsts8, 32)
	return n
}

// ones8: the up values of SiLU without one.
var ones8 = [8]float32{1, 1, 1, 1, 1, 1, 1, 1}

//go:noescape
func siluMulAVX2(out, gate, u *float32, n int, c *[14][8]float32, ustep int)

// vexpSumAVX2 is kset.expSum on avx2: expSubAVX2's exponentials with the
// block sum of online's order, the first len(x)&^7 in one pass.
func vexpSumAVX2(x []float32, m float32) float64 {
	var s [4]float64
	nv := len(x) &^ 7
	if nv > 0 {
		expSumAVX2(&x[0], m, nv, expConsts8, &s)
	}
	return expSumTail(x, m, nv, s)
}

//go:noescape
func expSumAVX2(x *float32, m float32, n int, c *[14][8]float32, s *[4]float64)

// vscaleMaxAVX2 is kset.scaleMax on avx2.
func vscaleMaxAVX2(x []float32, scale float32) float32 {
	nv := len(x) &^ 7
	bm := float32(math.Inf(-1))
	if nv > 0 {
		var nan int32
		bm = scaleMaxAVX2(&x[0], nv, scale, &nan)
		if nan != 0 {
			bm = float32(math.NaN())
		}
	}
	for i := nv; i < len(x); i++ {
		v := float32(x[i] * scale)
		x[i] = v
		bm = max(bm, v)
	}
	return bm
}

//go:noescape
func scaleMaxAVX2(x *float32, n int, scale float32, nan *int32) float32

// vwsum4AVX2 is kset.wsum4 on avx2 (the decode kernel
// wsum4x16AVX2, 16 elements of the four outputs a pass; len(o[r]) a
// multiple of 16).
func vwsum4AVX2(o, s *[4][]float32, data []float32, offs []int) bool {
	hd, n, ok := wsum4Check(o, s, data, offs, 16, 8)
	if !ok || n == 0 {
		return ok
	}
	for c := 0; c < hd; c += 16 {
		wsum4x16AVX2(&o[0][c], &o[1][c], &o[2][c], &o[3][c], &s[0][0], &s[1][0], &s[2][0], &s[3][0], &data[c], &offs[0], n)
	}
	return true
}

// wsum4Check checks a wsum4 call: ok false when len(o[r]) is not a
// multiple of chunk or a weight row is short; every offset, and the spare
// ones past len(offs) that the kernel reads for prefetches (within the
// capacity), inside data (else it panics).
func wsum4Check(o, s *[4][]float32, data []float32, offs []int, chunk, spare int) (hd, n int, ok bool) {
	hd, n = len(o[0]), len(offs)
	if hd == 0 || hd%chunk != 0 {
		return hd, n, false
	}
	for r := range 4 {
		if len(o[r]) != hd || len(s[r]) < n {
			return hd, n, false
		}
	}
	if n == 0 {
		return hd, n, true
	}
	for _, off := range offs[:n+spare] {
		if off < 0 || off+hd > len(data) {
			panic("kernels/cpu: attention value outside the arena")
		}
	}
	return hd, n, true
}

// vscores is kset.scores on avx2 (wide false: three query rows, hd a
// multiple of 8, dot3x4AVX2's tile) and avx512 (four rows, hd a multiple of
// 16, dot4x4AVX512's): the scores of the query rows x against the
// len(offs)/4·4 keys at data[offs[j]:][:hd] into out (row r at
// out[r·attnKeys:]), each with the tile's bits (no tail). It checks every
// offset and length so that the assembly reads and writes only inside the
// slices.
func vscores(wide bool, x *[4][]float32, data []float32, offs []int, hd int, out []float32) {
	ng := len(offs) / 4
	if ng == 0 {
		return
	}
	rows := 3
	if wide {
		rows = 4
	}
	if hd <= 0 || hd%lanes(wide) != 0 || len(out) < (rows-1)*attnKeys+4*ng {
		panic("kernels/cpu: attention score tile shapes")
	}
	for r := range rows {
		if len(x[r]) < hd {
			panic("kernels/cpu: attention score tile shapes")
		}
	}
	for _, off := range offs[:4*ng] {
		if off < 0 || off+hd > len(data) {
			panic("kernels/cpu: attention key outside the arena")
		}
	}
	if wide {
		scores4AVX512(&x[0][0], &x[1][0], &x[2][0], &x[3][0], &data[0], &offs[0], ng, hd, &out[0])
	} else {
		scores3AVX2(&x[0][0], &x[1][0], &x[2][0], &data[0], &offs[0], ng, hd, &out[0])
	}
}

//go:noescape
func scores3AVX2(x0, x1, x2 *float32, base *float32, offs *int, ng int, hd int, out *float32)

//go:noescape
func scores4AVX512(x0, x1, x2, x3 *float32, base *float32, offs *int, ng int, hd int, out *float32)

// vwsum4 is kset.wsum4 on avx512: vwsum for four outputs o[r] with their
// weights s[r], each value row loaded once for the four; false (nothing
// done) when len(o[r]) is not a multiple of 64.
func vwsum4(o, s *[4][]float32, data []float32, offs []int) bool {
	hd, n, ok := wsum4Check(o, s, data, offs, 64, 0)
	if !ok || n == 0 {
		return ok
	}
	for c := 0; c < hd; c += 64 {
		wsum4x64AVX512(&o[0][c], &o[1][c], &o[2][c], &o[3][c], &s[0][0], &s[1][0], &s[2][0], &s[3][0], &data[c], &offs[0], n)
	}
	return true
}

//go:noescape
func wsum4x64AVX512(o0, o1, o2, o3 *float32, s0, s1, s2, s3 *float32, base *float32, offs *int, n int)
