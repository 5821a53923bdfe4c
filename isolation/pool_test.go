package isolation

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"

	"github.com/cloison/cloison"
)

// newPool builds a pool and adds tenants, failing the test on any error.
func newPool(t testing.TB, cfg Config, tenants ...TenantConfig) *Pool {
	t.Helper()
	p, err := NewPool(cfg)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	for _, tc := range tenants {
		if err := p.AddTenant(tc); err != nil {
			t.Fatalf("AddTenant(%s): %v", tc.ID, err)
		}
	}
	return p
}

func mustCheck(t testing.TB, p *Pool) {
	t.Helper()
	if err := p.Check(); err != nil {
		t.Fatal(err)
	}
}

// leasePages exposes a lease's pages to tests of this package.
func leasePages(p *Pool, l Lease) []int32 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.leases[l.Epoch].pages)
}

// snapshot copies the pool's page metadata, to prove that a failed call
// changed nothing.
func snapshot(p *Pool) []page {
	// (used by the property machine too)
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.pages)
}

func scrubAll(t testing.TB, p *Pool) []int32 {
	t.Helper()
	work := p.ScrubWork()
	if err := p.ConfirmScrub(work); err != nil {
		t.Fatalf("ConfirmScrub: %v", err)
	}
	return work
}

func TestNewPoolConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"defaults to 16 tokens a page", Config{Pages: 4}, true},
		{"no pages", Config{Pages: 0}, false},
		{"page tokens not a power of two", Config{Pages: 4, PageTokens: 12}, false},
		{"page tokens too large", Config{Pages: 4, PageTokens: 8192}, false},
		{"one token a page", Config{Pages: 4, PageTokens: 1}, true},
		{"bad zeroing", Config{Pages: 4, DefaultZeroing: 9}, false},
		{"unset zeroing means cross-tenant", Config{Pages: 4}, true},
		{"duplicate shared namespace", Config{Pages: 4, SharedNamespaces: []string{"pub", "pub"}}, false},
		{"empty shared namespace", Config{Pages: 4, SharedNamespaces: []string{""}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := NewPool(tt.cfg)
			if (err == nil) != tt.ok {
				t.Fatalf("got err %v, want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("got %v, want ErrInvalidConfig", err)
			}
			if err == nil {
				if tt.cfg.PageTokens == 0 && p.PageTokens() != 16 {
					t.Errorf("got %d page tokens, want 16", p.PageTokens())
				}
				mustCheck(t, p)
			}
		})
	}
}

func TestAddTenant(t *testing.T) {
	base := func() *Pool {
		return newPool(t, Config{Pages: 16, SharedNamespaces: []string{"public"}}, TenantConfig{ID: "a", Reserved: 4})
	}
	tests := []struct {
		name string
		tc   TenantConfig
		want error
	}{
		{"plain", TenantConfig{ID: "b"}, nil},
		{"empty id", TenantConfig{}, ErrInvalidConfig},
		{"duplicate", TenantConfig{ID: "a"}, ErrInvalidConfig},
		{"negative reserved", TenantConfig{ID: "b", Reserved: -1}, ErrInvalidConfig},
		{"cap below reserved", TenantConfig{ID: "b", Reserved: 4, Cap: 2}, ErrInvalidConfig},
		{"reservations over the pool", TenantConfig{ID: "b", Reserved: 13}, ErrInvalidConfig},
		{"reservations fill the pool", TenantConfig{ID: "b", Reserved: 12}, nil},
		{"dedicated without pages", TenantConfig{ID: "b", Tier: TierDedicated}, ErrInvalidConfig},
		{"dedicated", TenantConfig{ID: "b", Tier: TierDedicated, Reserved: 12}, nil},
		{"dedicated too large", TenantConfig{ID: "b", Tier: TierDedicated, Reserved: 13}, ErrInvalidConfig},
		{"dedicated in a shared namespace", TenantConfig{ID: "b", Tier: TierDedicated, Reserved: 2, Namespace: "public"}, ErrInvalidConfig},
		{"unknown shared namespace", TenantConfig{ID: "b", Namespace: "other"}, ErrInvalidConfig},
		{"shared namespace", TenantConfig{ID: "b", Namespace: "public"}, nil},
		{"bad zeroing", TenantConfig{ID: "b", Zeroing: 7}, ErrInvalidConfig},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			err := p.AddTenant(tt.tc)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			mustCheck(t, p)
		})
	}
}

func TestZeroingNeverLaxerThanDefault(t *testing.T) {
	p := newPool(t, Config{Pages: 4, DefaultZeroing: ZeroCrossTenant}, TenantConfig{ID: "a", Zeroing: ZeroNever}, TenantConfig{ID: "b", Zeroing: ZeroAlways})
	got := map[cloison.TenantID]Zeroing{}
	for _, ts := range p.Stats().Tenants {
		got[ts.Tenant] = ts.Zeroing
	}
	if got["a"] != ZeroCrossTenant || got["b"] != ZeroAlways {
		t.Fatalf("got %v, want a=cross-tenant b=always", got)
	}
}

func TestParse(t *testing.T) {
	for _, z := range []Zeroing{ZeroNever, ZeroCrossTenant, ZeroAlways} {
		if got, err := ParseZeroing(z.String()); err != nil || got != z {
			t.Errorf("ParseZeroing(%q) = %v, %v", z, got, err)
		}
	}
	for _, tr := range []Tier{TierShared, TierDedicated} {
		if got, err := ParseTier(tr.String()); err != nil || got != tr {
			t.Errorf("ParseTier(%q) = %v, %v", tr, got, err)
		}
	}
	if _, err := ParseZeroing("sometimes"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("got %v, want ErrInvalidConfig", err)
	}
	if _, err := ParseTier("vip"); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("got %v, want ErrInvalidConfig", err)
	}
}

// Allocation is all-or-nothing: every failure leaves every page as it was.
func TestAllocateAllOrNothing(t *testing.T) {
	tests := []struct {
		name    string
		tenants []TenantConfig
		setup   func(p *Pool)
		tenant  cloison.TenantID
		tokens  int
		want    error
	}{
		{"unknown tenant", []TenantConfig{{ID: "a"}}, nil, "z", 16, ErrUnknownTenant},
		{"zero tokens", []TenantConfig{{ID: "a"}}, nil, "a", 0, ErrInvalidArgument},
		{"larger than the pool", []TenantConfig{{ID: "a"}}, nil, "a", 8*16 + 1, ErrTooLarge},
		{"larger than the cap", []TenantConfig{{ID: "a", Cap: 2}}, nil, "a", 3 * 16, ErrTooLarge},
		{"larger than what others' reservations leave", []TenantConfig{{ID: "a"}, {ID: "b", Reserved: 6}}, nil, "a", 3 * 16, ErrTooLarge},
		{"quota reached", []TenantConfig{{ID: "a", Cap: 4}}, func(p *Pool) { p.Allocate("a", "r0", 3*16) }, "a", 2 * 16, ErrQuotaExceeded},
		{"pool busy", []TenantConfig{{ID: "a"}, {ID: "b"}}, func(p *Pool) { p.Allocate("b", "r0", 6*16) }, "a", 3 * 16, ErrPoolExhausted},
		{"reserved for another tenant", []TenantConfig{{ID: "a"}, {ID: "b", Reserved: 4}}, func(p *Pool) { p.Allocate("a", "r0", 3*16) }, "a", 2 * 16, ErrPoolExhausted},
		{"dedicated pages busy", []TenantConfig{{ID: "a", Tier: TierDedicated, Reserved: 3}}, func(p *Pool) { p.Allocate("a", "r0", 2*16) }, "a", 2 * 16, ErrPoolExhausted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPool(t, Config{Pages: 8}, tt.tenants...)
			if tt.setup != nil {
				tt.setup(p)
			}
			before, stats := snapshot(p), p.Stats()
			_, err := p.Allocate(tt.tenant, "r1", tt.tokens)
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if after := snapshot(p); !reflect.DeepEqual(before, after) {
				t.Fatal("a failed allocation changed page state")
			}
			if !reflect.DeepEqual(stats, p.Stats()) {
				t.Fatalf("a failed allocation changed counters: %+v → %+v", stats, p.Stats())
			}
			mustCheck(t, p)
		})
	}
}

func TestReservedPagesAreNeverLent(t *testing.T) {
	p := newPool(t, Config{Pages: 8}, TenantConfig{ID: "a", Reserved: 5}, TenantConfig{ID: "b"})
	if n, _ := p.MaxLeaseTokens("b"); n != 3*16 {
		t.Fatalf("b may hold %d tokens, want %d", n, 3*16)
	}
	lb, err := p.Allocate("b", "r", 3*16)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Allocate("b", "r2", 1); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("got %v, want ErrPoolExhausted", err)
	}
	// a still gets all five reserved pages while b holds the rest.
	if _, err := p.Allocate("a", "r", 5*16); err != nil {
		t.Fatalf("reserved allocation failed: %v", err)
	}
	mustCheck(t, p)
	p.Release(lb)
	mustCheck(t, p)
}

func TestDedicatedPagesNeverLeave(t *testing.T) {
	p := newPool(t, Config{Pages: 8, DefaultZeroing: ZeroNever},
		TenantConfig{ID: "d", Tier: TierDedicated, Reserved: 3}, TenantConfig{ID: "s"})
	ld, err := p.Allocate("d", "r", 3*16)
	if err != nil {
		t.Fatal(err)
	}
	dpages := leasePages(p, ld)
	p.Write(ld, 3*16)
	p.Release(ld)
	scrubAll(t, p)
	// s can take the five shared pages, never one of d's.
	ls, err := p.Allocate("s", "r", 5*16)
	if err != nil {
		t.Fatal(err)
	}
	for _, pg := range leasePages(p, ls) {
		if slices.Contains(dpages, pg) {
			t.Fatalf("shared tenant got dedicated page %d", pg)
		}
	}
	if _, err := p.Allocate("s", "r2", 1); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("got %v, want ErrPoolExhausted", err)
	}
	if _, err := p.Allocate("d", "r2", 4*16); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	ld2, err := p.Allocate("d", "r2", 3*16)
	if err != nil {
		t.Fatal(err)
	}
	if got := leasePages(p, ld2); !sameSet(got, dpages) {
		t.Fatalf("dedicated tenant got %v, want its pages %v", got, dpages)
	}
	mustCheck(t, p)
}

func sameSet(a, b []int32) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

func TestWrite(t *testing.T) {
	p := newPool(t, Config{Pages: 8}, TenantConfig{ID: "a"})
	l, _ := p.Allocate("a", "r", 20) // two pages: 32 slots
	tests := []struct {
		name string
		n    int
		want error
	}{
		{"negative", -1, ErrInvalidArgument},
		{"first chunk", 10, nil},
		{"second chunk across a page", 12, nil},
		{"past the reserved slots", 11, ErrLeaseOverflow},
		{"up to the end", 10, nil},
	}
	for _, tt := range tests {
		if err := p.Write(l, tt.n); !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
			t.Fatalf("%s: got %v, want %v", tt.name, err, tt.want)
		}
		mustCheck(t, p)
	}
	if w, _ := p.Written(l); w != 32 {
		t.Fatalf("got %d written, want 32", w)
	}
	if err := p.Extend(l, 40); err != nil {
		t.Fatal(err)
	}
	if err := p.Write(l, 8); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, p)
}

// The 2026 incident at the pool level.
func TestIncident2026(t *testing.T) {
	t.Run("a prompt larger than the pool fails atomically with nothing allocated", func(t *testing.T) {
		p := newPool(t, Config{Pages: 64}, TenantConfig{ID: "victim"}, TenantConfig{ID: "b"})
		lv, _ := p.Allocate("victim", "canary", 100)
		p.Write(lv, 100)
		before := snapshot(p)
		_, err := p.Allocate("b", "long", 64*16+1)
		if !errors.Is(err, ErrTooLarge) || cloison.ErrorCode(err) != cloison.CodeContextLengthExceeded {
			t.Fatalf("got %v (code %s), want ErrTooLarge / context_length_exceeded", err, cloison.ErrorCode(err))
		}
		if !reflect.DeepEqual(before, snapshot(p)) {
			t.Fatal("the rejected prompt changed page state")
		}
		if s := p.Stats(); s.Leased != 7 {
			t.Fatalf("got %d leased pages, want the victim's 7", s.Leased)
		}
		mustCheck(t, p)
	})
	t.Run("reserved for N slots, written for 1: reading N is a violation", func(t *testing.T) {
		p := newPool(t, Config{Pages: 64, DefaultZeroing: ZeroNever}, TenantConfig{ID: "victim"}, TenantConfig{ID: "b"})
		// The victim fills pages with its KV and leaves: never mode, no scrub.
		lv, _ := p.Allocate("victim", "canary", 32*16)
		p.Write(lv, 32*16)
		p.Release(lv)
		// The placeholder: pages reserved for the full prompt, one token written.
		lb, err := p.Allocate("b", "placeholder", 32*16)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Write(lb, 1); err != nil {
			t.Fatal(err)
		}
		_, err = p.BlockTable(lb, 32*16)
		var v *ViolationError
		if !errors.As(err, &v) || v.Reason != ReasonUnwritten || v.Reader != lb {
			t.Fatalf("got %v, want a ViolationError for unwritten slots read by %s", err, lb)
		}
		if !errors.Is(err, ErrViolation) || cloison.ErrorCode(err) != cloison.CodeIsolationViolation {
			t.Fatalf("violation does not match ErrViolation/isolation_violation: %v", err)
		}
		if bt, err := p.BlockTable(lb, 1); err != nil || bt.Tokens() != 1 {
			t.Fatalf("the one written slot is not readable: %v", err)
		}
		for _, ts := range p.Stats().Tenants {
			if ts.Tenant == "b" && ts.Violations != 1 {
				t.Fatalf("got %d violations blocked for b, want 1", ts.Violations)
			}
		}
		mustCheck(t, p)
	})
}

func TestBlockTable(t *testing.T) {
	p := newPool(t, Config{Pages: 16}, TenantConfig{ID: "a"}, TenantConfig{ID: "b"})
	la, _ := p.Allocate("a", "r", 40)
	p.Write(la, 40)
	bt, err := p.BlockTable(la, 40)
	if err != nil {
		t.Fatal(err)
	}
	if bt.Len() != 3 || bt.Tokens() != 40 || bt.PageTokens() != 16 || bt.Lease() != la {
		t.Fatalf("got table %d pages %d tokens, want 3 pages 40 tokens", bt.Len(), bt.Tokens())
	}
	pages := leasePages(p, la)
	for i := range bt.Len() {
		if bt.Page(i) != pages[i] || !bt.Writable(i) || bt.Tag(i) != (Tag{Tenant: 1, Epoch: la.Epoch}) {
			t.Fatalf("entry %d: page %d tag %+v", i, bt.Page(i), bt.Tag(i))
		}
	}
	if i, s := bt.Slot(39); i != 2 || s != 7 {
		t.Fatalf("Slot(39) = %d, %d; want 2, 7", i, s)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Slot outside the table did not panic")
			}
		}()
		bt.Slot(40)
	}()
	if _, err := p.BlockTable(la, 3*16+1); !errors.Is(err, ErrInvalidArgument) {
		t.Fatalf("got %v, want ErrInvalidArgument", err)
	}
	// A forged lease value (another tenant's name on a's epoch) is stale.
	if _, err := p.BlockTable(Lease{Tenant: "b", Request: "r", Epoch: la.Epoch}, 16); !errors.Is(err, ErrStaleLease) {
		t.Fatalf("got %v, want ErrStaleLease", err)
	}
	var zero BlockTable
	if zero.Len() != 0 || zero.Tokens() != 0 {
		t.Fatal("zero BlockTable is not empty")
	}
}

func TestEpochs(t *testing.T) {
	p := newPool(t, Config{Pages: 1, DefaultZeroing: ZeroNever}, TenantConfig{ID: "a"})
	l1, _ := p.Allocate("a", "r", 16)
	p.Write(l1, 16)
	g1 := snapshot(p)[0].gen
	p.Release(l1)
	l2, err := p.Allocate("a", "r", 16)
	if err != nil {
		t.Fatal(err)
	}
	if l2.Epoch == l1.Epoch {
		t.Fatal("a new lease reused an epoch")
	}
	if g2 := snapshot(p)[0].gen; g2 <= g1 {
		t.Fatalf("page generation %d did not grow past %d", g2, g1)
	}
	for name, call := range map[string]func() error{
		"Write":      func() error { return p.Write(l1, 1) },
		"BlockTable": func() error { _, err := p.BlockTable(l1, 1); return err },
		"Extend":     func() error { return p.Extend(l1, 32) },
		"Release":    func() error { return p.Release(l1) },
		"Publish":    func() error { _, err := p.Publish(l1, make([]int32, 16)); return err },
		"Hold":       func() error { _, err := p.Hold(l1); return err },
		"Written":    func() error { _, err := p.Written(l1); return err },
	} {
		if err := call(); !errors.Is(err, ErrStaleLease) {
			t.Errorf("%s with a stale lease: got %v, want ErrStaleLease", name, err)
		}
	}
	// The new lease has not written the page: the stale data is unreadable.
	var v *ViolationError
	if _, err := p.BlockTable(l2, 16); !errors.As(err, &v) || v.Reason != ReasonUnwritten {
		t.Fatalf("got %v, want unwritten-slot violation", err)
	}
	mustCheck(t, p)
}

func TestScrubbing(t *testing.T) {
	tests := []struct {
		name          string
		mode          Zeroing
		sameTenantNow bool // a's freed pages come back to a without a scrub
		otherNow      bool // b takes a's freed pages without a scrub
	}{
		{"never", ZeroNever, true, true},
		{"cross-tenant", ZeroCrossTenant, true, false},
		{"always", ZeroAlways, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, who := range []cloison.TenantID{"a", "b"} {
				p := newPool(t, Config{Pages: 4, DefaultZeroing: ZeroNever}, TenantConfig{ID: "a", Zeroing: tt.mode}, TenantConfig{ID: "b", Zeroing: tt.mode})
				la, _ := p.Allocate("a", "r", 4*16)
				p.Write(la, 4*16)
				p.Release(la)
				mustCheck(t, p)
				want := tt.otherNow
				if who == "a" {
					want = tt.sameTenantNow
				}
				_, err := p.Allocate(who, "r2", 4*16)
				if want {
					if err != nil {
						t.Fatalf("%s: got %v, want the pages at once", who, err)
					}
					mustCheck(t, p)
					continue
				}
				if !errors.Is(err, ErrScrubPending) {
					t.Fatalf("%s: got %v, want ErrScrubPending", who, err)
				}
				work := p.ScrubWork()
				if len(work) != 4 {
					t.Fatalf("%s: got %d pages to scrub, want 4", who, len(work))
				}
				// Until confirmed, the pages reach nobody.
				if _, err := p.Allocate(who, "r2", 16); !errors.Is(err, ErrScrubPending) {
					t.Fatalf("%s: got %v before confirming, want ErrScrubPending", who, err)
				}
				mustCheck(t, p)
				if err := p.ConfirmScrub(work); err != nil {
					t.Fatal(err)
				}
				l, err := p.Allocate(who, "r2", 4*16)
				if err != nil {
					t.Fatalf("%s: got %v after the scrub", who, err)
				}
				for _, pg := range leasePages(p, l) {
					if !snapshot(p)[pg].tag.IsZero() {
						t.Fatalf("page %d handed out with tag %+v after scrub", pg, snapshot(p)[pg].tag)
					}
				}
				st := p.Stats()
				if st.Scrubbed != 4 || st.Tenants[0].Scrubbed != 4 {
					t.Fatalf("got %d scrubbed (a: %d), want 4", st.Scrubbed, st.Tenants[0].Scrubbed)
				}
				mustCheck(t, p)
			}
		})
	}
}

func TestConfirmScrubRefusesUnknownPages(t *testing.T) {
	p := newPool(t, Config{Pages: 4}, TenantConfig{ID: "a", Zeroing: ZeroAlways})
	l, _ := p.Allocate("a", "r", 32)
	p.Write(l, 32)
	p.Release(l)
	work := p.ScrubWork()
	for name, pages := range map[string][]int32{
		"never handed out": {3},
		"out of range":     {99},
		"negative":         {-1},
		"listed twice":     {work[0], work[0]},
	} {
		if err := p.ConfirmScrub(pages); !errors.Is(err, ErrNotScrubbing) {
			t.Errorf("%s: got %v, want ErrNotScrubbing", name, err)
		}
		mustCheck(t, p)
	}
	if err := p.ConfirmScrub(work); err != nil {
		t.Fatal(err)
	}
	if err := p.ConfirmScrub(work); !errors.Is(err, ErrNotScrubbing) {
		t.Fatalf("second confirm: got %v, want ErrNotScrubbing", err)
	}
	mustCheck(t, p)
}

// A page held by an in-flight transfer is not freed, even when its lease is
// aborted, until the transfer is done or its cancellation acknowledged.
func TestHoldsStopFreeWhileInFlight(t *testing.T) {
	p := newPool(t, Config{Pages: 2}, TenantConfig{ID: "a", Zeroing: ZeroAlways}, TenantConfig{ID: "b"})
	la, _ := p.Allocate("a", "r", 32)
	p.Write(la, 32)
	h, err := p.Hold(la)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Release(la); err != nil { // client abort mid-transfer
		t.Fatal(err)
	}
	mustCheck(t, p)
	if st := p.Stats(); st.Draining != 2 {
		t.Fatalf("got %d draining pages, want 2", st.Draining)
	}
	if _, err := p.Allocate("b", "r", 1); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("got %v, want ErrPoolExhausted while the transfer holds the pages", err)
	}
	if work := p.ScrubWork(); len(work) != 0 {
		t.Fatalf("held pages handed out for scrubbing: %v", work)
	}
	if err := p.Unhold(h); err != nil {
		t.Fatal(err)
	}
	if err := p.Unhold(h); !errors.Is(err, ErrUnknownHold) {
		t.Fatalf("got %v, want ErrUnknownHold", err)
	}
	if work := scrubAll(t, p); len(work) != 2 {
		t.Fatalf("got %d pages to scrub after the transfer, want 2", len(work))
	}
	if _, err := p.Allocate("b", "r", 32); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, p)
}

func seq(n int, base int32) []int32 {
	s := make([]int32, n)
	for i := range s {
		s[i] = base + int32(i)
	}
	return s
}

func TestPrefixCache(t *testing.T) {
	cfg := Config{Pages: 32, PrefixSecret: []byte("server secret"), SharedNamespaces: []string{"public"}}
	prompt := seq(50, 1000) // three full pages and two tokens
	t.Run("same tenant hits, read-only", func(t *testing.T) {
		p := newPool(t, cfg, TenantConfig{ID: "a"})
		l1, cached, err := p.AllocatePrefix("a", "r1", 60, prompt)
		if err != nil || cached != 0 {
			t.Fatalf("first: cached %d, %v", cached, err)
		}
		p.Write(l1, 50)
		if n, err := p.Publish(l1, prompt); err != nil || n != 3 {
			t.Fatalf("published %d, %v; want 3", n, err)
		}
		mustCheck(t, p)
		l2, cached, err := p.AllocatePrefix("a", "r2", 60, prompt)
		if err != nil || cached != 48 {
			t.Fatalf("second: cached %d, %v; want 48", cached, err)
		}
		if w, _ := p.Written(l2); w != 48 {
			t.Fatalf("got %d written, want 48", w)
		}
		p.Write(l2, 2)
		bt, err := p.BlockTable(l2, 50)
		if err != nil {
			t.Fatal(err)
		}
		p1 := leasePages(p, l1)
		for i := range 3 {
			if bt.Page(i) != p1[i] || bt.Writable(i) || bt.Tag(i) != (Tag{Tenant: 1, Epoch: l1.Epoch}) {
				t.Fatalf("entry %d: page %d writable %v tag %+v", i, bt.Page(i), bt.Writable(i), bt.Tag(i))
			}
		}
		if !bt.Writable(3) || bt.Page(3) == p1[3] {
			t.Fatal("the uncached tail is not the lease's own page")
		}
		mustCheck(t, p)
		// A whole-page prompt leaves the last page uncached.
		_, cached, _ = p.AllocatePrefix("a", "r3", 64, prompt[:48])
		if cached != 32 {
			t.Fatalf("got %d cached for a 48-token prompt, want 32", cached)
		}
		mustCheck(t, p)
	})
	t.Run("other tenants never hit", func(t *testing.T) {
		p := newPool(t, cfg, TenantConfig{ID: "a"}, TenantConfig{ID: "b"})
		l1, _, _ := p.AllocatePrefix("a", "r1", 60, prompt)
		p.Write(l1, 50)
		p.Publish(l1, prompt)
		_, cached, err := p.AllocatePrefix("b", "r1", 60, prompt)
		if err != nil || cached != 0 {
			t.Fatalf("tenant b got %d cached tokens of a's prompt (%v)", cached, err)
		}
		mustCheck(t, p)
	})
	t.Run("shared namespace shares", func(t *testing.T) {
		p := newPool(t, cfg, TenantConfig{ID: "a", Namespace: "public"}, TenantConfig{ID: "b", Namespace: "public"}, TenantConfig{ID: "c"})
		l1, _, _ := p.AllocatePrefix("a", "r1", 60, prompt)
		p.Write(l1, 50)
		p.Publish(l1, prompt)
		lb, cached, _ := p.AllocatePrefix("b", "r1", 60, prompt)
		if cached != 48 {
			t.Fatalf("b in the shared namespace got %d cached, want 48", cached)
		}
		p.Write(lb, 2)
		if _, err := p.BlockTable(lb, 50); err != nil {
			t.Fatal(err)
		}
		if _, cached, _ := p.AllocatePrefix("c", "r1", 60, prompt); cached != 0 {
			t.Fatalf("c outside the namespace got %d cached", cached)
		}
		mustCheck(t, p)
	})
	t.Run("salts come from the server secret", func(t *testing.T) {
		p1 := newPool(t, cfg, TenantConfig{ID: "a"})
		p2 := newPool(t, Config{Pages: 4, PrefixSecret: []byte("another secret")}, TenantConfig{ID: "a"})
		if p1.nss[0].salt == p2.nss[0].salt {
			t.Fatal("two secrets gave the same tenant salt")
		}
		if p1.salt("tenant", "a") == p1.salt("tenant", "b") || p1.salt("tenant", "x") == p1.salt("namespace", "x") {
			t.Fatal("salts collide across tenants or kinds")
		}
	})
	t.Run("duplicate publish stops, refcounts, LRU eviction", func(t *testing.T) {
		p := newPool(t, Config{Pages: 8, DefaultZeroing: ZeroCrossTenant}, TenantConfig{ID: "a"}, TenantConfig{ID: "b"})
		l1, _, _ := p.AllocatePrefix("a", "r1", 48, seq(48, 0))
		p.Write(l1, 48)
		l2, _, _ := p.AllocatePrefix("a", "r2", 48, seq(48, 0)) // concurrent: no hit yet
		p.Write(l2, 48)
		if n, _ := p.Publish(l1, seq(48, 0)); n != 3 {
			t.Fatalf("published %d, want 3", n)
		}
		if n, _ := p.Publish(l2, seq(48, 0)); n != 0 {
			t.Fatalf("a duplicate prefix published %d pages", n)
		}
		p.Release(l1)
		p.Release(l2)
		mustCheck(t, p)
		if st := p.Stats(); st.Cached != 3 || st.Tenants[0].Cached != 3 {
			t.Fatalf("got %d cached, want 3", st.Cached)
		}
		// b needs all 8 pages: a's cached pages are evicted and scrubbed.
		if _, err := p.Allocate("b", "big", 8*16); !errors.Is(err, ErrScrubPending) {
			t.Fatalf("got %v, want ErrScrubPending", err)
		}
		if work := scrubAll(t, p); len(work) != 6 {
			t.Fatalf("scrubbed %d pages, want 6 (3 evicted + 3 affine)", len(work))
		}
		if _, err := p.Allocate("b", "big", 8*16); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.Cached != 0 || st.Tenants[0].Cached != 0 {
			t.Fatalf("got %d cached after eviction", st.Cached)
		}
		mustCheck(t, p)
	})
}

func TestCheckDetectsCorruption(t *testing.T) {
	corruptions := map[string]func(p *Pool, l Lease){
		"page with two owners": func(p *Pool, l Lease) {
			ls := p.leases[l.Epoch]
			ls.pages[1] = ls.pages[0]
		},
		"fill count beyond what was written": func(p *Pool, l Lease) { p.pages[p.leases[l.Epoch].pages[1]].fill = 16 },
		"a page in two lists":                func(p *Pool, l Lease) { p.parts[0].free = append(p.parts[0].free, p.parts[0].free[0]) },
		"leased page on the free list": func(p *Pool, l Lease) {
			p.parts[0].free = append(p.parts[0].free, p.leases[l.Epoch].pages[0])
		},
		"unscrubbed strict page on the shared free list": func(p *Pool, l Lease) {
			pg := p.parts[0].free[0]
			p.pages[pg].tag = Tag{Tenant: 1, Epoch: 1}
		},
		"dedicated page with another tenant's data": func(p *Pool, l Lease) {
			pg := p.parts[1].free[0]
			p.pages[pg].tag = Tag{Tenant: 1, Epoch: 1}
		},
		"stale generation": func(p *Pool, l Lease) { p.pages[p.leases[l.Epoch].pages[0]].gen++ },
		"tenant count":     func(p *Pool, l Lease) { p.tenants[0].leased++ },
		"hold count":       func(p *Pool, l Lease) { p.pages[0].holds++ },
	}
	for name, corrupt := range corruptions {
		t.Run(name, func(t *testing.T) {
			p := newPool(t, Config{Pages: 8}, TenantConfig{ID: "a"}, TenantConfig{ID: "d", Tier: TierDedicated, Reserved: 2})
			l, _ := p.Allocate("a", "r", 40)
			p.Write(l, 20)
			mustCheck(t, p)
			p.mu.Lock()
			corrupt(p, l)
			p.mu.Unlock()
			if err := p.Check(); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
		})
	}
}

func TestStats(t *testing.T) {
	p := newPool(t, Config{Pages: 8}, TenantConfig{ID: "a", Reserved: 2}, TenantConfig{ID: "b"})
	la, _ := p.Allocate("a", "r", 40)
	p.Write(la, 40)
	lb, _ := p.Allocate("b", "r", 16)
	p.Release(lb)
	p.BlockTable(la, 41-1)
	st := p.Stats()
	want := Stats{Pages: 8, PageTokens: 16, Free: 4, Leased: 3, Quarantined: 1, Tenants: []TenantStats{
		{Tenant: "a", Zeroing: ZeroCrossTenant, Reserved: 2, Leased: 3, Leases: 1},
		{Tenant: "b", Zeroing: ZeroCrossTenant, Affine: 0},
	}}
	// b never wrote its page: it is clean and goes straight back to free.
	want.Free, want.Quarantined = 5, 0
	if !reflect.DeepEqual(st, want) {
		t.Fatalf("got %+v\nwant %+v", st, want)
	}
}

func ExamplePool() {
	pool, _ := NewPool(Config{Pages: 64, PageTokens: 16, DefaultZeroing: ZeroCrossTenant})
	pool.AddTenant(TenantConfig{ID: "acme", Reserved: 8})
	lease, _ := pool.Allocate("acme", "req-1", 100)
	pool.Write(lease, 1) // one token written, 100 reserved
	_, err := pool.BlockTable(lease, 100)
	fmt.Println(err)
	// Output: isolation violation: lease acme/req-1@1 may not read page 0 owned by acme/req-1@1 (unwritten-slot)
}

func TestDiscardScrubsWhateverTheMode(t *testing.T) {
	p := newPool(t, Config{Pages: 2, DefaultZeroing: ZeroNever}, TenantConfig{ID: "a"})
	l, _ := p.Allocate("a", "r", 32)
	p.Write(l, 20)
	h, _ := p.Hold(l)
	if err := p.Discard(l); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Allocate("a", "r2", 1); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("got %v while the transfer holds the pages, want ErrPoolExhausted", err)
	}
	p.Unhold(h)
	if _, err := p.Allocate("a", "r2", 32); !errors.Is(err, ErrScrubPending) {
		t.Fatalf("got %v, want ErrScrubPending for discarded pages in never mode", err)
	}
	if work := scrubAll(t, p); len(work) != 2 {
		t.Fatalf("scrubbed %d pages, want 2", len(work))
	}
	if _, err := p.Allocate("a", "r2", 32); err != nil {
		t.Fatal(err)
	}
	mustCheck(t, p)
}

// A cache salt (cache_salt) only narrows a namespace: a request finds the
// pages published under its own salt in its own namespace — the same salt
// shares, another salt or none does not — and a tenant of another
// namespace never finds them, whatever salt it sends (the same one
// included).
func TestPrefixCacheSalt(t *testing.T) {
	cfg := Config{Pages: 64, PrefixSecret: []byte("server secret")}
	prompt := seq(50, 1000) // three full pages and two tokens
	p := newPool(t, cfg, TenantConfig{ID: "a"}, TenantConfig{ID: "b"})
	publish := func(tenant cloison.TenantID, req string, salt []byte) {
		t.Helper()
		l, _, err := p.AllocatePrefixSalted(tenant, cloison.RequestID(req), 60, prompt, salt)
		if err != nil {
			t.Fatal(err)
		}
		p.Write(l, 50)
		if n, err := p.Publish(l, prompt); err != nil || n != 3 {
			t.Fatalf("%s %q: published %d, %v; want 3", tenant, salt, n, err)
		}
		if err := p.Release(l); err != nil {
			t.Fatal(err)
		}
	}
	cachedFor := func(tenant cloison.TenantID, req string, salt []byte) int {
		t.Helper()
		l, cached, err := p.AllocatePrefixSalted(tenant, cloison.RequestID(req), 60, prompt, salt)
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Release(l); err != nil {
			t.Fatal(err)
		}
		return cached
	}
	publish("a", "pub-salted", []byte("alpha"))
	for _, tc := range []struct {
		tenant cloison.TenantID
		salt   string
		want   int
	}{
		{"a", "alpha", 48}, // same tenant, same salt: shared
		{"a", "beta", 0},   // another salt
		{"a", "", 0},       // no salt: the unsalted part of the namespace
		{"b", "alpha", 0},  // another tenant with the same salt: never
		{"b", "", 0},
	} {
		if got := cachedFor(tc.tenant, "probe-"+string(tc.tenant)+tc.salt, []byte(tc.salt)); got != tc.want {
			t.Fatalf("tenant %s, salt %q: %d tokens cached, want %d", tc.tenant, tc.salt, got, tc.want)
		}
	}
	// Unsalted pages are not reachable with a salt either.
	publish("a", "pub-plain", nil)
	if got := cachedFor("a", "probe-plain", nil); got != 48 {
		t.Fatalf("unsalted: %d cached, want 48", got)
	}
	if got := cachedFor("a", "probe-plain-salted", []byte("gamma")); got != 0 {
		t.Fatalf("salt gamma after an unsalted publish: %d cached, want 0", got)
	}
	if got := cachedFor("b", "probe-b-plain", nil); got != 0 {
		t.Fatalf("tenant b, no salt: %d cached, want 0", got)
	}
	mustCheck(t, p)
}
