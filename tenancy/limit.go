package tenancy

import (
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
// Limits are per process: N nodes let a tenant use up to N times its
// quota. A cluster-wide limit needs a shared store; see the package doc.
type Limiter struct {
	// Now is the clock (time.Now when nil); a test seam. Set before use.
	Now func() time.Time

	mu      sync.Mutex
	tenants map[cloison.TenantID]*usage // guarded by mu
}

type usage struct {
	inFlight int       // requests admitted and not released
	pages    int       // KV pages those requests may lease at most (AdmitLease)
	tokens   float64   // bucket level
	at       time.Time // when tokens was last brought up to date
	capacity float64   // the TokensPerMinute the bucket was last sized for
}

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
		l.tenants[t] = u
	}
	u.refill(now, capacity)
	if u.inFlight >= q.MaxConcurrent {
		return nil, &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "concurrent_requests", RetryAfter: time.Second,
			detail: fmt.Sprintf("%d of %d concurrent requests in flight", u.inFlight, q.MaxConcurrent)}
	}
	if pages > q.KVPages {
		return nil, &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "kv_pages",
			detail: fmt.Sprintf("request of %d KV pages exceeds the %d-page quota", pages, q.KVPages)}
	}
	if pages > 0 && u.pages+pages > q.KVPages {
		return nil, &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "kv_pages", RetryAfter: time.Second,
			detail: fmt.Sprintf("%d of %d KV pages held by requests in flight, %d more asked", u.pages, q.KVPages, pages)}
	}
	need := float64(tokens)
	if need > capacity {
		return nil, &LimitError{sentinel: ErrQuotaExceeded, Tenant: t, Limit: "tokens_per_minute",
			detail: fmt.Sprintf("request of %d tokens exceeds the %d tokens-per-minute quota", tokens, q.TokensPerMinute)}
	}
	// The epsilon absorbs float rounding in refill, so that waiting exactly
	// the Retry-After given is always enough.
	if u.tokens < need-1e-6 {
		perSecond := capacity / 60
		wait := time.Duration(math.Ceil((need-u.tokens)/perSecond*1e3)) * time.Millisecond
		return nil, &LimitError{sentinel: ErrRateLimited, Tenant: t, Limit: "tokens_per_minute", RetryAfter: wait,
			detail: fmt.Sprintf("request of %d tokens, %.0f left of %d per minute", tokens, math.Floor(u.tokens), q.TokensPerMinute)}
	}
	u.tokens = max(0, u.tokens-need)
	u.inFlight++
	u.pages += pages
	return &Permit{l: l, tenant: t, charged: tokens, pages: pages}, nil
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
		if refund := p.charged - max(used, 0); refund > 0 {
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
