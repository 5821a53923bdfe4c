//go:build faults

package engine

import (
	"testing"
	"time"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// BenchmarkDefenceCost reports the throughput with every defence on (fill
// checks, arena tag checks, cross-tenant zeroing) divided by the throughput
// with all of them off, measured in alternating rounds of 16 concurrent
// requests of 8 tenants on the same machine. Aim: ≥ 0.97.
func BenchmarkDefenceCost(b *testing.B) {
	w, err := synth.Random(synth.Config{Layers: 4, DModel: 256, Heads: 4, KVHeads: 2, FFN: 704, Vocab: 2048, Context: 4096, DType: gguf.Q8_0, Seed: 3})
	if err != nil {
		b.Fatal(err)
	}
	on := loadWriterOpts(b, w, nil, kernels.Options{})
	w, _ = synth.Random(synth.Config{Layers: 4, DModel: 256, Heads: 4, KVHeads: 2, FFN: 704, Vocab: 2048, Context: 4096, DType: gguf.Q8_0, Seed: 3})
	off := loadWriterOpts(b, w, nil, kernels.Options{Unsafe: kernels.Unsafe{SkipOwnershipChecks: true}})
	// A pool small enough that pages change tenant all the time.
	rOn := newRig(b, on, rigConfig{pool: isolation.Config{Pages: 40, PageTokens: 16, DefaultZeroing: isolation.ZeroCrossTenant},
		tenants: tenants8(isolation.ZeroCrossTenant), sched: SchedulerConfig{MaxBatchTokens: 1024}})
	rOff := newRig(b, off, rigConfig{pool: isolation.Config{Pages: 40, PageTokens: 16, DefaultZeroing: isolation.ZeroNever,
		Unsafe: isolation.Unsafe{SkipFillCheck: true, SkipScrub: true}}, tenants: tenants8(isolation.ZeroNever), sched: SchedulerConfig{MaxBatchTokens: 1024}})
	var tOn, tOff time.Duration
	var nOn, nOff int64
	for i := 0; b.Loop(); i++ {
		start := time.Now()
		n, _ := runLoad(b, rOn, 16, 2*i)
		tOn += time.Since(start)
		nOn += n
		start = time.Now()
		n, _ = runLoad(b, rOff, 16, 2*i+1)
		tOff += time.Since(start)
		nOff += n
	}
	b.ReportMetric(float64(nOn)/tOn.Seconds(), "tokens/s-on")
	b.ReportMetric(float64(nOff)/tOff.Seconds(), "tokens/s-off")
	b.ReportMetric((float64(nOn)/tOn.Seconds())/(float64(nOff)/tOff.Seconds()), "on/off")
	if s := rOn.pool.Stats(); s.Scrubbed == 0 {
		b.Fatal("no page was scrubbed: the benchmark did not exercise cross-tenant zeroing")
	}
}
