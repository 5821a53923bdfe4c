package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/transfer"
)

// RecordIncident is the engine's OnIncident hook: it ledgers the isolation
// violation (counts and identifiers only) and opens a Loi 25 register entry
// with the period, the affected tenant and the withheld response pre-filled
// and the assessment pending. It runs on the engine's loop goroutine, so it
// hands the work to a tracked goroutine that retries a ledger failure until
// Close (the request itself already failed closed).
func (s *Requests) RecordIncident(in engine.Incident) {
	s.obs.OnIsolationFailure(in.Tenant, in.Kind)
	s.mu.Lock()
	dup := s.incOpen[in.Request]
	s.incOpen[in.Request] = true
	s.mu.Unlock()
	if dup {
		return
	}
	invariant := audit.Name(SanitizeName(in.Kind + ":" + in.Reason))
	affected := []cloison.TenantID{in.Tenant}
	if in.Owner.Tenant != "" && in.Owner.Tenant != in.Tenant {
		affected = append(affected, in.Owner.Tenant)
	}
	var rec *audit.Record // set once the event is ledgered: a retry only opens the incident
	s.durably("isolation violation", in.Request, func(ctx context.Context) error {
		if rec == nil {
			r, err := s.Append(ctx, in.Tenant, audit.IsolationViolation{Request: in.Request, Invariant: invariant, Page: int64(in.Page),
				Epoch: int64(in.Owner.Epoch), AffectedTenants: affected, AffectedRequests: []cloison.RequestID{in.Request}, WithheldResponses: 1})
			if err != nil {
				return err
			}
			rec = &r
		}
		id, err := s.cfg.Ledger.OpenFromDetection(ctx, s.cfg.Node, audit.Detection{Source: audit.SourceIsolationViolation, Invariant: invariant,
			DetectedAt: in.Time, PeriodStart: in.Time, PeriodEnd: in.Time, AffectedTenants: affected,
			AffectedRequests: []cloison.RequestID{in.Request}, AffectedResponses: 1, LedgerEvents: []int64{int64(rec.Seq)}, Model: audit.Name(s.cfg.ModelName)})
		if err != nil {
			return err
		}
		s.log.Warn("isolation violation: request failed closed, incident opened", "request", in.Request, "tenant", in.Tenant, "incident", id, "kind", in.Kind)
		return nil
	})
}

// RecordTransferFailure is a transfer.Receiver's OnVerificationFailed hook:
// the decode node refused a prefill node's pages (another request's or
// tenant's manifest, a digest or MAC mismatch, fewer tokens than reserved —
// the 2026 placeholder). The reservation was already discarded; this ledgers
// transfer.verification_failed and opens a Loi 25 register entry with the
// tenant and the withheld response pre-filled. Like RecordIncident it works in
// the background, tracked and retried until Close.
func (s *Requests) RecordTransferFailure(f transfer.Failure) {
	tenant, req := f.Lease.Tenant, f.Lease.Request
	s.obs.OnTransferFailure(tenant)
	switch {
	case f.Unauthenticated:
		// Junk or a header without the cluster key: no reservation was
		// touched; one incident per peer and window (the receiver's
		// bound), the rest counted in
		// cloison_transfer_unauthenticated_refusals_total.
		req = "unauthenticated-stream"
		s.log.Warn("unauthenticated transfer stream refused", "peer", f.Peer, "reason", f.Reason, "suppressed_since_last", f.Suppressed)
	case req == "":
		req = "unmatched-reservation" // no reservation matched the manifest
	}
	check := audit.Name(SanitizeName(string(f.Reason)))
	if check == "" {
		check = "unknown"
	}
	var tenants []cloison.TenantID
	if tenant != "" {
		tenants = []cloison.TenantID{tenant}
	}
	at := f.Time
	if at.IsZero() {
		at = time.Now()
	}
	var rec *audit.Record // set once the event is ledgered: a retry only opens the incident
	s.durably("transfer failure", req, func(ctx context.Context) error {
		if rec == nil {
			r, err := s.Append(ctx, tenant, audit.TransferVerificationFailed{Request: req, Source: "prefill", Check: check, WithheldResponses: 1})
			if err != nil {
				return err
			}
			rec = &r
		}
		id, err := s.cfg.Ledger.OpenFromDetection(ctx, s.cfg.Node, audit.Detection{Source: audit.SourceTransferFailure, Invariant: check,
			DetectedAt: at, PeriodStart: at, PeriodEnd: at, AffectedTenants: tenants,
			AffectedRequests: []cloison.RequestID{req}, AffectedResponses: 1, LedgerEvents: []int64{int64(rec.Seq)}, Model: audit.Name(s.cfg.ModelName)})
		if err != nil {
			return err
		}
		s.log.Warn("transfer refused: decode withheld, incident opened", "request", req, "tenant", tenant, "incident", id, "check", check)
		return nil
	})
}

// incidentWrites tracks the incident writes in flight, so that Close returns
// only once each is in the ledger (or Close's deadline passed). The hooks
// that start them run on the engine loop and on transfer streams, which must
// not wait on the ledger: the writes run beside them, retried.
type incidentWrites struct {
	once   sync.Once
	life   context.Context    // ends when Close gives up: retries stop
	giveUp context.CancelFunc // ends life
	wg     sync.WaitGroup

	mu     sync.Mutex
	closed bool // guarded by mu: after Close, writes run in their caller
	lost   int  // guarded by mu: writes abandoned when Close gave up
}

func (w *incidentWrites) init() {
	w.once.Do(func() { w.life, w.giveUp = context.WithCancel(context.Background()) })
}

// Retry pacing of an incident write the ledger refused (a restarting
// database, an exhausted connection pool): doubling, capped.
const (
	incidentRetryFirst = 100 * time.Millisecond
	incidentRetryMax   = 5 * time.Second
)

// durably runs write until it succeeds, retrying with backoff until Close
// gives up; write keeps its own progress (a retry does not ledger an event
// twice). Before Close it runs on a tracked goroutine; after, in the caller.
func (s *Requests) durably(what string, req cloison.RequestID, write func(context.Context) error) {
	w := &s.writes
	w.init()
	w.mu.Lock()
	closed := w.closed
	if !closed {
		w.wg.Add(1) // never once Close set closed: no Add races Close's Wait
	}
	w.mu.Unlock()
	run := func() {
		if err := s.retry(write); err != nil {
			w.mu.Lock()
			w.lost++
			w.mu.Unlock()
			s.obs.OnIncidentWriteLost()
			s.log.Error(what+": incident not durable", "request", req, "err", err)
		}
	}
	if closed {
		run()
		return
	}
	go func() {
		defer w.wg.Done()
		run()
	}()
}

func (s *Requests) retry(write func(context.Context) error) error {
	life := s.writes.life
	wait := incidentRetryFirst
	for {
		ctx, cancel := context.WithTimeout(life, 30*time.Second)
		err := write(ctx)
		cancel()
		if err == nil {
			return nil
		}
		s.log.Warn("incident write failed, retrying", "err", err, "in", wait)
		select {
		case <-life.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, incidentRetryMax)
	}
}

// ErrIncidentsPending: Close's deadline passed with incident writes not yet
// durable (each is logged and counted in cloison_incident_writes_lost_total).
var ErrIncidentsPending = errors.New("service: incident writes not durable at shutdown")

// Close waits until every incident write started so far is in the ledger,
// retrying failed writes, until ctx ends; then it stops the retries. Call it
// after the engine and the transfer server stopped (they are what report
// incidents); an incident reported after Close is written in its caller.
//
// Errors: ErrIncidentsPending (ctx ended first; the count is in the text).
func (s *Requests) Close(ctx context.Context) error {
	w := &s.writes
	w.init()
	w.mu.Lock()
	w.closed = true
	w.mu.Unlock()
	done := make(chan struct{})
	go func() { w.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		w.giveUp()
		<-done
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lost > 0 {
		return fmt.Errorf("%w: %d lost", ErrIncidentsPending, w.lost)
	}
	return nil
}
