package kernelstest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/reference"
)

// Geometry of the arena tests: small pages so that sequences cross them.
const (
	tLayers     = 2
	tKVHeads    = 2
	tQHeads     = 4 // grouped-query: two query heads per kv head
	tHeadDim    = 8
	tPageTokens = 4
	tPages      = 24
)

var tArena = kernels.ArenaConfig{Pages: tPages, PageTokens: tPageTokens, Layers: tLayers, KVHeads: tKVHeads, HeadDim: tHeadDim}

func newPool(t tb, cfg isolation.Config, tenants ...cloison.TenantID) *isolation.Pool {
	t.Helper()
	if cfg.Pages == 0 {
		cfg.Pages = tPages
	}
	cfg.PageTokens = tPageTokens
	p, err := isolation.NewPool(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range tenants {
		if err := p.AddTenant(isolation.TenantConfig{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func newArena(t tb, b kernels.Backend) kernels.Arena {
	t.Helper()
	a, err := b.NewArena(tArena)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// seq is one request: its lease and, per layer, the K and V rows it wrote
// (the dense KV that the reference attends over).
type seq struct {
	lease      isolation.Lease
	pos        int // tokens written so far
	keys, vals [tLayers][][]float64
}

func allocate(t tb, p *isolation.Pool, tenant cloison.TenantID, req cloison.RequestID, tokens int) *seq {
	t.Helper()
	l, err := p.Allocate(tenant, req, tokens)
	if err != nil {
		t.Fatalf("Allocate(%s, %s, %d): %v", tenant, req, tokens, err)
	}
	return &seq{lease: l}
}

// stepResult holds what one step computed, per layer, for the rows of the batch.
type stepResult struct {
	spans []kernels.Span
	q     [tLayers][]float32 // rows × tQHeads·tHeadDim
	out   [tLayers][]float32
}

// step appends n[i] tokens to seqs[i] (one batch, rows in seqs order): it
// records the writes in the pool, builds fresh block tables, writes random
// K/V and runs attention in every layer.
func step(t tb, b kernels.Backend, p *isolation.Pool, a kernels.Arena, r *rand.Rand, seqs []*seq, n []int) stepResult {
	t.Helper()
	var res stepResult
	rows := 0
	for i, s := range seqs {
		if err := p.Write(s.lease, n[i]); err != nil {
			t.Fatalf("pool Write: %v", err)
		}
		bt, err := p.BlockTable(s.lease, s.pos+n[i])
		if err != nil {
			t.Fatalf("pool BlockTable: %v", err)
		}
		res.spans = append(res.spans, kernels.Span{Table: bt, Row: rows, Pos: s.pos, N: n[i]})
		rows += n[i]
	}
	kvw, qw := tKVHeads*tHeadDim, tQHeads*tHeadDim
	for l := range tLayers {
		ks, vs, qs := randFloats(r, rows*kvw, 1), randFloats(r, rows*kvw, 1), randFloats(r, rows*qw, 1)
		k, v, q := tensor(t, b, rows, kvw, ks), tensor(t, b, rows, kvw, vs), tensor(t, b, rows, qw, qs)
		out := tensor(t, b, rows, qw, nil)
		if err := a.WriteKV(l, k, v, res.spans); err != nil {
			t.Fatalf("WriteKV layer %d: %v", l, err)
		}
		if err := a.Attention(l, out, q, res.spans); err != nil {
			t.Fatalf("Attention layer %d: %v", l, err)
		}
		res.q[l], res.out[l] = qs, download(t, b, out)
		for i, s := range seqs {
			sp := res.spans[i]
			for j := range sp.N {
				row := sp.Row + j
				s.keys[l] = append(s.keys[l], to64(1, kvw, stored(a, ks[row*kvw:(row+1)*kvw]))[0])
				s.vals[l] = append(s.vals[l], to64(1, kvw, stored(a, vs[row*kvw:(row+1)*kvw]))[0])
			}
		}
	}
	for i, s := range seqs {
		s.pos += n[i]
	}
	return res
}

// stored returns the values a's pages hold after a write of x: x itself
// in a KVF32 arena, each element rounded to the nearest half in a KVF16
// one. The reference attends over these.
func stored(a kernels.Arena, x []float32) []float32 {
	if a.Config().KV != kernels.KVF16 {
		return x
	}
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = kernels.F16ToF32(kernels.F32ToF16(v))
	}
	return out
}

// checkAgainstReference compares every row of a step with dense reference
// attention over the sequence's own KV.
func checkAgainstReference(t tb, seqs []*seq, res stepResult) {
	t.Helper()
	qw := tQHeads * tHeadDim
	for l := range tLayers {
		for i, s := range seqs {
			sp := res.spans[i]
			for j := range sp.N {
				row, pos := sp.Row+j, sp.Pos+j
				q := to64(1, qw, res.q[l][row*qw:(row+1)*qw])[0]
				want := reference.Attention(q, s.keys[l][:pos+1], s.vals[l][:pos+1], tQHeads, tKVHeads, tHeadDim)
				for c := range qw {
					kh := c / tHeadDim / (tQHeads / tKVHeads)
					var vmax float64
					for _, v := range s.vals[l][:pos+1] {
						for d := range tHeadDim {
							vmax = max(vmax, math.Abs(v[kh*tHeadDim+d]))
						}
					}
					got := res.out[l][row*qw+c]
					if tol := 1e-4*vmax + 1e-6; !within(got, want[c], tol) {
						t.Fatalf("layer %d seq %d pos %d col %d: got %v, want %v ± %.3g", l, i, pos, c, got, want[c], tol)
					}
				}
			}
		}
	}
}

func testAttention(t *testing.T, b kernels.Backend) {
	p := newPool(t, isolation.Config{}, "a", "b")
	a := newArena(t, b)
	r := newRand(20)
	s1 := allocate(t, p, "a", "r1", 20)
	s2 := allocate(t, p, "b", "r1", 20)
	s3 := allocate(t, p, "a", "r2", 20)
	seqs := []*seq{s1, s2, s3}
	// Prefill of different lengths in one batch, then decode steps, some
	// with a single sequence, crossing page boundaries.
	steps := [][]int{{7, 1, 4}, {1, 1, 1}, {1, 6, 1}, {1, 1, 1}, {2, 3, 1}}
	for i, n := range steps {
		t.Run(fmt.Sprintf("step %d %v", i, n), func(t *testing.T) {
			checkAgainstReference(t, seqs, step(t, b, p, a, r, seqs, n))
		})
	}
}

func testAttentionBatchInvariance(t *testing.T, b kernels.Backend) {
	// Two worlds: in one, sequence s runs alone; in the other it shares
	// every batch with a co-tenant's sequence that comes first (so s's rows
	// move) and has other lengths. s's outputs must be bit-identical: a
	// co-tenant cannot influence another's results.
	steps := [][2]int{{5, 3}, {1, 1}, {1, 4}, {3, 1}} // s's tokens, the neighbour's
	run := func(withNeighbour bool) [][]float32 {
		p := newPool(t, isolation.Config{}, "a", "b")
		a := newArena(t, b)
		rs, rn := newRand(21), newRand(22)
		s := allocate(t, p, "a", "r", 16)
		nb := allocate(t, p, "b", "r", 16)
		var outs [][]float32
		qw := tQHeads * tHeadDim
		for _, st := range steps {
			seqs, srcs, n, mine := []*seq{s}, []*rand.Rand{rs}, []int{st[0]}, 0
			if withNeighbour {
				seqs, srcs, n, mine = []*seq{nb, s}, []*rand.Rand{rn, rs}, []int{st[1], st[0]}, 1
			}
			res := stepTwoSources(t, b, p, a, srcs, seqs, n)
			sp := res.spans[mine]
			for l := range tLayers {
				outs = append(outs, res.out[l][sp.Row*qw:(sp.Row+sp.N)*qw])
			}
		}
		return outs
	}
	solo, batched := run(false), run(true)
	for i := range solo {
		checkBits(t, fmt.Sprintf("output %d alone vs batched with a co-tenant", i), batched[i], solo[i])
	}
}

// stepTwoSources is step with each sequence's K, V and Q drawn from its own
// random source, so that a sequence's data is the same whatever else is in
// the batch.
func stepTwoSources(t tb, b kernels.Backend, p *isolation.Pool, a kernels.Arena, rs []*rand.Rand, seqs []*seq, n []int) stepResult {
	t.Helper()
	var res stepResult
	rows := 0
	for i, s := range seqs {
		if err := p.Write(s.lease, n[i]); err != nil {
			t.Fatal(err)
		}
		bt, err := p.BlockTable(s.lease, s.pos+n[i])
		if err != nil {
			t.Fatal(err)
		}
		res.spans = append(res.spans, kernels.Span{Table: bt, Row: rows, Pos: s.pos, N: n[i]})
		rows += n[i]
	}
	kvw, qw := tKVHeads*tHeadDim, tQHeads*tHeadDim
	for l := range tLayers {
		var ks, vs, qs []float32
		for i := range seqs {
			// Same draw order as step: all K, all V, all Q of a sequence.
			ks = append(ks, randFloats(rs[i], n[i]*kvw, 1)...)
			vs = append(vs, randFloats(rs[i], n[i]*kvw, 1)...)
			qs = append(qs, randFloats(rs[i], n[i]*qw, 1)...)
		}
		k, v, q := tensor(t, b, rows, kvw, ks), tensor(t, b, rows, kvw, vs), tensor(t, b, rows, qw, qs)
		out := tensor(t, b, rows, qw, nil)
		if err := a.WriteKV(l, k, v, res.spans); err != nil {
			t.Fatal(err)
		}
		if err := a.Attention(l, out, q, res.spans); err != nil {
			t.Fatal(err)
		}
		res.q[l], res.out[l] = qs, download(t, b, out)
	}
	for i, s := range seqs {
		s.pos += n[i]
	}
	return res
}

// sentinel fills an output tensor with a recognisable value so that a test
// can prove a refused call wrote nothing.
func sentinel(t tb, b kernels.Backend, rows, cols int) (kernels.Tensor, []float32) {
	t.Helper()
	vals := make([]float32, rows*cols)
	for i := range vals {
		vals[i] = 12345
	}
	return tensor(t, b, rows, cols, vals), vals
}

// attend runs one layer-0 attention of a single query at position pos
// through bt and returns the error; it checks that a refused call leaves the
// output untouched.
func attend(t tb, b kernels.Backend, a kernels.Arena, bt isolation.BlockTable, pos int) error {
	t.Helper()
	qw := tQHeads * tHeadDim
	q := tensor(t, b, 1, qw, randFloats(newRand(99), qw, 1))
	out, before := sentinel(t, b, 1, qw)
	err := a.Attention(0, out, q, []kernels.Span{{Table: bt, Row: 0, Pos: pos, N: 1}})
	if err != nil {
		checkBits(t, "output of a refused attention", download(t, b, out), before)
	}
	return err
}

func writeOne(t tb, b kernels.Backend, a kernels.Arena, bt isolation.BlockTable, layer, pos int) error {
	t.Helper()
	kvw := tKVHeads * tHeadDim
	r := newRand(uint64(pos))
	k, v := tensor(t, b, 1, kvw, randFloats(r, kvw, 1)), tensor(t, b, 1, kvw, randFloats(r, kvw, 1))
	return a.WriteKV(layer, k, v, []kernels.Span{{Table: bt, Row: 0, Pos: pos, N: 1}})
}

// write records n tokens in the pool and writes them (all layers) through
// a fresh table, which it returns.
func write(t tb, b kernels.Backend, p *isolation.Pool, a kernels.Arena, s *seq, n int) isolation.BlockTable {
	t.Helper()
	if err := p.Write(s.lease, n); err != nil {
		t.Fatal(err)
	}
	bt, err := p.BlockTable(s.lease, s.pos+n)
	if err != nil {
		t.Fatal(err)
	}
	for j := range n {
		for l := range tLayers {
			if err := writeOne(t, b, a, bt, l, s.pos+j); err != nil {
				t.Fatalf("write pos %d layer %d: %v", s.pos+j, l, err)
			}
		}
	}
	s.pos += n
	return bt
}

func wantMismatch(t tb, what string, err error) *kernels.TagMismatchError {
	t.Helper()
	var tm *kernels.TagMismatchError
	if !errors.As(err, &tm) || !errors.Is(err, kernels.ErrTagMismatch) {
		t.Fatalf("%s: got error %v, want a *TagMismatchError", what, err)
	}
	if c := cloison.ErrorCode(err); c != cloison.CodeIsolationViolation {
		t.Fatalf("%s: got code %q, want %q", what, c, cloison.CodeIsolationViolation)
	}
	return tm
}

// testArenaIsolation shows that a page is read only through a block table
// the pool approved for the page's current owner: defence layer 3
// (ownership tags: "attention never reads a slot that was not written in the
// current epoch by the current lease") enforced a second time, by the
// kernel, and layer 5 (a scrubbed or reused page is never read through an
// old table).
func testArenaIsolation(t *testing.T, b kernels.Backend) {
	t.Run("stale table of a released lease after the page was reused by another tenant", func(t *testing.T) {
		p := newPool(t, isolation.Config{Pages: 4, DefaultZeroing: isolation.ZeroAlways}, "a", "b")
		a := newArena(t, b)
		sa := allocate(t, p, "a", "r", 16) // every page of the pool
		old := write(t, b, p, a, sa, 6)
		if err := attend(t, b, a, old, 5); err != nil {
			t.Fatalf("owner's own read: %v", err)
		}
		if err := p.Release(sa.lease); err != nil {
			t.Fatal(err)
		}
		work := p.ScrubWork()
		if err := a.ZeroPages(work); err != nil {
			t.Fatal(err)
		}
		if err := p.ConfirmScrub(work); err != nil {
			t.Fatal(err)
		}
		// Still scrubbed: the old table finds zero tags.
		tm := wantMismatch(t, "read of a scrubbed page", attend(t, b, a, old, 5))
		if !tm.Got.IsZero() || tm.Want != old.Tag(0) {
			t.Fatalf("got mismatch %+v, want arena tag zero and table tag %+v", tm, old.Tag(0))
		}
		sb := allocate(t, p, "b", "r", 16)
		nb := write(t, b, p, a, sb, 16) // the pool has 4 pages: b now writes all of a's
		if !slices.Contains(pagesOf(nb), old.Page(0)) {
			t.Fatalf("pool gave pages %v, want a's page %d among them", pagesOf(nb), old.Page(0))
		}
		tm = wantMismatch(t, "read of a reused page through the old table", attend(t, b, a, old, 5))
		if tm.Got != nb.Tag(0) {
			t.Fatalf("arena tag %+v, want the new owner's %+v", tm.Got, nb.Tag(0))
		}
		if err := attend(t, b, a, nb, 15); err != nil {
			t.Fatalf("new owner's read: %v", err)
		}
		// The old table cannot write either: its generation is older than
		// the page's contents, so neither a write mid-page (which would
		// adopt b's slots 0…4) nor one at the page start (which would wipe
		// b's KV) is allowed.
		for _, pos := range []int{5, 0} {
			wantMismatch(t, fmt.Sprintf("write through a stale table at position %d", pos), writeOne(t, b, a, old, 0, pos))
		}
		if err := attend(t, b, a, nb, 15); err != nil {
			t.Fatalf("new owner's read after the refused write: %v", err)
		}
	})
	faultSubtests(t, b) // with the faults build tag only: switches a pool defence off
	t.Run("pool books claiming unwritten slots are caught by the arena", func(t *testing.T) {
		// The pool is told 6 tokens were written (a transfer that reported
		// success), but only one reached the arena.
		p := newPool(t, isolation.Config{}, "a")
		a := newArena(t, b)
		s := allocate(t, p, "a", "r", 8)
		if err := p.Write(s.lease, 6); err != nil {
			t.Fatal(err)
		}
		bt, err := p.BlockTable(s.lease, 6)
		if err != nil {
			t.Fatal(err)
		}
		for l := range tLayers {
			if err := writeOne(t, b, a, bt, l, 0); err != nil {
				t.Fatal(err)
			}
		}
		var uw *kernels.UnwrittenError
		if err := attend(t, b, a, bt, 5); !errors.As(err, &uw) || !errors.Is(err, kernels.ErrUnwritten) {
			t.Fatalf("read of unwritten slots: got %v, want *UnwrittenError", err)
		}
		if uw.Page != bt.Page(0) || uw.Need != 4 || uw.Have != 1 {
			t.Fatalf("got %+v, want page %d needing 4 slots with 1 written", uw, bt.Page(0))
		}
		if err := attend(t, b, a, bt, 0); err != nil {
			t.Fatalf("read of the written slot: %v", err)
		}
		// Skipping slots when writing is refused as well.
		if err := writeOne(t, b, a, bt, 0, 3); !errors.As(err, &uw) {
			t.Fatalf("write skipping slots 1…2: got %v, want *UnwrittenError", err)
		}
		buf := make([]byte, a.PageBytes())
		if err := a.CopyOut(buf, bt, 1); !errors.As(err, &uw) && !errors.Is(err, kernels.ErrTagMismatch) {
			t.Fatalf("transfer of a never-written page: got %v, want a refusal", err)
		}
	})
	t.Run("shared prefix pages are read-only and readable by the namespace", func(t *testing.T) {
		p := newPool(t, isolation.Config{PrefixSecret: []byte("k")}, "a", "b")
		a := newArena(t, b)
		prompt := make([]int32, 9)
		l1, _, err := p.AllocatePrefix("a", "r1", 12, prompt)
		if err != nil {
			t.Fatal(err)
		}
		s1 := &seq{lease: l1}
		write(t, b, p, a, s1, 9)
		if n, err := p.Publish(l1, prompt); err != nil || n != 2 {
			t.Fatalf("Publish: %d, %v", n, err)
		}
		l2, cached, err := p.AllocatePrefix("a", "r2", 12, prompt)
		if err != nil || cached != 8 {
			t.Fatalf("AllocatePrefix: cached %d, %v", cached, err)
		}
		s2 := &seq{lease: l2, pos: cached}
		bt := write(t, b, p, a, s2, 1)
		if bt.Writable(0) {
			t.Fatal("prefix page is writable")
		}
		if err := attend(t, b, a, bt, 8); err != nil {
			t.Fatalf("read over the shared prefix: %v", err)
		}
		errIs(t, "write into a prefix page", writeOne(t, b, a, bt, 0, 3), kernels.ErrReadOnlyPage)
		errIs(t, "CopyIn into a prefix page", a.CopyIn(bt, 0, make([]byte, a.PageBytes())), kernels.ErrReadOnlyPage)
		// Another tenant does not get the prefix: its own pages only.
		l3, cached, err := p.AllocatePrefix("b", "r1", 12, prompt)
		if err != nil || cached != 0 {
			t.Fatalf("other tenant: cached %d, %v", cached, err)
		}
		bt3 := write(t, b, p, a, &seq{lease: l3}, 9)
		for i := range bt3.Len() {
			if slices.Contains([]int32{bt.Page(0), bt.Page(1)}, bt3.Page(i)) {
				t.Fatalf("other tenant's table lists prefix page %d", bt3.Page(i))
			}
		}
	})
	t.Run("the zero table reads nothing", func(t *testing.T) {
		a := newArena(t, b)
		errIs(t, "attention through the zero table", attend(t, b, a, isolation.BlockTable{}, 0), kernels.ErrShape)
		errIs(t, "CopyOut through the zero table", a.CopyOut(make([]byte, a.PageBytes()), isolation.BlockTable{}, 0), kernels.ErrShape)
	})
	t.Run("bad spans", func(t *testing.T) {
		p := newPool(t, isolation.Config{}, "a")
		a := newArena(t, b)
		s := allocate(t, p, "a", "r", 8)
		bt := write(t, b, p, a, s, 3)
		qw := tQHeads * tHeadDim
		q, out := tensor(t, b, 2, qw, nil), tensor(t, b, 2, qw, nil)
		for _, tt := range []struct {
			name  string
			layer int
			span  kernels.Span
		}{
			{"past the table", 0, kernels.Span{Table: bt, Pos: 2, N: 2}},
			{"rows past the tensor", 0, kernels.Span{Table: bt, Row: 1, Pos: 0, N: 2}},
			{"empty span", 0, kernels.Span{Table: bt, N: 0}},
			{"negative position", 0, kernels.Span{Table: bt, Pos: -1, N: 1}},
			{"layer out of range", tLayers, kernels.Span{Table: bt, N: 1}},
		} {
			errIs(t, tt.name, a.Attention(tt.layer, out, q, []kernels.Span{tt.span}), kernels.ErrShape)
		}
		overlapping := []kernels.Span{{Table: bt, Row: 0, Pos: 0, N: 2}, {Table: bt, Row: 1, Pos: 2, N: 1}}
		errIs(t, "spans sharing output rows", a.Attention(0, out, q, overlapping), kernels.ErrShape)
		errIs(t, "query width not a head multiple", a.Attention(0, tensor(t, b, 1, 12, nil), tensor(t, b, 1, 12, nil), []kernels.Span{{Table: bt, N: 1}}), kernels.ErrShape)
	})
}

func pagesOf(bt isolation.BlockTable) []int32 {
	var out []int32
	for i := range bt.Len() {
		out = append(out, bt.Page(i))
	}
	return out
}

// checkOnlySlots checks a page in transfer format (elements of kv's size): slots ≥ n are zero in
// every layer's K and V.
func checkOnlySlots(t tb, buf []byte, n int, kv kernels.KVType) {
	t.Helper()
	row := tKVHeads * tHeadDim * kv.Size()
	for run := range 2 * tLayers {
		part := buf[run*tPageTokens*row : (run+1)*tPageTokens*row]
		for i, c := range part[n*row:] {
			if c != 0 {
				t.Fatalf("run %d byte %d after slot %d: got %#x, want 0", run, n*row+i, n, c)
			}
		}
		if slices.Max(part[:n*row]) == 0 {
			t.Fatalf("run %d: written slots are all zero", run)
		}
	}
}

func testZeroPages(t *testing.T, b kernels.Backend) {
	p := newPool(t, isolation.Config{}, "a")
	a := newArena(t, b)
	s := allocate(t, p, "a", "r", 16)
	bt := write(t, b, p, a, s, 16)
	for i := range bt.Len() {
		if a.Tag(bt.Page(i)) != bt.Tag(i) {
			t.Fatalf("page %d tag %+v, want %+v", bt.Page(i), a.Tag(bt.Page(i)), bt.Tag(i))
		}
	}
	pages := []int32{bt.Page(2), bt.Page(0), bt.Page(1)} // unsorted
	if err := a.ZeroPages(pages); err != nil {
		t.Fatal(err)
	}
	for _, pg := range pages {
		if !a.Tag(pg).IsZero() {
			t.Fatalf("page %d tag %+v after ZeroPages, want zero", pg, a.Tag(pg))
		}
	}
	if a.Tag(bt.Page(3)) != bt.Tag(3) {
		t.Fatal("ZeroPages changed a page it was not given")
	}
	wantMismatch(t, "read of a zeroed page", attend(t, b, a, bt, 15))
	errIs(t, "page out of range", a.ZeroPages([]int32{tPages}), kernels.ErrShape)
	errIs(t, "negative page", a.ZeroPages([]int32{-1}), kernels.ErrShape)
	if err := a.ZeroPages(nil); err != nil {
		t.Fatalf("ZeroPages(nil): %v", err)
	}
}

// testPageTransfer moves a prefilled sequence from one arena (a prefill
// node) to another (a decode node) page by page and checks that decode
// attention there equals attention at the source, bit for bit
// (defence layer 4, verified transfer: the bytes a page carries are
// exactly its lease's, and only a table of the page's owner exports them).
func testPageTransfer(t *testing.T, b kernels.Backend) {
	pp := newPool(t, isolation.Config{}, "a")
	pa := newArena(t, b)
	dp := newPool(t, isolation.Config{}, "x", "a") // tenant numbers differ between nodes
	da := newArena(t, b)
	src := allocate(t, pp, "a", "r", 12)
	const tokens = 10
	sbt := write(t, b, pp, pa, src, tokens)

	dst := allocate(t, dp, "a", "r", 12)
	if err := dp.Write(dst.lease, tokens); err != nil {
		t.Fatal(err)
	}
	dbt, err := dp.BlockTable(dst.lease, tokens)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, pa.PageBytes())
	for i := range sbt.Len() {
		if err := pa.CopyOut(buf, sbt, i); err != nil {
			t.Fatalf("CopyOut page %d: %v", i, err)
		}
		if i == sbt.Len()-1 {
			checkOnlySlots(t, buf, tokens%tPageTokens, pa.Config().KV)
		}
		if err := da.CopyIn(dbt, i, buf); err != nil {
			t.Fatalf("CopyIn page %d: %v", i, err)
		}
		if da.Tag(dbt.Page(i)) != dbt.Tag(i) {
			t.Fatalf("page %d tag %+v after CopyIn, want the decode table's %+v", i, da.Tag(dbt.Page(i)), dbt.Tag(i))
		}
	}
	qw := tQHeads * tHeadDim
	q := tensor(t, b, 1, qw, randFloats(newRand(30), qw, 1))
	for l := range tLayers {
		o1, o2 := tensor(t, b, 1, qw, nil), tensor(t, b, 1, qw, nil)
		if err := pa.Attention(l, o1, q, []kernels.Span{{Table: sbt, Pos: tokens - 1, N: 1}}); err != nil {
			t.Fatal(err)
		}
		if err := da.Attention(l, o2, q, []kernels.Span{{Table: dbt, Pos: tokens - 1, N: 1}}); err != nil {
			t.Fatal(err)
		}
		checkBits(t, fmt.Sprintf("layer %d attention after transfer", l), download(t, b, o2), download(t, b, o1))
	}
	// Decode continues on the transferred pages.
	write(t, b, dp, da, dst, 1)

	// Refusals: a table of the wrong owner, wrong sizes, read-only pages.
	wantMismatch(t, "CopyOut through the decode table on the prefill arena", pa.CopyOut(buf, dbt, 0))
	errIs(t, "short buffer", pa.CopyOut(buf[:10], sbt, 0), kernels.ErrShape)
	errIs(t, "index past the table", pa.CopyOut(buf, sbt, sbt.Len()), kernels.ErrShape)
	errIs(t, "CopyIn short buffer", da.CopyIn(dbt, 0, buf[:10]), kernels.ErrShape)
}

// testArenaProperty (defence layers 3 and 5, ownership tags and scrubbing) drives random lifecycles of leases over a shared pool
// and arena: writes, reads, releases, scrubs. Invariants: a live lease's
// fresh table always reads its own KV correctly; every table kept from a
// released lease is refused once its pages were scrubbed or reused, and never
// returns data.
func testArenaProperty(t *testing.T, b kernels.Backend) { rapid.Check(t, ArenaLifecycle(b)) }

// ArenaLifecycle is the property of testArenaProperty, exported so that a
// backend can also fuzz it: f.Fuzz(rapid.MakeFuzz(kernelstest.ArenaLifecycle(b))).
func ArenaLifecycle(b kernels.Backend) func(*rapid.T) {
	return func(rt *rapid.T) {
		p := newPool(rt, isolation.Config{Pages: 8}, "a", "b")
		a := newArena(rt, b)
		r := newRand(rapid.Uint64().Draw(rt, "seed"))
		var live []*seq
		type stale struct {
			bt  isolation.BlockTable
			pos int
		}
		var old []stale
		next := 0
		for range rapid.IntRange(10, 40).Draw(rt, "ops") {
			switch op := rapid.IntRange(0, 3).Draw(rt, "op"); {
			case op == 0 && len(live) < 3:
				tenant := rapid.SampledFrom([]cloison.TenantID{"a", "b"}).Draw(rt, "tenant")
				next++
				l, err := p.Allocate(tenant, cloison.RequestID(fmt.Sprint(next)), 8)
				if err != nil {
					continue // pool full or scrub pending: fine
				}
				live = append(live, &seq{lease: l})
			case op == 1 && len(live) > 0:
				s := live[rapid.IntRange(0, len(live)-1).Draw(rt, "seq")]
				if s.pos == 8 {
					continue
				}
				n := rapid.IntRange(1, 8-s.pos).Draw(rt, "n")
				res := step(rt, b, p, a, r, []*seq{s}, []int{n})
				checkAgainstReference(rt, []*seq{s}, res)
			case op == 2 && len(live) > 0:
				i := rapid.IntRange(0, len(live)-1).Draw(rt, "seq")
				s := live[i]
				if s.pos > 0 {
					bt, err := p.BlockTable(s.lease, s.pos)
					if err != nil {
						rt.Fatal(err)
					}
					old = append(old, stale{bt, s.pos - 1})
				}
				if err := p.Release(s.lease); err != nil {
					rt.Fatal(err)
				}
				live = slices.Delete(live, i, i+1)
			case op == 3:
				work := p.ScrubWork()
				if err := a.ZeroPages(work); err != nil {
					rt.Fatal(err)
				}
				if err := p.ConfirmScrub(work); err != nil {
					rt.Fatal(err)
				}
			}
			// Every stale table whose first page was scrubbed or taken
			// over is refused with a typed error and no output.
			for _, o := range old {
				if a.Tag(o.bt.Page(0)) == o.bt.Tag(0) {
					continue // not yet scrubbed or reused: the owner's bytes, unchanged
				}
				if err := attend(rt, b, a, o.bt, o.pos); !errors.Is(err, kernels.ErrTagMismatch) {
					rt.Fatalf("stale table of lease %v read pages that changed owner: %v", o.bt.Lease(), err)
				}
			}
		}
	}
}

// testStoredKV checks the transfer format of a written page: each element
// of K and V is, in the arena's KV type, what WriteKV was given (float32
// bits; for KVF16 the nearest half, ties to even, as kernels.F32ToF16), and
// a page carried into a fresh arena comes back out byte for byte.
func testStoredKV(t *testing.T, b kernels.Backend) {
	p := newPool(t, isolation.Config{}, "a")
	a := newArena(t, b)
	kv := a.Config().KV
	kvw := tKVHeads * tHeadDim
	// Values that round in every way a half can: ties to even both ways,
	// subnormals, overflow to infinity, signed zero.
	special := []float32{1 + 1.0/2048, 1 + 3.0/2048, 65504, 65520, 1e6, -1e-7, 6e-8, 3e-8, float32(math.Copysign(0, -1)), 0.1, -2.5, 1.0 / 3}
	s := allocate(t, p, "a", "r", tPageTokens)
	if err := p.Write(s.lease, 2); err != nil {
		t.Fatal(err)
	}
	bt, err := p.BlockTable(s.lease, 2)
	if err != nil {
		t.Fatal(err)
	}
	var ks, vs []float32
	r := newRand(40)
	for l := range tLayers {
		kx, vx := randFloats(r, 2*kvw, 4), randFloats(r, 2*kvw, 4)
		copy(kx, special)
		copy(vx[kvw:], special)
		if err := a.WriteKV(l, tensor(t, b, 2, kvw, kx), tensor(t, b, 2, kvw, vx), []kernels.Span{{Table: bt, N: 2}}); err != nil {
			t.Fatal(err)
		}
		ks, vs = append(ks, kx...), append(vs, vx...)
	}
	buf := make([]byte, a.PageBytes())
	if err := a.CopyOut(buf, bt, 0); err != nil {
		t.Fatal(err)
	}
	es := kv.Size()
	for l := range tLayers {
		for v, x := range [2][]float32{ks[l*2*kvw : (l+1)*2*kvw], vs[l*2*kvw : (l+1)*2*kvw]} {
			run := buf[(2*l+v)*tPageTokens*kvw*es:]
			for i, f := range x {
				var want, got uint32
				if kv == kernels.KVF16 {
					want, got = uint32(kernels.F32ToF16(f)), uint32(binary.LittleEndian.Uint16(run[2*i:]))
				} else {
					want, got = math.Float32bits(f), binary.LittleEndian.Uint32(run[4*i:])
				}
				if got != want {
					t.Fatalf("%v arena, layer %d run %d element %d (%v): stored %#x, want %#x", kv, l, v, i, f, got, want)
				}
			}
		}
	}
	a2 := newArena(t, b)
	if err := a2.CopyIn(bt, 0, buf); err != nil {
		t.Fatal(err)
	}
	buf2 := make([]byte, a2.PageBytes())
	if err := a2.CopyOut(buf2, bt, 0); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(buf, buf2) {
		t.Fatal("a page carried into another arena comes back out changed")
	}
}
