package cuda

import (
	"fmt"
	"math"
	"slices"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// arena is a KV cache in one device allocation. Page p occupies bytes
// [p·pageBytes, (p+1)·pageBytes) of data, laid out as the transfer format
// ([layer][K, V][slot][kv_head][head_dim] float32), so a page is one
// contiguous run and a copy of a page is one transfer.
//
// Ownership is kept twice. On the host, tags and fills exactly as
// kernels/cpu keeps them, checked before any launch. On the device,
// devTags holds each page's tag (two uint64: Tenant<<32|Gen, Epoch), which
// the attention kernels compare with the tags the block table expects
// before reading a page: a second, independent layer that holds even if the
// host books were wrong.
type arena struct {
	b        *Backend
	c        kernels.ArenaConfig
	row      int   // floats per token row of one layer's K or V: kv_heads × head_dim
	kvLen    int64 // floats of one layer's K (or V) in a page
	pageLen  int64 // floats per page
	data     uint64
	devTags  uint64 // 2·Pages uint64
	devBytes int64
	// The host books: tags and fills of page p are read and written only by
	// the calls that the Backend contract lets touch p.
	kernels.Books
	// skipHostChecks makes Attention skip the host-side tag and fill checks
	// (tests only: it proves the device check refuses a foreign page alone).
	skipHostChecks bool
}

// packTag is the device form of a tag.
func packTag(t isolation.Tag) [2]uint64 {
	return [2]uint64{uint64(t.Tenant)<<32 | uint64(t.Gen), t.Epoch}
}

func unpackTag(w [2]uint64) isolation.Tag {
	return isolation.Tag{Tenant: uint32(w[0] >> 32), Gen: uint32(w[0]), Epoch: w[1]}
}

// NewArena allocates a zeroed arena with zero tags: one device allocation
// for the pages, one for their tags. It stores float32 KV only: KVF16 is
// ErrKVType.
func (b *Backend) NewArena(c kernels.ArenaConfig) (kernels.Arena, error) {
	if b.closed.Load() {
		return nil, kernels.ErrClosed
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.KV != kernels.KVF32 {
		// The device kernels read float32 KV only.
		return nil, fmt.Errorf("%w: %v on the cuda backend (only f32)", kernels.ErrKVType, c.KV)
	}
	row := c.KVHeads * c.HeadDim
	a := &arena{
		b: b, c: c, row: row, kvLen: int64(c.PageTokens * row), pageLen: int64(c.Layers) * 2 * int64(c.PageTokens*row),
		Books: kernels.NewBooks(c, b.unsafeSkip),
	}
	a.devBytes = int64(c.Pages) * a.pageLen * 4
	err := b.do(func(dv driver) error {
		var err error
		if a.data, err = dv.alloc(a.devBytes); err != nil {
			return fmt.Errorf("KV arena of %d bytes: %w", a.devBytes, err)
		}
		if a.devTags, err = dv.alloc(16 * int64(c.Pages)); err != nil {
			_ = dv.free(a.data)
			return err
		}
		if err := dv.memset(a.data, a.devBytes); err != nil {
			return err
		}
		return dv.memset(a.devTags, 16*int64(c.Pages))
	})
	if err != nil {
		return nil, err
	}
	return a, nil
}

func (a *arena) Config() kernels.ArenaConfig { return a.c }
func (a *arena) PageBytes() int              { return int(a.pageLen) * 4 }

func (a *arena) Tag(page int32) isolation.Tag {
	if page < 0 || int(page) >= a.c.Pages {
		return isolation.Tag{}
	}
	return a.Tags[page]
}

// pagePtr returns the device address of page p.
func (a *arena) pagePtr(p int32) uint64 { return a.data + uint64(int64(p)*a.pageLen*4) }

// setDevTag writes page p's device tag. Inside Backend.do only.
func (a *arena) setDevTag(dv driver, p int32, t isolation.Tag) error {
	w := packTag(t)
	return dv.htod(a.devTags+uint64(16*int64(p)), bytesOf(w[:]))
}

// devTag reads page p's device tag. Inside Backend.do only.
func (a *arena) devTag(dv driver, p int32) (isolation.Tag, error) {
	var w [2]uint64
	err := dv.dtoh(bytesOf(w[:]), a.devTags+uint64(16*int64(p)))
	return unpackTag(w), err
}

// WriteKV stores K and V rows through block tables. Pages changing owner
// are zeroed on the device (and their device tags set) before the rows are
// copied in.
func (a *arena) WriteKV(layer int, k, v kernels.Tensor, spans []kernels.Span) error {
	b := a.b
	if b.closed.Load() {
		return kernels.ErrClosed
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
	pages, err := a.PlanWrite(layer, spans)
	if err != nil {
		return err
	}
	// Destination of each row: the arena float offset of its K slot.
	var offs []int64
	var src []int // tensor row of each destination
	for _, s := range spans {
		for j := range s.N {
			i, slot := s.Table.Slot(s.Pos + j)
			p := s.Table.Page(i)
			offs = append(offs, int64(p)*a.pageLen+int64(2*layer)*a.kvLen+int64(slot*a.row))
			src = append(src, s.Row+j)
		}
	}
	return b.do(func(dv driver) error {
		for _, w := range pages {
			if a.Changes(w) {
				if err := dv.memset(a.pagePtr(w.Page), a.pageLen*4); err != nil {
					return err
				}
				if err := a.setDevTag(dv, w.Page, w.Tag); err != nil {
					return err
				}
			}
			a.Record(layer, w)
		}
		if len(offs) == 0 {
			return nil
		}
		// The kernel copies row j of k and v; spans name arbitrary rows,
		// so runs of consecutive rows are launched separately.
		for j0 := 0; j0 < len(offs); {
			j1 := j0 + 1
			for j1 < len(offs) && src[j1] == src[j1-1]+1 {
				j1++
			}
			p, err := b.scr.stage(dv, bytesOf(offs[j0:j1]))
			if err != nil {
				return err
			}
			if err := dv.launch("write_kv", [3]int{j1 - j0, 1, 1}, 128, ptrArg(a.data),
				kt.row(src[j0]), vt.row(src[j0]), ptrArg(p), intArg(a.row), longArg(a.kvLen)); err != nil {
				return err
			}
			j0 = j1
		}
		return nil
	})
}

// ZeroPages zeroes pages and resets their tags and fills: one
// cuMemsetD8Async per run of adjacent pages (and one for their device tags).
func (a *arena) ZeroPages(pages []int32) error {
	if a.b.closed.Load() {
		return kernels.ErrClosed
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
	return a.b.do(func(dv driver) error {
		for i := 0; i < len(sorted); {
			j := i + 1
			for j < len(sorted) && sorted[j] <= sorted[j-1]+1 {
				j++
			}
			lo, hi := sorted[i], sorted[j-1]+1
			n := int64(hi - lo)
			if err := dv.memset(a.pagePtr(lo), n*a.pageLen*4); err != nil {
				return err
			}
			if err := dv.memset(a.devTags+uint64(16*int64(lo)), 16*n); err != nil {
				return err
			}
			a.ClearPages(int(lo), int(hi))
			i = j
		}
		return nil
	})
}

func (a *arena) checkCopy(buf []byte, t isolation.BlockTable, i int) error {
	if a.b.closed.Load() {
		return kernels.ErrClosed
	}
	return a.CheckCopy(len(buf), a.PageBytes(), t, i)
}

// CopyOut copies table page i into dst after checking its tag and fills;
// only the covered slots of each layer's K and V cross from the device.
func (a *arena) CopyOut(dst []byte, t isolation.BlockTable, i int) error {
	if err := a.checkCopy(dst, t, i); err != nil {
		return err
	}
	p, c, err := a.CheckCopyOut(t, i)
	if err != nil {
		return err
	}
	want := t.Tag(i)
	return a.b.do(func(dv driver) error {
		// The device tag too: the copy leaves the device only if both
		// books agree.
		if got, err := a.devTag(dv, p); err != nil {
			return err
		} else if got != want {
			return &kernels.TagMismatchError{Page: p, Want: want, Got: got}
		}
		base := a.pagePtr(p)
		if c == a.c.PageTokens {
			return dv.dtoh(dst, base)
		}
		n := int64(c*a.row) * 4 // covered bytes of each K or V run
		runBytes := a.kvLen * 4
		for run := int64(0); run < int64(2*a.c.Layers); run++ {
			d := dst[run*runBytes : (run+1)*runBytes]
			if err := dv.dtoh(d[:n], base+uint64(run*runBytes)); err != nil {
				return err
			}
			clear(d[n:])
		}
		return nil
	})
}

// CopyIn writes src into table page i and takes the table's tag; slots
// beyond the covered ones are zeroed on the device.
func (a *arena) CopyIn(t isolation.BlockTable, i int, src []byte) error {
	if err := a.checkCopy(src, t, i); err != nil {
		return err
	}
	p, c, err := a.CheckCopyIn(t, i)
	if err != nil {
		return err
	}
	want := t.Tag(i)
	return a.b.do(func(dv driver) error {
		base := a.pagePtr(p)
		if c == a.c.PageTokens {
			if err := dv.htod(base, src); err != nil {
				return err
			}
		} else {
			n := int64(c*a.row) * 4
			runBytes := a.kvLen * 4
			for run := int64(0); run < int64(2*a.c.Layers); run++ {
				d := base + uint64(run*runBytes)
				if err := dv.htod(d, src[run*runBytes:run*runBytes+n]); err != nil {
					return err
				}
				if err := dv.memset(d+uint64(n), runBytes-n); err != nil {
					return err
				}
			}
		}
		if err := a.setDevTag(dv, p, want); err != nil {
			return err
		}
		a.RecordCopyIn(p, want, c)
		return nil
	})
}

// Attention computes causal grouped-query attention through block tables.
// The host checks tags and fills first (as kernels/cpu); then one upload
// carries the flat list of every span's pages with their expected tags,
// paged_attention_check compares those with the device tags, and
// paged_attention runs one block per (query row, query head) — refusing, on
// the device, to read a page whose tag differs. A raised device flag
// becomes a *kernels.TagMismatchError and out is not written.
func (a *arena) Attention(layer int, out, q kernels.Tensor, spans []kernels.Span) error {
	b := a.b
	ts, err := b.sameShape("attention", out, q)
	if err != nil {
		return err
	}
	ot, qt := ts[0], ts[1]
	hd := a.c.HeadDim
	if qt.cols%hd != 0 || (qt.cols/hd)%a.c.KVHeads != 0 {
		return shapeErr("attention query rows of %d for %d kv heads of %d", qt.cols, a.c.KVHeads, hd)
	}
	if hd > maxHeadDim {
		return shapeErr("attention head dim %d above the cuda backend's %d", hd, maxHeadDim)
	}
	if overlaps(ot, qt) {
		return shapeErr("attention output aliases its query")
	}
	if err := a.CheckSpans("Attention", layer, qt.rows, spans); err != nil {
		return err
	}
	if err := kernels.CheckRows(spans); err != nil {
		return err
	}
	if !a.skipHostChecks {
		for _, s := range spans {
			if err := a.CheckRead(s.Table, s.Pos+s.N, layer); err != nil {
				return err
			}
		}
	}
	if len(spans) == 0 {
		return nil
	}
	// Flat page list: entries [first, first+pages) belong to one span.
	type entry struct {
		page int32
		want isolation.Tag
	}
	var entries []entry
	var pages []int32
	var want []uint64
	var rowinfo, qrow []int32
	for _, s := range spans {
		first := int32(len(pages))
		last, _ := s.Table.Slot(s.Pos + s.N - 1)
		for i := 0; i <= last; i++ {
			p, w := s.Table.Page(i), s.Table.Tag(i)
			entries = append(entries, entry{p, w})
			pages = append(pages, p)
			pw := packTag(w)
			want = append(want, pw[0], pw[1])
		}
		for j := range s.N {
			rowinfo = append(rowinfo, first, int32(s.Pos+j))
			qrow = append(qrow, int32(s.Row+j))
		}
	}
	var pk packer
	flag := []int32{0, math.MaxInt32} // flag, lowest bad entry
	fo := pk.add(bytesOf(flag))
	po := pk.add(bytesOf(pages))
	wo := pk.add(bytesOf(want))
	ro := pk.add(bytesOf(rowinfo))
	qo := pk.add(bytesOf(qrow))
	qHeads := qt.cols / hd
	check := 1
	if b.unsafeSkip {
		check = 0
	}
	var bad *kernels.TagMismatchError
	err = b.do(func(dv driver) error {
		s, err := b.scr.stage(dv, pk.buf)
		if err != nil {
			return err
		}
		at := func(off uint64) uint64 { return ptrArg(s + off) }
		if check == 1 {
			if err := dv.launch("paged_attention_check", [3]int{(len(pages) + 127) / 128, 1, 1}, 128,
				ptrArg(a.devTags), at(po), at(wo), intArg(len(pages)), at(fo), at(fo+4)); err != nil {
				return err
			}
		}
		if err := dv.launch("paged_attention", [3]int{len(qrow), qHeads, 1}, 32*attWarps,
			ptrArg(ot.ptr), ptrArg(qt.ptr), ptrArg(a.data), ptrArg(a.devTags), at(po), at(wo), at(ro), at(qo),
			intArg(qt.cols), intArg(hd), intArg(qHeads/a.c.KVHeads), intArg(a.c.PageTokens),
			longArg(a.pageLen), longArg(a.kvLen), intArg(a.row), intArg(layer),
			floatArg(float32(1/math.Sqrt(float64(hd)))), intArg(check), at(fo)); err != nil {
			return err
		}
		if check == 0 {
			return nil
		}
		var res [2]int32
		if err := dv.dtoh(bytesOf(res[:]), s+fo); err != nil {
			return err
		}
		if res[0] == 0 {
			return nil
		}
		e := 0
		if res[1] >= 0 && int(res[1]) < len(entries) {
			e = int(res[1])
		}
		got, err := a.devTag(dv, entries[e].page)
		if err != nil {
			return err
		}
		bad = &kernels.TagMismatchError{Page: entries[e].page, Want: entries[e].want, Got: got}
		return nil
	})
	if err != nil {
		return err
	}
	if bad != nil {
		return bad
	}
	return nil
}

// Limits of paged_attention (ATT_WARPS, 32·ATT_DIMS in kernels.cu).
const (
	attWarps   = 4
	maxHeadDim = 256
)
