package cpu

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/cloison/cloison/kernels"
)

// Work split of a product dst = x·wᵀ: tasks are (x tile, w block) pairs; a
// task computes every output element of its tile's rows and its block's
// weight rows, each with the reduction order fixed in dot.go. Tasks that
// share an x tile are numbered consecutively so that concurrently running
// tasks read the same activations from cache; a weight block (dequantized
// once per task when its type needs it) stays in L2 while the tile's rows
// stream past it.
const (
	wBlock = 24 // weight rows per task: a multiple of 3 and 4 (the kernels' widths)
	// wBlockAMX: weight rows per task on the amx path, three AMX calls of
	// 16 rows (24 would leave a call of 8, costing a 16-row call's tile
	// work).
	wBlockAMX = 48
	xTile     = 64 // activation rows per task
)

// rowTile is the activation rows per task of a product with weights of
// type dt: xTile, or on a path whose float tiles take three rows (avx2)
// and a type they compute, the multiple of three above it (66: a 64-row
// task is 21 tiles and one more ending at its end, two rows computed
// twice; 66 rows are 22 tiles). Which task computes a row never changes
// its bits.
func (k *kset) rowTile(dt kernels.DType) int {
	if k.tileRows != 3 || k.hasInt(dt) || (dt == kernels.BF16 && k.bf16block != nil) {
		return xTile
	}
	return xTile + 2
}

// MatMul sets dst = x·wᵀ.
func (b *Backend) MatMul(dst, x kernels.Tensor, w kernels.Matrix) error {
	return b.MultiMatMul([]kernels.Tensor{dst}, x, []kernels.Matrix{w})
}

type product struct {
	dst   *tensor
	m     *matrix
	first int // first task number of this product
	wb    int // weight rows per task
	xt    int // activation rows per task (rowTile)
}

// decodeRows: a product of at most this many activation rows whose weights
// have a row kernel (decodeBlock) reads its weights in a few long
// contiguous chunks, decodeChunks per thread, instead of blocks of wBlock
// rows taken in turn: each thread's weights are then one sequential
// stream the prefetcher follows (AMD EPYC Zen 5, 2 threads, Q8_0 d=768:
// rows of 24-row blocks taken alternately by the two threads made 2-thread
// decode slower than 1-thread). Which task computes an output never
// changes its bits.
const (
	decodeRows   = 3
	decodeChunks = 4
)

// decodeBlock reports whether a one-row product of dt weights runs a row
// kernel on the weights in place (no per-task scratch).
func (k *kset) decodeBlock(dt kernels.DType) bool {
	switch dt {
	case kernels.F32, kernels.F16, kernels.BF16:
		return true
	case kernels.Q8_0, kernels.Q4_K, kernels.Q6_K:
		return k.intQ8() || dt == kernels.Q8_0
	}
	return false
}

// MultiMatMul sets dsts[i] = x·ws[i]ᵀ for all i as one parallel job.
func (b *Backend) MultiMatMul(dsts []kernels.Tensor, x kernels.Tensor, ws []kernels.Matrix) error {
	if err := b.check(); err != nil {
		return err
	}
	if len(dsts) != len(ws) {
		return shapeErr("MultiMatMul with %d outputs and %d matrices", len(dsts), len(ws))
	}
	xt, err := b.tensor(x, "matmul input")
	if err != nil {
		return err
	}
	ps := make([]product, len(ws))
	wb := wBlock
	if b.k.q8amx != nil {
		wb = wBlockAMX
	}
	tasks := 0
	for i := range ws {
		m, err := b.matrix(ws[i])
		if err != nil {
			return err
		}
		d, err := b.tensor(dsts[i], "matmul output")
		if err != nil {
			return err
		}
		if m.cols != xt.cols || d.rows != xt.rows || d.cols != m.rows {
			return shapeErr("matmul %d×%d · (%d×%d)ᵀ into %d×%d", xt.rows, xt.cols, m.rows, m.cols, d.rows, d.cols)
		}
		if overlaps(d.data, xt.data) {
			return shapeErr("matmul output aliases its input")
		}
		pwb := wb
		if xt.rows <= decodeRows && b.k.decodeBlock(m.dt) {
			pwb = max(wb, (m.rows+b.w.n*decodeChunks-1)/(b.w.n*decodeChunks))
		}
		rt := b.k.rowTile(m.dt)
		ps[i] = product{dst: d, m: m, first: tasks, wb: pwb, xt: rt}
		tasks += (xt.rows + rt - 1) / rt * ((m.rows + pwb - 1) / pwb)
	}
	acts := b.prepareQ8(xt, ps)
	xb := b.prepareBF16(xt, ps)
	b.w.run(tasks, func(t int) {
		i := len(ps) - 1
		for ps[i].first > t {
			i--
		}
		p := ps[i]
		blocks := (p.m.rows + p.wb - 1) / p.wb
		t -= p.first
		tile, blk := t/blocks, t%blocks
		r0, r1 := tile*p.xt, min(xt.rows, (tile+1)*p.xt)
		o0, o1 := blk*p.wb, min(p.m.rows, (blk+1)*p.wb)
		if p.m.dt == kernels.BF16 && b.k.bf16block != nil {
			b.k.bf16block(p.dst, xt, xb, p.m, r0, r1, o0, o1)
			return
		}
		r := b.k.kqTile(p.dst, acts, p.m, r0, r1, o0, o1) // Q4_K rows four at a time
		if r < r1 && !b.k.q8IntMul(p.dst, acts, p.m, r, r1, o0, o1) {
			b.k.mulBlock(p.dst, xt, p.m, r, r1, o0, o1, b.w.n)
		}
	})
	acts.release()
	xb.release()
	return nil
}

// bf16Acts holds a product's activation rows rounded to BF16 (the BF16
// order, bf16dp.go), rows × cols, for the path's prefill block, and where
// the path packs them (bf16pack), that layout in p.
type bf16Acts struct {
	h []uint16
	p []uint32
}

var bf16ActsPool = sync.Pool{New: func() any { return new(bf16Acts) }}

func (a *bf16Acts) rows() []uint16 {
	if a == nil {
		return nil
	}
	return a.h
}

func (a *bf16Acts) release() {
	if a != nil {
		bf16ActsPool.Put(a)
	}
}

// prepareBF16 rounds x's rows to BF16 once when the path multiplies BF16
// weights in the BF16 order, a product in ps has them and x has the rows
// of a prefill tile; otherwise it returns nil (the block rounds what it
// needs itself).
func (b *Backend) prepareBF16(x *tensor, ps []product) *bf16Acts {
	if b.k.bf16round == nil || x.rows < 4 || !slices.ContainsFunc(ps, func(p product) bool { return p.m.dt == kernels.BF16 }) {
		return nil
	}
	a := bf16ActsPool.Get().(*bf16Acts)
	a.h = growAny(a.h, x.rows*x.cols)
	pack := b.k.bf16pack
	a.p = a.p[:0]
	if pack != nil {
		// Groups of 16 rows, the last one's missing rows zero.
		g, pairs := (x.rows+15)/16, x.cols/32*16
		a.p = growAny(a.p, g*16*pairs)
		clear(a.p[(g-1)*16*pairs:])
	}
	b.eachRow(x.rows, x.cols, func(r int) {
		h := a.h[r*x.cols : (r+1)*x.cols]
		b.k.bf16round(h, x.row(r))
		if pack != nil {
			pack(a.p, h, r, x.cols)
		}
	})
	return a
}

// overlaps reports whether two float32 slices share memory.
func overlaps(a, b []float32) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0 := uintptr(unsafe.Pointer(&a[0]))
	b0 := uintptr(unsafe.Pointer(&b[0]))
	return a0 < b0+uintptr(4*len(b)) && b0 < a0+uintptr(4*len(a))
}

// scratch holds a dequantized weight block.
type scratch struct{ q []float32 }

var scratchPool = sync.Pool{New: func() any { return new(scratch) }}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// mulBlock computes dst[r][o] for r in [r0,r1), o in [o0,o1); the tiles
// prefetch the F16/BF16 weight block ahead blocks on (the task this
// thread most likely takes next: tasks go to the threads in turn).
func (k *kset) mulBlock(dst, x *tensor, m *matrix, r0, r1, o0, o1, ahead int) {
	cols := m.cols
	if m.dt == kernels.F32 {
		k.floatBlock(dst, x, m.f32[o0*cols:o1*cols], r0, r1, o0, o1, nil)
		return
	}
	if m.dt == kernels.BF16 && k.bf16block != nil {
		k.bf16block(dst, x, nil, m, r0, r1, o0, o1)
		return
	}
	if r1-r0 == 1 && k.inRegister(m.dt) {
		// Decode: read each weight once, decoding it in registers.
		k.decodeRow(dst.row(r0), x.row(r0), m, o0, o1)
		return
	}
	if m.dt == kernels.F16 && k.f16tilexn != nil && (cols > k.f16convertCols || r1-r0 <= 16) && r1-r0 >= k.tileRows && cols%k.tileStep == 0 && o1-o0 >= 4 {
		// F16 rows converted in registers by the tiles, tileRows
		// activation rows at a time; the rest (rows and weight rows past
		// the last tile) one row at a time as decode does: the same bits.
		var xs [4][]float32
		pf := nextBlock(m, o0, o1, ahead)
		w := m.u16[o0*cols : o1*cols]
		tr := k.tileRows
		r := r0
		for ; r < r1; r += tr {
			if r+tr > r1 {
				// The last rows: a tile ending at r1 (its first rows
				// computed again, the same bits), faster than reading
				// the block once a row.
				r = r1 - tr
			}
			for i := range tr {
				xs[i] = x.row(r + i)
			}
			done := k.f16tilexn(&xs, w, cols, o1-o0, dst.data[r*dst.cols+o0:], dst.cols, pf)
			if span := done / 4 * 2 * cols; len(pf) >= span {
				pf = pf[span:]
			}
			if o0+done < o1 {
				for i := range tr {
					k.decodeRow(dst.row(r+i), xs[i], m, o0+done, o1)
				}
			}
		}
		return
	}
	// Decode the weight block to float32 once (the same values the
	// in-register decoders produce), then run the float kernels on it.
	s := scratchPool.Get().(*scratch)
	s.q = grow(s.q, (o1-o0)*cols)
	for o := o0; o < o1; o++ {
		k.dequantRow(m, s.q[(o-o0)*cols:(o-o0+1)*cols], o)
	}
	// The tiles prefetch this thread's next block of F16/BF16 weights (the
	// block a following task converts) while they compute: its conversion
	// would otherwise stall on memory.
	var pf []byte
	if m.dt == kernels.F16 || m.dt == kernels.BF16 {
		pf = nextBlock(m, o0, o1, ahead)
	}
	k.floatBlock(dst, x, s.q, r0, r1, o0, o1, pf)
	scratchPool.Put(s)
}

// nextBlock is the F16/BF16 weight rows of the block of o1−o0 rows ahead
// blocks after [o0, o1) (ahead ≥ 1) as bytes, nil past the matrix's end.
func nextBlock(m *matrix, o0, o1, ahead int) []byte {
	b0 := o1 + (ahead-1)*(o1-o0)
	if b0 >= m.rows {
		return nil
	}
	next := m.u16[b0*m.cols : min(m.rows, b0+o1-o0)*m.cols]
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(next))), 2*len(next))
}

// decodeRow computes out[o] = x·w[o] for o in [o0,o1) with in-register
// decoding of Q8_0, F16 or BF16 weights.
func (k *kset) decodeRow(out, x []float32, m *matrix, o0, o1 int) {
	cols := m.cols
	o := o0
	switch m.dt {
	case kernels.Q8_0:
		row := func(o int) []byte { return m.data[o*m.rowBytes : (o+1)*m.rowBytes] }
		quarterRows(out, x, o, o1, row, k.q8dot1x4, k.q8dot1x1)
	case kernels.F16, kernels.BF16:
		row := func(o int) []uint16 { return m.u16[o*cols : (o+1)*cols] }
		dot4, dot1 := k.f16dot1x4, k.f16dot1x1
		if m.dt == kernels.BF16 {
			dot4, dot1 = k.bf16dot1x4, k.bf16dot1x1
		}
		if m.dt == kernels.F16 && k.f16rows != nil {
			// Every row of the block in one call, one after the other:
			// the weights read as one sequential stream.
			k.f16rows(x, m.u16[o*cols:o1*cols], out[o:o1])
			o = o1
		}
		if m.dt == kernels.BF16 && k.bf16rows != nil {
			k.bf16rows(x, m.u16[o*cols:o1*cols], out[o:o1])
			o = o1
		}
		quarterRows(out, x, o, o1, row, dot4, dot1)
	}
}

// quarterRows sets out[o] = x·row(o) for o in [o0, o1): four rows a quarter
// of the range apart a call (four sequential streams, which the prefetchers
// follow faster than one: AMD EPYC Zen 3, one core, 20 against 12.5 GB/s),
// the last (o1−o0)%4 one at a time. Which call computes a row never changes
// its bits.
func quarterRows[W any](out, x []float32, o0, o1 int, row func(int) W,
	dot4 func(x []float32, w0, w1, w2, w3 W) (float32, float32, float32, float32), dot1 func(x []float32, w W) float32) {
	q := (o1 - o0) / 4
	for j := o0; j < o0+q; j++ {
		out[j], out[j+q], out[j+2*q], out[j+3*q] = dot4(x, row(j), row(j+q), row(j+2*q), row(j+3*q))
	}
	for o := o0 + 4*q; o < o1; o++ {
		out[o] = dot1(x, row(o))
	}
}

// floatBlock computes a block of outputs from the float32 weight rows
// o0…o1−1, consecutive in wb (x.cols values each).
//
// pf (may be nil) is memory the register tiles prefetch while they
// compute, 2·cols bytes a tile; the results do not depend on it.
func (k *kset) floatBlock(dst, x *tensor, wb []float32, r0, r1, o0, o1 int, pf []byte) {
	cols := x.cols
	w := func(o int) []float32 { return wb[(o-o0)*cols : (o-o0+1)*cols] }
	r := r0
	if k.tilexn != nil && r1-r0 >= k.tileRows && cols%k.tileStep == 0 && o1-o0 >= 4 {
		// The whole block's weight rows, four at a time, against tileRows
		// activation rows in one call: the same bits as the tiles below.
		var xs [4][]float32
		tr := k.tileRows
		for ; r < r1; r += tr {
			if r+tr > r1 {
				r = r1 - tr // the last rows: a tile ending at r1, as above
			}
			for i := range tr {
				xs[i] = x.row(r + i)
			}
			done := k.tilexn(&xs, wb, cols, o1-o0, dst.data[r*dst.cols+o0:], dst.cols, pf)
			if span := done / 4 * 2 * cols; len(pf) >= span {
				pf = pf[span:]
			}
			for o := o0 + done; o < o1; o++ {
				for i := range tr {
					dst.row(r + i)[o] = k.dot1x1(xs[i], w(o))
				}
			}
		}
	}
	if k.tile != nil && r1-r0 >= k.tileRows {
		// Register tiles of tileRows × 4 outputs: each weight vector loaded
		// serves tileRows activation rows. Same order per element as the
		// kernels below.
		var xs, ws [4][]float32
		var out [16]float32
		for ; r+k.tileRows <= r1; r += k.tileRows {
			for i := range k.tileRows {
				xs[i] = x.row(r + i)
			}
			o := o0
			for ; o+4 <= o1; o += 4 {
				ws = [4][]float32{w(o), w(o + 1), w(o + 2), w(o + 3)}
				if span := 2 * len(xs[0]); k.tilePF != nil && len(pf) >= span {
					k.tilePF(&xs, &ws, &out, unsafe.Pointer(&pf[0]))
					pf = pf[span:]
				} else {
					k.tile(&xs, &ws, &out)
				}
				for i := range k.tileRows {
					copy(dst.row(r + i)[o:o+4], out[4*i:4*i+4])
				}
			}
			for ; o < o1; o++ {
				for i := range k.tileRows {
					dst.row(r + i)[o] = k.dot1x1(xs[i], w(o))
				}
			}
		}
	}
	for ; r+2 <= r1; r += 2 {
		x0, x1 := x.row(r), x.row(r+1)
		out0, out1 := dst.row(r), dst.row(r+1)
		o := o0
		for ; o+3 <= o1; o += 3 {
			out0[o], out0[o+1], out0[o+2], out1[o], out1[o+1], out1[o+2] = k.dot2x3(x0, x1, w(o), w(o+1), w(o+2))
		}
		for ; o < o1; o++ {
			out0[o] = k.dot1x1(x0, w(o))
			out1[o] = k.dot1x1(x1, w(o))
		}
	}
	if r < r1 {
		x0, out := x.row(r), dst.row(r)
		o := o0
		for ; o+4 <= o1; o += 4 {
			out[o], out[o+1], out[o+2], out[o+3] = k.dot1x4(x0, w(o), w(o+1), w(o+2), w(o+3))
		}
		for ; o < o1; o++ {
			out[o] = k.dot1x1(x0, w(o))
		}
	}
}
