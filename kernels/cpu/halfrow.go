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
	m.dequantRow(dst, r)
}
