package kernels

import (
	"fmt"
	"slices"

	"github.com/cloison/cloison/isolation"
)

// Books are an arena's host-side record of whose KV each page holds (its
// tag) and how much of it (leading slots written, per layer), and the checks
// every backend makes against a block table before a kernel reads or writes:
// one implementation, so that the CPU and GPU arenas apply them identically.
// A backend embeds Books in its arena and touches Tags[p] and Fills of page
// p only in the calls that the Backend contract lets touch p.
type Books struct {
	Geometry ArenaConfig
	Tags     []isolation.Tag
	Fills    []int32 // [page·Layers + layer]: leading slots written under the page's tag
	// unsafe is Options.Unsafe.SkipOwnership() (faults builds only).
	unsafe bool
}

// NewBooks returns the books of an arena of c with zero tags and fills.
func NewBooks(c ArenaConfig, unsafe bool) Books {
	return Books{Geometry: c, Tags: make([]isolation.Tag, c.Pages), Fills: make([]int32, c.Pages*c.Layers), unsafe: unsafe}
}

// Fill is the fill count of page p in layer.
func (b *Books) Fill(p int32, layer int) *int32 { return &b.Fills[int(p)*b.Geometry.Layers+layer] }

// ClearPages resets the tags and fills of pages [lo, hi).
func (b *Books) ClearPages(lo, hi int) {
	clear(b.Tags[lo:hi])
	clear(b.Fills[lo*b.Geometry.Layers : hi*b.Geometry.Layers])
}

func shapeErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrShape}, args...)...)
}

// CheckTable validates what a table says about page geometry.
func (b *Books) CheckTable(t isolation.BlockTable) error {
	c := b.Geometry
	if t.Len() > 0 && t.PageTokens() != c.PageTokens {
		return shapeErr("block table of %d-token pages for an arena of %d-token pages", t.PageTokens(), c.PageTokens)
	}
	for i := range t.Len() {
		if p := t.Page(i); p < 0 || int(p) >= c.Pages {
			return shapeErr("block table page %d outside an arena of %d pages", p, c.Pages)
		}
	}
	return nil
}

// CheckRead checks the pages holding positions [0, n) of t before a read:
// the arena tag of each must equal the table's (a zero expected tag never
// matches: a page nobody owns is never read), and each must have its slots
// up to position n−1 filled in every layer of layers.
func (b *Books) CheckRead(t isolation.BlockTable, n int, layers ...int) error {
	if n <= 0 || b.unsafe {
		return nil
	}
	if t.Staged() {
		return fmt.Errorf("%w: lease %s", ErrStaged, t.Lease())
	}
	last, lastSlot := t.Slot(n - 1)
	for i := 0; i <= last; i++ {
		p, want := t.Page(i), t.Tag(i)
		if got := b.Tags[p]; got != want || want.IsZero() {
			return &TagMismatchError{Page: p, Want: want, Got: got}
		}
		need := b.Geometry.PageTokens
		if i == last {
			need = lastSlot + 1
		}
		for _, l := range layers {
			if have := int(*b.Fill(p, l)); have < need {
				return &UnwrittenError{Page: p, Layer: l, Need: need, Have: have}
			}
		}
	}
	return nil
}

// CheckSpans validates the rows, positions and tables of spans over tensors
// of rows rows.
func (b *Books) CheckSpans(what string, layer, rows int, spans []Span) error {
	c := b.Geometry
	if layer < 0 || layer >= c.Layers {
		return shapeErr("%s of layer %d in an arena of %d layers", what, layer, c.Layers)
	}
	for _, s := range spans {
		if s.N <= 0 || s.Row < 0 || s.Row+s.N > rows || s.Pos < 0 {
			return shapeErr("%s span rows [%d,%d) positions [%d,%d) for %d rows", what, s.Row, s.Row+s.N, s.Pos, s.Pos+s.N, rows)
		}
		if s.Pos+s.N > s.Table.Tokens() || (s.Pos+s.N-1)/c.PageTokens >= s.Table.Len() {
			return shapeErr("%s of positions up to %d through a block table of %d tokens in %d pages", what, s.Pos+s.N, s.Table.Tokens(), s.Table.Len())
		}
		if err := b.CheckTable(s.Table); err != nil {
			return err
		}
	}
	return nil
}

// PageWrite is one page a WriteKV call writes: slots [First, Last] under Tag.
type PageWrite struct {
	Page        int32
	Tag         isolation.Tag
	First, Last int
}

// Stale reports whether a write under want would overwrite KV a newer owner
// of the page wrote (a table older than the page's contents).
func Stale(cur, want isolation.Tag) bool {
	return !cur.IsZero() && cur != want && cur.Gen > want.Gen
}

// PlanWrite validates a WriteKV of layer through spans (checked by
// CheckSpans) and returns the pages it writes; nothing may be written unless
// it returns no error. A page written from two spans, a read-only or staged
// table, a zero or stale tag, and a write that would leave unwritten slots
// before it under the page's tag are refused.
func (b *Books) PlanWrite(layer int, spans []Span) ([]PageWrite, error) {
	var pages []PageWrite
	seen := make(map[int32]bool)
	pt := b.Geometry.PageTokens
	for _, s := range spans {
		i0, _ := s.Table.Slot(s.Pos)
		i1, _ := s.Table.Slot(s.Pos + s.N - 1)
		if s.Table.Staged() {
			return nil, fmt.Errorf("%w: lease %s", ErrStaged, s.Table.Lease())
		}
		for i := i0; i <= i1; i++ {
			p, tag := s.Table.Page(i), s.Table.Tag(i)
			if !s.Table.Writable(i) {
				return nil, fmt.Errorf("%w: page %d", ErrReadOnlyPage, p)
			}
			if tag.IsZero() || Stale(b.Tags[p], tag) {
				return nil, &TagMismatchError{Page: p, Want: tag, Got: b.Tags[p]}
			}
			if seen[p] {
				// Fills count leading slots: two spans could leave a gap.
				return nil, shapeErr("WriteKV writes page %d from two spans", p)
			}
			seen[p] = true
			pages = append(pages, PageWrite{Page: p, Tag: tag, First: max(s.Pos, i*pt) - i*pt, Last: min(s.Pos+s.N, (i+1)*pt) - 1 - i*pt})
		}
	}
	for _, w := range pages {
		have := 0 // a page changing owner restarts empty
		if b.Tags[w.Page] == w.Tag {
			have = int(*b.Fill(w.Page, layer))
		}
		if w.First > have && !b.unsafe {
			// The pool believes slots before First hold this lease's KV,
			// but the arena never saw them written under its tag: writing
			// would make whatever is there readable as ours.
			return nil, &UnwrittenError{Page: w.Page, Layer: layer, Need: w.First, Have: have}
		}
	}
	return pages, nil
}

// Changes reports whether w gives its page a new owner: the backend must
// clear the page's contents before Record.
func (b *Books) Changes(w PageWrite) bool { return b.Tags[w.Page] != w.Tag }

// Record books w as written in layer: a page changing owner takes w's tag
// with every fill reset, then its fill in layer covers w.
func (b *Books) Record(layer int, w PageWrite) {
	if b.Changes(w) {
		b.ClearPages(int(w.Page), int(w.Page)+1)
		b.Tags[w.Page] = w.Tag
	}
	f := b.Fill(w.Page, layer)
	*f = max(*f, int32(w.Last+1))
}

// Covered returns how many leading slots of table page i hold positions
// below t.Tokens(): what a page copy carries.
func Covered(t isolation.BlockTable, i int) int {
	return max(0, min(t.PageTokens(), t.Tokens()-i*t.PageTokens()))
}

// CheckCopy validates the geometry of a copy of table page i through a
// buffer of n bytes, pages being pageBytes long.
func (b *Books) CheckCopy(n, pageBytes int, t isolation.BlockTable, i int) error {
	if n != pageBytes {
		return shapeErr("page copy of %d bytes, pages are %d", n, pageBytes)
	}
	if i < 0 || i >= t.Len() {
		return shapeErr("page %d of a block table of %d pages", i, t.Len())
	}
	return b.CheckTable(t)
}

// CheckCopyOut checks table page i (CheckCopy passed) before it leaves the
// arena: not staged, the table's tag, every layer filled over the covered
// slots. It returns the page and the covered slots.
func (b *Books) CheckCopyOut(t isolation.BlockTable, i int) (int32, int, error) {
	if t.Staged() {
		return 0, 0, fmt.Errorf("%w: lease %s", ErrStaged, t.Lease())
	}
	p, want := t.Page(i), t.Tag(i)
	if got := b.Tags[p]; got != want || want.IsZero() {
		return 0, 0, &TagMismatchError{Page: p, Want: want, Got: got}
	}
	c := Covered(t, i)
	for l := range b.Geometry.Layers {
		if have := int(*b.Fill(p, l)); have < c {
			return 0, 0, &UnwrittenError{Page: p, Layer: l, Need: c, Have: have}
		}
	}
	return p, c, nil
}

// CheckCopyIn checks table page i (CheckCopy passed) before a copy into it:
// a writable page and a tag that is neither zero nor older than the page's
// contents. It returns the page and the covered slots.
func (b *Books) CheckCopyIn(t isolation.BlockTable, i int) (int32, int, error) {
	p, want := t.Page(i), t.Tag(i)
	if !t.Writable(i) {
		return 0, 0, fmt.Errorf("%w: page %d", ErrReadOnlyPage, p)
	}
	if want.IsZero() || Stale(b.Tags[p], want) {
		return 0, 0, &TagMismatchError{Page: p, Want: want, Got: b.Tags[p]}
	}
	return p, Covered(t, i), nil
}

// RecordCopyIn books page p as holding covered slots in every layer under tag.
func (b *Books) RecordCopyIn(p int32, tag isolation.Tag, covered int) {
	b.Tags[p] = tag
	for l := range b.Geometry.Layers {
		*b.Fill(p, l) = int32(covered)
	}
}

// CheckRows checks that no two spans write the same output rows (each row
// belongs to one span, so kernels may write rows in parallel).
func CheckRows(spans []Span) error {
	rows := make([][2]int, len(spans))
	for i, s := range spans {
		rows[i] = [2]int{s.Row, s.Row + s.N}
	}
	slices.SortFunc(rows, func(x, y [2]int) int { return x[0] - y[0] })
	for i := 1; i < len(rows); i++ {
		if rows[i][0] < rows[i-1][1] {
			return shapeErr("attention spans share output rows %d…%d", rows[i][0], rows[i-1][1]-1)
		}
	}
	return nil
}
