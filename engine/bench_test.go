package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
)

// benchModel is a 4-layer d=256 random llama, Q8_0.
func benchModel(b *testing.B) *loaded {
	w, err := synth.Random(synth.Config{Layers: 4, DModel: 256, Heads: 4, KVHeads: 2, FFN: 704, Vocab: 2048, Context: 4096, DType: gguf.Q8_0, Seed: 3})
	return loadWriter(b, w, err)
}

// runLoad sends conc concurrent requests (prompt 32, 32 new tokens) and
// returns generated tokens and the time to first token of each.
func runLoad(b *testing.B, r *rig, conc int, iter int) (int64, []time.Duration) {
	var wg sync.WaitGroup
	var toks atomic.Int64
	ttft := make([]time.Duration, conc)
	for i := range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			s, err := r.e.Submit(context.Background(), GenerateRequest{ID: cloison.RequestID(fmt.Sprintf("b%d-%d", iter, i)),
				Tenant: cloison.TenantID(fmt.Sprintf("t%d", i%8)), Prompt: prompt(32, i), MaxTokens: 32, IgnoreEOS: true})
			if err != nil {
				b.Error(err)
				return
			}
			for n := 0; ; n++ {
				_, err := s.Next(context.Background())
				if err != nil {
					if !isEOF(err) {
						b.Error(err)
					}
					return
				}
				if n == 0 {
					ttft[i] = time.Since(start)
				}
				toks.Add(1)
			}
		}()
	}
	wg.Wait()
	return toks.Load(), ttft
}

func tenants8(z isolation.Zeroing) []isolation.TenantConfig {
	var ts []isolation.TenantConfig
	for i := range 8 {
		ts = append(ts, isolation.TenantConfig{ID: cloison.TenantID(fmt.Sprintf("t%d", i)), Zeroing: z})
	}
	return ts
}

// BenchmarkEngine reports end-to-end generated tokens/s and the median time
// to first token at 1, 16 and 64 concurrent sequences.
func BenchmarkEngine(b *testing.B) {
	l := benchModel(b)
	for _, conc := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			r := newRig(b, l, rigConfig{pool: isolation.Config{Pages: 1024, PageTokens: 16}, tenants: tenants8(isolation.ZeroCrossTenant),
				sched: SchedulerConfig{MaxBatchTokens: 1024, MaxRunning: 64}})
			var total int64
			var all []time.Duration
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				n, ttft := runLoad(b, r, conc, i)
				total += n
				all = append(all, ttft...)
			}
			slices.Sort(all)
			b.ReportMetric(float64(total)/b.Elapsed().Seconds(), "tokens/s")
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "ttft-p50-ms")
		})
	}
}

// BenchmarkRejectOverlong measures admission of an over-long prompt: it must
// be rejected in well under a millisecond with zero pages touched.
func BenchmarkRejectOverlong(b *testing.B) {
	l := randomModel(b)
	r := newRig(b, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	p := prompt(5000, 1)
	before := r.pool.Stats()
	for i := 0; b.Loop(); i++ {
		if _, err := r.e.Submit(context.Background(), GenerateRequest{ID: cloison.RequestID(fmt.Sprint(i)), Tenant: "a", Prompt: p, MaxTokens: 10}); err == nil {
			b.Fatal("an over-long prompt was admitted")
		}
	}
	b.StopTimer()
	if after := r.pool.Stats(); after.Free != before.Free || after.Leased != 0 {
		b.Fatalf("rejections touched pages: %+v → %+v", before, after)
	}
}
