package api

import (
	"context"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// Traces (internal/tracing has the span tree): every HTTP request is a
// server span, child of its W3C traceparent header; a gRPC call the same
// from its metadata (GRPCServer). Inside it: auth (the JWT), and for a
// generation inference with policy (the OPA decision), ledger.append (each
// ledger write on the request path), and queue, prefill and decode from
// the engine's own timings (engine.Summary), plus on a decode node the
// engine's transfer span, whose context the PrefillService call carries.
// Attributes are identifiers and counts: the request id, the tenant id (as
// the access log names it), the model, token counts, codes. Never text.

const (
	attrKind     = attribute.Key("cloison.ledger_kind")
	attrDecision = attribute.Key("cloison.decision_id")
	attrAllowed  = attribute.Key("cloison.allowed")
)

// authenticate authenticates a bearer token within an auth span.
func (s *Server) authenticate(ctx context.Context, raw string) (tenancy.Principal, error) {
	ctx, span := s.tracer.Start(ctx, "auth")
	defer span.End()
	p, err := s.cfg.Verifier.Verify(ctx, raw)
	if err != nil {
		tracing.Fail(span, err)
		return p, err
	}
	span.SetAttributes(tracing.AttrTenant.String(string(p.Tenant)))
	return p, nil
}

// decide evaluates the policy within a policy span.
func (s *Server) decide(ctx context.Context, in policies.Input) (policies.Decision, error) {
	ctx, span := s.tracer.Start(ctx, "policy")
	defer span.End()
	dec, err := s.cfg.Decider.Decide(ctx, in)
	span.SetAttributes(attrDecision.String(dec.ID), attrAllowed.Bool(err == nil && dec.Allow))
	tracing.Fail(span, err)
	return dec, err
}

// engineSpans records the queue, prefill and decode spans of a generation
// from the engine's timings (the engine's loop serves every request at
// once: its phases are measured there and drawn here, children of the
// inference span in ctx); the phase the request ended in carries endErr.
func (s *Server) engineSpans(ctx context.Context, st *engine.Stream, endErr error) {
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

// traceHTTP is the server span of one HTTP request (the outermost
// middleware): its parent is the request's traceparent; it is named after
// the route pattern once the mux matched one, and answered with a
// traceresponse header when sampled. A 5xx marks it failed.
func (s *Server) traceHTTP(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, span := s.tracer.Start(tracing.Extract(r.Context(), r.Header), "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", r.Method)))
		defer span.End()
		tracing.ResponseHeader(w.Header(), span)
		rt := &routeOf{}
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r.WithContext(context.WithValue(ctx, routeKey{}, rt)))
		if rt.pattern != "" {
			span.SetName(rt.pattern)
			span.SetAttributes(attribute.String("http.route", rt.pattern))
		}
		status := sw.status
		if status == 0 {
			status = http.StatusOK
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if id := w.Header().Get("X-Request-Id"); id != "" {
			span.SetAttributes(tracing.AttrRequest.String(id))
		}
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	})
}

// routeOf carries the matched route pattern back up to traceHTTP (the mux
// sets it on the request it routes, a copy of traceHTTP's).
type routeOf struct{ pattern string }

type routeKey struct{}

func setRoute(ctx context.Context, pattern string) {
	if rt, _ := ctx.Value(routeKey{}).(*routeOf); rt != nil {
		rt.pattern = pattern
	}
}

// traceRequestID names the request id on the span of a gRPC call.
func traceRequestID(ctx context.Context, id cloison.RequestID) {
	trace.SpanFromContext(ctx).SetAttributes(tracing.AttrRequest.String(string(id)))
}
