package cpu

import "github.com/cloison/cloison/kernels"

// dequantRow is m.dequantRow with the path's vector conversion of F16 and
// BF16 rows (the same values): a decode batch of a few sequences decodes
// each weight block once per task for only those few rows, so a table load
// per weight would cost more than the products.
func (k *kset) dequantRow(m *matrix, dst []float32, r int) {
	if k.halfRow != nil && (m.dt == kernels.F16 || m.dt == kernels.BF16) {
		k.halfRow(m.dt == kernels.BF16, dst[:m.cols], m.u16[r*m.cols:(r+1)*m.cols])
		return
	}
	if k.q8row != nil && m.dt == kernels.Q8_0 {
		k.q8row(dst[:m.cols], m.data[r*m.rowBytes:(r+1)*m.rowBytes])
		return
	}
	m.dequantRow(dst, r)
}

// halfTail4 finishes a four-row half-precision dot product whose first nv
// elements a vector kernel summed into out: the remaining elements are
// added in order, each weight decoded as the vector kernels decode it
// (f16tab, bf16), so every path's tail has the same bits.
func halfTail4(bf bool, x []float32, w0, w1, w2, w3 []uint16, nv int, out [4]float32) (s0, s1, s2, s3 float32) {
	s0, s1, s2, s3 = out[0], out[1], out[2], out[3]
	dec := func(h uint16) float32 { return f16tab[h] }
	if bf {
		dec = bf16
	}
	for i := nv; i < len(x); i++ {
		v := x[i]
		s0 += float32(v * dec(w0[i]))
		s1 += float32(v * dec(w1[i]))
		s2 += float32(v * dec(w2[i]))
		s3 += float32(v * dec(w3[i]))
	}
	return
}
