package cpu

import "math"

// The BF16 order of the avx512 path where the CPU has AVX512_BF16
// (VDPBF16PS), as llama.cpp multiplies BF16 weights: the activations are
// rounded to BF16 first (its vec_dot_type for BF16 is BF16), so each
// product of two BF16 values is exact in float32 and two of them are
// added per lane and step. Per output element, n values:
//
//	x'[i] = bf16Round(x[i])
//	lane[l] = +0; per step s of 32 values, i = 32s+2l:
//	    lane[l] = ftz(lane[l] + x'[i+1]·w[i+1]); lane[l] = ftz(lane[l] + x'[i]·w[i])
//	s = hsum(lanes)   (the avx512 path's: lanes l and l+8 first, then avx2's)
//	s += x'[i]·w[i] for the tail i ≥ n&^31, ascending
//
// where BF16 inputs of a lane step read denormals as zero and ftz flushes
// a denormal sum to zero (the instruction's definition, which does not
// consult MXCSR). bf16dpRef is this order in Go (the tests' oracle).

// bf16Round is VCVTNEPS2BF16: v rounded to BF16, nearest even, a
// denormal read as zero, a NaN kept a NaN (quieted).
func bf16Round(v float32) uint16 {
	b := math.Float32bits(v)
	switch {
	case b&0x7fffffff > 0x7f800000:
		return uint16(b>>16) | 0x40
	case b&0x7f800000 == 0:
		return uint16(b>>16) & 0x8000
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// bf16DAZ is a BF16 value as a lane step reads it: a denormal as zero.
func bf16DAZ(h uint16) float32 {
	if h&0x7f80 == 0 {
		h &= 0x8000
	}
	return bf16(h)
}

// ftz flushes a denormal float32 to zero of its sign.
func ftz(v float32) float32 {
	if b := math.Float32bits(v); b&0x7f800000 == 0 {
		return math.Float32frombits(b & 0x80000000)
	}
	return v
}

// hsum16 is the avx512 path's sum of 16 lanes: lanes l and l+8 first,
// then ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)).
func hsum16(l *[16]float32) float32 {
	var h [8]float32
	for i := range h {
		h[i] = l[i] + l[i+8]
	}
	return ((h[0] + h[4]) + (h[2] + h[6])) + ((h[1] + h[5]) + (h[3] + h[7]))
}

// bf16dpRef is one output of the BF16 order, in Go.
func bf16dpRef(x []float32, w []uint16) float32 {
	n := len(x)
	nv := n &^ 31
	var lanes [16]float32
	for s := 0; s < nv; s += 32 {
		for l := range lanes {
			i := s + 2*l
			a := lanes[l]
			a = ftz(a + bf16DAZ(bf16Round(x[i+1]))*bf16DAZ(w[i+1]))
			a = ftz(a + bf16DAZ(bf16Round(x[i]))*bf16DAZ(w[i]))
			lanes[l] = a
		}
	}
	return bf16dpTail(hsum16(&lanes), x, w, nv)
}

// bf16dpTail adds the tail i ≥ nv of the BF16 order to s, ascending (the
// same in the kernels' Go wrappers).
func bf16dpTail(s float32, x []float32, w []uint16, nv int) float32 {
	for i := nv; i < len(x); i++ {
		s += float32(bf16(bf16Round(x[i])) * bf16(w[i]))
	}
	return s
}
