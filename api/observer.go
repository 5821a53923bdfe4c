package api

import (
	"context"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
)

// observer is the Server's service.Observer: what the request path reports
// goes to the Prometheus metrics and to the access record of the request's
// context (accesslog.go), the only two places the transport keeps it.
type observer struct{ s *Server }

func (o observer) OnTokens(ctx context.Context, prompt, completion int) {
	accessOf(ctx).setTokens(prompt, completion)
}

func (o observer) OnDenied(_ context.Context, t cloison.TenantID) {
	m := o.s.metrics
	m.policyDenied.WithLabelValues(m.tenant(t)).Inc()
}

func (o observer) OnTokenGap(gap time.Duration) { o.s.metrics.itl.Observe(gap.Seconds()) }

func (o observer) OnSequenceEnd(sum engine.Summary, prefixCache bool) {
	o.s.metrics.observe(sum, prefixCache)
}

func (o observer) OnLedgerError() { o.s.metrics.ledgerErrors.Inc() }

func (o observer) OnIsolationFailure(t cloison.TenantID, kind string) {
	m := o.s.metrics
	m.isolationFailures.WithLabelValues(m.tenant(t), kind).Inc()
}

func (o observer) OnTransferFailure(t cloison.TenantID) {
	m := o.s.metrics
	m.transferFailed.WithLabelValues(m.tenant(t)).Inc()
}

func (o observer) OnIncidentWriteLost() { o.s.metrics.incidentWritesLost.Inc() }
