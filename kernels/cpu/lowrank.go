package cpu

import (
	"sync"

	"github.com/cloison/cloison/kernels"
)

var lowRankPool = sync.Pool{New: func() any { return new(scratch) }}

// AddLowRank implements kernels.LowRankAdder: per row, the k rows of bt
// weighted by the row of x are summed with axpy (four at a time, then one,
// in order j = 0…k−1, the path's fused multiply-adds), and the sum is added
// to dst's row scaled by s (one more axpy).
func (b *Backend) AddLowRank(dst, x, bt kernels.Tensor, rows []int, s float32) error {
	if err := b.check(); err != nil {
		return err
	}
	d, err := b.tensor(dst, "low-rank output")
	if err != nil {
		return err
	}
	xt, err := b.tensor(x, "low-rank input")
	if err != nil {
		return err
	}
	w, err := b.tensor(bt, "low-rank weights")
	if err != nil {
		return err
	}
	if xt.cols != w.rows || w.cols != d.cols {
		return shapeErr("low-rank product of %d×%d and %d×%d into %d columns", xt.rows, xt.cols, w.rows, w.cols, d.cols)
	}
	if rows == nil && xt.rows != d.rows {
		return shapeErr("low-rank product of %d rows into %d", xt.rows, d.rows)
	}
	if rows != nil {
		if len(rows) != xt.rows {
			return shapeErr("low-rank product of %d rows with %d row indices", xt.rows, len(rows))
		}
		seen := make(map[int]bool, len(rows))
		for _, r := range rows {
			if r < 0 || r >= d.rows || seen[r] {
				return shapeErr("low-rank product into row %d of %d (or twice)", r, d.rows)
			}
			seen[r] = true
		}
	}
	if overlaps(d.data, xt.data) || overlaps(d.data, w.data) {
		return shapeErr("low-rank output aliases its input")
	}
	k := xt.cols
	b.eachRow(xt.rows, d.cols*k, func(i int) {
		sc := lowRankPool.Get().(*scratch)
		sum := grow(sc.q, d.cols)
		clear(sum)
		xr := xt.row(i)
		j := 0
		for ; j+4 <= k; j += 4 {
			c := [4]float32{xr[j], xr[j+1], xr[j+2], xr[j+3]}
			b.k.axpy4(sum, &c, w.row(j), w.row(j+1), w.row(j+2), w.row(j+3))
		}
		for ; j < k; j++ {
			b.k.axpy1(sum, xr[j], w.row(j))
		}
		r := i
		if rows != nil {
			r = rows[i]
		}
		b.k.axpy1(d.row(r), s, sum)
		sc.q = sum
		lowRankPool.Put(sc)
	})
	return nil
}
