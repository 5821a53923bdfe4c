package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// DefaultRefusalFlush is how often RunRefusals writes the refusal summaries.
const DefaultRefusalFlush = 10 * time.Second

// Stages at which a request is refused before service; each is the stage
// of a policy.refusals count.
const (
	StagePolicy    audit.Name = "policy"    // the policy decision denied it (or could not decide)
	StageIsolation audit.Name = "isolation" // the pool cannot isolate the tenant as the decision requires
	StageLimits    audit.Name = "limits"    // the decision's max_context or kv_pages cannot hold it
	StageQuota     audit.Name = "quota"     // the decision's max_concurrent, tokens_per_minute or kv_pages in flight
	StageAdmission audit.Name = "admission" // the engine's checks (reject before allocate)
	StageCapacity  audit.Name = "capacity"  // the node's per-tenant connection and stream caps
)

type refusalKey struct {
	stage audit.Name
	code  cloison.Code
}

// refusals counts the requests refused before service, per tenant, stage and
// code, between two flushes. A refusal costs a map increment, not a ledger
// row: the map is bounded by the authenticated tenants times the stages and
// codes, and each flush writes at most one policy.refusals event per tenant.
type refusals struct {
	mu     sync.Mutex
	since  time.Time                                 // start of the window, guarded by mu
	counts map[cloison.TenantID]map[refusalKey]int64 // guarded by mu
	flush  sync.Mutex                                // serializes FlushRefusals
}

// Refuse counts err, the refusal of one request of tenant t at stage, and
// returns it unchanged for the client. Transports call it for the refusals
// they make themselves (a connection cap, at StageCapacity).
func (s *Requests) Refuse(t cloison.TenantID, stage audit.Name, err error) error {
	k := refusalKey{stage: stage, code: cloison.Code(SanitizeName(string(cloison.ErrorCode(err))))}
	r := &s.refused
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts == nil {
		r.counts = map[cloison.TenantID]map[refusalKey]int64{}
	}
	if len(r.counts) == 0 {
		r.since = time.Now()
	}
	m := r.counts[t]
	if m == nil {
		m = map[refusalKey]int64{}
		r.counts[t] = m
	}
	m[k]++
	return err
}

// PendingRefusals returns how many refused requests are counted and not yet
// written to the ledger.
func (s *Requests) PendingRefusals() int64 {
	s.refused.mu.Lock()
	defer s.refused.mu.Unlock()
	var n int64
	for _, m := range s.refused.counts {
		for _, c := range m {
			n += c
		}
	}
	return n
}

// FlushRefusals writes the refusals counted since the last flush to the
// ledger: one policy.refusals event per tenant that had any, with the window
// and the counts by stage and code. Counts whose event could not be written
// are kept for the next flush (their window then starts where it started),
// so a ledger outage delays the summary but loses no count. Safe for
// concurrent use. Errors: ErrLedgerUnavailable (the first failed append).
func (s *Requests) FlushRefusals(ctx context.Context) error {
	r := &s.refused
	r.flush.Lock()
	defer r.flush.Unlock()
	r.mu.Lock()
	counts, since := r.counts, r.since
	r.counts = nil
	r.mu.Unlock()
	if len(counts) == 0 {
		return nil
	}
	until := time.Now()
	var first error
	for _, t := range slices.Sorted(maps.Keys(counts)) {
		if err := s.Stage(ctx, t, refusalSummary(since, until, counts[t])); err != nil {
			first = err
			break
		}
		delete(counts, t)
	}
	if first != nil {
		s.keepRefusals(counts, since)
	}
	return first
}

// keepRefusals merges counts that could not be written back into the
// current window, which then starts at since.
func (s *Requests) keepRefusals(counts map[cloison.TenantID]map[refusalKey]int64, since time.Time) {
	r := &s.refused
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.counts) == 0 || since.Before(r.since) {
		r.since = since
	}
	if r.counts == nil {
		r.counts = map[cloison.TenantID]map[refusalKey]int64{}
	}
	for t, m := range counts {
		cur := r.counts[t]
		if cur == nil {
			cur = map[refusalKey]int64{}
			r.counts[t] = cur
		}
		for k, c := range m {
			cur[k] += c
		}
	}
}

// refusalSummary is the ledger payload of one tenant's counts.
func refusalSummary(since, until time.Time, m map[refusalKey]int64) audit.PolicyRefusals {
	p := audit.PolicyRefusals{FromMicros: since.UnixMicro(), ToMicros: max(until.UnixMicro(), since.UnixMicro())}
	for k, c := range m {
		p.Counts = append(p.Counts, audit.RefusalCount{Stage: k.stage, Code: k.code, Count: c})
		p.Total += c
	}
	slices.SortFunc(p.Counts, func(a, b audit.RefusalCount) int {
		return cmp.Or(cmp.Compare(a.Stage, b.Stage), cmp.Compare(a.Code, b.Code))
	})
	return p
}

// RunRefusals flushes the refusal counts every interval (DefaultRefusalFlush
// when interval ≤ 0) until ctx ends, then flushes once more and returns that
// flush's error: the final counts are durable in the ledger when it returns
// nil. Stop accepting requests BEFORE ending ctx, so that no refusal comes
// after the last flush. A failed periodic flush is logged and retried at the
// next tick with its counts kept. Errors: ErrLedgerUnavailable.
func (s *Requests) RunRefusals(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		interval = DefaultRefusalFlush
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if err := s.FlushRefusals(ctx); err != nil && !errors.Is(err, context.Canceled) {
				s.log.Warn("refusal summary not written; kept for the next flush", "err", err)
			}
		case <-ctx.Done():
			// A fresh context: the final flush must not die with ctx.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.LedgerTimeout)
			defer cancel()
			if err := s.FlushRefusals(fctx); err != nil {
				return fmt.Errorf("final refusal summary: %w (%d refusals unrecorded)", err, s.PendingRefusals())
			}
			return nil
		}
	}
}
