package api

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"pgregory.net/rapid"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
)

// TestTenantLabelsBounded: whatever tenants arrive, at most max of them (the
// first seen) or exactly the configured ones get a label of their own, the
// rest are "other", and a tenant's label never changes (counters stay
// monotonic); every new label is announced once, for its zero series.
func TestTenantLabelsBounded(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		max := rapid.IntRange(1, 5).Draw(t, "max")
		ids := rapid.SliceOf(rapid.SampledFrom([]cloison.TenantID{"a", "b", "c", "d", "e", "f", "g", "other"})).Draw(t, "tenants")
		var listed []cloison.TenantID
		if rapid.Bool().Draw(t, "list") {
			listed = rapid.SliceOfDistinct(rapid.SampledFrom([]cloison.TenantID{"a", "b", "c"}), func(id cloison.TenantID) cloison.TenantID { return id }).Draw(t, "listed")
		}
		announced := map[string]int{}
		l := newTenantLabels(MetricsConfig{Tenants: listed, MaxTenants: max}, func(s string) { announced[s]++ })
		first := map[cloison.TenantID]string{}
		var order []cloison.TenantID
		for _, id := range ids {
			got := l.label(id)
			if prev, seen := first[id]; seen && prev != got {
				t.Fatalf("tenant %s: got label %q, had %q", id, got, prev)
			}
			if _, seen := first[id]; !seen {
				first[id] = got
				order = append(order, id)
			}
		}
		own := map[string]bool{}
		for id, lab := range first {
			if lab != OtherTenant {
				if lab != string(id) {
					t.Fatalf("tenant %s: got label %q, want its id or %q", id, lab, OtherTenant)
				}
				own[lab] = true
			}
		}
		if len(listed) > 0 {
			for id, lab := range first {
				want := OtherTenant
				for _, x := range listed {
					if x == id {
						want = string(id)
					}
				}
				if lab != want {
					t.Fatalf("tenant %s with list %v: got %q, want %q", id, listed, lab, want)
				}
			}
		} else {
			for i, id := range order {
				if i < max && first[id] != string(id) {
					t.Fatalf("tenant %s, seen %d of max %d: got %q, want its own label", id, i+1, max, first[id])
				}
			}
			if len(own) > max {
				t.Fatalf("got %d own labels, want at most %d", len(own), max)
			}
		}
		for lab, n := range announced {
			if n != 1 {
				t.Fatalf("label %q announced %d times, want once", lab, n)
			}
		}
	})
}

// TestObserveSummary: one summary fills the vLLM-style series; the
// prefix-cache counters move only with the cache on.
func TestObserveSummary(t *testing.T) {
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprintf("prefix cache %v", on), func(t *testing.T) {
			m := newMetrics(&Server{cfg: Config{ModelName: "m"}})
			m.observe(engine.Summary{Tenant: "a", State: engine.Finished, Finish: engine.FinishLength, Prompt: 40, Cached: 32, Generated: 7,
				Preemptions: 2, FirstToken: 30 * time.Millisecond, Queued: 10 * time.Millisecond, Prefill: 20 * time.Millisecond,
				Decode: 60 * time.Millisecond, Duration: 95 * time.Millisecond}, on)
			m.observe(engine.Summary{Tenant: "b", State: engine.Aborted, Code: cloison.CodeCanceled, Prompt: 5, Duration: time.Millisecond}, on)
			queries, hits := 0.0, 0.0
			if on {
				queries, hits = 40, 32
			}
			for _, c := range []struct {
				name      string
				got, want float64
			}{
				{"query tokens", value(t, m.prefixQueries), queries},
				{"hit tokens", value(t, m.prefixHits), hits},
				{"preemptions", value(t, m.preemptions), 2},
				{"success", value(t, m.success.WithLabelValues("a", "length")), 1},
				{"failure", value(t, m.failed.WithLabelValues("b", "aborted", string(cloison.CodeCanceled))), 1},
				{"prompt tokens", value(t, m.promptToks.WithLabelValues("a")) + value(t, m.promptToks.WithLabelValues("b")), 45},
			} {
				if c.got != c.want {
					t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
				}
			}
			// The request that never ran has no queue, prefill or decode time.
			for _, c := range []struct {
				name string
				h    prometheus.Histogram
				n    float64
			}{{"time to first token", m.ttft, 1}, {"queue", m.queue, 1}, {"prefill", m.prefill, 1}, {"decode", m.decode, 1},
				{"e2e", m.e2e, 2}, {"prompt tokens", m.reqPrompt, 2}} {
				if got := value(t, c.h); got != c.n {
					t.Errorf("%s: got %v observations, want %v", c.name, got, c.n)
				}
			}
		})
	}
}

// value is a counter's value, or a histogram's observation count (a fresh
// registry gathers it: the Metrics' own would read an engine).
func value(t *testing.T, c prometheus.Collector) float64 {
	t.Helper()
	r := prometheus.NewRegistry()
	r.MustRegister(c)
	fams, err := r.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var v float64
	for _, f := range fams {
		for _, s := range f.GetMetric() {
			v += s.GetCounter().GetValue() + float64(s.GetHistogram().GetSampleCount())
		}
	}
	return v
}
