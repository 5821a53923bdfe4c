package cpu

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// arena is a KV cache in one float32 slice. Page p occupies
// data[p·pageLen : (p+1)·pageLen], laid out as the transfer format:
// [layer][K, V][slot][kv_head][head_dim]. So a page is one contiguous run
// (ZeroPages and copies are single clear/copy calls) and one token's K (or V)
// row of a layer is contiguous, as WriteKV produces it.
//
// The arena's tags and fills are its own record of whose KV a page holds and
// how much of it; see kernels.Arena.
type arena struct {
	b       *Backend
	c       kernels.ArenaConfig
	row     int // floats per token row of one layer's K or V: kv_heads × head_dim
	kvLen   int // floats of one layer's K (or V) in a page: PageTokens × row
	pageLen int // floats per page
	data    []float32
	// tags[p] and fills[p·Layers+layer] belong to page p; they are read and
	// written only by the calls that the Backend contract lets touch p.
	tags  []isolation.Tag
	fills []int32 // leading slots written under the current tag, per page and layer
}

// NewArena allocates a zeroed arena with zero tags.
func (b *Backend) NewArena(c kernels.ArenaConfig) (kernels.Arena, error) {
	if err := b.check(); err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	row := c.KVHeads * c.HeadDim
	a := &arena{
		b: b, c: c, row: row, kvLen: c.PageTokens * row, pageLen: c.Layers * 2 * c.PageTokens * row,
		tags: make([]isolation.Tag, c.Pages), fills: make([]int32, c.Pages*c.Layers),
	}
	a.data = make([]float32, c.Pages*a.pageLen)
	return a, nil
}

func (a *arena) Config() kernels.ArenaConfig { return a.c }
func (a *arena) PageBytes() int              { return a.pageLen * 4 }

func (a *arena) Tag(page int32) isolation.Tag {
	if page < 0 || int(page) >= a.c.Pages {
		return isolation.Tag{}
	}
	return a.tags[page]
}

func (a *arena) page(p int32) []float32 {
	return a.data[int(p)*a.pageLen : (int(p)+1)*a.pageLen : (int(p)+1)*a.pageLen]
}

// kv returns the K (v=0) or V (v=1) row of slot in layer of page p.
func (a *arena) kv(p int32, layer, v, slot int) []float32 {
	off := int(p)*a.pageLen + (2*layer+v)*a.kvLen + slot*a.row
	return a.data[off : off+a.row : off+a.row]
}

// checkTable validates what a table says about page geometry.
func (a *arena) checkTable(t isolation.BlockTable) error {
	if t.Len() > 0 && t.PageTokens() != a.c.PageTokens {
		return shapeErr("block table of %d-token pages for an arena of %d-token pages", t.PageTokens(), a.c.PageTokens)
	}
	for i := range t.Len() {
		if p := t.Page(i); p < 0 || int(p) >= a.c.Pages {
			return shapeErr("block table page %d outside an arena of %d pages", p, a.c.Pages)
		}
	}
	return nil
}

// checkRead checks the pages holding positions [0, n) of t before a read:
// the arena tag of each must equal the table's (a zero expected tag never
// matches: a page nobody owns is never read), and each must have its slots
// up to position n−1 filled in every layer of layers.
func (a *arena) checkRead(t isolation.BlockTable, n int, layers ...int) error {
	if n <= 0 || a.b.unsafeSkip {
		return nil
	}
	if t.Staged() {
		return fmt.Errorf("%w: lease %s", kernels.ErrStaged, t.Lease())
	}
	last, lastSlot := t.Slot(n - 1)
	for i := 0; i <= last; i++ {
		p, want := t.Page(i), t.Tag(i)
		if got := a.tags[p]; got != want || want.IsZero() {
			return &kernels.TagMismatchError{Page: p, Want: want, Got: got}
		}
		need := a.c.PageTokens
		if i == last {
			need = lastSlot + 1
		}
		for _, l := range layers {
			if have := int(a.fills[int(p)*a.c.Layers+l]); have < need {
				return &kernels.UnwrittenError{Page: p, Layer: l, Need: need, Have: have}
			}
		}
	}
	return nil
}

// checkSpans validates the rows, positions and tables of spans over tensors
// of rows rows.
func (a *arena) checkSpans(what string, layer, rows int, spans []kernels.Span) error {
	if layer < 0 || layer >= a.c.Layers {
		return shapeErr("%s of layer %d in an arena of %d layers", what, layer, a.c.Layers)
	}
	for _, s := range spans {
		if s.N <= 0 || s.Row < 0 || s.Row+s.N > rows || s.Pos < 0 {
			return shapeErr("%s span rows [%d,%d) positions [%d,%d) for %d rows", what, s.Row, s.Row+s.N, s.Pos, s.Pos+s.N, rows)
		}
		if s.Pos+s.N > s.Table.Tokens() || (s.Pos+s.N-1)/a.c.PageTokens >= s.Table.Len() {
			return shapeErr("%s of positions up to %d through a block table of %d tokens in %d pages", what, s.Pos+s.N, s.Table.Tokens(), s.Table.Len())
		}
		if err := a.checkTable(s.Table); err != nil {
			return err
		}
	}
	return nil
}

type pageWrite struct {
	page        int32
	tag         isolation.Tag
	first, last int // slots this call writes: [first, last]
}

// WriteKV stores K and V rows through block tables.
func (a *arena) WriteKV(layer int, k, v kernels.Tensor, spans []kernels.Span) error {
	b := a.b
	if err := b.check(); err != nil {
		return err
	}
	kt, err := b.tensor(k, "WriteKV keys")
	if err != nil {
		return err
	}
	vt, err := b.tensor(v, "WriteKV values")
	if err != nil {
		return err
	}
	if kt.cols != a.row || vt.cols != a.row || kt.rows != vt.rows {
		return shapeErr("WriteKV of %d×%d keys and %d×%d values, rows of %d", kt.rows, kt.cols, vt.rows, vt.cols, a.row)
	}
	if err := a.checkSpans("WriteKV", layer, kt.rows, spans); err != nil {
		return err
	}
	// Validate every page first: nothing is written unless all writes may be.
	var pages []pageWrite
	seen := make(map[int32]bool)
	pt := a.c.PageTokens
	for _, s := range spans {
		i0, _ := s.Table.Slot(s.Pos)
		i1, _ := s.Table.Slot(s.Pos + s.N - 1)
		if s.Table.Staged() {
			return fmt.Errorf("%w: lease %s", kernels.ErrStaged, s.Table.Lease())
		}
		for i := i0; i <= i1; i++ {
			p, tag := s.Table.Page(i), s.Table.Tag(i)
			if !s.Table.Writable(i) {
				return fmt.Errorf("%w: page %d", kernels.ErrReadOnlyPage, p)
			}
			if tag.IsZero() || stale(a.tags[p], tag) {
				return &kernels.TagMismatchError{Page: p, Want: tag, Got: a.tags[p]}
			}
			first := max(s.Pos, i*pt) - i*pt
			last := min(s.Pos+s.N, (i+1)*pt) - 1 - i*pt
			if seen[p] {
				// Fills count leading slots: two spans could leave a gap.
				return shapeErr("WriteKV writes page %d from two spans", p)
			}
			seen[p] = true
			pages = append(pages, pageWrite{page: p, tag: tag, first: first, last: last})
		}
	}
	for _, w := range pages {
		have := 0 // a page changing owner restarts empty
		if a.tags[w.page] == w.tag {
			have = int(a.fills[int(w.page)*a.c.Layers+layer])
		}
		if w.first > have && !a.b.unsafeSkip {
			// The pool believes slots before first hold this lease's KV,
			// but the arena never saw them written under its tag: writing
			// would make whatever is there readable as ours.
			return &kernels.UnwrittenError{Page: w.page, Layer: layer, Need: w.first, Have: have}
		}
	}
	for _, w := range pages {
		if a.tags[w.page] != w.tag {
			clear(a.page(w.page))
			clear(a.fills[int(w.page)*a.c.Layers : int(w.page+1)*a.c.Layers])
			a.tags[w.page] = w.tag
		}
		f := &a.fills[int(w.page)*a.c.Layers+layer]
		*f = max(*f, int32(w.last+1))
	}
	for _, s := range spans {
		for j := range s.N {
			i, slot := s.Table.Slot(s.Pos + j)
			p := s.Table.Page(i)
			copy(a.kv(p, layer, 0, slot), kt.row(s.Row+j))
			copy(a.kv(p, layer, 1, slot), vt.row(s.Row+j))
		}
	}
	return nil
}

// ZeroPages zeroes pages and resets their tags and fills. Adjacent pages
// are cleared as one run; runs are cut into chunks that the workers clear in
// parallel, since one core rarely saturates memory bandwidth.
func (a *arena) ZeroPages(pages []int32) error {
	if err := a.b.check(); err != nil {
		return err
	}
	for _, p := range pages {
		if p < 0 || int(p) >= a.c.Pages {
			return shapeErr("ZeroPages of page %d in an arena of %d pages", p, a.c.Pages)
		}
	}
	sorted := pages
	if !slices.IsSorted(pages) {
		sorted = slices.Clone(pages)
		slices.Sort(sorted)
	}
	const chunk = 1 << 18 // floats (1 MiB) per task
	var spans [][2]int    // [lo, hi) float offsets
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j] <= sorted[j-1]+1 {
			j++
		}
		lo, hi := int(sorted[i]), int(sorted[j-1])+1
		clear(a.tags[lo:hi])
		clear(a.fills[lo*a.c.Layers : hi*a.c.Layers])
		for f := lo * a.pageLen; f < hi*a.pageLen; f += chunk {
			spans = append(spans, [2]int{f, min(f+chunk, hi*a.pageLen)})
		}
		i = j
	}
	a.b.w.run(len(spans), func(t int) { clear(a.data[spans[t][0]:spans[t][1]]) })
	return nil
}

// covered returns how many leading slots of table page i hold positions
// below t.Tokens().
func covered(t isolation.BlockTable, i int) int {
	return max(0, min(t.PageTokens(), t.Tokens()-i*t.PageTokens()))
}

func (a *arena) checkCopy(buf []byte, t isolation.BlockTable, i int) error {
	if err := a.b.check(); err != nil {
		return err
	}
	if len(buf) != a.PageBytes() {
		return shapeErr("page copy of %d bytes, pages are %d", len(buf), a.PageBytes())
	}
	if i < 0 || i >= t.Len() {
		return shapeErr("page %d of a block table of %d pages", i, t.Len())
	}
	return a.checkTable(t)
}

// CopyOut copies table page i into dst after checking its tag.
func (a *arena) CopyOut(dst []byte, t isolation.BlockTable, i int) error {
	if err := a.checkCopy(dst, t, i); err != nil {
		return err
	}
	if t.Staged() {
		return fmt.Errorf("%w: lease %s", kernels.ErrStaged, t.Lease())
	}
	p, want := t.Page(i), t.Tag(i)
	if got := a.tags[p]; got != want || want.IsZero() {
		return &kernels.TagMismatchError{Page: p, Want: want, Got: got}
	}
	c := covered(t, i)
	for l := range a.c.Layers {
		if have := int(a.fills[int(p)*a.c.Layers+l]); have < c {
			return &kernels.UnwrittenError{Page: p, Layer: l, Need: c, Have: have}
		}
	}
	n := c * a.row // floats of each K or V run to copy
	src := a.page(p)
	for run := 0; run < 2*a.c.Layers; run++ {
		s := src[run*a.kvLen : (run+1)*a.kvLen]
		d := dst[run*a.kvLen*4 : (run+1)*a.kvLen*4]
		putFloats(d[:4*n], s[:n])
		clear(d[4*n:])
	}
	return nil
}

// stale reports whether a write tagged want would overwrite a page whose
// contents are of a later generation: a page's generation grows every time
// it leaves an owner, so such a table comes from a lease that released the
// page since (or a bug). Its write would wipe the new owner's KV.
func stale(cur, want isolation.Tag) bool {
	return !cur.IsZero() && cur != want && cur.Gen > want.Gen
}

// CopyIn writes src into table page i and takes the table's tag.
func (a *arena) CopyIn(t isolation.BlockTable, i int, src []byte) error {
	if err := a.checkCopy(src, t, i); err != nil {
		return err
	}
	p, want := t.Page(i), t.Tag(i)
	if !t.Writable(i) {
		return fmt.Errorf("%w: page %d", kernels.ErrReadOnlyPage, p)
	}
	if want.IsZero() || stale(a.tags[p], want) {
		return &kernels.TagMismatchError{Page: p, Want: want, Got: a.tags[p]}
	}
	c := covered(t, i)
	n := c * a.row
	dst := a.page(p)
	for run := 0; run < 2*a.c.Layers; run++ {
		d := dst[run*a.kvLen : (run+1)*a.kvLen]
		s := src[run*a.kvLen*4 : (run+1)*a.kvLen*4]
		getFloats(d[:n], s[:4*n])
		clear(d[n:])
	}
	a.tags[p] = want
	for l := range a.c.Layers {
		a.fills[int(p)*a.c.Layers+l] = int32(c)
	}
	return nil
}

// putFloats writes f as little-endian float32 into b (len 4·len(f)).
func putFloats(b []byte, f []float32) {
	if littleEndian {
		copy(b, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f)))
		return
	}
	for i, v := range f {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
}

// getFloats reads little-endian float32 from b into f.
func getFloats(f []float32, b []byte) {
	if littleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(f))), 4*len(f)), b)
		return
	}
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
}
