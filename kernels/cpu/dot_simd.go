//go:build goexperiment.simd && amd64

package cpu

import (
	"simd/archsimd"
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

// q8w decodes the 32 weights of a Q8_0 block to four float vectors, exactly
// (q·d needs at most 19 significant bits).
func q8w(b *q8Block) (archsimd.Float32x8, archsimd.Float32x8, archsimd.Float32x8, archsimd.Float32x8) {
	d := archsimd.BroadcastFloat32x8(q8Scale(b))
	q := archsimd.LoadInt8x32((*[32]int8)(unsafeInt8(b[2:34])))
	lo, hi := q.GetLo(), q.GetHi()
	lo16, hi16 := lo.ExtendToInt16(), hi.ExtendToInt16()
	w0 := lo16.GetLo().ExtendToInt32().ConvertToFloat32().Mul(d)
	w1 := lo16.GetHi().ExtendToInt32().ConvertToFloat32().Mul(d)
	w2 := hi16.GetLo().ExtendToInt32().ConvertToFloat32().Mul(d)
	w3 := hi16.GetHi().ExtendToInt32().ConvertToFloat32().Mul(d)
	return w0, w1, w2, w3
}

func q8dot1x1(x []float32, w []byte) float32 {
	if !useSIMD {
		return q8dot1x1Go(x, w)
	}
	nb := len(x) / 32
	w = w[:nb*34]
	var acc archsimd.Float32x8
	for b := range nb {
		w0, w1, w2, w3 := q8w((*q8Block)(w[b*34:]))
		acc = ld(x, b*32).MulAdd(w0, acc)
		acc = ld(x, b*32+8).MulAdd(w1, acc)
		acc = ld(x, b*32+16).MulAdd(w2, acc)
		acc = ld(x, b*32+24).MulAdd(w3, acc)
	}
	s := hsum(acc)
	archsimd.ClearAVXUpperBits()
	return s
}

func q8dot1x4(x []float32, r0, r1, r2, r3 []byte) (s0, s1, s2, s3 float32) {
	if !useSIMD {
		return q8dot1x4Go(x, r0, r1, r2, r3)
	}
	nb := len(x) / 32
	r0, r1, r2, r3 = r0[:nb*34], r1[:nb*34], r2[:nb*34], r3[:nb*34]
	var a0, a1, a2, a3 archsimd.Float32x8
	for b := range nb {
		x0, x1, x2, x3 := ld(x, b*32), ld(x, b*32+8), ld(x, b*32+16), ld(x, b*32+24)
		w0, w1, w2, w3 := q8w((*q8Block)(r0[b*34:]))
		a0 = x0.MulAdd(w0, a0)
		a0 = x1.MulAdd(w1, a0)
		a0 = x2.MulAdd(w2, a0)
		a0 = x3.MulAdd(w3, a0)
		w0, w1, w2, w3 = q8w((*q8Block)(r1[b*34:]))
		a1 = x0.MulAdd(w0, a1)
		a1 = x1.MulAdd(w1, a1)
		a1 = x2.MulAdd(w2, a1)
		a1 = x3.MulAdd(w3, a1)
		w0, w1, w2, w3 = q8w((*q8Block)(r2[b*34:]))
		a2 = x0.MulAdd(w0, a2)
		a2 = x1.MulAdd(w1, a2)
		a2 = x2.MulAdd(w2, a2)
		a2 = x3.MulAdd(w3, a2)
		w0, w1, w2, w3 = q8w((*q8Block)(r3[b*34:]))
		a3 = x0.MulAdd(w0, a3)
		a3 = x1.MulAdd(w1, a3)
		a3 = x2.MulAdd(w2, a3)
		a3 = x3.MulAdd(w3, a3)
	}
	s0, s1, s2, s3 = hsum(a0), hsum(a1), hsum(a2), hsum(a3)
	archsimd.ClearAVXUpperBits()
	return
}

// inRegister reports whether decode (one-row) products of dt decode weights
// in registers (decodeRow) rather than into a scratch block. With vector
// kernels only Q8_0 has an in-register vector decoder; F16 and BF16 go
// through the scratch block so that decode and prefill share the order.
func inRegister(dt kernels.DType) bool {
	if useSIMD {
		return dt == kernels.Q8_0
	}
	return dt == kernels.Q8_0 || dt == kernels.F16 || dt == kernels.BF16
}

func unsafeInt8(b []byte) []int8 {
	return unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(b))), len(b))
}
