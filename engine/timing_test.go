package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloison/cloison/isolation"
)

// TestSummaryTimings checks the request phases the metrics chart (queue,
// prefill, decode, inter-token gaps) against each other on a clock that
// advances one millisecond per reading, so that every phase that happened
// has a positive length and nothing depends on real time: Submit → first
// scheduling → first token → last token, with the phases adding up to the
// time to first token and the gaps adding up to the decode time.
func TestSummaryTimings(t *testing.T) {
	var tick atomic.Int64
	base := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return base.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	l := randomModel(t)
	// Chunks of 16 tokens: a 37-token prompt takes three prefill steps.
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}},
		sched: SchedulerConfig{ChunkTokens: 16}, now: clock})
	s, err := r.e.Submit(context.Background(), GenerateRequest{ID: "r1", Tenant: "a", Prompt: prompt(37, 1), MaxTokens: 6, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	var gaps []time.Duration
	for {
		tok, err := s.Next(context.Background())
		if err != nil {
			break
		}
		if tok.ID >= 0 {
			gaps = append(gaps, tok.Gap)
		}
	}
	r.close()
	sums := r.summaries()
	if len(sums) != 1 {
		t.Fatalf("got %d summaries, want 1", len(sums))
	}
	sum := sums[0]
	if sum.Generated != 6 || len(gaps) != 6 {
		t.Fatalf("got %d generated, %d tokens, want 6", sum.Generated, len(gaps))
	}
	if sum.Queued <= 0 || sum.Prefill <= 0 || sum.Decode <= 0 {
		t.Fatalf("got queued %v, prefill %v, decode %v, want each > 0", sum.Queued, sum.Prefill, sum.Decode)
	}
	if got := sum.Queued + sum.Prefill; got != sum.FirstToken {
		t.Fatalf("got queue + prefill %v, want the time to first token %v", got, sum.FirstToken)
	}
	if gaps[0] != 0 {
		t.Fatalf("got a gap of %v before the first token, want 0", gaps[0])
	}
	var total time.Duration
	for _, g := range gaps[1:] {
		if g <= 0 {
			t.Fatalf("got gap %v, want > 0 (gaps %v)", g, gaps)
		}
		total += g
	}
	if total != sum.Decode {
		t.Fatalf("got gaps summing to %v, want the decode time %v", total, sum.Decode)
	}
	if sum.FirstToken+sum.Decode > sum.Duration {
		t.Fatalf("got first token %v + decode %v > duration %v", sum.FirstToken, sum.Decode, sum.Duration)
	}
}
