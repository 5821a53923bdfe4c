package tenancy

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
