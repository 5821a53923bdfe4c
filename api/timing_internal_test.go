package api

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// TestTimingSpans: under a request's timing record, the wrapped tracer
// times every span, explicit timestamps included, sums a repeated name,
// leaves names that are not tokens out of the header and ends with total;
// without a record it times nothing and hands back the inner span.
func TestTimingSpans(t *testing.T) {
	tr := newTimingProvider(nil).Tracer("test")
	st := &stageTimes{d: map[string]time.Duration{}}
	ctx := context.WithValue(context.Background(), timingKey{}, st)
	t0 := time.Now()
	ctx2, sp := tr.Start(ctx, "inference")
	if !sp.IsRecording() || trace.SpanFromContext(ctx2) != sp {
		t.Fatal("the timed span is not the context's, or says it does not record")
	}
	for _, d := range []time.Duration{2 * time.Millisecond, 3 * time.Millisecond} {
		_, l := tr.Start(ctx2, "ledger.append", trace.WithTimestamp(t0))
		l.End(trace.WithTimestamp(t0.Add(d)))
		l.End(trace.WithTimestamp(t0.Add(time.Hour))) // a second End adds nothing
	}
	_, q := tr.Start(ctx2, "HTTP POST", trace.WithTimestamp(t0))
	q.End(trace.WithTimestamp(t0.Add(time.Second)))
	sp.End()
	h := st.header(7 * time.Millisecond)
	if !strings.Contains(h, "ledger.append;dur=5.000") || !strings.Contains(h, "inference;dur=") || !strings.HasSuffix(h, ", total;dur=7.000") || strings.Contains(h, "HTTP") {
		t.Errorf("header %q", h)
	}
	if got := parseTiming(h); len(got) != 3 {
		t.Errorf("entries %v", got)
	}
	_, plain := tr.Start(context.Background(), "auth")
	if plain.IsRecording() {
		t.Error("a span without a timing record was wrapped")
	}
	plain.End()
}

// parseTiming splits a Server-Timing value into its names.
func parseTiming(h string) []string {
	var names []string
	for _, e := range strings.Split(h, ", ") {
		n, _, _ := strings.Cut(e, ";")
		names = append(names, n)
	}
	return names
}
