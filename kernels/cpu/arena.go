package cpu

import (
	"encoding/binary"
	"math"
	"slices"
	"unsafe"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// arena is a KV cache in one float32 slice (data, KVF32) or one slice of
// IEEE halves (half, KVF16). Page p occupies
// data[p·pageLen : (p+1)·pageLen] (or half's), laid out as the transfer format:
// [layer][K, V][slot][kv_head][head_dim]. So a page is one contiguous run
// (ZeroPages and copies are single clear/copy calls) and one token's K (or V)
// row of a layer is contiguous, as WriteKV produces it.
//
// The arena's tags and fills are its own record of whose KV a page holds and
// how much of it; see kernels.Arena.
type arena struct {
	b       *Backend
	c       kernels.ArenaConfig
	row     int       // floats per token row of one layer's K or V: kv_heads × head_dim
	kvLen   int       // floats of one layer's K (or V) in a page: PageTokens × row
	pageLen int       // elements per page
	data    []float32 // KVF32: the pages
	half    []uint16  // KVF16: the pages, F32ToF16 of what WriteKV was given
	kernels.Books
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
		Books: kernels.NewBooks(c, b.unsafeSkip),
	}
	if c.KV == kernels.KVF16 {
		a.half = make([]uint16, c.Pages*a.pageLen)
	} else {
		a.data = make([]float32, c.Pages*a.pageLen)
	}
	return a, nil
}

func (a *arena) Config() kernels.ArenaConfig { return a.c }
func (a *arena) PageBytes() int              { return a.pageLen * a.c.KV.Size() }

// clearElems zeroes elements [lo, hi) of the pages.
func (a *arena) clearElems(lo, hi int) {
	if a.half != nil {
		clear(a.half[lo:hi])
	} else {
		clear(a.data[lo:hi])
	}
}

func (a *arena) Tag(page int32) isolation.Tag {
	if page < 0 || int(page) >= a.c.Pages {
		return isolation.Tag{}
	}
	return a.Tags[page]
}

// kv returns the K (v=0) or V (v=1) row of slot in layer of page p
// (KVF32).
func (a *arena) kv(p int32, layer, v, slot int) []float32 {
	off := a.kvOffset(p, layer, v, slot)
	return a.data[off : off+a.row : off+a.row]
}

// kvHalf is kv on a KVF16 arena.
func (a *arena) kvHalf(p int32, layer, v, slot int) []uint16 {
	off := a.kvOffset(p, layer, v, slot)
	return a.half[off : off+a.row : off+a.row]
}

// kvOffset is the index in a.data of the row kv returns.
func (a *arena) kvOffset(p int32, layer, v, slot int) int {
	return int(p)*a.pageLen + (2*layer+v)*a.kvLen + slot*a.row
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
	if err := a.CheckSpans("WriteKV", layer, kt.rows, spans); err != nil {
		return err
	}
	// Validate every page first: nothing is written unless all writes may be.
	pages, err := a.PlanWrite(layer, spans)
	if err != nil {
		return err
	}
	for _, w := range pages {
		if a.Changes(w) {
			a.clearElems(int(w.Page)*a.pageLen, int(w.Page+1)*a.pageLen)
		}
		a.Record(layer, w)
	}
	for _, s := range spans {
		for j := range s.N {
			i, slot := s.Table.Slot(s.Pos + j)
			p := s.Table.Page(i)
			if a.half != nil {
				a.toHalf(a.kvHalf(p, layer, 0, slot), kt.row(s.Row+j))
				a.toHalf(a.kvHalf(p, layer, 1, slot), vt.row(s.Row+j))
				continue
			}
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
	chunk := 1 << 20 / a.c.KV.Size() // elements (1 MiB) per task
	var spans [][2]int               // [lo, hi) element offsets
	for i := 0; i < len(sorted); {
		j := i + 1
		for j < len(sorted) && sorted[j] <= sorted[j-1]+1 {
			j++
		}
		lo, hi := int(sorted[i]), int(sorted[j-1])+1
		a.ClearPages(lo, hi)
		for f := lo * a.pageLen; f < hi*a.pageLen; f += chunk {
			spans = append(spans, [2]int{f, min(f+chunk, hi*a.pageLen)})
		}
		i = j
	}
	a.b.w.run(len(spans), func(t int) { a.clearElems(spans[t][0], spans[t][1]) })
	return nil
}

func (a *arena) checkCopy(buf []byte, t isolation.BlockTable, i int) error {
	if err := a.b.check(); err != nil {
		return err
	}
	return a.CheckCopy(len(buf), a.PageBytes(), t, i)
}

// CopyOut copies table page i into dst after checking its tag.
func (a *arena) CopyOut(dst []byte, t isolation.BlockTable, i int) error {
	if err := a.checkCopy(dst, t, i); err != nil {
		return err
	}
	p, c, err := a.CheckCopyOut(t, i)
	if err != nil {
		return err
	}
	n := c * a.row // elements of each K or V run to copy
	es := a.c.KV.Size()
	base := int(p) * a.pageLen
	for run := 0; run < 2*a.c.Layers; run++ {
		o := base + run*a.kvLen
		d := dst[run*a.kvLen*es : (run+1)*a.kvLen*es]
		if a.half != nil {
			putHalves(d[:es*n], a.half[o:o+n])
		} else {
			putFloats(d[:es*n], a.data[o:o+n])
		}
		clear(d[es*n:])
	}
	return nil
}

// CopyIn writes src into table page i and takes the table's tag.
func (a *arena) CopyIn(t isolation.BlockTable, i int, src []byte) error {
	if err := a.checkCopy(src, t, i); err != nil {
		return err
	}
	p, c, err := a.CheckCopyIn(t, i)
	if err != nil {
		return err
	}
	n := c * a.row
	es := a.c.KV.Size()
	base := int(p) * a.pageLen
	for run := 0; run < 2*a.c.Layers; run++ {
		o := base + run*a.kvLen
		s := src[run*a.kvLen*es : (run+1)*a.kvLen*es]
		if a.half != nil {
			getHalves(a.half[o:o+n], s[:es*n])
		} else {
			getFloats(a.data[o:o+n], s[:es*n])
		}
		a.clearElems(o+n, o+a.kvLen)
	}
	a.RecordCopyIn(p, t.Tag(i), c)
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

// toHalfVec is toHalf with vector instructions (avx2 with F16C; nil
// elsewhere): the same halves.
var toHalfVec func(dst []uint16, src []float32)

// toHalf sets dst[i] to the nearest half of src[i] (ties to even,
// kernels.F32ToF16), vectorized on paths other than generic.
func (a *arena) toHalf(dst []uint16, src []float32) {
	if toHalfVec != nil && a.b.k.path != Generic {
		toHalfVec(dst, src)
		return
	}
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = kernels.F32ToF16(v)
	}
}

// putHalves writes h as little-endian halves into b (len 2·len(h)).
func putHalves(b []byte, h []uint16) {
	if littleEndian {
		copy(b, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h))), 2*len(h)))
		return
	}
	for i, v := range h {
		binary.LittleEndian.PutUint16(b[2*i:], v)
	}
}

// getHalves reads little-endian halves from b into h.
func getHalves(h []uint16, b []byte) {
	if littleEndian {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(h))), 2*len(h)), b)
		return
	}
	for i := range h {
		h[i] = binary.LittleEndian.Uint16(b[2*i:])
	}
}
