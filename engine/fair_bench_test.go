package engine

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// BenchmarkFairShare measures what a flooding co-tenant costs another
// tenant: tenant b sends single requests one after the other (prompt 64,
// 4 new tokens) and its time to first token is measured alone, then while
// tenant a keeps FAIR_FLOOD (16) streams of long prompts (1,024 tokens, 64
// new tokens) in flight. It reports b's TTFT p50 and p99 in both phases
// and their ratios (the target: p50 ≤ 1.5×, p99 ≤ 2× of alone), a's
// generated tokens/s under the flood, and b's wait counted in the tokens
// the engine computed meanwhile (-tok: what the scheduler decides, which
// other processes on the machine do not move) and in the process's CPU
// time (-cpu-ms: moved by them far less than the wall clock on a shared
// machine; both phases count the same threads, so its ratio compares).
// FAIR_REQUESTS (40) sets b's
// requests per phase, FAIR_BATCH (512) the step budget, FAIR_CONTENDED
// the step budget while both tenants are active (SchedulerConfig.
// ContendedBatchTokens: unset, its default; "off", FAIR_BATCH), FAIR_SPAN
// its SchedulerConfig.ContextSpan (unset: the model's). (n>1
// choices reach the engine as that many requests: more streams.) A
// benchmark, not a test: run it with -benchtime 1x (make bench-fair).
func BenchmarkFairShare(b *testing.B) {
	flood := envInt("FAIR_FLOOD", 16)
	nb := envInt("FAIR_REQUESTS", 40)
	batch := envInt("FAIR_BATCH", 512)
	contended := envInt("FAIR_CONTENDED", 0)
	if os.Getenv("FAIR_CONTENDED") == "off" {
		contended = -1
	}
	l := benchModel(b)
	work := &workArena{}
	r := newRig(b, l, rigConfig{pool: isolation.Config{Pages: 4096, PageTokens: 16},
		tenants: []isolation.TenantConfig{{ID: "a"}, {ID: "b"}},
		sched:   SchedulerConfig{MaxBatchTokens: batch, ChunkTokens: min(256, batch), MaxRunning: 64, ContendedBatchTokens: contended, ContextSpan: float64(envInt("FAIR_SPAN", 0))},
		arena:   func(a kernels.Arena) kernels.Arena { work.Arena = a; return work }})
	for i := 0; b.Loop(); i++ {
		// Warm the model's scratch buffers at the largest step size.
		drive(b, r, "a", fmt.Sprintf("w%d", i), prompt(1024, 99), 1)
		alone, aloneWork, aloneCPU := tenantTTFT(b, r, work, fmt.Sprintf("alone%d", i), nb)
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var aToks atomic.Int64
		var started sync.WaitGroup
		started.Add(flood)
		for c := range flood {
			wg.Add(1)
			go func() {
				defer wg.Done()
				first := true
				for k := 0; ctx.Err() == nil; k++ {
					s, err := r.e.Submit(ctx, GenerateRequest{ID: cloison.RequestID(fmt.Sprintf("a%d-%d-%d", i, c, k)), Tenant: "a",
						Prompt: prompt(1024, c*1000+k), MaxTokens: 64, IgnoreEOS: true})
					if err != nil {
						break
					}
					for {
						if _, err := s.Next(ctx); err != nil {
							break
						}
						if first {
							started.Done()
							first = false
						}
						aToks.Add(1)
					}
				}
				if first {
					started.Done()
				}
			}()
		}
		started.Wait() // every stream of a has produced a token
		t0 := time.Now()
		n0 := aToks.Load()
		flooded, floodWork, floodCPU := tenantTTFT(b, r, work, fmt.Sprintf("flood%d", i), nb)
		aRate := float64(aToks.Load()-n0) / time.Since(t0).Seconds()
		cancel()
		wg.Wait()
		pa, pf := pct(alone, 50), pct(flooded, 50)
		qa, qf := pct(alone, 99), pct(flooded, 99)
		b.ReportMetric(ms(pa), "b-alone-p50-ms")
		b.ReportMetric(ms(qa), "b-alone-p99-ms")
		b.ReportMetric(ms(pf), "b-flood-p50-ms")
		b.ReportMetric(ms(qf), "b-flood-p99-ms")
		b.ReportMetric(float64(pf)/float64(pa), "p50-ratio")
		b.ReportMetric(float64(qf)/float64(qa), "p99-ratio")
		b.ReportMetric(aRate, "a-tokens/s")
		b.ReportMetric(float64(pctInt(aloneWork, 50)), "b-alone-p50-tok")
		b.ReportMetric(float64(pctInt(floodWork, 50)), "b-flood-p50-tok")
		b.ReportMetric(float64(pctInt(floodWork, 99)), "b-flood-p99-tok")
		b.ReportMetric(ms(pct(aloneCPU, 50)), "b-alone-p50-cpu-ms")
		b.ReportMetric(ms(pct(aloneCPU, 99)), "b-alone-p99-cpu-ms")
		b.ReportMetric(ms(pct(floodCPU, 50)), "b-flood-p50-cpu-ms")
		b.ReportMetric(ms(pct(floodCPU, 99)), "b-flood-p99-cpu-ms")
	}
}

// tenantTTFT sends n requests of tenant b one after the other and returns
// each one's time to first token, the tokens the engine computed meanwhile
// and the CPU time the process used meanwhile (the same delay in work,
// which other processes on a shared machine move far less than the wall
// clock's).
func tenantTTFT(b *testing.B, r *rig, work *workArena, tag string, n int) ([]time.Duration, []int64, []time.Duration) {
	out := make([]time.Duration, 0, n)
	toks := make([]int64, 0, n)
	cpu := make([]time.Duration, 0, n)
	for k := range n {
		start := time.Now()
		c0 := cpuTime()
		w0 := work.tokens.Load()
		s, err := r.e.Submit(context.Background(), GenerateRequest{ID: cloison.RequestID(fmt.Sprintf("b-%s-%d", tag, k)), Tenant: "b",
			Prompt: prompt(64, 5000+k), MaxTokens: 4, IgnoreEOS: true})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Next(context.Background()); err != nil {
			b.Fatal(err)
		}
		out = append(out, time.Since(start))
		cpu = append(cpu, cpuTime()-c0)
		toks = append(toks, work.tokens.Load()-w0)
		if _, _, err := collect(b, s); err != nil {
			b.Fatal(err)
		}
	}
	return out, toks, cpu
}

// cpuTime is the user and system time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// workArena counts the tokens each step writes (layer 0's KV rows).
type workArena struct {
	kernels.Arena
	tokens atomic.Int64
}

func (w *workArena) WriteKV(layer int, k, v kernels.Tensor, spans []kernels.Span) error {
	if layer == 0 {
		for _, s := range spans {
			w.tokens.Add(int64(s.N))
		}
	}
	return w.Arena.WriteKV(layer, k, v, spans)
}

func pctInt(d []int64, p int) int64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func drive(b *testing.B, r *rig, tenant cloison.TenantID, id string, p []int32, max int) {
	s, err := r.e.Submit(context.Background(), GenerateRequest{ID: cloison.RequestID(id), Tenant: tenant, Prompt: p, MaxTokens: max, IgnoreEOS: true})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := collect(b, s); err != nil {
		b.Fatal(err)
	}
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// BenchmarkFairShareSteps is BenchmarkFairShare's scenario on the scheduler
// alone, without a model: tenant a keeps 16 requests (prompt 1,024, 64 new
// tokens) in flight and tenant b sends one request (prompt 64, 4 new
// tokens) at a time, a few steps after the last one ended. b's time to
// first token is counted in the tokens of the steps up to and including
// the one that samples it (one step of 64 when b is alone), and again with
// the whole step before it added (-inflight: the engine's wall-clock time
// adds the part of the step in flight when b arrives, which cannot be
// interrupted). a's work is reported as the tokens of its steps per step
// (a-tok/step) while b comes and goes. The figures do not depend on the
// machine: they are the scheduler's decision. contended=off runs with
// ContendedBatchTokens at MaxBatchTokens (the step's length not bounded
// under contention).
func BenchmarkFairShareSteps(b *testing.B) {
	for _, batch := range []int{512, 128, 64} {
		for _, contended := range []int{0, -1} {
			name := fmt.Sprintf("batch=%d", batch)
			if contended < 0 {
				name += "/contended=off"
			}
			b.Run(name, func(b *testing.B) {
				var ttft, inflight []int
				var perStep float64
				for b.Loop() {
					ttft, inflight, perStep = floodSteps(b, batch, contended)
				}
				slices.Sort(ttft)
				slices.Sort(inflight)
				b.ReportMetric(float64(ttft[len(ttft)/2]), "b-flood-p50-tok")
				b.ReportMetric(float64(ttft[len(ttft)*99/100]), "b-flood-p99-tok")
				b.ReportMetric(float64(ttft[len(ttft)/2])/64, "p50-ratio")
				b.ReportMetric(float64(ttft[len(ttft)*99/100])/64, "p99-ratio")
				b.ReportMetric(float64(inflight[len(inflight)/2])/64, "p50-inflight-ratio")
				b.ReportMetric(float64(inflight[len(inflight)*99/100])/64, "p99-inflight-ratio")
				b.ReportMetric(perStep, "a-tok/step")
			})
		}
	}
}

func floodSteps(b *testing.B, batch, contended int) (ttft, inflight []int, aPerStep float64) {
	pool, err := isolation.NewPool(isolation.Config{Pages: 4096, PageTokens: 16})
	if err != nil {
		b.Fatal(err)
	}
	for _, tn := range []cloison.TenantID{"a", "b"} {
		if err := pool.AddTenant(isolation.TenantConfig{ID: tn}); err != nil {
			b.Fatal(err)
		}
	}
	s := NewScheduler(pool, SchedulerConfig{MaxBatchTokens: batch, ChunkTokens: min(256, batch), MaxRunning: 64, ContendedBatchTokens: contended})
	adm := NewAdmission(AdmissionConfig{ServedContext: 4096 * 16, Vocab: 1000, Pool: pool})
	ids := 0
	submit := func(tn cloison.TenantID, prompt, max int) cloison.RequestID {
		ids++
		id := cloison.RequestID(fmt.Sprintf("%s%d", tn, ids))
		tk, err := adm.Admit(Request{ID: id, Tenant: tn, Prompt: make([]int32, prompt), MaxTokens: max})
		if err == nil {
			err = s.Enqueue(tk)
		}
		if err != nil {
			b.Fatal(err)
		}
		return id
	}
	for range 16 {
		submit("a", 1024, 64)
	}
	var bID cloison.RequestID
	waited, gap, prev := 0, 0, 0
	aToks, steps := 0, 0
	for step := range 6000 {
		if bID == "" && step >= 300 { // a's streams have spread out
			if gap == 0 {
				bID, waited, gap = submit("b", 64, 4), 0, 1+step%7
			} else {
				gap--
			}
		}
		rd := s.Ready()
		var res []Result
		n, first := 0, false
		for _, it := range rd.Batch {
			n += len(it.Tokens)
			if it.Tenant == "a" && step >= 300 {
				aToks += len(it.Tokens)
			}
			if it.Logits {
				res = append(res, Result{ID: it.ID, Token: 7})
				first = first || it.ID == bID && waited >= 0
			}
		}
		if step >= 300 {
			steps++
		}
		if bID != "" && waited >= 0 {
			waited += n
			if first {
				ttft = append(ttft, waited)
				inflight = append(inflight, waited+prev)
				waited = -1
			}
		}
		prev = n
		for _, ev := range s.Advance(rd, res) {
			switch {
			case ev.ID == bID:
				bID = ""
			case ev.Tenant == "a" && ev.State == Finished:
				submit("a", 1024, 64)
			}
		}
	}
	return ttft, inflight, float64(aToks) / float64(steps)
}
