package cpu

import "github.com/cloison/cloison/kernels"

// Prefill tiles of the k-quant integer products (vector paths): four
// activation rows, quantized to Q8_K blocks (kquant.go), against each Q4_K
// or Q6_K weight row of a task's block in one call. The weights' bits,
// scales and minimums are unpacked once for the four rows (what a one-row
// product spends most of its instructions on); every output element keeps
// the integer lanes and float steps of the one-row kernel (q4ki1x1,
// q6ki1x1), so it has the same bits and a row's result is the same in any
// batch (TestKQTile).

// q4kTile4 sets out[r·os+j] = q4ki1x1 of activation row r (r < 4: q8kActs
// rows at strides xqs, xds, bss) with Q4_K weight row j of w (consecutive
// rows of xds super-blocks); nil where the CPU has no such kernel.
// q6kTile4 is the same for Q6_K weights; q4kTile8 for eight activation
// rows (the avx512 path with AVX512_VNNI: VPDPWSSD, the same integers).
var q4kTile4, q6kTile4, q4kTile8 func(xq []int8, xqs int, xd []float32, xds int, bs []int16, bss int, w []byte, out []float32, os int)

// kqTile computes the outputs of rows [r0, r) of a Q4_K or Q6_K product
// block four rows at a time and returns r, the first row left to the caller
// (r0 when it does nothing: another type, no tile kernel, or no Q8_K
// activations).
func (k *kset) kqTile(dst *tensor, acts *q8acts, m *matrix, r0, r1, o0, o1 int) int {
	tile := q4kTile4
	if m.dt == kernels.Q6_K {
		tile = q6kTile4
	}
	if acts == nil || acts.k == nil || !needsQ8K(m.dt) || k.q4ki1x1 == nil || tile == nil {
		return r0
	}
	a, cols := acts.k, m.cols
	nb := cols / 256
	r := r0
	if m.dt == kernels.Q4_K && k.avx512() && q4kTile8 != nil {
		for ; r+8 <= r1; r += 8 {
			xq, xd, bs := a.q[r*cols:(r+8)*cols], a.d[r*nb:(r+8)*nb], a.bs[r*cols/16:(r+8)*cols/16]
			q4kTile8(xq, cols, xd, nb, bs, cols/16, m.data[o0*m.rowBytes:o1*m.rowBytes], dst.data[r*dst.cols+o0:(r+7)*dst.cols+o1], dst.cols)
		}
	}
	for ; r+4 <= r1; r += 4 {
		xq, xd, bs := a.q[r*cols:(r+4)*cols], a.d[r*nb:(r+4)*nb], a.bs[r*cols/16:(r+4)*cols/16]
		tile(xq, cols, xd, nb, bs, cols/16, m.data[o0*m.rowBytes:o1*m.rowBytes], dst.data[r*dst.cols+o0:(r+3)*dst.cols+o1], dst.cols)
	}
	return r
}
