package cpu

import (
	"math"
	"sort"
	"sync"

	"github.com/cloison/cloison/kernels"
)

// Attention computes causal grouped-query attention through block tables.
// Every page is checked (tag and fill) before any is read; then tasks of
// (span, kv head, block of attnRows query rows) run in parallel, each
// owning the output heads of its rows that read that kv head. The work is
// tiled as flash attention is: keys and values in blocks of attnKeys
// positions, an online softmax per query head, never a score matrix; see
// flash for the order, fixed per output element whatever the batch.
func (a *arena) Attention(layer int, out, q kernels.Tensor, spans []kernels.Span) error {
	return a.AttentionWith(layer, out, q, spans, kernels.AttentionOptions{})
}

// AttentionWith is Attention with a score scale and a sliding window
// (kernels.WindowAttender): a query at position p reads only the keys and
// values of positions max(0, p−Window+1) … p (the pages before the window
// keep their tag and fill checks, their keys and values are not read).
// Key blocks are still counted from position 0, so a window wider than the
// sequence gives bit-identical results to Attention.
// Bidirectional runs every query row to its span's end; a Bias (T5's
// relative positions) is added to each block's scores before online scales
// them. Both run flash alone (never flashDecode), so a row's bits do not
// depend on the other rows of its task.
func (a *arena) AttentionWith(layer int, out, q kernels.Tensor, spans []kernels.Span, o kernels.AttentionOptions) error {
	b := a.b
	if o.Window < 0 || o.Scale < 0 || math.IsInf(float64(o.Scale), 0) || math.IsNaN(float64(o.Scale)) || (o.Bidirectional && o.Window != 0) {
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
	// Task t: span, kv head kh, block qb of query rows (consecutive tasks
	// read the same kv head's keys and values, which stay in cache).
	qHeads := qt.cols / hd
	offs := make([]int, len(spans)+1)
	for i, s := range spans {
		offs[i+1] = offs[i] + (s.N+attnRows-1)/attnRows*a.c.KVHeads
	}
	group := qHeads / a.c.KVHeads
	var bias *relBias
	if o.Bias != nil {
		if err := o.Bias.Check(qHeads); err != nil {
			return err
		}
		bias = newRelBias(o.Bias, spans)
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	if o.Scale != 0 {
		scale = o.Scale
	}
	// One query row per task (decode) runs the path's decode kernels, with
	// flash's bits.
	var dk *decodeKernels
	switch {
	case o.Bidirectional || bias != nil:
		// flash alone: flashDecode has neither.
	case b.k.avx512() && hd%64 == 0:
		dk = decodeK
	case b.k.path == AVX2 && hd%64 == 0:
		dk = decodeK2
	}
	b.w.run(offs[len(spans)], func(t int) {
		// The span of task t: the last si with offs[si] <= t (a linear
		// scan here costs O(spans) per task, O(spans²) per call with a
		// span per row).
		si := sort.Search(len(spans), func(i int) bool { return offs[i+1] > t })
		s := spans[si]
		t -= offs[si]
		blocks := (s.N + attnRows - 1) / attnRows
		kh, qb := t/blocks, t%blocks
		sc := scorePool.Get().(*attnScratch)
		j0, j1 := qb*attnRows, min(s.N, (qb+1)*attnRows)
		if dk != nil && j1-j0 == 1 {
			a.flashDecode(dk, sc, qt, ot, s, layer, kh, group, j0, scale, o.Window)
		} else {
			a.flash(sc, qt, ot, s, layer, kh, group, j0, j1, scale, o.Window, o.Bidirectional, bias)
		}
		scorePool.Put(sc)
	})
	return nil
}

// The tiling of attention: a task takes attnRows query rows (all the query
// heads of one kv head: attnRows·group vectors) through the keys and
// values attnKeys positions at a time, a block of each staying in L1 while
// every vector of the task reads it (with F16 KV, converted once a task:
// 16 rows rather than 8 made a 2,048-token prefill 4% faster, AMD EPYC
// Zen 1, avx2, d=768).
const (
	attnRows = 16
	attnKeys = 64
)

// attnScratch is one task's scores (vectors × attnKeys), online-softmax
// state and a block's value offsets.
type attnScratch struct {
	scores []float32
	m      []float32    // running maximum per vector
	l      []float64    // running normaliser per vector
	offs   []int        // values of the block
	koffs  []int        // keys of the block (kset.scores)
	kbuf   []float32    // KVF16: the block's keys, converted
	vbuf   []float32    // KVF16: the block's values, converted
	pad    []float32    // flashDecode: the output of a short group's spare vectors
	xs, ws [4][]float32 // a register tile's rows (pooled: they escape)
	ov, sv [4][]float32 // wsum4's outputs and weights
	out    [16]float32
}

var scorePool = sync.Pool{New: func() any { return new(attnScratch) }}

// flash computes the attention of query rows [j0, j1) of span s for the
// query heads that read kv head kh. Vector i is row j0+i/group, head
// kh·group+i%group; it reads positions [lo, lim) with lim = s.Pos+row+1
// and lo = max(0, lim−window) when window > 0, else 0. Per vector the
// order is fixed and depends only on lo and lim, never on the other
// vectors of the task:
//
//   - key blocks [64b, 64b+64) ∩ [lo, lim), counted from position 0, in
//     order;
//   - scores q·k with dot1x4's order (the same in a register tile of
//     several vectors), times scale;
//   - per block: its maximum bm; m' = max(m, bm); when m' > m (and a
//     block came before) o and l are scaled by expf(m − m'); e = expf(s − m');
//     l += the block's float64 sum of e (four lanes, see online); o += e·v
//     with axpy's chain in position order (wsum: o held in registers);
//   - at the end o is multiplied by float32(1/l).
//
// A register tile of vectors starts at its first vector's lo (the
// smallest): the scores it computes below a later vector's lo are inside
// the first vector's window, and are never used.
func (a *arena) flash(sc *attnScratch, qt, ot *tensor, s kernels.Span, layer, kh, group, j0, j1 int, scale float32, window int, bidir bool, bias *relBias) {
	hd := a.c.HeadDim
	pt := a.c.PageTokens
	k := a.b.k
	nv := (j1 - j0) * group
	vec := func(t *tensor, i int) []float32 {
		h := kh*group + i%group
		return t.row(s.Row + j0 + i/group)[h*hd : (h+1)*hd : (h+1)*hd]
	}
	lim := func(i int) int { return s.Pos + j0 + i/group + 1 }
	if bidir {
		lim = func(int) int { return s.Pos + s.N }
	}
	lo := func(i int) int {
		if window > 0 {
			return max(0, lim(i)-window)
		}
		return 0
	}
	// The keys and values read: in the arena (KVF32), or a block's
	// converted into the task's scratch (KVF16: kbuf and vbuf hold
	// positions [kb, b1) of kv head kh, hd floats each), so that the
	// float32 code below computes over F16ToF32 of the stored halves.
	kdata, vdata := a.data, a.data
	kb := 0 // the block's first position read
	koff := func(p int) int { return a.kvOffset(s.Table.Page(p/pt), layer, 0, p%pt) + kh*hd }
	voff := func(p int) int { return a.kvOffset(s.Table.Page(p/pt), layer, 1, p%pt) + kh*hd }
	if a.half != nil {
		kdata, vdata = sc.kbuf, sc.vbuf
		koff = func(p int) int { return (p - kb) * hd }
		voff = koff
	}
	key := func(p int) []float32 {
		o := koff(p)
		return kdata[o : o+hd : o+hd]
	}
	sc.scores = grow(sc.scores, (nv+3)*attnKeys) // spare rows: a partial tile's repeats
	fast := k.scores != nil && k.tile != nil && hd%k.tileStep == 0
	sc.m = grow(sc.m, nv)
	sc.l = growAny(sc.l, nv)
	for i := range nv {
		sc.m[i], sc.l[i] = float32(math.Inf(-1)), 0
		clear(vec(ot, i))
	}
	scores := func(i int) []float32 { return sc.scores[i*attnKeys : (i+1)*attnKeys : (i+1)*attnKeys] }
	// w4: the path's wsum4 takes this head dimension (probed with no
	// positions).
	w4 := false
	wsum4 := k.wsum4
	if wsum4 != nil && nv >= 4 {
		for r := range 4 {
			sc.ov[r], sc.sv[r] = vec(ot, r), nil
		}
		w4 = wsum4(&sc.ov, &sc.sv, vdata, nil)
	}
	end := lim(nv - 1)
	// Both bounds are nondecreasing in i: from(i) and to(i) delimit the
	// positions of block [b0, b1) that vector i reads.
	var b0, b1 int
	from := func(i int) int { return max(b0, lo(i)) }
	to := func(i int) int { return min(b1, lim(i)) }
	for b0 = lo(0) / attnKeys * attnKeys; b0 < end; b0 += attnKeys {
		b1 = min(b0+attnKeys, end)
		kb = from(0) // koffs and offs start there
		if a.half != nil {
			sc.kbuf, sc.vbuf = a.halfBlock(sc.kbuf, s, layer, 0, kh, kb, b1), a.halfBlock(sc.vbuf, s, layer, 1, kh, kb, b1)
			kdata, vdata = sc.kbuf, sc.vbuf
		}
		if fast {
			sc.koffs = sc.koffs[:0]
			for p := kb; p < b1; p++ {
				sc.koffs = append(sc.koffs, koff(p))
			}
		}
		// Scores of positions [from, to) of every vector, at index p−b0 (a
		// tile computes from its first vector's from to its last vector's
		// to; the spare scores of its other rows are not used).
		i := 0
		if k.tile != nil && nv > 1 {
			xs, ws, out := &sc.xs, &sc.ws, &sc.out
			for ; i < nv; i += k.tileRows {
				rows := min(k.tileRows, nv-i) // a partial tile repeats its last vector
				for r := range k.tileRows {
					xs[r] = vec(qt, i+min(r, rows-1))
				}
				pe := to(i + rows - 1)
				p := from(i)
				if p >= pe {
					continue // no vector of the tile reads this block
				}
				if fast {
					ng := (pe - p) / 4
					k.scores(xs, kdata, sc.koffs[p-kb:p-kb+4*ng], hd, sc.scores[i*attnKeys+p-b0:])
					p += 4 * ng
				}
				for ; p+4 <= pe; p += 4 {
					*ws = [4][]float32{key(p), key(p + 1), key(p + 2), key(p + 3)}
					k.tile(xs, ws, out)
					for r := range rows {
						copy(scores(i + r)[p-b0:p-b0+4], out[4*r:4*r+4])
					}
				}
				for ; p < pe; p++ {
					for r := range rows {
						scores(i + r)[p-b0] = k.dot1x1(xs[r], key(p))
					}
				}
			}
		}
		for ; i < nv; i++ {
			qh, sg := vec(qt, i), scores(i)
			pe := to(i)
			p := from(i)
			for ; p+4 <= pe; p += 4 {
				sg[p-b0], sg[p-b0+1], sg[p-b0+2], sg[p-b0+3] = k.dot1x4(qh, key(p), key(p+1), key(p+2), key(p+3))
			}
			for ; p < pe; p++ {
				sg[p-b0] = k.dot1x1(qh, key(p))
			}
		}
		// Value offsets of the block in the arena, once for every vector.
		sc.offs = sc.offs[:0]
		if k.wsum != nil {
			for p := kb; p < b1; p++ {
				sc.offs = append(sc.offs, voff(p))
			}
			// 8 spare entries (the last offset again) past the block's:
			// avx2's wsum4 reads them for prefetches.
			if n := len(sc.offs); n > 0 {
				for range 8 {
					sc.offs = append(sc.offs, sc.offs[n-1])
				}
				sc.offs = sc.offs[:n]
			}
		}
		// voffs: the value offsets from position p (none without wsum).
		voffs := func(p int) []int {
			if len(sc.offs) == 0 {
				return nil
			}
			return sc.offs[p-kb:]
		}
		for i := range nv {
			if f, t := from(i), to(i); f < t {
				if bias != nil {
					bias.add(scores(i)[f-b0:t-b0], kh*group+i%group, f-(s.Pos+j0+i/group))
				}
				a.online(scores(i)[f-b0:t-b0], vec(ot, i), &sc.m[i], &sc.l[i], scale)
			}
		}
		// Values: four vectors at a time over the positions all four read
		// (avx512), each vector's own positions before and after them
		// alone; every element still adds its positions in order.
		i = 0
		if w4 {
			ov, sv := &sc.ov, &sc.sv
			for ; i+4 <= nv; i += 4 {
				c0, c1 := from(i+3), to(i) // read by all four
				if c0 >= c1 {
					for r := range 4 {
						a.valuesOf(scores(i+r), vec(ot, i+r), vdata, voff, b0, from(i+r), to(i+r), voffs)
					}
					continue
				}
				for r := range 4 {
					ov[r], sv[r] = vec(ot, i+r), scores(i + r)[c0-b0:c1-b0]
					a.valuesOf(scores(i+r), ov[r], vdata, voff, b0, from(i+r), c0, voffs)
				}
				if !wsum4(ov, sv, vdata, voffs(c0)[:c1-c0]) {
					panic("kernels/cpu: attention value tile refused after its probe")
				}
				for r := range 4 {
					a.valuesOf(scores(i+r), ov[r], vdata, voff, b0, c1, to(i+r), voffs)
				}
			}
		}
		for ; i < nv; i++ {
			a.valuesOf(scores(i), vec(ot, i), vdata, voff, b0, from(i), to(i), voffs)
		}
	}
	for i := range nv {
		inv := float32(1 / sc.l[i])
		oh := vec(ot, i)
		for d := range oh {
			oh[d] *= inv
		}
	}
}

// online takes one key block's scores sg of a vector into its running
// maximum m and normaliser l, rescaling its output oh when the maximum
// grows, and leaves the weights expf(score − m) in sg (flash's order).
func (a *arena) online(sg, oh []float32, m *float32, l *float64, scale float32) {
	k := a.b.k
	n := len(sg)
	// Four independent chains (the loops are latency-bound): the maximum
	// does not depend on their order, the block's sum is
	// (s0+s1)+(s2+s3) of lanes of positions ≡ 0, 1, 2, 3 mod 4 (the tail
	// in lane 0), in position order within a lane.
	var bm float32
	if k.scaleMax != nil {
		bm = k.scaleMax(sg, scale)
	} else {
		inf := float32(math.Inf(-1))
		m0, m1, m2, m3 := inf, inf, inf, inf
		i := 0
		for ; i+4 <= n; i += 4 {
			q := (*[4]float32)(sg[i:])
			v0, v1, v2, v3 := float32(q[0]*scale), float32(q[1]*scale), float32(q[2]*scale), float32(q[3]*scale)
			q[0], q[1], q[2], q[3] = v0, v1, v2, v3
			m0, m1, m2, m3 = max(m0, v0), max(m1, v1), max(m2, v2), max(m3, v3)
		}
		for ; i < n; i++ {
			v := float32(sg[i] * scale)
			sg[i] = v
			m0 = max(m0, v)
		}
		bm = max(m0, m1, m2, m3)
	}
	if mn := max(*m, bm); mn > *m {
		if !math.IsInf(float64(*m), -1) {
			alpha := expf(*m - mn)
			for d := range oh {
				oh[d] *= alpha
			}
			*l *= float64(alpha)
		}
		*m = mn
	}
	if k.expSum != nil {
		*l += k.expSum(sg, *m)
		return
	}
	if k.expSub != nil {
		k.expSub(sg, *m)
	} else {
		for i, v := range sg {
			sg[i] = expf(v - *m)
		}
	}
	*l += blockSum(sg, [4]float64{})
}

// blockSum adds the weights sg to the four lanes s of online's order
// (positions ≡ 0…3 mod 4 in order, the tail in lane 0) and returns
// (s0+s1)+(s2+s3).
func blockSum(sg []float32, s [4]float64) float64 {
	s0, s1, s2, s3 := s[0], s[1], s[2], s[3]
	i := 0
	for ; i+4 <= len(sg); i += 4 {
		q := (*[4]float32)(sg[i:])
		s0, s1, s2, s3 = s0+float64(q[0]), s1+float64(q[1]), s2+float64(q[2]), s3+float64(q[3])
	}
	for ; i < len(sg); i++ {
		s0 += float64(sg[i])
	}
	return (s0 + s1) + (s2 + s3)
}

// valuesOf is values for positions [f, t) of a vector whose block scores
// sg start at position b0, voffs giving the value offsets from a position.
func (a *arena) valuesOf(sg, oh, vdata []float32, voff func(int) int, b0, f, t int, voffs func(int) []int) {
	if f < t {
		a.values(sg[f-b0:t-b0], oh, vdata, voff, f, voffs(f))
	}
}

// halfBlock converts the K (v=0) or V (v=1) rows of kv head kh at
// positions [p0, p1) of span s into buf ((p1−p0)·head_dim floats, grown
// as needed): F16ToF32 of each stored half, exactly; a page's rows a call
// where the path has halfRows.
func (a *arena) halfBlock(buf []float32, s kernels.Span, layer, v, kh, p0, p1 int) []float32 {
	hd, pt := a.c.HeadDim, a.c.PageTokens
	buf = grow(buf, (p1-p0)*hd)
	k := a.b.k
	for p := p0; p < p1; {
		slot := p % pt
		n := min(pt-slot, p1-p) // rows of this page
		dst := buf[(p-p0)*hd : (p-p0+n)*hd]
		if k.halfRows != nil && hd%16 == 0 {
			off := a.kvOffset(s.Table.Page(p/pt), layer, v, slot) + kh*hd
			k.halfRows(dst, a.half[off:off+(n-1)*a.row+hd], hd, n, a.row)
			p += n
			continue
		}
		for i := range n {
			d, src := dst[i*hd:(i+1)*hd], a.kvHalf(s.Table.Page(p/pt), layer, v, slot+i)[kh*hd:(kh+1)*hd]
			if k.halfRow != nil {
				k.halfRow(false, d, src)
				continue
			}
			for j, h := range src {
				d[j] = f16tab[h]
			}
		}
		p += n
	}
	return buf
}

// values adds Σ_p sg[p]·v(p0+p) to oh in position order (axpy's chain per
// element); voffs holds the values' offsets when the path has wsum.
func (a *arena) values(sg, oh, vdata []float32, voff func(int) int, p0 int, voffs []int) {
	hd := a.c.HeadDim
	k := a.b.k
	if k.wsum != nil && k.wsum(oh, sg, vdata, voffs[:len(sg)]) {
		return
	}
	val := func(p int) []float32 {
		o := voff(p)
		return vdata[o : o+hd : o+hd]
	}
	// Four positions per pass over oh; each element still adds the
	// positions in order.
	n, i := len(sg), 0
	for ; i+4 <= n; i += 4 {
		k.axpy4(oh, (*[4]float32)(sg[i:]), val(p0+i), val(p0+i+1), val(p0+i+2), val(p0+i+3))
	}
	for ; i < n; i++ {
		k.axpy1(oh, sg[i], val(p0+i))
	}
}

// decodeKernels are the avx512 kernels of flashDecode (decodeK is nil on
// other paths and architectures). Exactly one of f32 (KVF32) and f16
// (KVF16) is the arena's data; offsets count its elements.
type decodeKernels struct {
	group int // keys per score group: 16 (avx512), 8 (avx2)
	// scores sets out[i·ostride + G·g + j] = q_i·key(offs[G·g+j]) (G =
	// group) for the nq query vectors q_i = q[i·hd:][:hd], with flash's
	// score order (dot1x4's); offs holds 2·G entries past G·ng.
	scores func(q []float32, nq, hd int, f32 []float32, f16 []uint16, offs []int, ng int, out []float32, ostride int)
	// wsum4 is wsum4 reading the values in place: o[r] += Σ_p<n
	// s[r][p]·value(offs[p]) with wsum's chain per element; offs holds 8
	// entries past n.
	wsum4 func(o, s *[4][]float32, f32 []float32, f16 []uint16, offs []int, n int)
}

// decodeK (avx512) and decodeK2 (avx2) are nil where the CPU lacks them.
var decodeK, decodeK2 *decodeKernels

// decodeStride is the distance between two vectors' scores in
// flashDecode: a key block and the spare scores of its last group of 16.
const decodeStride = attnKeys + 16

// flashDecode is flash for a task of one query row j0 (decode), on avx512
// with a head dimension that is a multiple of 64, over KVF32 or KVF16 in
// place: the same operations per vector in the same order as flash, so the
// same bits (a row gives the same result alone or among the rows of a
// prefill span). The offsets of the keys and values the row reads are
// computed once, a page at a time; the scores of the group's vectors are
// computed sixteen keys at a time, each key block read once from memory
// (with prefetches) and then from L1 for the other vectors; values four
// vectors at a time (a short group padded with a scratch output).
func (a *arena) flashDecode(dk *decodeKernels, sc *attnScratch, qt, ot *tensor, s kernels.Span, layer, kh, group, j0 int, scale float32, window int) {
	hd, pt, row := a.c.HeadDim, a.c.PageTokens, a.row
	lim := s.Pos + j0 + 1
	lo := 0
	if window > 0 {
		lo = max(0, lim-window)
	}
	nv := group
	qrow := qt.row(s.Row + j0)[kh*group*hd : (kh+1)*group*hd]
	orow := ot.row(s.Row + j0)[kh*group*hd : (kh+1)*group*hd]
	clear(orow)
	sc.koffs, sc.offs = sc.koffs[:0], sc.offs[:0]
	for p := lo; p < lim; {
		pg := s.Table.Page(p / pt)
		kbase := a.kvOffset(pg, layer, 0, 0) + kh*hd
		vbase := a.kvOffset(pg, layer, 1, 0) + kh*hd
		for slot := p % pt; slot < pt && p < lim; slot, p = slot+1, p+1 {
			sc.koffs = append(sc.koffs, kbase+slot*row)
			sc.offs = append(sc.offs, vbase+slot*row)
		}
	}
	lastK, lastV := sc.koffs[len(sc.koffs)-1], sc.offs[len(sc.offs)-1]
	for range 48 { // the kernels' spare group and prefetches
		sc.koffs = append(sc.koffs, lastK)
		sc.offs = append(sc.offs, lastV)
	}
	sc.scores = grow(sc.scores, nv*decodeStride)
	sc.m = grow(sc.m, nv)
	sc.l = growAny(sc.l, nv)
	sc.pad = grow(sc.pad, hd)
	for i := range nv {
		sc.m[i], sc.l[i] = float32(math.Inf(-1)), 0
	}
	scores := func(i int) []float32 {
		return sc.scores[i*decodeStride : (i+1)*decodeStride : (i+1)*decodeStride]
	}
	vec := func(i int) []float32 { return orow[i*hd : (i+1)*hd : (i+1)*hd] }
	for b0 := lo / attnKeys * attnKeys; b0 < lim; b0 += attnKeys {
		f, t := max(b0, lo), min(b0+attnKeys, lim)
		dk.scores(qrow, nv, hd, a.data, a.half, sc.koffs[f-lo:], (t-f+dk.group-1)/dk.group, sc.scores[f-b0:], decodeStride)
		for i := range nv {
			a.online(scores(i)[f-b0:t-b0], vec(i), &sc.m[i], &sc.l[i], scale)
		}
		for i := 0; i < nv; i += 4 {
			for r := range 4 {
				if i+r < nv {
					sc.ov[r], sc.sv[r] = vec(i+r), scores(i + r)[f-b0:]
				} else {
					sc.ov[r], sc.sv[r] = sc.pad[:hd], scores(nv - 1)[f-b0:]
				}
			}
			dk.wsum4(&sc.ov, &sc.sv, a.data, a.half, sc.offs[f-lo:], t-f)
		}
	}
	for i := range nv {
		inv := float32(1 / sc.l[i])
		oh := vec(i)
		for d := range oh {
			oh[d] *= inv
		}
	}
}

// relBias is a kernels.PosBias expanded for one call: per query head, the
// bias of every relative position −off … off (off+1 the longest span end).
type relBias struct {
	byRel []float32 // head h, rel r: byRel[h·width + r + off]
	width int
	off   int
}

func newRelBias(pb *kernels.PosBias, spans []kernels.Span) *relBias {
	end := 1
	for _, s := range spans {
		end = max(end, s.Pos+s.N)
	}
	r := &relBias{width: 2*end - 1, off: end - 1}
	r.byRel = make([]float32, pb.Heads*r.width)
	for rel := -r.off; rel <= r.off; rel++ {
		bk := kernels.RelativeBucket(rel, pb.Buckets, pb.MaxDistance, pb.Bidirectional)
		for h := range pb.Heads {
			r.byRel[h*r.width+rel+r.off] = pb.Table[bk*pb.Heads+h]
		}
	}
	return r
}

// add adds head h's bias to scores sg of consecutive keys, the first rel0
// positions from the query.
func (r *relBias) add(sg []float32, h, rel0 int) {
	row := r.byRel[h*r.width+rel0+r.off:]
	for i := range sg {
		sg[i] += row[i]
	}
}
