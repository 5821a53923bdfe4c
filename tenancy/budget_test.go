package tenancy

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloison/cloison"
)

// budgetTenant creates a tenant of perMinute tokens per minute and returns
// a store on its own pool (as a separate node would have).
func budgetTenant(t *testing.T, perMinute int) (cloison.TenantID, Quotas) {
	t.Helper()
	tn := sampleTenant("budget")
	tn.Quotas.TokensPerMinute = perMinute
	tn.Quotas.MaxConcurrent = 64
	if _, err := newStore(t).CreateTenant(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
	return tn.ID, tn.Quotas
}

// Replicas share one quota: two limiters ("nodes") sharing the PostgreSQL budget admit
// a 100 tokens/minute tenant's quota once plus the documented burst
// (WithBudget), not twice. Without WithBudget each admits its own 100.
func TestSharedBudgetTwoNodes(t *testing.T) {
	const perMinute = 100
	for _, shared := range []bool{true, false} {
		id, q := budgetTenant(t, perMinute)
		nodes := []*Limiter{NewLimiter(), NewLimiter()}
		if shared {
			for _, l := range nodes {
				l.WithBudget(NewStore(db.RuntimePool(t)))
			}
		}
		var admitted atomic.Int64
		start := time.Now()
		var wg sync.WaitGroup
		for _, l := range nodes {
			for range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for time.Since(start) < 1500*time.Millisecond {
						p, err := l.Admit(id, q, 7)
						if err != nil {
							if !errors.Is(err, ErrRateLimited) {
								t.Errorf("admit: got %v, want nil or ErrRateLimited", err)
								return
							}
							time.Sleep(5 * time.Millisecond)
							continue
						}
						admitted.Add(7)
						p.Release(7)
					}
				}()
			}
		}
		wg.Wait()
		elapsed := time.Since(start).Seconds()
		bound := perMinute*(1+elapsed/60) + 2*perMinute/LeaseChunkDivisor
		got := float64(admitted.Load())
		if shared && (got > bound || got < perMinute*0.9) {
			t.Errorf("shared budget: admitted %.0f tokens in %.2fs, want between %.0f and %.0f", got, elapsed, perMinute*0.9, bound)
		}
		if !shared && got <= bound {
			t.Errorf("per-process limiters: admitted %.0f tokens, want more than %.0f (the test must be able to fail)", got, bound)
		}
		t.Logf("shared %v: admitted %.0f tokens across two nodes in %.2fs (bound %.0f)", shared, got, elapsed, bound)
	}
}

// Refunds stay within the tenant's budget: a request charged 50 that used 5
// gives 45 back, of which one chunk stays on the node and the rest returns
// to the shared bucket for the other node.
func TestSharedBudgetRefund(t *testing.T) {
	id, q := budgetTenant(t, 100)
	a, b := NewLimiter().WithBudget(NewStore(db.RuntimePool(t))), NewLimiter().WithBudget(NewStore(db.RuntimePool(t)))
	p, err := a.Admit(id, q, 100)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Admit(id, q, 10); !errors.Is(err, ErrRateLimited) {
		t.Fatalf("node b while a holds the whole bucket: got %v, want ErrRateLimited", err)
	}
	p.Release(10) // 90 refunded: 5 stay on a, 85 pending
	// a's next lease gives the pending tokens back; b can then use them.
	if _, err := a.Admit(id, q, 20); err != nil {
		t.Fatalf("node a after its refund: %v", err)
	}
	if _, err := b.Admit(id, q, 60); err != nil {
		t.Fatalf("node b after a gave back: %v", err)
	}
}

// A budget that cannot be reached refuses (fail closed) with the typed
// unavailable error, whose public text names no internal detail.
func TestSharedBudgetUnavailable(t *testing.T) {
	id, q := budgetTenant(t, 100)
	pool := db.RuntimePool(t)
	l := NewLimiter().WithBudget(NewStore(pool))
	pool.Close()
	_, err := l.Admit(id, q, 10)
	if !errors.Is(err, ErrBudgetUnavailable) || cloison.ErrorCode(err) != cloison.CodeUnavailable {
		t.Fatalf("got %v, want ErrBudgetUnavailable", err)
	}
	if got := cloison.PublicMessage(err); got != ErrBudgetUnavailable.Message {
		t.Fatalf("public message: got %q, want %q", got, ErrBudgetUnavailable.Message)
	}
	if n := l.InFlight(id); n != 0 {
		t.Fatalf("in flight after a refusal: got %d, want 0", n)
	}
}

// The request path's added cost: Admit+Release with the budget in
// PostgreSQL against the per-process limiter, for a busy tenant (most
// requests served from the node's leased chunk) and for one whose every
// request leases (the lease's round trip alone, giving back what it takes).
func BenchmarkAdmit(b *testing.B) {
	for _, c := range []struct {
		name   string
		shared bool
		tokens int
	}{{"local", false, 10}, {"shared/chunked", true, 10}, {"shared/lease", true, 0}} {
		b.Run(c.name, func(b *testing.B) {
			tn := sampleTenant("bench")
			tn.Quotas.TokensPerMinute = 1_000_000
			tn.Quotas.MaxConcurrent = 1 << 20
			if _, err := newStore(b).CreateTenant(context.Background(), tn); err != nil {
				b.Fatal(err)
			}
			l, store := NewLimiter(), NewStore(db.RuntimePool(b))
			if c.shared {
				l.WithBudget(store)
			}
			if c.tokens == 0 {
				for b.Loop() {
					if _, _, err := store.LeaseTokens(context.Background(), tn.ID, tn.Quotas.TokensPerMinute, 10, 10, 10); err != nil {
						b.Fatal(err)
					}
				}
				return
			}
			for b.Loop() {
				p, err := l.Admit(tn.ID, tn.Quotas, c.tokens)
				if err != nil {
					b.Fatal(err)
				}
				p.Release(c.tokens)
			}
		})
	}
}
