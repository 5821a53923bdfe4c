package cpu

import "math"

// Inner loops of the matrix products.
//
// Every output element has one fixed reduction order, the same in every
// kernel below whatever the number of rows or columns it handles at once, so
// that a row's result never depends on the rest of the batch:
//
//	s = 0; for i in order: s += round32(x[i]·w[i])
//
// where w[i] is the weight decoded to float32 exactly as dequantRow decodes
// it. For F32, F16, BF16 and Q8_0 the decoded value is exact (a Q8_0 weight
// q·d has at most 8+11 significant bits), so a kernel may decode in
// registers (decode) or into a scratch block (prefill) and get the same
// bits.
//
// The explicit float32 conversions forbid the compiler to fuse a multiply and
// an add into an FMA (the Go spec allows fusion otherwise, and arm64 does it),
// which could differ between two kernels.
//
// Several rows of x and w are handled at once only to keep more independent
// additions in flight (the loop is bound by add latency) and to load each
// value once for several products; the kernels are sized so that their
// accumulators stay in registers on amd64.

// dot1x1Go returns Σ x[i]·w[i].
func dot1x1Go(x, w []float32) (s float32) {
	w = w[:len(x)]
	for i, v := range x {
		s += float32(v * w[i])
	}
	return s
}

// dot1x4Go returns the dot products of x with four weight rows.
func dot1x4Go(x, w0, w1, w2, w3 []float32) (s0, s1, s2, s3 float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	for i, v := range x {
		s0 += float32(v * w0[i])
		s1 += float32(v * w1[i])
		s2 += float32(v * w2[i])
		s3 += float32(v * w3[i])
	}
	return
}

// dot2x3Go returns the dot products of two x rows with three weight rows:
// a* for x0, b* for x1.
func dot2x3Go(x0, x1, w0, w1, w2 []float32) (a0, a1, a2, b0, b1, b2 float32) {
	n := len(x0)
	x1, w0, w1, w2 = x1[:n], w0[:n], w1[:n], w2[:n]
	for i, u := range x0 {
		v := x1[i]
		p := w0[i]
		a0 += float32(u * p)
		b0 += float32(v * p)
		p = w1[i]
		a1 += float32(u * p)
		b1 += float32(v * p)
		p = w2[i]
		a2 += float32(u * p)
		b2 += float32(v * p)
	}
	return
}

// q8Block is one GGUF Q8_0 block: f16 scale, 32 int8 quants.
type q8Block = [34]byte

// i8tab[b] is float32(int8(b)): a load is cheaper than an int→float
// conversion in the decode loop.
var i8tab = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(int8(i))
	}
	return t
}()

func q8Scale(b *q8Block) float32 { return f16tab[uint16(b[0])|uint16(b[1])<<8] }

// q8dot1x1Go returns the dot product of x with one Q8_0 weight row, decoding
// each weight in registers.
func q8dot1x1Go(x []float32, w []byte) (s float32) {
	nb := len(x) / 32
	w = w[:nb*34]
	for b := range nb {
		xb := (*[32]float32)(x[b*32:])
		wb := (*q8Block)(w[b*34:])
		d := q8Scale(wb)
		for j := range 32 {
			s += float32(xb[j] * float32(i8tab[wb[2+j]]*d))
		}
	}
	return s
}

// q8dot1x4Go returns the dot products of x with four Q8_0 weight rows.
func q8dot1x4Go(x []float32, w0, w1, w2, w3 []byte) (s0, s1, s2, s3 float32) {
	nb := len(x) / 32
	w0, w1, w2, w3 = w0[:nb*34], w1[:nb*34], w2[:nb*34], w3[:nb*34]
	for b := range nb {
		xb := (*[32]float32)(x[b*32:])
		a, c, d, e := (*q8Block)(w0[b*34:]), (*q8Block)(w1[b*34:]), (*q8Block)(w2[b*34:]), (*q8Block)(w3[b*34:])
		da, dc, dd, de := q8Scale(a), q8Scale(c), q8Scale(d), q8Scale(e)
		for j := range 32 {
			v := xb[j]
			s0 += float32(v * float32(i8tab[a[2+j]]*da))
			s1 += float32(v * float32(i8tab[c[2+j]]*dc))
			s2 += float32(v * float32(i8tab[d[2+j]]*dd))
			s3 += float32(v * float32(i8tab[e[2+j]]*de))
		}
	}
	return
}

// f16dot1x1Go returns the dot product of x with one F16 weight row.
func f16dot1x1Go(x []float32, w []uint16) (s float32) {
	w = w[:len(x)]
	for i, v := range x {
		s += float32(v * f16tab[w[i]])
	}
	return s
}

// f16dot1x4Go returns the dot products of x with four F16 weight rows.
func f16dot1x4Go(x []float32, w0, w1, w2, w3 []uint16) (s0, s1, s2, s3 float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	for i, v := range x {
		s0 += float32(v * f16tab[w0[i]])
		s1 += float32(v * f16tab[w1[i]])
		s2 += float32(v * f16tab[w2[i]])
		s3 += float32(v * f16tab[w3[i]])
	}
	return
}

func bf16(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// bf16dot1x1Go returns the dot product of x with one BF16 weight row.
func bf16dot1x1Go(x []float32, w []uint16) (s float32) {
	w = w[:len(x)]
	for i, v := range x {
		s += float32(v * bf16(w[i]))
	}
	return s
}

// bf16dot1x4Go returns the dot products of x with four BF16 weight rows.
func bf16dot1x4Go(x []float32, w0, w1, w2, w3 []uint16) (s0, s1, s2, s3 float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	for i, v := range x {
		s0 += float32(v * bf16(w0[i]))
		s1 += float32(v * bf16(w1[i]))
		s2 += float32(v * bf16(w2[i]))
		s3 += float32(v * bf16(w3[i]))
	}
	return
}

// axpy4Go adds w[0]·v0, …, w[3]·v3 to o, in that order for every element.
func axpy4Go(o []float32, w *[4]float32, v0, v1, v2, v3 []float32) {
	n := len(o)
	v0, v1, v2, v3 = v0[:n], v1[:n], v2[:n], v3[:n]
	w0, w1, w2, w3 := w[0], w[1], w[2], w[3]
	for d := range o {
		x := o[d] + float32(w0*v0[d])
		x += float32(w1 * v1[d])
		x += float32(w2 * v2[d])
		o[d] = x + float32(w3*v3[d])
	}
}

// axpy1Go adds w·v to o.
func axpy1Go(o []float32, w float32, v []float32) {
	v = v[:len(o)]
	for d := range o {
		o[d] += float32(w * v[d])
	}
}
