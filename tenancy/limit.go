package tenancy

import (
	"context"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/cloison/cloison"
)

// Limiter enforces each tenant's concurrency quota, tokens-per-minute rate
// and (AdmitLease) KV pages in flight in this process. The bucket holds at most TokensPerMinute tokens
// and refills at TokensPerMinute per minute; a request is charged its
// prompt tokens plus the completion tokens it may generate, and Release
// refunds what it did not use. Safe for concurrent use.
//
// Concurrency and KV pages are this process's (they bound its own memory
// and engine). Tokens per minute are per process too unless WithBudget
// names a shared Budget: then the bucket lives in the shared store and
// this process leases tokens from it in chunks (see WithBudget for the
// burst that allows).
type Limiter struct {
	// Now is the clock (time.Now when nil); a test seam. Set before use.
	Now func() time.Time

	budget Budget // nil: tokens per minute counted in this process; set before use

	mu      sync.Mutex
	tenants map[cloison.TenantID]*usage // guarded by mu
}

type usage struct {
	inFlight int       // requests admitted and not released
	pages    int       // KV pages those requests may lease at most (AdmitLease)
	tokens   float64   // bucket level
	at       time.Time // when tokens was last brought up to date
	capacity float64   // the TokensPerMinute the bucket was last sized for
	// With a Budget, tokens is instead the balance leased from the shared
	// bucket and not yet charged, at when it was leased, and pending what
	// goes back to the shared bucket with the next lease.
	pending float64
}

// Lease sizing with a Budget. A lease takes what the request needs, or a
// chunk of capacity/LeaseChunkDivisor when that is more, so most requests
// of a busy tenant are admitted from the node's balance without a database
// round trip. A balance unused for LeaseTTL, and whatever a refund brings
// above one chunk, is given back with the node's next lease.
const (
	LeaseChunkDivisor = 20
	LeaseTTL          = time.Second
	// budgetTimeout bounds one lease: a store slower than this refuses
	// the request (ErrBudgetUnavailable) instead of holding it.
	budgetTimeout = 2 * time.Second
)

// WithBudget makes l's tokens-per-minute limit cluster-wide: the bucket is
// b's (one row per tenant in PostgreSQL for *Store), and every process
// sharing b leases from it, so N processes admit a tenant's quota once.
//
// Burst: besides the shared bucket (at most TokensPerMinute), each process
// may hold one chunk (TokensPerMinute/LeaseChunkDivisor) leased and not yet
// used, so over any window of length w the cluster admits at most
// TokensPerMinute·(1 + w/1min) + N·TokensPerMinute/LeaseChunkDivisor
// tokens (a single process: the first two terms, as without a budget).
// Balances stranded on a process that stopped are lost to the tenant until
// the bucket refills: an error on the side of refusing.
//
// A lease the store cannot serve within two seconds refuses the request
// with ErrBudgetUnavailable (CodeUnavailable): never admitted uncounted.
// Call before the first Admit.
func (l *Limiter) WithBudget(b Budget) *Limiter { l.budget = b; return l }

// NewLimiter returns an empty Limiter.
func NewLimiter() *Limiter { return &Limiter{tenants: map[cloison.TenantID]*usage{}} }

// Permit is one admitted request's hold on its tenant's quotas.
type Permit struct {
	l       *Limiter
	tenant  cloison.TenantID
	charged int
	pages   int
	once    sync.Once
}

// Admit admits one request of tenant t that may consume tokens tokens
// (prompt + max completion), under quotas q (the tenant record's, read at
// authentication). It returns a *LimitError: ErrQuotaExceeded when t has
// q.MaxConcurrent requests in flight (RetryAfter one second) or when tokens
// exceeds what the bucket can ever hold (RetryAfter zero); ErrRateLimited
// when the bucket is short (RetryAfter: when it will hold enough). A
// rejected request takes nothing. Release the permit exactly when the
// request ends, in every path.
func (l *Limiter) Admit(t cloison.TenantID, q Quotas, tokens int) (*Permit, error) {
	return l.admit(t, q, tokens, 0)
}

// AdmitLease is Admit for a request whose KV lease may grow to pages pages:
// the tenant's admitted requests together may lease at most q.KVPages. It
// returns ErrQuotaExceeded (a *LimitError of Limit "kv_pages") when pages
// alone exceeds q.KVPages (RetryAfter zero: it never fits) or when the
// requests in flight already hold too many (RetryAfter one second), and
// otherwise what Admit returns. pages < 1 counts as 1.
func (l *Limiter) AdmitLease(t cloison.TenantID, q Quotas, tokens, pages int) (*Permit, error) {
	if q.KVPages < 1 {
		return nil, &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "quotas", detail: fmt.Sprintf("quotas %+v admit nothing", q)}
	}
	return l.admit(t, q, tokens, max(pages, 1))
}

// Check returns the error Admit(t, q, tokens) would return for the
// tenant's concurrency, the request's size and (without a Budget, whose
// bucket is shared and read only by leasing) its tokens-per-minute bucket,
// without taking anything: a request can be refused before work whose cost
// its caller controls (tokenizing its prompt), tokens then being a lower
// bound of what it will ask. A nil error promises nothing: Admit decides.
func (l *Limiter) Check(t cloison.TenantID, q Quotas, tokens int) error {
	if q.MaxConcurrent < 1 || q.TokensPerMinute < 1 {
		return &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "quotas", detail: fmt.Sprintf("quotas %+v admit nothing", q)}
	}
	tokens = max(tokens, 0)
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.tenants[t]
	if u == nil {
		if tokens > q.TokensPerMinute {
			return (&usage{}).limits(t, q, tokens, 0)
		}
		return nil
	}
	if err := u.limits(t, q, tokens, 0); err != nil {
		return err
	}
	if l.budget != nil {
		return nil
	}
	// The bucket as refill would bring it up to now, left unchanged.
	level := u.tokens
	capacity := float64(q.TokensPerMinute)
	if capacity != u.capacity {
		level = min(level, capacity)
	}
	if dt := now.Sub(u.at); dt > 0 {
		level = min(capacity, level+dt.Seconds()*capacity/60)
	}
	if level < float64(tokens)-1e-6 {
		return rateLimited(t, q, tokens, level, float64(tokens)-level)
	}
	return nil
}

// admit is Admit and AdmitLease; pages 0 leaves the KV pages uncounted.
func (l *Limiter) admit(t cloison.TenantID, q Quotas, tokens, pages int) (*Permit, error) {
	if q.MaxConcurrent < 1 || q.TokensPerMinute < 1 {
		return nil, &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "quotas", detail: fmt.Sprintf("quotas %+v admit nothing", q)}
	}
	if tokens < 0 {
		tokens = 0
	}
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.tenants[t]
	capacity := float64(q.TokensPerMinute)
	if u == nil {
		u = &usage{tokens: capacity, at: now, capacity: capacity}
		if l.budget != nil {
			u.tokens = 0 // nothing leased yet
		}
		l.tenants[t] = u
	}
	if err := u.limits(t, q, tokens, pages); err != nil {
		return nil, err
	}
	need := float64(tokens)
	if l.budget != nil {
		u.capacity = capacity
		if err := l.lease(u, t, q, need, pages, now); err != nil {
			return nil, err
		}
	} else {
		u.refill(now, capacity)
		// The epsilon absorbs float rounding in refill, so that waiting exactly
		// the Retry-After given is always enough.
		if u.tokens < need-1e-6 {
			return nil, rateLimited(t, q, tokens, u.tokens, need-u.tokens)
		}
	}
	u.tokens = max(0, u.tokens-need)
	u.inFlight++
	u.pages += pages
	return &Permit{l: l, tenant: t, charged: tokens, pages: pages}, nil
}

// limits checks the concurrency, KV page and request-size quotas.
func (u *usage) limits(t cloison.TenantID, q Quotas, tokens, pages int) error {
	if u.inFlight >= q.MaxConcurrent {
		return &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "concurrent_requests", RetryAfter: time.Second,
			detail: fmt.Sprintf("%d of %d concurrent requests in flight", u.inFlight, q.MaxConcurrent)}
	}
	if pages > q.KVPages {
		return &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "kv_pages",
			detail: fmt.Sprintf("request of %d KV pages exceeds the %d-page quota", pages, q.KVPages)}
	}
	if pages > 0 && u.pages+pages > q.KVPages {
		return &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "kv_pages", RetryAfter: time.Second,
			detail: fmt.Sprintf("%d of %d KV pages held by requests in flight, %d more asked", u.pages, q.KVPages, pages)}
	}
	if tokens > q.TokensPerMinute {
		return &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "tokens_per_minute",
			detail: fmt.Sprintf("request of %d tokens exceeds the %d tokens-per-minute quota", tokens, q.TokensPerMinute)}
	}
	return nil
}

// rateLimited is the rejection of a request short of short tokens, its
// Retry-After the time the bucket takes to refill them.
func rateLimited(t cloison.TenantID, q Quotas, tokens int, left, short float64) *LimitError {
	perSecond := float64(q.TokensPerMinute) / 60
	wait := time.Duration(math.Ceil(short/perSecond*1e3)) * time.Millisecond
	return &LimitError{sentinel: ErrRateLimited, Tenant: t, Limit: "tokens_per_minute", RetryAfter: wait,
		detail: fmt.Sprintf("request of %d tokens, %.0f left of %d per minute", tokens, math.Floor(left), q.TokensPerMinute)}
}

// lease makes u's leased balance hold need tokens, leasing from the shared
// budget when it does not. Called and returning with l.mu held; it lets go
// of l.mu during the store's round trip, so it checks u's limits again
// after it.
func (l *Limiter) lease(u *usage, t cloison.TenantID, q Quotas, need float64, pages int, now time.Time) error {
	if now.Sub(u.at) > LeaseTTL {
		u.pending += u.tokens // idle balance: back to the tenant's other nodes
		u.tokens = 0
	}
	if u.tokens >= need-1e-6 {
		return nil
	}
	short := need - u.tokens
	chunk := float64(q.TokensPerMinute) / LeaseChunkDivisor
	give := u.pending
	u.pending = 0
	l.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), budgetTimeout)
	granted, level, err := l.budget.LeaseTokens(ctx, t, q.TokensPerMinute, give, short, max(short, chunk))
	cancel()
	l.mu.Lock()
	if err != nil {
		u.pending += give // the failed statement changed nothing
		return err
	}
	if granted > 0 {
		u.tokens += granted
		u.at = now
	}
	if err := u.limits(t, q, int(need), pages); err != nil {
		return err
	}
	if u.tokens < need-1e-6 {
		return rateLimited(t, q, int(need), level+u.tokens, need-u.tokens-level)
	}
	return nil
}

// refill brings the bucket up to now; a changed quota resizes it.
func (u *usage) refill(now time.Time, capacity float64) {
	if capacity != u.capacity {
		u.tokens = min(u.tokens, capacity)
		u.capacity = capacity
	}
	if dt := now.Sub(u.at); dt > 0 {
		u.tokens = min(capacity, u.tokens+dt.Seconds()*capacity/60)
	}
	u.at = now
}

// Release ends the request: it frees its concurrency slot and refunds the
// tokens it was charged but did not use (used is prompt + generated
// tokens). Only the first call counts.
func (p *Permit) Release(used int) {
	p.once.Do(func() {
		l := p.l
		l.mu.Lock()
		defer l.mu.Unlock()
		u := l.tenants[p.tenant]
		u.inFlight--
		u.pages -= p.pages
		refund := p.charged - max(used, 0)
		switch {
		case refund <= 0:
		case l.budget != nil:
			// Keep at most one chunk; the rest goes back to the shared
			// bucket with the next lease.
			u.tokens += float64(refund)
			if chunk := u.capacity / LeaseChunkDivisor; u.tokens > chunk {
				u.pending += u.tokens - chunk
				u.tokens = chunk
			}
		default:
			u.tokens = min(u.capacity, u.tokens+float64(refund))
		}
	})
}

// InFlight returns tenant t's admitted, unreleased requests.
func (l *Limiter) InFlight(t cloison.TenantID) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if u := l.tenants[t]; u != nil {
		return u.inFlight
	}
	return 0
}
