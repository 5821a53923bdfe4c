package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"
)

// Server timing (Config.ServerTiming, cloisond's --server-timing): every
// streamed (chunked) HTTP response ends with a Server-Timing trailer (W3C Server Timing's
// syntax, as a trailer) giving, in milliseconds, the time the request spent
// in each of its spans, summed by name (a request's ledger.append spans
// together): auth, admission, policy, ledger.append, queue, prefill,
// decode, inference; and total, the whole handler. It is how a benchmark
// client splits a request's time between the platform and the engine
// (cloisonctl bench serve's breakdown). The spans are the request path's
// own (service, internal/tracing), timed whether or not a tracer records
// them: the provider the server is built with is wrapped, and a span whose
// request carries a timing record adds its duration there at End. Only
// durations of the request's own stages leave the node, never another
// request's; still, it is a benchmark's switch and off by default.

// ServerTimingHeader is the trailer's name.
const ServerTimingHeader = "Server-Timing"

type timingKey struct{}

// stageTimes is one request's time per span name.
type stageTimes struct {
	mu    sync.Mutex
	order []string
	d     map[string]time.Duration
}

func (t *stageTimes) add(name string, d time.Duration) {
	t.mu.Lock()
	if _, ok := t.d[name]; !ok {
		t.order = append(t.order, name)
	}
	t.d[name] += max(d, 0)
	t.mu.Unlock()
}

// header is the Server-Timing value: name;dur=MS for every span name (in
// the order their first span ended; names not HTTP tokens are left out),
// then total.
func (t *stageTimes) header(total time.Duration) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var b strings.Builder
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', 3, 64) }
	for _, n := range t.order {
		if !timingToken(n) {
			continue
		}
		b.WriteString(n + ";dur=" + ms(t.d[n]) + ", ")
	}
	b.WriteString("total;dur=" + ms(total))
	return b.String()
}

// timingToken says whether a span name is a token Server-Timing may carry.
func timingToken(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// serverTiming is the outermost middleware when Config.ServerTiming is on:
// it gives the request a timing record and sets the trailer once the
// handler returned.
func (s *Server) serverTiming(next http.Handler) http.Handler {
	if !s.cfg.ServerTiming {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		st := &stageTimes{d: map[string]time.Duration{}}
		start := time.Now()
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), timingKey{}, st)))
		// Undeclared (a handler may set its own Trailer header, as the
		// receipts' is): the prefix makes it a trailer all the same.
		w.Header().Set(http.TrailerPrefix+ServerTimingHeader, st.header(time.Since(start)))
	})
}

// timingProvider wraps the server's tracer provider so that the spans of a
// request with a timing record are timed (nil inner: a no-op provider).
type timingProvider struct {
	embedded.TracerProvider
	inner trace.TracerProvider
}

func newTimingProvider(inner trace.TracerProvider) trace.TracerProvider {
	if inner == nil {
		inner = noop.NewTracerProvider()
	}
	return timingProvider{inner: inner}
}

func (p timingProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return timingTracer{inner: p.inner.Tracer(name, opts...)}
}

type timingTracer struct {
	embedded.Tracer
	inner trace.Tracer
}

func (t timingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	st, _ := ctx.Value(timingKey{}).(*stageTimes)
	ctx, sp := t.inner.Start(ctx, name, opts...)
	if st == nil {
		return ctx, sp
	}
	sc := trace.NewSpanStartConfig(opts...)
	start := sc.Timestamp()
	if start.IsZero() {
		start = time.Now()
	}
	ts := &timedSpan{Span: sp, name: name, start: start, st: st}
	return trace.ContextWithSpan(ctx, ts), ts
}

// timedSpan adds its duration to the request's record at End. It says it
// records (the engine's phases are drawn only under a recording span,
// service's engineSpans); what it records is the inner span's business.
type timedSpan struct {
	trace.Span
	name  string
	start time.Time
	st    *stageTimes
	once  sync.Once
}

func (s *timedSpan) IsRecording() bool { return true }

func (s *timedSpan) End(opts ...trace.SpanEndOption) {
	s.once.Do(func() {
		ec := trace.NewSpanEndConfig(opts...)
		end := ec.Timestamp()
		if end.IsZero() {
			end = time.Now()
		}
		s.st.add(s.name, end.Sub(s.start))
	})
	s.Span.End(opts...)
}
