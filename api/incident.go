package api

import (
	"context"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
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
