package cpu

import (
	"math"
	"sync"

	"github.com/cloison/cloison/kernels"
)

// Attention computes causal grouped-query attention through block tables.
// Every page is checked (tag and fill) before any is read; then tasks of
// (query row, kv head) run in parallel, each owning the output of the query
// heads of its group. Per output element the order is fixed: scores in
// position order, the softmax normaliser summed in float64 in position
// order, values accumulated in position order.
func (a *arena) Attention(layer int, out, q kernels.Tensor, spans []kernels.Span) error {
	b := a.b
	if err := b.check(); err != nil {
		return err
	}
	ts, err := b.sameShape("attention", out, q)
	if err != nil {
		return err
	}
	ot, qt := ts[0], ts[1]
	hd := a.c.HeadDim
	if qt.cols%hd != 0 || (qt.cols/hd)%a.c.KVHeads != 0 {
		return shapeErr("attention query rows of %d for %d kv heads of %d", qt.cols, a.c.KVHeads, hd)
	}
	if overlaps(ot.data, qt.data) {
		return shapeErr("attention output aliases its query")
	}
	if err := a.checkSpans("Attention", layer, qt.rows, spans); err != nil {
		return err
	}
	for _, s := range spans {
		if err := a.checkRead(s.Table, s.Pos+s.N, layer); err != nil {
			return err
		}
	}
	// Task t: span, query j, kv head.
	offs := make([]int, len(spans)+1)
	for i, s := range spans {
		offs[i+1] = offs[i] + s.N*a.c.KVHeads
	}
	group := qt.cols / hd / a.c.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	b.w.run(offs[len(spans)], func(t int) {
		si := 0
		for offs[si+1] <= t {
			si++
		}
		s := spans[si]
		t -= offs[si]
		j, kh := t/a.c.KVHeads, t%a.c.KVHeads
		n := s.Pos + j + 1 // positions read
		sc := scorePool.Get().(*[]float32)
		scores := grow(*sc, n)
		qrow, orow := qt.row(s.Row+j), ot.row(s.Row+j)
		for h := kh * group; h < (kh+1)*group; h++ {
			qh := qrow[h*hd : (h+1)*hd]
			oh := orow[h*hd : (h+1)*hd]
			a.head(scores, qh, oh, s, layer, kh, n, scale)
		}
		*sc = scores
		scorePool.Put(sc)
	})
	return nil
}

var scorePool = sync.Pool{New: func() any { return new([]float32) }}

// head computes one query head's attention over positions [0, n).
func (a *arena) head(scores, qh, oh []float32, s kernels.Span, layer, kh, n int, scale float32) {
	hd := a.c.HeadDim
	pt := a.c.PageTokens
	m := float32(math.Inf(-1))
	for p0 := 0; p0 < n; p0 += pt {
		page := s.Table.Page(p0 / pt)
		for slot := 0; slot < min(pt, n-p0); slot++ {
			k := a.kv(page, layer, 0, slot)[kh*hd : (kh+1)*hd]
			v := float32(dot1x1(qh, k) * scale)
			scores[p0+slot] = v
			m = max(m, v)
		}
	}
	var sum float64
	for i, v := range scores[:n] {
		e := expf(v - m)
		scores[i] = e
		sum += float64(e)
	}
	clear(oh)
	for p0 := 0; p0 < n; p0 += pt {
		page := s.Table.Page(p0 / pt)
		for slot := 0; slot < min(pt, n-p0); slot++ {
			v := a.kv(page, layer, 1, slot)[kh*hd : (kh+1)*hd]
			w := scores[p0+slot]
			v = v[:len(oh)]
			for d := range oh {
				oh[d] += float32(w * v[d])
			}
		}
	}
	inv := float32(1 / sum)
	for d := range oh {
		oh[d] *= inv
	}
}
