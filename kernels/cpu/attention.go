package cpu

import (
	"math"
	"sync"

	"github.com/cloison/cloison/kernels"
)

// Attention computes causal grouped-query attention through block tables.
// Every page is checked (tag and fill) before any is read; then tasks of
// (query row, query head) run in parallel, each owning its output head. Per output element the order is fixed: scores in
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
	if err := a.CheckSpans("Attention", layer, qt.rows, spans); err != nil {
		return err
	}
	// Each output row belongs to one span (tasks write their rows).
	if err := kernels.CheckRows(spans); err != nil {
		return err
	}
	for _, s := range spans {
		if err := a.CheckRead(s.Table, s.Pos+s.N, layer); err != nil {
			return err
		}
	}
	// Task t: span, query j, query head h (reading kv head h/group).
	qHeads := qt.cols / hd
	offs := make([]int, len(spans)+1)
	for i, s := range spans {
		offs[i+1] = offs[i] + s.N*qHeads
	}
	group := qHeads / a.c.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	b.w.run(offs[len(spans)], func(t int) {
		si := 0
		for offs[si+1] <= t {
			si++
		}
		s := spans[si]
		t -= offs[si]
		j, h := t/qHeads, t%qHeads
		n := s.Pos + j + 1 // positions read
		sc := scorePool.Get().(*[]float32)
		scores := grow(*sc, n)
		qh := qt.row(s.Row + j)[h*hd : (h+1)*hd]
		oh := ot.row(s.Row + j)[h*hd : (h+1)*hd]
		a.head(scores, qh, oh, s, layer, h/group, n, scale)
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
	// Scores four positions at a time: four independent sums in flight
	// (each still in the fixed order of dot1x1).
	key := func(p int) []float32 {
		return a.kv(s.Table.Page(p/pt), layer, 0, p%pt)[kh*hd : (kh+1)*hd]
	}
	p := 0
	for ; p+4 <= n; p += 4 {
		scores[p], scores[p+1], scores[p+2], scores[p+3] = a.b.k.dot1x4(qh, key(p), key(p+1), key(p+2), key(p+3))
	}
	for ; p < n; p++ {
		scores[p] = a.b.k.dot1x1(qh, key(p))
	}
	m := float32(math.Inf(-1))
	for i, v := range scores[:n] {
		v = float32(v * scale)
		scores[i] = v
		m = max(m, v)
	}
	var sum float64
	for i, v := range scores[:n] {
		e := expf(v - m)
		scores[i] = e
		sum += float64(e)
	}
	clear(oh)
	val := func(p int) []float32 {
		return a.kv(s.Table.Page(p/pt), layer, 1, p%pt)[kh*hd : (kh+1)*hd : (kh+1)*hd]
	}
	// Four positions per pass over oh; each element still adds the
	// positions in order.
	p = 0
	for ; p+4 <= n; p += 4 {
		a.b.k.axpy4(oh, (*[4]float32)(scores[p:]), val(p), val(p+1), val(p+2), val(p+3))
	}
	for ; p < n; p++ {
		a.b.k.axpy1(oh, scores[p], val(p))
	}
	inv := float32(1 / sum)
	for d := range oh {
		oh[d] *= inv
	}
}
