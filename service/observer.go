package service

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/internal/tracing"
)

// Observer is what the request path reports to the transport's metrics and
// access log. The service counts nothing itself and knows no log line: the
// transport implements Observer (api's metrics and access record) and the
// service calls it at the points below, so that a request read in this
// package never reaches into a transport's context or registry.
//
// Every method is called on the request's goroutine or on the goroutine of
// the hook that reports (an incident, a transfer); none may block.
type Observer interface {
	// OnTokens reports the request's token counts to the access record
	// that ctx carries: the prompt once the model is known (completion 0),
	// then prompt and completion once the engine is done.
	OnTokens(ctx context.Context, prompt, completion int)
	// OnDenied: the policy decision denied tenant t's request (or could
	// not be made).
	OnDenied(ctx context.Context, t cloison.TenantID)
	// OnTokenGap is the time between two consecutive tokens of one
	// sequence (inter-token latency).
	OnTokenGap(gap time.Duration)
	// OnSequenceEnd is called once per sequence that entered the engine,
	// with its summary; prefixCache says whether the engine looked its
	// prompt up in the prefix cache.
	OnSequenceEnd(sum engine.Summary, prefixCache bool)
	// OnLedgerError: a ledger write failed (the request it belonged to is
	// refused with ErrLedgerUnavailable, an incident write retried).
	OnLedgerError()
	// OnIsolationFailure: an isolation check failed tenant t's request
	// closed; kind is engine.Incident's.
	OnIsolationFailure(t cloison.TenantID, kind string)
	// OnTransferFailure: a prefill-to-decode transfer for tenant t ("" if
	// none matched) was refused by verification.
	OnTransferFailure(t cloison.TenantID)
	// OnIncidentWriteLost: an incident write was abandoned at Close.
	OnIncidentWriteLost()
}

// NopObserver reports nothing; embed it to implement only some of Observer.
type NopObserver struct{}

func (NopObserver) OnTokens(context.Context, int, int)          {}
func (NopObserver) OnDenied(context.Context, cloison.TenantID)  {}
func (NopObserver) OnTokenGap(time.Duration)                    {}
func (NopObserver) OnSequenceEnd(engine.Summary, bool)          {}
func (NopObserver) OnLedgerError()                              {}
func (NopObserver) OnIsolationFailure(cloison.TenantID, string) {}
func (NopObserver) OnTransferFailure(cloison.TenantID)          {}
func (NopObserver) OnIncidentWriteLost()                        {}

// Traces (internal/tracing has the span tree): within the transport's
// server span, a generation is an inference span holding policy (the OPA
// decision), ledger.append (each ledger write on the request path), and
// queue, prefill and decode from the engine's own timings (engineSpans).
// Attributes are identifiers and counts, never text.

// engineSpans records the queue, prefill and decode spans of a generation
// from the engine's timings (the engine's loop serves every request at
// once: its phases are measured there and drawn here, children of the
// inference span in ctx); the phase the request ended in carries endErr.
func (s *Requests) engineSpans(ctx context.Context, st *engine.Stream, endErr error) {
	parent := trace.SpanFromContext(ctx)
	sum, _ := st.Summary()
	parent.SetAttributes(tracing.AttrCompletion.Int(sum.Generated), attribute.Int("cloison.cached_tokens", sum.Cached))
	if !parent.IsRecording() || sum.Started.IsZero() {
		return
	}
	t0 := sum.Started
	end := t0.Add(sum.Duration)
	type phase struct {
		name       string
		start, end time.Time
	}
	var phases []phase
	queued := t0.Add(sum.Queued)
	if sum.Queued <= 0 {
		queued = end // never scheduled: it waited until it ended
	}
	phases = append(phases, phase{"queue", t0, queued})
	if sum.Queued > 0 {
		first := end
		if sum.FirstToken > 0 {
			first = t0.Add(sum.FirstToken)
		}
		phases = append(phases, phase{"prefill", queued, first})
		if sum.FirstToken > 0 {
			phases = append(phases, phase{"decode", first, end})
		}
	}
	for i, ph := range phases {
		_, sp := s.tracer.Start(ctx, ph.name, trace.WithTimestamp(ph.start))
		if i == len(phases)-1 {
			tracing.Fail(sp, endErr)
		}
		if ph.name == "decode" {
			sp.SetAttributes(tracing.AttrCompletion.Int(sum.Generated))
		}
		sp.End(trace.WithTimestamp(ph.end))
	}
}
