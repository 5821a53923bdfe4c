package api

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/internal/tracing"
)

// Traces (internal/tracing has the span tree): every HTTP request is a
// server span, child of its W3C traceparent header; a gRPC call the same
// from its metadata (GRPCServer). Inside it, the request path's spans
// (service): auth (the JWT), and for a generation inference with policy
// (the OPA decision), ledger.append (each ledger write on the request
// path), and queue, prefill and decode from the engine's own timings
// (engine.Summary), plus on a decode node the engine's transfer span,
// whose context the PrefillService call carries.
// Attributes are identifiers and counts: the request id, the tenant id (as
// the access log names it), the model, token counts, codes. Never text.

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
