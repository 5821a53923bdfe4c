package tenancy

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/cloison/cloison"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLimiterConcurrency(t *testing.T) {
	l := NewLimiter()
	q := Quotas{MaxConcurrent: 2, TokensPerMinute: 1_000_000}
	p1, err := l.Admit("a", q, 10)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := l.Admit("a", q, 10)
	if err != nil {
		t.Fatal(err)
	}
	_, err = l.Admit("a", q, 10)
	if !errors.Is(err, ErrQuotaExceeded) || cloison.ErrorCode(err) != cloison.CodeQuotaExceeded {
		t.Fatalf("third request: got %v, want ErrQuotaExceeded", err)
	}
	if d, ok := RetryAfter(err); !ok || d != time.Second {
		t.Fatalf("retry after: got %v, %v; want 1s", d, ok)
	}
	// Other tenants are not affected.
	if _, err := l.Admit("b", q, 10); err != nil {
		t.Fatalf("tenant b: %v", err)
	}
	p1.Release(10)
	p1.Release(10) // only the first release counts
	if got := l.InFlight("a"); got != 1 {
		t.Fatalf("in flight: got %d, want 1", got)
	}
	if _, err := l.Admit("a", q, 10); err != nil {
		t.Fatalf("after release: %v", err)
	}
	p2.Release(0)
}

func TestLimiterTokensPerMinute(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := NewLimiter()
	l.Now = clk.now
	q := Quotas{MaxConcurrent: 100, TokensPerMinute: 600} // 10 tokens per second
	cases := []struct {
		name    string
		advance time.Duration
		tokens  int
		release int // tokens actually used; -1: keep the permit
		want    error
		retry   time.Duration
	}{
		{"burst up to the quota", 0, 600, 600, nil, 0},
		{"empty bucket", 0, 1, -1, ErrRateLimited, 100 * time.Millisecond},
		{"half refilled after 30s", 30 * time.Second, 300, 300, nil, 0},
		{"short by 50 tokens", 0, 50, -1, ErrRateLimited, 5 * time.Second},
		{"larger than the quota can ever hold", time.Hour, 601, -1, ErrQuotaExceeded, 0},
		{"full after an hour, refund of unused", 0, 600, 100, nil, 0},
		{"the refund is usable", 0, 500, 500, nil, 0},
		{"and nothing more", 0, 1, -1, ErrRateLimited, 100 * time.Millisecond},
	}
	for _, c := range cases {
		clk.advance(c.advance)
		p, err := l.Admit("t", q, c.tokens)
		if !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
			t.Fatalf("%s: got %v, want %v", c.name, err, c.want)
		}
		if got, _ := RetryAfter(err); got != c.retry {
			t.Fatalf("%s: retry after %v, want %v", c.name, got, c.retry)
		}
		if err == nil && c.release >= 0 {
			p.Release(c.release)
		}
	}
	// A lowered quota shrinks the bucket at once.
	clk.advance(time.Hour)
	if _, err := l.Admit("t", Quotas{MaxConcurrent: 1, TokensPerMinute: 60}, 61); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("lowered quota: got %v, want ErrQuotaExceeded", err)
	}
	if _, err := l.Admit("t", Quotas{MaxConcurrent: 1, TokensPerMinute: 60}, 60); err != nil {
		t.Fatalf("lowered quota, within: %v", err)
	}
	if _, err := l.Admit("t", Quotas{}, 1); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("zero quotas: got %v, want ErrQuotaExceeded", err)
	}
}

// Under contention the concurrency quota is never exceeded and every
// released slot is reusable.
func TestLimiterRace(t *testing.T) {
	l := NewLimiter()
	q := Quotas{MaxConcurrent: 3, TokensPerMinute: 1 << 30}
	var inside, peak, admitted atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for range 200 {
				p, err := l.Admit("r", q, 1)
				if err != nil {
					continue
				}
				n := inside.Add(1)
				for {
					m := peak.Load()
					if n <= m || peak.CompareAndSwap(m, n) {
						break
					}
				}
				admitted.Add(1)
				inside.Add(-1)
				p.Release(1)
			}
		})
	}
	wg.Wait()
	if peak.Load() > 3 || admitted.Load() == 0 || l.InFlight("r") != 0 {
		t.Fatalf("peak %d (max 3), admitted %d, in flight %d", peak.Load(), admitted.Load(), l.InFlight("r"))
	}
}

// TestLimiterProperties drives a Limiter with drawn admissions, releases
// and clock steps, and checks: concurrency never exceeds the quota; the
// tokens charged and kept (released with no refund) never exceed the burst
// plus the refill since the start; every rate-limit rejection names a wait
// after which the same request is admitted.
func TestLimiterProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		clk := &fakeClock{t: time.Unix(1_700_000_000, 0)}
		start := clk.t
		l := NewLimiter()
		l.Now = clk.now
		q := Quotas{
			MaxConcurrent:   rapid.IntRange(1, 4).Draw(rt, "max concurrent"),
			TokensPerMinute: rapid.IntRange(1, 1000).Draw(rt, "tpm"),
		}
		var held []*Permit
		charged := 0
		for range rapid.IntRange(1, 60).Draw(rt, "steps") {
			switch rapid.IntRange(0, 2).Draw(rt, "op") {
			case 0:
				n := rapid.IntRange(0, q.TokensPerMinute+10).Draw(rt, "tokens")
				// Check foretells Admit exactly (no Budget, no pages)
				// and takes nothing.
				cerr := l.Check("p", q, n)
				if l.InFlight("p") != len(held) {
					rt.Fatalf("Check took a slot")
				}
				p, err := l.Admit("p", q, n)
				if (cerr == nil) != (err == nil) || (err != nil && cloison.ErrorCode(cerr) != cloison.ErrorCode(err)) {
					rt.Fatalf("Check said %v, Admit %v", cerr, err)
				}
				switch {
				case err == nil:
					held = append(held, p)
					charged += n
				case errors.Is(err, ErrRateLimited):
					wait, ok := RetryAfter(err)
					if !ok || wait <= 0 {
						rt.Fatalf("rate limited without a wait: %v", err)
					}
					// Honest Retry-After: after the wait, the same request fits
					// (a probe in a clone, so the run's history is unchanged).
					probe := &Limiter{Now: func() time.Time { return clk.t.Add(wait) }, tenants: cloneUsage(l)}
					if pp, err := probe.Admit("p", Quotas{MaxConcurrent: q.MaxConcurrent + 1, TokensPerMinute: q.TokensPerMinute}, n); err != nil {
						rt.Fatalf("after Retry-After %v, %d tokens still refused: %v", wait, n, err)
					} else {
						pp.Release(n)
					}
				case errors.Is(err, ErrQuotaExceeded):
					if n <= q.TokensPerMinute && len(held) < q.MaxConcurrent {
						rt.Fatalf("quota exceeded for %d tokens with %d held: %v", n, len(held), err)
					}
				default:
					rt.Fatalf("unexpected error %v", err)
				}
			case 1:
				if len(held) > 0 {
					i := rapid.IntRange(0, len(held)-1).Draw(rt, "release")
					held[i].Release(held[i].charged) // used all: no refund
					held = append(held[:i], held[i+1:]...)
				}
			case 2:
				clk.advance(time.Duration(rapid.IntRange(0, 90_000).Draw(rt, "ms")) * time.Millisecond)
			}
			if got := l.InFlight("p"); got != len(held) || got > q.MaxConcurrent {
				rt.Fatalf("in flight %d, held %d, max %d", got, len(held), q.MaxConcurrent)
			}
			budget := float64(q.TokensPerMinute) * (1 + clk.t.Sub(start).Minutes())
			if float64(charged) > budget+1e-6 {
				rt.Fatalf("charged %d tokens, budget %.1f", charged, budget)
			}
		}
	})
}

func cloneUsage(l *Limiter) map[cloison.TenantID]*usage {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[cloison.TenantID]*usage{}
	for k, u := range l.tenants {
		c := *u
		out[k] = &c
	}
	return out
}

// AdmitLease bounds the KV pages a tenant's requests in flight may lease
// together by the KVPages quota; releasing a request returns its pages.
func TestLimiterKVPages(t *testing.T) {
	l := NewLimiter()
	q := Quotas{MaxConcurrent: 10, KVPages: 8, TokensPerMinute: 1_000_000}
	var held []*Permit
	steps := []struct {
		name    string
		pages   int
		release bool // release the oldest permit instead
		want    error
		retry   time.Duration
	}{
		{name: "5 of 8", pages: 5},
		{name: "3 more fill it", pages: 3},
		{name: "one more page waits", pages: 1, want: ErrQuotaExceeded, retry: time.Second},
		{name: "release the 5", release: true},
		{name: "4 fit again", pages: 4},
		{name: "9 never fit", pages: 9, want: ErrQuotaExceeded, retry: 0},
		{name: "0 counts as 1", pages: 0},
		{name: "full again", pages: 1, want: ErrQuotaExceeded, retry: time.Second},
	}
	for _, s := range steps {
		if s.release {
			held[0].Release(0)
			held = held[1:]
			continue
		}
		p, err := l.AdmitLease("a", q, 10, s.pages)
		if !errors.Is(err, s.want) || (s.want == nil) != (err == nil) {
			t.Fatalf("%s: got %v, want %v", s.name, err, s.want)
		}
		if err != nil {
			var le *LimitError
			d, _ := RetryAfter(err)
			if !errors.As(err, &le) || le.Limit != "kv_pages" || d != s.retry {
				t.Fatalf("%s: got %v (retry %v), want a kv_pages limit, retry %v", s.name, err, d, s.retry)
			}
			continue
		}
		held = append(held, p)
	}
	// Another tenant has its own pages; a quota of no pages admits nothing.
	if _, err := l.AdmitLease("b", q, 10, 8); err != nil {
		t.Fatalf("tenant b: got %v, want admitted", err)
	}
	if _, err := l.AdmitLease("c", Quotas{MaxConcurrent: 1, TokensPerMinute: 100}, 10, 1); !errors.Is(err, ErrQuotaExceeded) {
		t.Fatalf("no KV pages: got %v, want ErrQuotaExceeded", err)
	}
}
