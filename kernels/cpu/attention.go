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
	return a.AttentionWith(layer, out, q, spans, kernels.AttentionOptions{})
}

// AttentionWith is Attention with a score scale and a sliding window
// (kernels.WindowAttender): a query at position p reads only the keys and
// values of positions max(0, p−Window+1) … p, in position order as
// Attention does, so a window wider than the sequence gives bit-identical
// results to Attention.
func (a *arena) AttentionWith(layer int, out, q kernels.Tensor, spans []kernels.Span, o kernels.AttentionOptions) error {
	b := a.b
	if o.Window < 0 || o.Scale < 0 || math.IsInf(float64(o.Scale), 0) || math.IsNaN(float64(o.Scale)) {
		return shapeErr("attention options %+v", o)
	}
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
	// Task t: span, query j, kv head kh (its group of query heads share
	// each key and value row loaded).
	qHeads := qt.cols / hd
	offs := make([]int, len(spans)+1)
	for i, s := range spans {
		offs[i+1] = offs[i] + s.N*a.c.KVHeads
	}
	group := qHeads / a.c.KVHeads
	scale := float32(1 / math.Sqrt(float64(hd)))
	if o.Scale != 0 {
		scale = o.Scale
	}
	b.w.run(offs[len(spans)], func(t int) {
		si := 0
		for offs[si+1] <= t {
			si++
		}
		s := spans[si]
		t -= offs[si]
		j, kh := t/a.c.KVHeads, t%a.c.KVHeads
		n := s.Pos + j + 1 // positions read: [lo, n)
		lo := 0
		if o.Window > 0 {
			lo = max(0, n-o.Window)
		}
		sc := scorePool.Get().(*attnScratch)
		sc.scores = grow(sc.scores, group*(n-lo))
		qr, or := qt.row(s.Row+j), ot.row(s.Row+j)
		a.group(sc, qr[kh*group*hd:(kh+1)*group*hd], or[kh*group*hd:(kh+1)*group*hd], s, layer, kh, group, lo, n, scale)
		scorePool.Put(sc)
	})
	return nil
}

// attnScratch is one task's scores (group × positions) and value offsets.
type attnScratch struct {
	scores []float32
	offs   []int
	xs, ws [4][]float32 // a register tile's rows (pooled: they escape)
	out    [16]float32
}

var scorePool = sync.Pool{New: func() any { return new(attnScratch) }}

// group computes the attention of the group query heads q (group × hd) that
// read kv head kh, over positions [lo, n), into o (group × hd). Per output
// element the order is that of one head alone: scores (dot1x4's order, also
// in a register tile of several heads), the softmax, values in position
// order (axpy's chain, also with the output held in registers).
func (a *arena) group(sc *attnScratch, q, o []float32, s kernels.Span, layer, kh, group, lo, n int, scale float32) {
	hd := a.c.HeadDim
	pt := a.c.PageTokens
	k := a.b.k
	// Positions are relative to lo from here on: index p is position lo+p.
	key := func(p int) []float32 {
		p += lo
		return a.kv(s.Table.Page(p/pt), layer, 0, p%pt)[kh*hd : (kh+1)*hd]
	}
	n -= lo
	head := func(g int) []float32 { return q[g*hd : (g+1)*hd : (g+1)*hd] }
	scores := func(g int) []float32 { return sc.scores[g*n : (g+1)*n : (g+1)*n] }
	g := 0
	if k.tile != nil && group > 1 {
		// Heads tileRows at a time (a last, partial tile repeats its last head
		// in the spare rows), four positions at a time.
		xs, ws, out := &sc.xs, &sc.ws, &sc.out
		for ; g < group; g += k.tileRows {
			rows := min(k.tileRows, group-g)
			for i := range k.tileRows {
				xs[i] = head(g + min(i, rows-1))
			}
			p := 0
			for ; p+4 <= n; p += 4 {
				*ws = [4][]float32{key(p), key(p + 1), key(p + 2), key(p + 3)}
				k.tile(xs, ws, out)
				for i := range rows {
					copy(scores(g + i)[p:p+4], out[4*i:4*i+4])
				}
			}
			for ; p < n; p++ {
				for i := range rows {
					scores(g + i)[p] = k.dot1x1(xs[i], key(p))
				}
			}
		}
	}
	for ; g < group; g++ {
		qh, sg := head(g), scores(g)
		p := 0
		for ; p+4 <= n; p += 4 {
			sg[p], sg[p+1], sg[p+2], sg[p+3] = k.dot1x4(qh, key(p), key(p+1), key(p+2), key(p+3))
		}
		for ; p < n; p++ {
			sg[p] = k.dot1x1(qh, key(p))
		}
	}
	// Value offsets in the arena, once for the group.
	sc.offs = sc.offs[:0]
	if k.wsum != nil {
		for p := lo; p < lo+n; p++ {
			sc.offs = append(sc.offs, a.kvOffset(s.Table.Page(p/pt), layer, 1, p%pt)+kh*hd)
		}
	}
	for g := range group {
		a.softmaxValues(scores(g), o[g*hd:(g+1)*hd:(g+1)*hd], s, layer, kh, lo, n, scale, sc.offs)
	}
}

// softmaxValues turns one head's scores of positions [lo, lo+n) into its
// output: softmax (max, exp
// and the float64 normaliser in position order), then values in position
// order, then the division.
func (a *arena) softmaxValues(scores, oh []float32, s kernels.Span, layer, kh, lo, n int, scale float32, voffs []int) {
	hd := a.c.HeadDim
	pt := a.c.PageTokens
	m := float32(math.Inf(-1))
	for i, v := range scores[:n] {
		v = float32(v * scale)
		scores[i] = v
		m = max(m, v)
	}
	var sum float64
	if k := a.b.k; k.expSub != nil {
		k.expSub(scores[:n], m)
		for _, e := range scores[:n] {
			sum += float64(e)
		}
	} else {
		for i, v := range scores[:n] {
			e := expf(v - m)
			scores[i] = e
			sum += float64(e)
		}
	}
	clear(oh)
	if k := a.b.k; k.wsum == nil || !k.wsum(oh, scores[:n], a.data, voffs) {
		val := func(p int) []float32 {
			p += lo
			return a.kv(s.Table.Page(p/pt), layer, 1, p%pt)[kh*hd : (kh+1)*hd : (kh+1)*hd]
		}
		// Four positions per pass over oh; each element still adds the
		// positions in order.
		p := 0
		for ; p+4 <= n; p += 4 {
			k.axpy4(oh, (*[4]float32)(scores[p:]), val(p), val(p+1), val(p+2), val(p+3))
		}
		for ; p < n; p++ {
			k.axpy1(oh, scores[p], val(p))
		}
	}
	inv := float32(1 / sum)
	for d := range oh {
		oh[d] *= inv
	}
}
