package api

import (
	"context"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/service"
)

// observer is the Server's service.Observer: what the request path reports
// goes to the Prometheus metrics and to the access record of the request's
// context (accesslog.go), the only two places the transport keeps it. mm
// is the series of the model the requests are served by (ForModel).
type observer struct {
	s  *Server
	mm *modelMetrics
}

// ForModel is the observer of the requests served by model name
// (service.Requests.For): the same, counting under that model_name.
func (o observer) ForModel(name string) service.Observer {
	return observer{o.s, o.s.metrics.forModel(name)}
}

func (o observer) OnTokens(ctx context.Context, prompt, completion int) {
	accessOf(ctx).setTokens(prompt, completion)
}

func (o observer) OnDenied(_ context.Context, t cloison.TenantID) {
	o.mm.policyDenied.WithLabelValues(o.s.metrics.tenant(t)).Inc()
}

func (o observer) OnTokenGap(gap time.Duration) { o.mm.itl.Observe(gap.Seconds()) }

func (o observer) OnSequenceEnd(sum engine.Summary, prefixCache bool) {
	o.mm.observe(o.s.metrics.tenant(sum.Tenant), sum, prefixCache)
}

func (o observer) OnLedgerError() { o.s.metrics.ledgerErrors.Inc() }

func (o observer) OnIsolationFailure(t cloison.TenantID, kind string) {
	o.mm.isolationFailures.WithLabelValues(o.s.metrics.tenant(t), kind).Inc()
}

func (o observer) OnTransferFailure(t cloison.TenantID) {
	m := o.s.metrics
	m.transferFailed.WithLabelValues(m.tenant(t)).Inc()
}

func (o observer) OnIncidentWriteLost() { o.s.metrics.incidentWritesLost.Inc() }
