package cpu

import (
	"math"

	"github.com/cloison/cloison/kernels"
)

// Integer products of the other block types (vector paths), as llama.cpp's
// ggml_vec_dot_q4_0_q8_0, ggml_vec_dot_q4_K_q8_K and ggml_vec_dot_q6_K_q8_K
// do them:
//
//   - Q4_0 weights meet the activations quantized to Q8 blocks of 32
//     (q8.go): per block the exact integer Σ (q−8)·xq, scaled by
//     round32(d_w·d_x), lanes as Q8_0.
//   - Q4_K and Q6_K weights meet the activations quantized to Q8_K blocks
//     of 256 (one scale d_x = max|x|/127 per 256 values, and the sums of
//     every 16 quantized values). Q6_K: per super-block the integer
//     Σ_sub sc·Σ q·xq is exact in eight int32 lanes (the offset −32 from
//     VPMADDUBSW of 32 with xq); the lanes become float32 once per
//     super-block,
//
//	lane = fma(float32(isum), round32(d·d_x), lane)
//
//     over super-blocks in order, lanes combined as hsum8.
//
// Q4_K on every amd64 vector path has the amx order (q4kamx_amd64.go): per
// super-block the exact integers of all 256 values, isum = Σ sc·q·xq and
// msum = Σ m·Σ xq (the minimums against the 32-value sums), then
//
//	acc = fma(float32(isum), round32(d·d_x), acc); acc = fma(−float32(msum), round32(dmin·d_x), acc)
//
// over super-blocks in order from +0 (one accumulator, no lanes): what an
// AMX tile's exact sums allow, and what lets the VNNI and AVX2 prefill
// tiles hold one activation row a lane (q4kblk_amd64.s); prefill and
// decode alike. (neon: its own, dot_arm64.go.)
//
// On AVX-512 (avx512, amx) the quantization's maximum and loop run in
// assembly (q8k_amd64.s) with the Go loop's bits.
//
// The activation rounding of a Q8_K block costs at most max|x_B|/254 per
// element of its 256 (the conformance suite's extra MatMul term for the
// k-quants). Every product of a row with such weights, decode or prefill,
// goes this way, so a row's result never depends on the batch. The avx512
// path runs the same 256-bit kernels (the same bits as avx2).

// q8kActs holds activation rows quantized to Q8_K blocks of 256.
type q8kActs struct {
	q  []int8    // rows × cols
	d  []float32 // rows × cols/256
	bs []int16   // rows × cols/16: sums of 16 consecutive q
}

// quantizeRowQ8K quantizes x to Q8_K blocks: q (len(x) values), one scale
// d per 256 values, bs the sum of every 16 values of q. The block maximum
// is taken on the bits of |v| (for non-negative floats their order as
// integers, a branch-free max); a block holding a NaN takes
// quantizeBlockQ8K's float max, so every bit is that of
// quantizeBlockQ8K (TestQuantizeRowQ8K).
func quantizeRowQ8K(q []int8, d []float32, bs []int16, x []float32) {
	for b := range d {
		xb := (*[256]float32)(x[b*256 : b*256+256])
		var m uint32
		if q8kMax != nil {
			m = q8kMax(xb)
		} else {
			for _, v := range xb {
				m = max(m, math.Float32bits(v)&^(1<<31))
			}
		}
		qb := (*[256]int8)(q[b*256 : b*256+256])
		bb := (*[16]int16)(bs[b*16 : b*16+16])
		if m > 0x7f800000 { // a NaN
			d[b] = quantizeBlockQ8K(qb, bb, xb)
			continue
		}
		d[b] = quantizeScaledQ8K(qb, bb, xb, math.Float32frombits(m))
	}
}

// quantizeBlockQ8K quantizes one block of 256 and returns its scale
// (the reference order: Go's float max).
func quantizeBlockQ8K(q *[256]int8, bs *[16]int16, x *[256]float32) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, abs32(v))
	}
	return quantizeScaledQ8K(q, bs, x, amax)
}

// quantizeScaledQ8K quantizes one block of 256 whose largest magnitude is
// amax and returns its scale.
func quantizeScaledQ8K(q *[256]int8, bs *[16]int16, x *[256]float32, amax float32) float32 {
	dd := amax / 127
	var id float32
	if dd != 0 {
		id = 1 / dd
	}
	if q8kBlock != nil {
		q8kBlock(q, bs, x, id)
		return dd
	}
	for g := range 16 {
		var s int32
		xg := (*[16]float32)(x[g*16 : g*16+16])
		qg := (*[16]int8)(q[g*16 : g*16+16])
		for j, v := range xg {
			const magic = 12582912 // round half even, as quantizeRowQ8
			r := float32(float32(v*id)+magic) - magic
			c := max(-127, min(127, int32(r)))
			qg[j] = int8(c)
			s += c
		}
		bs[g] = int16(s)
	}
	return dd
}

// q8kMax and q8kBlock are quantizeRowQ8K's maximum and quantizeScaledQ8K's
// loop in assembly, with their bits (amd64 with AVX-512; nil elsewhere).
var (
	q8kMax   func(x *[256]float32) uint32
	q8kBlock func(q *[256]int8, bs *[16]int16, x *[256]float32, id float32)
)

// needsQ8 and needsQ8K report which activation quantizations the products
// of a job need on a path with integer products.
func needsQ8(dt kernels.DType) bool  { return dt == kernels.Q8_0 || dt == kernels.Q4_0 }
func needsQ8K(dt kernels.DType) bool { return dt == kernels.Q4_K || dt == kernels.Q6_K }

// hasInt reports whether the path has an integer kernel for weights of
// type dt (on a path with integer Q8_0 a type without one, such as Q4_K on
// neon, takes the float kernels like Q4_1 does).
func (k *kset) hasInt(dt kernels.DType) bool {
	switch dt {
	case kernels.Q8_0:
		return k.q8i1x4 != nil && !k.q8float
	case kernels.Q4_0:
		return k.q40i1x1 != nil
	case kernels.Q4_K:
		return k.q4ki1x1 != nil
	case kernels.Q6_K:
		return k.q6ki1x1 != nil
	}
	return false
}
