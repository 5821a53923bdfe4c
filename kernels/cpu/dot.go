package cpu

// Inner loops of the matrix products.
//
// Every output element o of row r has one fixed reduction order, the same in
// every kernel below whatever the number of rows or columns it handles at
// once, so that a row's result never depends on the rest of the batch:
//
//	float weights:  s = 0; for i in order: s += round32(x[i]·w[i])
//	Q8_0 weights:   acc = 0; for each 32-block b in order:
//	                    s = 0; for j in order: s += round32(x[32b+j]·q[j])
//	                    acc += round32(d_b·s)
//
// The explicit float32 conversions forbid the compiler to fuse a multiply and
// an add into an FMA (the Go spec allows fusion otherwise, and arm64 does it),
// which could differ between two kernels.
//
// Several rows of x and w are handled at once only to keep more independent
// additions in flight (the loop is bound by add latency) and to load each
// value once for several products; the kernels are sized so that their
// accumulators stay in registers on amd64.

// dot1x1 returns Σ x[i]·w[i].
func dot1x1(x, w []float32) (s float32) {
	w = w[:len(x)]
	for i, v := range x {
		s += float32(v * w[i])
	}
	return s
}

// dot1x4 returns the dot products of x with four weight rows.
func dot1x4(x, w0, w1, w2, w3 []float32) (s0, s1, s2, s3 float32) {
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

// dot2x3 returns the dot products of two x rows with three weight rows:
// a* for x0, b* for x1.
func dot2x3(x0, x1, w0, w1, w2 []float32) (a0, a1, a2, b0, b1, b2 float32) {
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

func q8Scale(b *q8Block) float32 { return f16tab[uint16(b[0])|uint16(b[1])<<8] }

// q8dot1x1 returns the Q8_0 dot product of x with one weight row (rows of
// 34-byte blocks).
func q8dot1x1(x []float32, w []byte) (acc float32) {
	nb := len(x) / 32
	w = w[:nb*34]
	for b := range nb {
		xb := (*[32]float32)(x[b*32:])
		wb := (*q8Block)(w[b*34:])
		var s float32
		for j := range 32 {
			s += float32(xb[j] * float32(int8(wb[2+j])))
		}
		acc += float32(q8Scale(wb) * s)
	}
	return acc
}

// q8dot1x4 returns the Q8_0 dot products of x with four weight rows.
func q8dot1x4(x []float32, w0, w1, w2, w3 []byte) (t0, t1, t2, t3 float32) {
	nb := len(x) / 32
	w0, w1, w2, w3 = w0[:nb*34], w1[:nb*34], w2[:nb*34], w3[:nb*34]
	for b := range nb {
		xb := (*[32]float32)(x[b*32:])
		a, c, d, e := (*q8Block)(w0[b*34:]), (*q8Block)(w1[b*34:]), (*q8Block)(w2[b*34:]), (*q8Block)(w3[b*34:])
		var s0, s1, s2, s3 float32
		for j := range 32 {
			v := xb[j]
			s0 += float32(v * float32(int8(a[2+j])))
			s1 += float32(v * float32(int8(c[2+j])))
			s2 += float32(v * float32(int8(d[2+j])))
			s3 += float32(v * float32(int8(e[2+j])))
		}
		t0 += float32(q8Scale(a) * s0)
		t1 += float32(q8Scale(c) * s1)
		t2 += float32(q8Scale(d) * s2)
		t3 += float32(q8Scale(e) * s3)
	}
	return
}

// q8dot2x3 is q8dot1x4's two-row form, on weights already unpacked to
// float32 quants q (len cols) and per-block scales d (len cols/32).
func q8dot2x3(x0, x1, q0, q1, q2, d0, d1, d2 []float32) (a0, a1, a2, b0, b1, b2 float32) {
	nb := len(x0) / 32
	x1, q0, q1, q2 = x1[:nb*32], q0[:nb*32], q1[:nb*32], q2[:nb*32]
	d0, d1, d2 = d0[:nb], d1[:nb], d2[:nb]
	for b := range nb {
		u := (*[32]float32)(x0[b*32:])
		v := (*[32]float32)(x1[b*32:])
		p0, p1, p2 := (*[32]float32)(q0[b*32:]), (*[32]float32)(q1[b*32:]), (*[32]float32)(q2[b*32:])
		var sa0, sa1, sa2, sb0, sb1, sb2 float32
		for j := range 32 {
			xu, xv := u[j], v[j]
			p := p0[j]
			sa0 += float32(xu * p)
			sb0 += float32(xv * p)
			p = p1[j]
			sa1 += float32(xu * p)
			sb1 += float32(xv * p)
			p = p2[j]
			sa2 += float32(xu * p)
			sb2 += float32(xv * p)
		}
		a0 += float32(d0[b] * sa0)
		a1 += float32(d1[b] * sa1)
		a2 += float32(d2[b] * sa2)
		b0 += float32(d0[b] * sb0)
		b1 += float32(d1[b] * sb1)
		b2 += float32(d2[b] * sb2)
	}
	return
}

// q8dot1x1f is q8dot1x1 on unpacked quants and scales.
func q8dot1x1f(x, q, d []float32) (acc float32) {
	nb := len(x) / 32
	q, d = q[:nb*32], d[:nb]
	for b := range nb {
		xb := (*[32]float32)(x[b*32:])
		qb := (*[32]float32)(q[b*32:])
		var s float32
		for j := range 32 {
			s += float32(xb[j] * qb[j])
		}
		acc += float32(d[b] * s)
	}
	return acc
}
