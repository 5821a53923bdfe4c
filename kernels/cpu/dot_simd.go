//go:build goexperiment.simd && amd64

package cpu

import (
	"math"
	"simd/archsimd"
	"slices"
	"unsafe"

	"github.com/cloison/cloison/kernels"
)

// Built with GOEXPERIMENT=simd on amd64, the matrix kernels use AVX2 and FMA
// when the CPU has them (decided once per process). Their fixed reduction
// order per output element is then:
//
//	lane[l] = fma(x[i], w[i], lane[l]) for i ≡ l (mod 8), i ascending
//	s = ((lane0+lane4) + (lane2+lane6)) + ((lane1+lane5) + (lane3+lane7))
//	s += round32(x[i]·w[i]) for the tail i ≥ len&^7, ascending
//
// identical in every vector kernel, so batch invariance holds exactly as in
// the scalar build (whose order differs: results of the two builds are not
// bit-identical to each other, both are within the conformance tolerances).

var useSIMD = archsimd.X86.AVX2() && archsimd.X86.FMA()

// Every vector kernel ends with ClearAVXUpperBits (VZEROUPPER): scalar SSE
// code that runs next (weight decoders, elementwise ops) is several times
// slower with dirty upper halves of the vector registers.

// SIMD reports whether the matrix kernels use vector instructions.
var SIMD = useSIMD

func hsum(v archsimd.Float32x8) float32 {
	var a [8]float32
	v.Store(&a)
	return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]))
}

func ld(s []float32, i int) archsimd.Float32x8 { return archsimd.LoadFloat32x8((*[8]float32)(s[i:])) }

func dot1x1(x, w []float32) float32 {
	if !useSIMD {
		return dot1x1Go(x, w)
	}
	n := len(x)
	w = w[:n]
	n8 := n &^ 7
	var acc archsimd.Float32x8
	for i := 0; i < n8; i += 8 {
		acc = ld(x, i).MulAdd(ld(w, i), acc)
	}
	s := hsum(acc)
	archsimd.ClearAVXUpperBits()
	for i := n8; i < n; i++ {
		s += float32(x[i] * w[i])
	}
	return s
}

func dot1x4(x, w0, w1, w2, w3 []float32) (s0, s1, s2, s3 float32) {
	if !useSIMD {
		return dot1x4Go(x, w0, w1, w2, w3)
	}
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	n8 := n &^ 7
	var a0, a1, a2, a3 archsimd.Float32x8
	for i := 0; i < n8; i += 8 {
		v := ld(x, i)
		a0 = v.MulAdd(ld(w0, i), a0)
		a1 = v.MulAdd(ld(w1, i), a1)
		a2 = v.MulAdd(ld(w2, i), a2)
		a3 = v.MulAdd(ld(w3, i), a3)
	}
	s0, s1, s2, s3 = hsum(a0), hsum(a1), hsum(a2), hsum(a3)
	archsimd.ClearAVXUpperBits()
	for i := n8; i < n; i++ {
		v := x[i]
		s0 += float32(v * w0[i])
		s1 += float32(v * w1[i])
		s2 += float32(v * w2[i])
		s3 += float32(v * w3[i])
	}
	return
}

func dot2x3(x0, x1, w0, w1, w2 []float32) (a0, a1, a2, b0, b1, b2 float32) {
	if !useSIMD {
		return dot2x3Go(x0, x1, w0, w1, w2)
	}
	n := len(x0)
	x1, w0, w1, w2 = x1[:n], w0[:n], w1[:n], w2[:n]
	n8 := n &^ 7
	var c0, c1, c2, d0, d1, d2 archsimd.Float32x8
	for i := 0; i < n8; i += 8 {
		u, v := ld(x0, i), ld(x1, i)
		p := ld(w0, i)
		c0 = u.MulAdd(p, c0)
		d0 = v.MulAdd(p, d0)
		p = ld(w1, i)
		c1 = u.MulAdd(p, c1)
		d1 = v.MulAdd(p, d1)
		p = ld(w2, i)
		c2 = u.MulAdd(p, c2)
		d2 = v.MulAdd(p, d2)
	}
	a0, a1, a2, b0, b1, b2 = hsum(c0), hsum(c1), hsum(c2), hsum(d0), hsum(d1), hsum(d2)
	archsimd.ClearAVXUpperBits()
	for i := n8; i < n; i++ {
		u, v := x0[i], x1[i]
		a0 += float32(u * w0[i])
		a1 += float32(u * w1[i])
		a2 += float32(u * w2[i])
		b0 += float32(v * w0[i])
		b1 += float32(v * w1[i])
		b2 += float32(v * w2[i])
	}
	return
}

// With vector kernels, Q8_0 products take q8IntMul; the float Q8_0 kernels
// only run when the CPU lacks AVX2 or FMA.
func q8dot1x1(x []float32, w []byte) float32 { return q8dot1x1Go(x, w) }

func q8dot1x4(x []float32, w0, w1, w2, w3 []byte) (float32, float32, float32, float32) {
	return q8dot1x4Go(x, w0, w1, w2, w3)
}

// inRegister reports whether decode (one-row) products of dt decode weights
// in registers (decodeRow) rather than into a scratch block.
func inRegister(dt kernels.DType) bool {
	if useSIMD {
		return dt == kernels.F16 || dt == kernels.BF16 // Q8_0: q8IntMul
	}
	return dt == kernels.Q8_0 || dt == kernels.F16 || dt == kernels.BF16
}

func unsafeInt8(b []byte) []int8 {
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}

// Q8_0 (and Q4_K, see q4k1x1) products with vector kernels multiply int8 by
// int8, as llama.cpp does:
// each activation row is quantized to Q8 blocks first (d = max|x|/127 per 32
// values, q = round(x/d)), then every block contributes
//
//	lane[l] = fma(float32(Σ pairs of w·q), round32(d_w·d_x), lane[l])
//
// (VPMADDUBSW of |w| and sign(w)·q, VPMADDWD with ones: exact integers),
// lanes combined as hsum does. Every Q8_0 product of a row, decode or
// prefill, goes this way, so a row's result still never depends on the batch.

// q8acts holds the activation rows of a product quantized to Q8 blocks.
type q8acts struct {
	q []int8    // rows × cols
	d []float32 // rows × cols/32
	s []int32   // rows × cols/32: Σ q of each block (for Q4_K's mins)
}

// prepareQ8 quantizes x's rows when a product in ps has Q8_0 weights and
// the vector kernels are on; otherwise it returns nil.
func (b *Backend) prepareQ8(x *tensor, ps []product) *q8acts {
	if !useSIMD || x.cols%32 != 0 {
		return nil
	}
	if !slices.ContainsFunc(ps, func(p product) bool { return p.m.dt == kernels.Q8_0 || p.m.dt == kernels.Q4_K }) {
		return nil
	}
	nb := x.cols / 32
	a := &q8acts{q: make([]int8, x.rows*x.cols), d: make([]float32, x.rows*nb), s: make([]int32, x.rows*nb)}
	b.eachRow(x.rows, x.cols, func(r int) {
		q := a.q[r*x.cols : (r+1)*x.cols]
		quantizeRowQ8(q, a.d[r*nb:(r+1)*nb], x.row(r))
		sums := a.s[r*nb : (r+1)*nb]
		for i, v := range q {
			sums[i/32] += int32(v)
		}
	})
	return a
}

func quantizeRowQ8(q []int8, d []float32, x []float32) {
	for b := range d {
		xb := x[b*32 : b*32+32]
		var amax float32
		for _, v := range xb {
			amax = max(amax, abs32(v))
		}
		dd := amax / 127
		var id float32
		if dd != 0 {
			id = 1 / dd
		}
		d[b] = dd
		qb := q[b*32 : b*32+32]
		for j, v := range xb {
			// Round to nearest even by the 1.5·2²³ trick (|v·id| ≤ 127):
			// two float32 additions instead of a call.
			const magic = 12582912
			r := float32(float32(v*id)+magic) - magic
			qb[j] = int8(max(-127, min(127, int32(r))))
		}
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// q8IntMul computes the block of outputs of a Q8_0 product from quantized
// activations; it reports false (and does nothing) when acts is nil.
func q8IntMul(dst *tensor, acts *q8acts, m *matrix, r0, r1, o0, o1 int) bool {
	if acts == nil || (m.dt != kernels.Q8_0 && m.dt != kernels.Q4_K) {
		return false
	}
	cols, nb := m.cols, m.cols/32
	row := func(o int) []byte { return m.data[o*m.rowBytes : (o+1)*m.rowBytes] }
	if m.dt == kernels.Q4_K {
		for r := r0; r < r1; r++ {
			xq, xd, xs := acts.q[r*cols:(r+1)*cols], acts.d[r*nb:(r+1)*nb], acts.s[r*nb:(r+1)*nb]
			out := dst.row(r)
			for o := o0; o < o1; o++ {
				out[o] = q4k1x1(xq, xd, xs, row(o))
			}
		}
		return true
	}
	for r := r0; r < r1; r++ {
		xq, xd := acts.q[r*cols:(r+1)*cols], acts.d[r*nb:(r+1)*nb]
		out := dst.row(r)
		o := o0
		for ; o+4 <= o1; o += 4 {
			out[o], out[o+1], out[o+2], out[o+3] = q8i1x4(xq, xd, row(o), row(o+1), row(o+2), row(o+3))
		}
		for ; o < o1; o++ {
			out[o] = q8i1x1(xq, xd, row(o))
		}
	}
	return true
}

var ones16 = archsimd.BroadcastInt16x16(1)

// q8i is one block's exact integer dot product of weights w and activations
// x, as floats in 8 lanes.
func q8i(w *q8Block, x archsimd.Int8x32) archsimd.Float32x8 {
	wv := archsimd.LoadInt8x32((*[32]int8)(unsafeInt8(w[2:34])))
	// |w| as unsigned (|−128| = 128 fits) times sign(w)·x (x ∈ [−127, 127]).
	return wv.Abs().AsUint8x32().DotProductPairsSaturated(x.CopySign(wv)).DotProductPairs(ones16).ConvertToFloat32()
}

func q8i1x1(xq []int8, xd []float32, w []byte) float32 {
	nb := len(xd)
	w = w[:nb*34]
	var acc archsimd.Float32x8
	for b := range nb {
		blk := (*q8Block)(w[b*34:])
		x := archsimd.LoadInt8x32((*[32]int8)(xq[b*32:]))
		acc = q8i(blk, x).MulAdd(archsimd.BroadcastFloat32x8(float32(q8Scale(blk)*xd[b])), acc)
	}
	s := hsum(acc)
	archsimd.ClearAVXUpperBits()
	return s
}

func q8i1x4(xq []int8, xd []float32, r0, r1, r2, r3 []byte) (s0, s1, s2, s3 float32) {
	nb := len(xd)
	r0, r1, r2, r3 = r0[:nb*34], r1[:nb*34], r2[:nb*34], r3[:nb*34]
	var a0, a1, a2, a3 archsimd.Float32x8
	for b := range nb {
		x := archsimd.LoadInt8x32((*[32]int8)(xq[b*32:]))
		dx := xd[b]
		w := (*q8Block)(r0[b*34:])
		a0 = q8i(w, x).MulAdd(archsimd.BroadcastFloat32x8(float32(q8Scale(w)*dx)), a0)
		w = (*q8Block)(r1[b*34:])
		a1 = q8i(w, x).MulAdd(archsimd.BroadcastFloat32x8(float32(q8Scale(w)*dx)), a1)
		w = (*q8Block)(r2[b*34:])
		a2 = q8i(w, x).MulAdd(archsimd.BroadcastFloat32x8(float32(q8Scale(w)*dx)), a2)
		w = (*q8Block)(r3[b*34:])
		a3 = q8i(w, x).MulAdd(archsimd.BroadcastFloat32x8(float32(q8Scale(w)*dx)), a3)
	}
	s0, s1, s2, s3 = hsum(a0), hsum(a1), hsum(a2), hsum(a3)
	archsimd.ClearAVXUpperBits()
	return
}

// f16x8 converts 8 halves to float32 exactly, as f16tab does: the exponent
// and mantissa bits shifted into place and scaled by 2¹¹² (exact for normal
// and subnormal halves), infinities and NaNs given the all-ones exponent.
func f16x8(p *[8]uint16) archsimd.Float32x8 {
	u := archsimd.LoadUint16x8(p).ExtendToUint32()
	sign := u.And(archsimd.BroadcastUint32x8(0x8000)).ShiftAllLeft(16)
	em := u.And(archsimd.BroadcastUint32x8(0x7fff))
	f := em.ShiftAllLeft(13).AsFloat32x8().Mul(archsimd.BroadcastFloat32x8(0x1p112)).AsUint32x8()
	inf := archsimd.BroadcastUint32x8(0x7f800000).Masked(em.AsInt32x8().Greater(archsimd.BroadcastInt32x8(0x7bff)))
	return f.Or(inf).Or(sign).AsFloat32x8()
}

func bf16x8(p *[8]uint16) archsimd.Float32x8 {
	return archsimd.LoadUint16x8(p).ExtendToUint32().ShiftAllLeft(16).AsFloat32x8()
}

func u16p(s []uint16, i int) *[8]uint16 { return (*[8]uint16)(s[i:]) }

// halfDot1x4 is dot1x4 on F16 (bf false) or BF16 weights decoded in
// registers: the same values and order as decoding to a scratch block first.
// The two decoders are written out (not passed as a func value) so that they
// inline.
func halfDot1x4(bf bool, x []float32, w0, w1, w2, w3 []uint16) (s0, s1, s2, s3 float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	n8 := n &^ 7
	var a0, a1, a2, a3 archsimd.Float32x8
	if bf {
		for i := 0; i < n8; i += 8 {
			v := ld(x, i)
			a0 = v.MulAdd(bf16x8(u16p(w0, i)), a0)
			a1 = v.MulAdd(bf16x8(u16p(w1, i)), a1)
			a2 = v.MulAdd(bf16x8(u16p(w2, i)), a2)
			a3 = v.MulAdd(bf16x8(u16p(w3, i)), a3)
		}
	} else {
		for i := 0; i < n8; i += 8 {
			v := ld(x, i)
			a0 = v.MulAdd(f16x8(u16p(w0, i)), a0)
			a1 = v.MulAdd(f16x8(u16p(w1, i)), a1)
			a2 = v.MulAdd(f16x8(u16p(w2, i)), a2)
			a3 = v.MulAdd(f16x8(u16p(w3, i)), a3)
		}
	}
	s0, s1, s2, s3 = hsum(a0), hsum(a1), hsum(a2), hsum(a3)
	archsimd.ClearAVXUpperBits()
	for i := n8; i < n; i++ {
		v := x[i]
		if bf {
			s0 += float32(v * bf16(w0[i]))
			s1 += float32(v * bf16(w1[i]))
			s2 += float32(v * bf16(w2[i]))
			s3 += float32(v * bf16(w3[i]))
		} else {
			s0 += float32(v * f16tab[w0[i]])
			s1 += float32(v * f16tab[w1[i]])
			s2 += float32(v * f16tab[w2[i]])
			s3 += float32(v * f16tab[w3[i]])
		}
	}
	return
}

func f16dot1x4(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32) {
	if !useSIMD {
		return f16dot1x4Go(x, w0, w1, w2, w3)
	}
	return halfDot1x4(false, x, w0, w1, w2, w3)
}

func bf16dot1x4(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32) {
	if !useSIMD {
		return bf16dot1x4Go(x, w0, w1, w2, w3)
	}
	return halfDot1x4(true, x, w0, w1, w2, w3)
}

// The one-row tails reuse the four-row kernel on the same row, which keeps
// the order (each output is computed independently).
func f16dot1x1(x []float32, w []uint16) float32 {
	if !useSIMD {
		return f16dot1x1Go(x, w)
	}
	s, _, _, _ := halfDot1x4(false, x, w, w, w, w)
	return s
}

func bf16dot1x1(x []float32, w []uint16) float32 {
	if !useSIMD {
		return bf16dot1x1Go(x, w)
	}
	s, _, _, _ := halfDot1x4(true, x, w, w, w, w)
	return s
}

// axpy4 adds w[0]·v0, …, w[3]·v3 to o, in that order for every element
// (fused multiply-adds on 8 elements at a time, then the tail as axpy4Go).
func axpy4(o []float32, w *[4]float32, v0, v1, v2, v3 []float32) {
	if !useSIMD {
		axpy4Go(o, w, v0, v1, v2, v3)
		return
	}
	n := len(o)
	v0, v1, v2, v3 = v0[:n], v1[:n], v2[:n], v3[:n]
	n8 := n &^ 7
	b0, b1 := archsimd.BroadcastFloat32x8(w[0]), archsimd.BroadcastFloat32x8(w[1])
	b2, b3 := archsimd.BroadcastFloat32x8(w[2]), archsimd.BroadcastFloat32x8(w[3])
	for d := 0; d < n8; d += 8 {
		x := ld(v0, d).MulAdd(b0, ld(o, d))
		x = ld(v1, d).MulAdd(b1, x)
		x = ld(v2, d).MulAdd(b2, x)
		x = ld(v3, d).MulAdd(b3, x)
		x.Store((*[8]float32)(o[d:]))
	}
	archsimd.ClearAVXUpperBits()
	if n8 < n {
		axpy4Go(o[n8:], w, v0[n8:], v1[n8:], v2[n8:], v3[n8:])
	}
}

// axpy1 adds w·v to o.
func axpy1(o []float32, w float32, v []float32) {
	if !useSIMD {
		axpy1Go(o, w, v)
		return
	}
	n := len(o)
	v = v[:n]
	n8 := n &^ 7
	b := archsimd.BroadcastFloat32x8(w)
	for d := 0; d < n8; d += 8 {
		ld(v, d).MulAdd(b, ld(o, d)).Store((*[8]float32)(o[d:]))
	}
	archsimd.ClearAVXUpperBits()
	if n8 < n {
		axpy1Go(o[n8:], w, v[n8:])
	}
}

var low4 = archsimd.BroadcastUint8x32(0x0f)

// q4k1x1 is the Q4_K product of one weight row with quantized activations,
// as llama.cpp's vec_dot_q4_K_q8_K: per 32-element sub-block j with 6-bit
// scale sc and min m, Σ w·x = d·sc·dx·Σ q·xq − dmin·m·dx·Σ xq, the first sum
// exact in integers (VPMADDUBSW of the unsigned nibbles and xq), the second
// from the precomputed block sums. The scale terms go to the vector lanes,
// the min terms to one scalar sum, both in sub-block order; the result is
// hsum(lanes) − mins.
func q4k1x1(xq []int8, xd []float32, xs []int32, w []byte) float32 {
	nsb := len(w) / 144
	xq, xd, xs = xq[:nsb*256], xd[:nsb*8], xs[:nsb*8]
	var acc archsimd.Float32x8
	var mins float32
	for s := range nsb {
		blk := (*[144]byte)(w[s*144:])
		d := f16tab[uint16(blk[0])|uint16(blk[1])<<8]
		dmin := f16tab[uint16(blk[2])|uint16(blk[3])<<8]
		scales := blk[4:16]
		for j := range 4 {
			q := archsimd.LoadUint8x32((*[32]uint8)(blk[16+32*j:]))
			lo := q.And(low4)
			hi := q.AsUint16x16().ShiftAllRight(4).AsUint8x32().And(low4)
			b0 := s*8 + 2*j // activation block of the low nibbles; b0+1: high
			x0 := archsimd.LoadInt8x32((*[32]int8)(xq[b0*32:]))
			x1 := archsimd.LoadInt8x32((*[32]int8)(xq[b0*32+32:]))
			sc0, m0 := kernels.Q4KScaleMin(2*j, scales)
			sc1, m1 := kernels.Q4KScaleMin(2*j+1, scales)
			i0 := lo.DotProductPairsSaturated(x0).DotProductPairs(ones16).ConvertToFloat32()
			i1 := hi.DotProductPairsSaturated(x1).DotProductPairs(ones16).ConvertToFloat32()
			acc = i0.MulAdd(archsimd.BroadcastFloat32x8(float32(float32(d*float32(sc0))*xd[b0])), acc)
			acc = i1.MulAdd(archsimd.BroadcastFloat32x8(float32(float32(d*float32(sc1))*xd[b0+1])), acc)
			mins += float32(float32(float32(dmin*float32(m0))*xd[b0]) * float32(xs[b0]))
			mins += float32(float32(float32(dmin*float32(m1))*xd[b0+1]) * float32(xs[b0+1]))
		}
	}
	s := hsum(acc)
	archsimd.ClearAVXUpperBits()
	return s - mins
}
