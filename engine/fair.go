package engine

import (
	"slices"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/isolation"
)

// Fair share between tenants: the Virtual Token Counter (Sheng et al.,
// "Fairness in Serving Large Language Models", OSDI 2024), applied to
// admission and to each step's token budget. The counters live in
// Scheduler.vtc; everything here runs on the scheduler's goroutine.

// weight is tenant's share weight: SchedulerConfig.TenantWeight's, else
// its tier's (DedicatedWeight for the dedicated tier, 1 for shared).
func (s *Scheduler) weight(t cloison.TenantID) float64 {
	if s.cfg.TenantWeight != nil {
		if w := s.cfg.TenantWeight(t); w > 0 {
			return w
		}
	}
	if s.dedicated(t) {
		return s.cfg.DedicatedWeight
	}
	return 1
}

// charge adds n tokens of the given cost to tenant's counter.
func (s *Scheduler) charge(t cloison.TenantID, n int, cost float64) {
	s.vtc[t] += float64(n) * cost / s.weight(t)
}

// prefilling reports whether q is admitted with prompt left to compute
// here: demand the scheduler orders, as a queued request is.
func prefilling(q *seq) bool {
	return q.leased && (q.state == Admitted || q.state == Prefilling)
}

// waiting returns the tenants with a queued request or a prompt left to
// compute: the backlogged tenants of the paper.
func (s *Scheduler) waiting() map[cloison.TenantID]bool {
	w := map[cloison.TenantID]bool{}
	for t, tq := range s.queues {
		if len(tq) > 0 {
			w[t] = true
		}
	}
	for _, q := range s.running {
		if prefilling(q) {
			w[q.req.Tenant] = true
		}
	}
	return w
}

// minWaiting returns the smallest counter of the waiting tenants.
func (s *Scheduler) minWaiting(w map[cloison.TenantID]bool) (float64, bool) {
	m, ok := 0.0, false
	for t := range w {
		if c := s.vtc[t]; !ok || c < m {
			m, ok = c, true
		}
	}
	return m, ok
}

// lift raises the counter of a tenant that starts waiting to the smallest
// counter of those already waiting (or, when none is, to the smallest at
// the last step): service a tenant did not ask for while others were
// served is not owed to it later, so a tenant back from idle competes as
// an equal, not as a creditor.
//
// It reports whether t was not waiting (it starts now).
func (s *Scheduler) lift(t cloison.TenantID) bool {
	w := s.waiting()
	if w[t] {
		return false
	}
	s.arrived[t] = s.step + 1
	m, ok := s.minWaiting(w)
	if !ok {
		m = s.floor
	}
	s.vtc[t] = max(s.vtc[t], m)
	return true
}

// noteFloor records the smallest counter of the tenants still waiting
// after a step was planned (see floor).
func (s *Scheduler) noteFloor() {
	if m, ok := s.minWaiting(s.waiting()); ok {
		s.floor = m
	}
}

// pending is the prefill cost tenant t's admitted sequences still have to
// compute, in counter units: admission counts it as if already served, so
// one admission round does not hand every free slot to the tenant that was
// behind.
func (s *Scheduler) pending(t cloison.TenantID) float64 {
	n := 0
	for _, q := range s.running {
		if q.req.Tenant == t && prefilling(q) {
			n += len(q.tokens) - q.computed
		}
	}
	return float64(n) * s.cfg.PrefillCost / s.weight(t)
}

// fairQueue hands out a step's budget: each tenant's candidates (its
// decoding sequences, the least recently served first, then those with
// prompt left in admission order), the next one always from the tenant
// with the smallest counter (ties: see before; one tenant's in the order
// above).
type fairQueue struct {
	s     *Scheduler
	byTen map[cloison.TenantID][]*seq
}

func (s *Scheduler) newFairQueue(keep func(*seq) bool) *fairQueue {
	f := &fairQueue{s: s, byTen: map[cloison.TenantID][]*seq{}}
	for _, q := range s.running {
		if keep(q) {
			f.byTen[q.req.Tenant] = append(f.byTen[q.req.Tenant], q)
		}
	}
	for _, qs := range f.byTen {
		// Decode first, the least recently served first: a step too short
		// for every decode token of a tenant serves the others next time.
		// Prompts in admission order: one is finished before the next.
		slices.SortStableFunc(qs, func(a, b *seq) int {
			switch da, db := a.state == Decoding, b.state == Decoding; {
			case da != db && da:
				return -1
			case da != db:
				return 1
			case da && a.last != b.last:
				return compare(a.last, b.last)
			}
			return compare(a.order, b.order)
		})
	}
	return f
}

func compare(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// next returns the next candidate, or nil when none is left.
func (f *fairQueue) next() *seq {
	var best *seq
	for t, qs := range f.byTen {
		if len(qs) == 0 {
			delete(f.byTen, t)
			continue
		}
		q := qs[0]
		if best == nil {
			best = q
			continue
		}
		if f.s.before(t, best.req.Tenant) || t == best.req.Tenant && q.order < best.order {
			best = q
		}
	}
	if best != nil {
		f.byTen[best.req.Tenant] = f.byTen[best.req.Tenant][1:]
	}
	return best
}

// contention notes the tenants with a live request at this step and
// reports whether the step is contended: more than one tenant is active
// (a live request now, or within the last ContendedSteps steps) and one of
// them is light: it has no request queued and no prompt left to compute
// but for the first chunk of a fresh request (one that found its tenant
// with no request live), so that its next request would wait for the step
// in flight. Tenants
// that are all backlogged gain nothing from short steps: their steps stay
// MaxBatchTokens long. owed holds the active
// tenants that come first (before) at the start of the step (a tenant
// long idle keeps the counter it had, so one that served itself meanwhile
// is not owed while the idle one still counts as active).
func (s *Scheduler) contention() (bool, map[cloison.TenantID]bool) {
	for _, q := range s.seqs {
		s.seen[q.req.Tenant] = s.step
	}
	for t, at := range s.seen {
		if s.step-at > uint64(s.cfg.ContendedSteps) {
			delete(s.seen, t)
		}
	}
	if len(s.seen) < 2 {
		return false, nil
	}
	// A tenant is heavy when it has a request queued or with prompt left
	// to compute, other than a fresh one not started.
	heavy := map[cloison.TenantID]bool{}
	for _, q := range s.seqs {
		if (q.state == Queued || prefilling(q)) && !(q.fresh && q.computed == q.cached) {
			heavy[q.req.Tenant] = true
		}
	}
	light := false
	for t := range s.seen {
		light = light || !heavy[t]
	}
	if !light {
		return false, nil
	}
	owed := map[cloison.TenantID]bool{}
	for t := range s.seen {
		owed[t] = true
		for u := range s.seen {
			if u != t && s.before(u, t) {
				owed[t] = false
				break
			}
		}
	}
	return true, owed
}

// before reports whether tenant t comes before u in a step: a smaller
// counter, or an equal one and a later start of waiting (the tenant just
// lifted to the others' counter is served first; the tenants it is level
// with were served until then), then the tenant's name (a total order).
func (s *Scheduler) before(t, u cloison.TenantID) bool {
	ct, cu := s.vtc[t], s.vtc[u]
	switch {
	case ct != cu:
		return ct < cu
	case s.arrived[t] != s.arrived[u]:
		return s.arrived[t] > s.arrived[u]
	}
	return t < u
}

// dedicated reports whether tenant's pages are its own (an exhausted
// partition then concerns it alone).
func (s *Scheduler) dedicated(t cloison.TenantID) bool {
	p, err := s.pool.Partition(t)
	return err == nil && p.Tier == isolation.TierDedicated
}

// span is what n tokens from position pos count against a contended step:
// each 1+p/ContextSpan (n when ContextSpan is 0).
func (s *Scheduler) span(pos, n int) float64 {
	if s.cfg.ContextSpan <= 0 || n <= 0 {
		return float64(n)
	}
	// The sum of 1+p/ContextSpan for p in [pos, pos+n).
	return float64(n) + (float64(n)*float64(pos)+float64(n)*float64(n-1)/2)/s.cfg.ContextSpan
}

// fit is how many of the n tokens from position pos cost no more than
// budget (see span).
func (s *Scheduler) fit(pos, n int, budget float64) int {
	if s.cfg.ContextSpan <= 0 {
		return max(0, min(n, int(budget)))
	}
	k, c := 0, 0.0
	for k < n {
		if c += 1 + float64(pos+k)/s.cfg.ContextSpan; c > budget {
			break
		}
		k++
	}
	return k
}

// contextSpan is the context positions whose attention costs what one
// token's matrix products cost: the multiply-adds per layer of the Q, K, V
// and O projections and the three FFN matrices against those of a query's
// scores and weighted sum over one position (2·Heads·HeadDim), divided by
// attentionPenalty. About 360 for the 4-layer synthesized llama of the
// benchmarks; 0 when the shape is unknown.
func contextSpan(c model.Config) float64 {
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	if q <= 0 || kv <= 0 || c.DModel <= 0 {
		return 0
	}
	matmul := 2*c.DModel*q + 2*c.DModel*kv + 3*c.DModel*c.FFN
	return float64(matmul) / float64(2*q) / attentionPenalty
}

// attentionPenalty is what a multiply-add of attention costs against one of
// the matrix products: the products reuse each weight across the step's
// tokens and run on quantized blocks, attention reads every position's K and
// V for each token. Measured on the CPU backend (BenchmarkFairShare with
// FAIR_SPAN): at the span of the bare count (1,440) b's wait under a flood
// in CPU time barely moved; at a quarter of it, it fell by a quarter.
const attentionPenalty = 4
