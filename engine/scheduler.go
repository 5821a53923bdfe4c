package engine

import (
	"errors"
	"fmt"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
)

// ErrNoTicket: Enqueue of a request admission did not accept.
var ErrNoTicket = cloison.NewError(cloison.CodeInternal, "engine: enqueue without an admission ticket")

// ErrDuplicateRequest: a request ID already live in the scheduler.
var ErrDuplicateRequest = cloison.NewError(cloison.CodeConflict, "engine: duplicate request id")

// ErrCanceled is the reason of a client cancellation.
var ErrCanceled = cloison.NewError(cloison.CodeCanceled, "request canceled")

// SchedulerConfig tunes batching and fairness.
type SchedulerConfig struct {
	// MaxBatchTokens bounds the tokens of one step (decode tokens plus
	// prefill chunks); default 512.
	MaxBatchTokens int
	// MaxRunning bounds the sequences holding leases; default 64.
	MaxRunning int
	// ChunkTokens bounds one sequence's prefill chunk per step; default 256.
	ChunkTokens int
	// ScoreChunkTokens bounds the prefill chunk of a request that scores
	// its prompt (every row's logits: chunk × vocabulary floats on the
	// device and the host per step); default 64, at most ChunkTokens.
	ScoreChunkTokens int
	// TenantMaxRunning returns a tenant's concurrency cap (0: none); nil
	// means no caps.
	TenantMaxRunning func(cloison.TenantID) int
	// TenantWeight returns a tenant's share of the engine when tenants
	// compete (its Virtual Token Counter advances by the service received
	// divided by the weight: a tenant of weight 2 gets twice the tokens of
	// one of weight 1 while both are backlogged); nil, or a value not
	// above 0, means the weight of the tenant's tier (DedicatedWeight).
	TenantWeight func(cloison.TenantID) float64
	// DedicatedWeight is the weight of a tenant whose partition is of the
	// dedicated tier (its record's tier, which the policy decision may
	// require and the API checks; service.PoolTenant) when TenantWeight
	// gives none: the tier that buys pages of its own also buys a larger
	// share of each step. Shared tenants weigh 1. Default 2.
	DedicatedWeight float64
	// PrefillCost and DecodeCost are what one prefill token and one decode
	// token add to their tenant's counter; defaults 1 and 2 (the weights of
	// the Virtual Token Counter paper: a decode token costs more per token
	// on an accelerator, where a step's weights are read once for the whole
	// batch).
	PrefillCost, DecodeCost float64
	// ContendedBatchTokens bounds a step's tokens while more than one
	// tenant is active (a live request now or in the last ContendedSteps
	// steps) and one of them is light (no request queued, no prompt left
	// to compute: its next request may be on its way): a step cannot be
	// interrupted, so its length is the wait of a request that arrives
	// meanwhile, and a tenant that keeps the engine busy cannot lengthen
	// it. The first chunk of a request of a tenant that had none live, when
	// that tenant is served no more than every other active one, is not
	// held to it (it starts at once, in full). Default 32 (at most
	// MaxBatchTokens); negative: no bound but MaxBatchTokens. A
	// latency-for-throughput trade: on a compute-bound CPU a step's time
	// grows with its tokens and short steps cost little; on an
	// accelerator, where it hardly grows, raise it.
	ContendedBatchTokens int
	// ContextSpan weighs that bound by context: a token at position p
	// counts 1+p/ContextSpan against it (the attention over p earlier
	// positions costs p/ContextSpan of the token's matrix products), so a
	// chunk or decode token of a long context takes less of a contended
	// step than a short one. New sets it from the model's shape
	// (contextSpan) when 0; negative counts tokens alone. Not applied when
	// the bound is MaxBatchTokens (ContendedBatchTokens negative or at
	// least it). A token past 31·ContextSpan (with the default bound) fits
	// only an otherwise empty contended step.
	ContextSpan float64
	// ContendedSteps is how long a tenant counts as active after its last
	// request left (its next one is likely on its way); default 16.
	ContendedSteps int
	// WholePrompt gives every prompt its whole prefill in one step (an
	// encoder, whose tokens attend to the tokens after them): a prompt
	// waits for a step with the budget for it, or takes a step alone when
	// it is longer than MaxBatchTokens.
	WholePrompt bool
	// PrefixCache publishes full prompt pages and looks them up (per tenant
	// namespace, see isolation).
	PrefixCache bool
	// Remote hands the prompt of every admitted request with more than one
	// token to remote prefill: all but its last token are computed on a
	// prefill node and transferred (Ready.Remote); the last one is computed
	// here, so sampling stays on this node.
	Remote bool
	// Unsafe (faults builds only: PlaceholderOver) emulates the 2026 bug.
	Unsafe Unsafe
}

// Item is one sequence's share of a step: feed Tokens at positions
// [Pos, Pos+len(Tokens)) through the model, writing their KV through Table
// and attending over Table; produce logits for the last token if Logits.
// All (a request that scores its prompt, on a chunk inside the prompt)
// asks for the logits of every token of the chunk: row j predicts the
// token at Pos+j+1.
type Item struct {
	ID     cloison.RequestID
	Tenant cloison.TenantID
	Lease  isolation.Lease
	Tokens []int32
	Pos    int
	Table  isolation.BlockTable
	Logits bool
	All    bool
}

// Ready is the work of one step. The driver must, in order: zero the pages
// in Scrub (arena.ZeroPages) BEFORE calling Advance, which confirms them to
// the pool; run Batch through the model; sample a token for every item with
// Logits; then call Advance (or FailStep if the model failed).
type Ready struct {
	Batch []Item
	Scrub []int32
	// Remote lists requests whose leading prompt tokens a prefill node must
	// compute and transfer into Lease; report with RemoteDone.
	Remote []RemoteItem
}

// RemoteItem is a remote prefill to start: the KV of Tokens (positions
// [0, len(Tokens))) must arrive, verified, in Lease.
type RemoteItem struct {
	ID     cloison.RequestID
	Tenant cloison.TenantID
	Lease  isolation.Lease
	Tokens []int32
}

// Result is the driver's outcome for one Item with Logits.
type Result struct {
	ID    cloison.RequestID
	Token int32
	// Stop ends the request (end-of-sequence token, stop token or stop
	// string, decided by the driver). Max tokens is the scheduler's.
	Stop bool
}

// Event reports a request that left the running set: finished, aborted,
// failed, or preempted back to the queue.
type Event struct {
	ID          cloison.RequestID
	Tenant      cloison.TenantID
	State       State
	Finish      FinishReason // for Finished
	Err         error        // for Aborted and Failed
	Prompt      int          // prompt tokens
	Generated   int          // tokens emitted
	Cached      int          // prompt tokens served from the prefix cache (last lease)
	Pages       int          // pages the last lease held
	Preemptions int
}

type seq struct {
	req         Request
	state       State
	lease       isolation.Lease
	leased      bool
	tokens      []int32 // prompt then generated
	computed    int     // leading tokens whose KV is written
	generated   int
	cached      int
	published   bool
	preemptions int
	order       uint64 // admission order, for preemption victims
	placeholder bool   // Unsafe.PlaceholderOver: only the placeholder was written
	remote      bool   // waiting for a remote prefill's transfer
	last        uint64 // the last step that had it in its batch (0: none yet)
	fresh       bool   // its tenant had no live request when it was enqueued
}

// Scheduler is the engine's core without I/O (raft-style): it decides which
// requests get pages and which tokens each step computes, and keeps every
// request's state. It is owned by one goroutine (the driver's loop) and is
// not safe for concurrent use.
//
// The loop:
//
//	rd := s.Ready()                 // leases taken, Writes recorded, tables approved
//	arena.ZeroPages(rd.Scrub)       // BEFORE Advance
//	results := run the model and sample over rd.Batch
//	events := s.Advance(rd, results) // or s.FailStep(rd, touched, err)
//
// Cancel may be called between Advance and the next Ready, never between a
// Ready and its Advance.
type Scheduler struct {
	pool    *isolation.Pool
	cfg     SchedulerConfig
	seqs    map[cloison.RequestID]*seq
	queues  map[cloison.TenantID][]*seq
	tenants []cloison.TenantID // round-robin order of tenants with a queue
	rr      int
	running []*seq
	perTen  map[cloison.TenantID]int // running sequences per tenant
	order   uint64
	// vtc is each tenant's Virtual Token Counter: the weighted service it
	// received (prefill and decode tokens put in a batch, times their
	// cost, divided by the tenant's weight). Admission and the prefill
	// share of each step go to the tenant with the smallest counter.
	vtc map[cloison.TenantID]float64
	// floor is the smallest counter among the tenants that were waiting
	// at the last step: a tenant that starts waiting when no one else is
	// is lifted to it, so idle time is never banked.
	floor float64
	// step counts the steps planned; seen is the last step at which each
	// tenant had a live request (see ContendedSteps).
	step uint64
	seen map[cloison.TenantID]uint64
	// arrived is the step at which each tenant last started waiting (the
	// lift), which breaks ties between equal counters (see before).
	arrived map[cloison.TenantID]uint64
	events  []Event // produced by Ready (violations, failed leases)
	broken  error   // a bug detected in the scheduler's own books; see Err
}

// NewScheduler returns a Scheduler over pool.
func NewScheduler(pool *isolation.Pool, cfg SchedulerConfig) *Scheduler {
	if cfg.MaxBatchTokens <= 0 {
		cfg.MaxBatchTokens = 512
	}
	if cfg.MaxRunning <= 0 {
		cfg.MaxRunning = 64
	}
	if cfg.ChunkTokens <= 0 {
		cfg.ChunkTokens = 256
	}
	if cfg.ScoreChunkTokens <= 0 {
		cfg.ScoreChunkTokens = 64
	}
	cfg.ScoreChunkTokens = min(cfg.ScoreChunkTokens, cfg.ChunkTokens)
	if cfg.PrefillCost <= 0 {
		cfg.PrefillCost = 1
	}
	if cfg.DecodeCost <= 0 {
		cfg.DecodeCost = 2
	}
	if cfg.DedicatedWeight <= 0 {
		cfg.DedicatedWeight = 2
	}
	switch {
	case cfg.ContendedBatchTokens == 0:
		cfg.ContendedBatchTokens = 32
	case cfg.ContendedBatchTokens < 0:
		cfg.ContendedBatchTokens = cfg.MaxBatchTokens
	}
	cfg.ContendedBatchTokens = min(cfg.ContendedBatchTokens, cfg.MaxBatchTokens)
	if cfg.ContextSpan < 0 || cfg.ContendedBatchTokens >= cfg.MaxBatchTokens {
		cfg.ContextSpan = 0
	}
	if cfg.ContendedSteps <= 0 {
		cfg.ContendedSteps = 16
	}
	return &Scheduler{pool: pool, cfg: cfg, seqs: map[cloison.RequestID]*seq{}, queues: map[cloison.TenantID][]*seq{}, perTen: map[cloison.TenantID]int{},
		vtc: map[cloison.TenantID]float64{}, seen: map[cloison.TenantID]uint64{},
		arrived: map[cloison.TenantID]uint64{}}
}

// Enqueue queues an admitted request. Errors: ErrNoTicket, ErrDuplicateRequest.
func (s *Scheduler) Enqueue(t Ticket) error {
	if !t.valid {
		return ErrNoTicket
	}
	if _, dup := s.seqs[t.req.ID]; dup {
		return fmt.Errorf("%w: %s", ErrDuplicateRequest, t.req.ID)
	}
	q := &seq{req: t.req, state: Queued, tokens: append(make([]int32, 0, len(t.req.Prompt)+min(t.req.MaxTokens, 4096)), t.req.Prompt...)}
	// Fresh: the tenant had no request live at all (not one streaming
	// either): its first chunk may start in full (see ContendedBatchTokens).
	q.fresh = s.lift(t.req.Tenant) && s.perTen[t.req.Tenant] == 0
	s.seqs[t.req.ID] = q
	s.push(q, false)
	return nil
}

func (s *Scheduler) push(q *seq, front bool) {
	tq, ok := s.queues[q.req.Tenant]
	if !ok || len(tq) == 0 {
		if !ok {
			s.tenants = append(s.tenants, q.req.Tenant)
		}
	}
	if front {
		s.queues[q.req.Tenant] = append([]*seq{q}, tq...)
	} else {
		s.queues[q.req.Tenant] = append(tq, q)
	}
}

// State returns a live request's state.
func (s *Scheduler) State(id cloison.RequestID) (State, bool) {
	q, ok := s.seqs[id]
	if !ok {
		return 0, false
	}
	return q.state, true
}

// Idle reports whether no request is queued or running.
func (s *Scheduler) Idle() bool { return len(s.seqs) == 0 }

// Len returns the number of queued and running requests.
func (s *Scheduler) Len() (queued, running int) {
	return len(s.seqs) - len(s.running), len(s.running)
}

// set moves q to a new state. An illegal transition is a bug of this file:
// the transition is refused and the scheduler is marked broken, which stops
// the engine (Err) — fail closed rather than run on.
func (s *Scheduler) set(q *seq, to State) {
	if !q.state.CanBecome(to) {
		s.fail(fmt.Errorf("%w: illegal transition %s → %s for %s", errInternal, q.state, to, q.req.ID))
		return
	}
	q.state = to
}

func (s *Scheduler) fail(err error) {
	if s.broken == nil {
		s.broken = err
	}
}

// Err returns the bug that broke the scheduler, if any. The driver stops
// when it is not nil.
func (s *Scheduler) Err() error { return s.broken }

// end removes a sequence for good and reports it.
func (s *Scheduler) end(q *seq, to State, finish FinishReason, err error) Event {
	pages := 0
	if q.leased {
		pages = (len(q.tokens) + s.pool.PageTokens() - 1) / s.pool.PageTokens()
		s.dropLease(q, to == Failed)
	} else {
		s.unqueue(q)
	}
	s.set(q, to)
	delete(s.seqs, q.req.ID)
	return Event{ID: q.req.ID, Tenant: q.req.Tenant, State: to, Finish: finish, Err: err,
		Prompt: len(q.req.Prompt), Generated: q.generated, Cached: q.cached, Pages: pages, Preemptions: q.preemptions}
}

// dropLease releases (or, after a failure, discards) q's lease and removes q
// from the running set.
func (s *Scheduler) dropLease(q *seq, discard bool) {
	release := s.pool.Release
	if discard {
		release = s.pool.Discard
	}
	// The lease is live by construction; an error here is a stale lease,
	// which the pool already treats as a violation.
	_ = release(q.lease)
	q.leased = false
	for i, r := range s.running {
		if r == q {
			s.running = append(s.running[:i], s.running[i+1:]...)
			break
		}
	}
	s.perTen[q.req.Tenant]--
}

func (s *Scheduler) unqueue(q *seq) {
	tq := s.queues[q.req.Tenant]
	for i, r := range tq {
		if r == q {
			s.queues[q.req.Tenant] = append(tq[:i], tq[i+1:]...)
			return
		}
	}
}

// Cancel aborts a live request with reason (ErrCanceled or a deadline error)
// and frees its lease. It reports false for an unknown or ended request.
func (s *Scheduler) Cancel(id cloison.RequestID, reason error) (Event, bool) {
	q, ok := s.seqs[id]
	if !ok {
		return Event{}, false
	}
	return s.end(q, Aborted, "", reason), true
}

// preempt releases q's lease and puts it back at the front of its tenant's
// queue; it will recompute its prompt and generated tokens.
func (s *Scheduler) preempt(q *seq) Event {
	s.dropLease(q, false)
	s.set(q, Queued)
	q.computed, q.cached, q.published = 0, 0, false
	q.fresh = false // it recomputes behind its tenant's other work
	q.preemptions++
	s.push(q, true)
	return Event{ID: q.req.ID, Tenant: q.req.Tenant, State: Queued, Preemptions: q.preemptions}
}

// admit gives leases to queued requests until the pool, the running cap or
// every tenant's cap stops it, each time to the head of the queue of the
// tenant with the smallest counter counting the prefill it already has
// admitted (ties: round-robin).
func (s *Scheduler) admit() {
	if len(s.tenants) == 0 {
		return
	}
	defer func() { s.rr++ }()
	blocked := map[cloison.TenantID]bool{}
	proj := map[cloison.TenantID]float64{}
	n := len(s.tenants)
	for len(s.running) < s.cfg.MaxRunning {
		var tn cloison.TenantID
		found := false
		for i := range n {
			t := s.tenants[(s.rr+i)%n]
			if len(s.queues[t]) == 0 || blocked[t] {
				continue
			}
			if s.cfg.TenantMaxRunning != nil {
				if c := s.cfg.TenantMaxRunning(t); c > 0 && s.perTen[t] >= c {
					continue
				}
			}
			if _, ok := proj[t]; !ok {
				proj[t] = s.vtc[t] + s.pending(t)
			}
			if !found || proj[t] < proj[tn] {
				tn, found = t, true
			}
		}
		if !found {
			break
		}
		tq := s.queues[tn]
		q := tq[0]
		var prompt []int32
		if s.cfg.PrefixCache && !q.req.ScorePrompt {
			// A request that scores its prompt computes every
			// position: cached pages would skip their logits.
			prompt = q.tokens
		}
		l, cached, err := s.pool.AllocatePrefixSalted(tn, q.req.ID, len(q.tokens), prompt, q.req.CacheSalt)
		switch {
		case err == nil:
		case errors.Is(err, isolation.ErrScrubPending), errors.Is(err, isolation.ErrPoolExhausted) && !s.dedicated(tn):
			// The shared pages are short for the tenant that is owed the
			// most: the tenants behind it wait too, or they would take
			// every page freed (and scrubbed) before it could, forever.
			return
		case errors.Is(err, isolation.ErrPoolExhausted), errors.Is(err, isolation.ErrQuotaExceeded):
			// The tenant's own partition or cap is full: its business
			// alone, the others go on.
			blocked[tn] = true
			continue
		default:
			// Cannot fit any more (the tenant's capacity changed since
			// admission) or unknown tenant: fail closed.
			s.events = append(s.events, s.end(q, Failed, "", err))
			continue
		}
		s.queues[tn] = tq[1:]
		s.set(q, Admitted)
		q.lease, q.leased, q.computed, q.cached = l, true, cached, cached
		q.order = s.order
		s.order++
		s.running = append(s.running, q)
		s.perTen[tn]++
		proj[tn] += float64(len(q.tokens)-cached) * s.cfg.PrefillCost / s.weight(tn)
	}
}

// ensure grows q's lease to hold slots tokens, preempting other sequences
// (not in the batch being built) when the pool is exhausted. It returns false
// if q must wait (it may have been preempted itself).
func (s *Scheduler) ensure(q *seq, slots int, inBatch map[*seq]bool) bool {
	for {
		err := s.pool.Extend(q.lease, slots)
		switch {
		case err == nil:
			return true
		case errors.Is(err, isolation.ErrScrubPending):
			return false // pages are being zeroed: next step
		case errors.Is(err, isolation.ErrPoolExhausted), errors.Is(err, isolation.ErrQuotaExceeded):
			// Over the tenant's cap only its own sequences may make room.
			if v := s.victim(q, inBatch, errors.Is(err, isolation.ErrQuotaExceeded)); v != nil {
				s.events = append(s.events, s.preempt(v))
				continue
			}
			s.events = append(s.events, s.preempt(q))
			return false
		default:
			// Capacity: the request can never grow this far; it ends.
			s.events = append(s.events, s.end(q, Failed, "", err))
			return false
		}
	}
}

// victim picks the sequence to preempt for q: one not in the batch, from
// the tenant holding the most running sequences, latest admitted first.
func (s *Scheduler) victim(q *seq, inBatch map[*seq]bool, sameTenant bool) *seq {
	var best *seq
	for _, r := range s.running {
		other := r.req.Tenant != q.req.Tenant
		if r == q || inBatch[r] || r.remote || other && (sameTenant || s.perTen[r.req.Tenant] < s.perTen[q.req.Tenant]) {
			continue
		}
		if best == nil || s.perTen[r.req.Tenant] > s.perTen[best.req.Tenant] ||
			s.perTen[r.req.Tenant] == s.perTen[best.req.Tenant] && r.order > best.order {
			best = r
		}
	}
	return best
}

// Ready plans the next step: scrub work, leases for queued requests, then
// the step's tokens, each recorded in the pool (Write) and approved
// (BlockTable), and each charged to its tenant's counter as it is planned.
// The tokens go out tenant by tenant, the one with the smallest counter
// first: its decode tokens (the least recently served first), then its
// prefill chunks, one per sequence. While several tenants are active the
// step stops at ContendedBatchTokens, except for the first chunk of a
// request of a tenant that had none live, when that tenant is served no
// more than the others (see contention). A sequence whose table the
// pool refuses is failed (its pages discarded) and reported by the next
// Advance.
func (s *Scheduler) Ready() Ready {
	rd := Ready{Scrub: s.pool.ScrubWork()}
	s.admit()
	s.step++
	contended, owed := s.contention()
	used, spent := 0, 0.0
	inBatch := map[*seq]bool{}
	add := func(q *seq, n int, logits bool) bool {
		pos := q.computed
		if err := s.pool.Write(q.lease, n); err != nil {
			s.events = append(s.events, s.end(q, Failed, "", err))
			return false
		}
		bt, err := s.pool.BlockTable(q.lease, pos+n)
		if err != nil {
			s.events = append(s.events, s.end(q, Failed, "", err))
			return false
		}
		inBatch[q] = true
		q.last = s.step
		used += n
		spent += s.span(pos, n)
		rd.Batch = append(rd.Batch, Item{ID: q.req.ID, Tenant: q.req.Tenant, Lease: q.lease, Tokens: q.tokens[pos : pos+n], Pos: pos, Table: bt, Logits: logits,
			All: q.req.ScorePrompt && pos < len(q.req.Prompt)})
		return true
	}
	// room is how many of q's next want tokens the step still takes:
	// under contention, those whose cost (see ContextSpan) fits what is
	// left of ContendedBatchTokens — at least one in an empty step.
	room := func(q *seq, want int, first bool) int {
		n := max(0, min(want, s.cfg.MaxBatchTokens-used))
		if !contended || first && owed[q.req.Tenant] {
			return n
		}
		if k := s.fit(q.computed, n, float64(s.cfg.ContendedBatchTokens)-spent); k > 0 || used > 0 {
			return k
		}
		return min(n, 1)
	}
	// Remote prefills take no budget here: start them all.
	if s.cfg.Remote {
		for _, q := range s.running {
			if q.leased && q.state == Admitted && !q.remote && q.computed == 0 && len(q.tokens) > 1 {
				s.set(q, Prefilling)
				q.remote = true
				rd.Remote = append(rd.Remote, RemoteItem{ID: q.req.ID, Tenant: q.req.Tenant, Lease: q.lease, Tokens: q.tokens[:len(q.tokens)-1]})
			}
		}
	}
	// One candidate after another, each from the tenant with the smallest
	// counter: a tenant's decode tokens, then its prompt chunks. A long
	// prompt of one tenant takes the rest of a step only after every tenant
	// behind it has had its share; a candidate the step has no room for
	// waits for the next one (a later, smaller one may still fit).
	fq := s.newFairQueue(func(q *seq) bool { return q.state == Decoding && q.leased || prefilling(q) && !q.remote })
	for q := fq.next(); q != nil; q = fq.next() {
		if q.state == Decoding {
			if !q.leased || room(q, 1, false) < 1 || !s.ensure(q, q.computed+1, inBatch) {
				continue // preempted meanwhile, no room, or must wait
			}
			if add(q, 1, true) {
				s.charge(q.req.Tenant, 1, s.cfg.DecodeCost)
			}
			continue
		}
		if !prefilling(q) {
			continue // preempted meanwhile
		}
		chunk := s.cfg.ChunkTokens
		if q.req.ScorePrompt && q.computed < len(q.req.Prompt) {
			chunk = s.cfg.ScoreChunkTokens
		}
		rest := len(q.tokens) - q.computed
		want := min(rest, chunk)
		if s.cfg.WholePrompt {
			want = rest
		}
		n := room(q, want, q.fresh && q.computed == q.cached)
		if s.cfg.WholePrompt {
			// An encoder's prompt in one step: it waits for a step with
			// room for it, or takes an empty step alone.
			if n < rest && used > 0 {
				continue
			}
			n = rest
		}
		if n < 1 {
			continue
		}
		if q.state == Admitted {
			s.set(q, Prefilling)
			if o := s.cfg.Unsafe.placeholderOver(); o > 0 && len(q.req.Prompt) > o && len(q.tokens) > 1 {
				q.placeholder = true
				add(q, 1, false)
				continue
			}
		}
		// max_tokens 0 (prompt scoring only): nothing is sampled.
		if add(q, n, q.computed+n == len(q.tokens) && q.req.MaxTokens > 0) {
			s.charge(q.req.Tenant, n, s.cfg.PrefillCost)
		}
	}
	s.noteFloor()
	return rd
}

// Advance completes a step: confirms the scrubbed pages, records the computed
// KV, appends sampled tokens and ends finished requests. It returns the events
// of requests that left the running set since the last Advance.
func (s *Scheduler) Advance(rd Ready, results []Result) []Event {
	s.confirm(rd)
	byID := make(map[cloison.RequestID]Result, len(results))
	for _, r := range results {
		byID[r.ID] = r
	}
	for _, it := range rd.Batch {
		q := s.seqs[it.ID]
		if q == nil || !q.leased || q.lease != it.Lease {
			continue // ended meanwhile
		}
		q.computed = it.Pos + len(it.Tokens)
		if q.placeholder {
			// The bug: "transfer complete", the whole prompt but its last
			// token counts as computed.
			q.placeholder = false
			q.computed = len(q.tokens) - 1
		}
		if s.cfg.PrefixCache && !q.published && q.computed >= len(q.req.Prompt) {
			// Best effort: a prefix already cached is simply not published again.
			_, _ = s.pool.Publish(q.lease, q.req.Prompt)
			q.published = true
		}
		if q.req.MaxTokens == 0 && q.computed >= len(q.tokens) {
			// Prompt scored, nothing to generate.
			s.events = append(s.events, s.end(q, Finished, FinishLength, nil))
			continue
		}
		if !it.Logits {
			continue
		}
		r, ok := byID[it.ID]
		if !ok {
			s.events = append(s.events, s.end(q, Failed, "", fmt.Errorf("%w: no result for %s", errInternal, it.ID)))
			continue
		}
		q.tokens = append(q.tokens, r.Token)
		q.generated++
		switch {
		case r.Stop:
			s.events = append(s.events, s.end(q, Finished, FinishStop, nil))
		case q.generated >= q.req.MaxTokens:
			s.events = append(s.events, s.end(q, Finished, FinishLength, nil))
		default:
			s.set(q, Decoding)
		}
	}
	ev := s.events
	s.events = nil
	return ev
}

var errInternal = cloison.NewError(cloison.CodeInternal, "engine: internal error")

func (s *Scheduler) confirm(rd Ready) {
	if len(rd.Scrub) > 0 {
		// The pages came from ScrubWork and were zeroed by the driver.
		if err := s.pool.ConfirmScrub(rd.Scrub); err != nil {
			s.fail(fmt.Errorf("%w: scrub confirmation refused: %w", errInternal, err))
		}
	}
}

// FailStep ends a step whose model run failed. Requests in touched (those
// whose reads the failure concerns, e.g. a kernel tag mismatch) fail with err
// and their pages are discarded (zeroed before any reuse); the other requests
// of the batch are preempted and will recompute from scratch, so no
// half-written KV survives.
func (s *Scheduler) FailStep(rd Ready, touched map[cloison.RequestID]bool, err error) []Event {
	s.confirm(rd)
	for _, it := range rd.Batch {
		q := s.seqs[it.ID]
		if q == nil || !q.leased || q.lease != it.Lease {
			continue
		}
		if touched[it.ID] {
			s.events = append(s.events, s.end(q, Failed, "", err))
		} else {
			s.events = append(s.events, s.preempt(q))
		}
	}
	ev := s.events
	s.events = nil
	return ev
}

// RemoteDone reports the end of a remote prefill started from Ready.Remote:
// on success the transferred tokens count as computed (the receiver recorded
// them in the pool after verifying them) and the last prompt token is
// computed here next; on failure the request fails with err (the receiver
// already discarded the reservation). A report for a request that ended
// meanwhile, or for another lease, is ignored. It returns the events of
// requests that ended.
func (s *Scheduler) RemoteDone(id cloison.RequestID, lease isolation.Lease, tokens int, err error) []Event {
	q := s.seqs[id]
	if q == nil || !q.leased || q.lease != lease || !q.remote {
		return nil
	}
	q.remote = false
	if err != nil {
		s.events = append(s.events, s.end(q, Failed, "", err))
	} else {
		q.computed = tokens
	}
	ev := s.events
	s.events = nil
	return ev
}

// Events returns and clears events produced outside a step (e.g. by
// admission of a request whose lease can never fit).
func (s *Scheduler) Events() []Event {
	ev := s.events
	s.events = nil
	return ev
}
