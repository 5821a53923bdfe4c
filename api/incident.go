package api

import (
	"context"
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
// hands the work to a goroutine; a ledger failure is logged and counted (the
// request itself already failed closed).
func (s *Server) RecordIncident(in engine.Incident) {
	s.metrics.incidents.WithLabelValues(string(in.Tenant), in.Kind).Inc()
	s.mu.Lock()
	dup := s.incOpen[in.Request]
	s.incOpen[in.Request] = true
	s.mu.Unlock()
	if dup {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		invariant := audit.Name(sanitizeName(in.Kind + ":" + in.Reason))
		affected := []cloison.TenantID{in.Tenant}
		if in.Owner.Tenant != "" && in.Owner.Tenant != in.Tenant {
			affected = append(affected, in.Owner.Tenant)
		}
		rec, err := s.append(ctx, in.Tenant, audit.IsolationViolation{Request: in.Request, Invariant: invariant, Page: int64(in.Page),
			Epoch: int64(in.Owner.Epoch), AffectedTenants: affected, AffectedRequests: []cloison.RequestID{in.Request}, WithheldResponses: 1})
		if err != nil {
			s.log.Error("isolation violation not ledgered", "request", in.Request, "err", err)
			return
		}
		id, err := s.cfg.Ledger.OpenFromDetection(ctx, s.cfg.Node, audit.Detection{Source: audit.SourceIsolationViolation, Invariant: invariant,
			DetectedAt: in.Time, PeriodStart: in.Time, PeriodEnd: in.Time, AffectedTenants: affected,
			AffectedRequests: []cloison.RequestID{in.Request}, AffectedResponses: 1, LedgerEvents: []int64{int64(rec.Seq)}})
		if err != nil {
			s.log.Error("incident not opened", "request", in.Request, "err", err)
			return
		}
		s.log.Warn("isolation violation: request failed closed, incident opened", "request", in.Request, "tenant", in.Tenant, "incident", id, "kind", in.Kind)
	}()
}

// RecordTransferFailure is a transfer.Receiver's OnVerificationFailed hook:
// the decode node refused a prefill node's pages (another request's or
// tenant's manifest, a digest or MAC mismatch, fewer tokens than reserved —
// the 2026 placeholder). The reservation was already discarded; this ledgers
// transfer.verification_failed and opens a Loi 25 register entry with the
// tenant and the withheld response pre-filled. Like RecordIncident it works in
// the background and logs a ledger failure.
func (s *Server) RecordTransferFailure(f transfer.Failure) {
	tenant, req := f.Lease.Tenant, f.Lease.Request
	s.metrics.TransferVerificationsFailed.WithLabelValues(string(tenant)).Inc()
	if req == "" {
		req = "unmatched-reservation" // no reservation matched the manifest
	}
	check := audit.Name(sanitizeName(string(f.Reason)))
	if check == "" {
		check = "unknown"
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rec, err := s.append(ctx, tenant, audit.TransferVerificationFailed{Request: req, Source: "prefill", Check: check, WithheldResponses: 1})
		if err != nil {
			s.log.Error("transfer failure not ledgered", "request", req, "err", err)
			return
		}
		var tenants []cloison.TenantID
		if tenant != "" {
			tenants = []cloison.TenantID{tenant}
		}
		at := f.Time
		if at.IsZero() {
			at = time.Now()
		}
		id, err := s.cfg.Ledger.OpenFromDetection(ctx, s.cfg.Node, audit.Detection{Source: audit.SourceTransferFailure, Invariant: check,
			DetectedAt: at, PeriodStart: at, PeriodEnd: at, AffectedTenants: tenants,
			AffectedRequests: []cloison.RequestID{req}, AffectedResponses: 1, LedgerEvents: []int64{int64(rec.Seq)}})
		if err != nil {
			s.log.Error("incident not opened", "request", req, "err", err)
			return
		}
		s.log.Warn("transfer refused: decode withheld, incident opened", "request", req, "tenant", tenant, "incident", id, "check", check)
	}()
}
