package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/spf13/pflag"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/node/prefill"
)

// engineOptions is `bench serve --engine MODEL.gguf`: the engine alone, in
// this process, built as cloisond builds its engine (node.New) from the
// same flags with the same defaults — the model on the backend with
// --threads, a KV pool of --kv-pages pages of --page-tokens in --kv-type,
// the capacity attestation, the scheduler's step budget, running bound,
// chunk, contended bound and prefix cache — and no HTTP, no JWT, no policy,
// no ledger. Every tenant of the workload gets the partition cloisond's
// development tenant gets (shared tier, cross-tenant zeroing, a cap of
// 1,024 pages). The same request generator, arrivals and metrics drive it
// through Engine.Submit and Stream.Next, so a run against cloisond and one
// against the engine alone on the same flags compare: their ratio is the
// platform's efficiency (scripts/bench-overhead.sh).
type engineOptions struct {
	path, backend, kvType, zeroing                        string
	threads, kvPages, pageTokens, servedContext, attestK  int
	maxBatchTokens, maxRunning, chunkTokens, contendedMax int
	prefixCache                                           bool
}

// engineFlags are the flags that mean something only with --engine.
var engineFlags = []string{"backend", "threads", "kv-pages", "page-tokens", "kv-type", "zeroing", "served-context", "attest-k",
	"max-batch-tokens", "max-running", "chunk-tokens", "contended-batch-tokens", "prefix-cache"}

// flags registers them with cloisond's defaults.
func (o *engineOptions) flags(f *pflag.FlagSet) {
	f.StringVar(&o.path, "engine", "", "measure the engine alone, in process, on this GGUF (no HTTP, auth, policy or ledger), built as cloisond builds it from the flags below")
	f.StringVar(&o.backend, "backend", "cpu", "with --engine: compute backend (cloisond's --backend)")
	f.IntVar(&o.threads, "threads", 0, "with --engine: compute threads (0: all cores; cloisond's --threads)")
	f.IntVar(&o.kvPages, "kv-pages", 4096, "with --engine: KV pool pages (cloisond's --kv-pages)")
	f.IntVar(&o.pageTokens, "page-tokens", 16, "with --engine: token slots per KV page (cloisond's --page-tokens)")
	f.StringVar(&o.kvType, "kv-type", "f32", "with --engine: KV element type, f32 or f16 (cloisond's --kv-type)")
	f.StringVar(&o.zeroing, "zeroing", "cross-tenant", "with --engine: default KV zeroing (cloisond's --zeroing)")
	f.IntVar(&o.servedContext, "served-context", 0, "with --engine: served context (0: the model's; cloisond's --served-context)")
	f.IntVar(&o.attestK, "attest-k", 1, "with --engine: the pool must hold k requests of the served context (cloisond's --attest-k)")
	f.IntVar(&o.maxBatchTokens, "max-batch-tokens", 512, "with --engine: tokens per engine step (cloisond's --max-batch-tokens)")
	f.IntVar(&o.maxRunning, "max-running", 64, "with --engine: sequences holding KV leases at once (cloisond's --max-running)")
	f.IntVar(&o.chunkTokens, "chunk-tokens", 256, "with --engine: prefill chunk per sequence per step (cloisond's --chunk-tokens)")
	f.IntVar(&o.contendedMax, "contended-batch-tokens", 32, "with --engine: a step's bound under contention (cloisond's --contended-batch-tokens)")
	f.BoolVar(&o.prefixCache, "prefix-cache", true, "with --engine: per-tenant prefix cache (cloisond's --prefix-cache)")
}

// check refuses engine flags given without --engine: they would be
// silently ignored against a server.
func (o *engineOptions) check(f *pflag.FlagSet) error {
	if o.path != "" {
		return nil
	}
	for _, n := range engineFlags {
		if f.Changed(n) {
			return fmt.Errorf("--%s applies to the engine alone: give --engine MODEL.gguf (against a server, set it on the server)", n)
		}
	}
	return nil
}

func (o engineOptions) String() string {
	return fmt.Sprintf("%s on %s, %d threads, KV %s in %d pages of %d, max-batch-tokens %d, max-running %d, chunk %d, contended %d, prefix cache %v",
		o.path, o.backend, o.threads, o.kvType, o.kvPages, o.pageTokens, o.maxBatchTokens, o.maxRunning, o.chunkTokens, o.contendedMax, o.prefixCache)
}

// engineTarget is the engine alone, running until close.
type engineTarget struct {
	inst *prefill.Instance
	eng  *engine.Engine
	stop context.CancelFunc
	done chan error
	seq  atomic.Int64
}

// devPartition is cloisond's development tenant's partition (cmd/cloisond
// devTenant): shared tier, cross-tenant zeroing, 1,024 pages.
func devPartition(id cloison.TenantID) isolation.TenantConfig {
	return isolation.TenantConfig{ID: id, Tier: isolation.TierShared, Zeroing: isolation.ZeroCrossTenant, Cap: 1024}
}

// open loads the model and starts the engine with a partition per tenant.
func (o engineOptions) open(_ context.Context, tenants []serveTenant) (_ *engineTarget, err error) {
	kv, err := kernels.ParseKVType(o.kvType)
	if err != nil {
		return nil, fmt.Errorf("--kv-type: %w", err)
	}
	zeroing, err := isolation.ParseZeroing(o.zeroing)
	if err != nil {
		return nil, fmt.Errorf("--zeroing: %w", err)
	}
	mf := prefill.ModelFile{Path: o.path, Backend: o.backend, Options: kernels.Options{Threads: o.threads}}
	inst, err := mf.Load(mf.Options)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			inst.Close()
		}
	}()
	capacity := prefill.Capacity{Pool: isolation.Config{Pages: o.kvPages, PageTokens: o.pageTokens, DefaultZeroing: zeroing},
		ServedContext: o.servedContext, K: o.attestK, KV: kv}
	pool, err := isolation.NewPool(capacity.Pool)
	if err != nil {
		return nil, err
	}
	for _, t := range tenants {
		if err := pool.AddTenant(devPartition(cloison.TenantID(t.Name))); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", t.Name, err)
		}
	}
	att, err := capacity.Attest(inst.Model.Model, nil)
	if err != nil {
		return nil, err
	}
	arena, err := inst.Backend.NewArena(inst.Model.Model.ArenaConfig(o.kvPages, o.pageTokens, kv))
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(engine.Config{Model: inst.Model.Model, Tokenizer: inst.Tokenizer, Pool: pool, Arena: arena, Attestation: att,
		Scheduler: engine.SchedulerConfig{MaxBatchTokens: o.maxBatchTokens, MaxRunning: o.maxRunning, ChunkTokens: o.chunkTokens,
			ContendedBatchTokens: o.contendedMax, PrefixCache: o.prefixCache}})
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	t := &engineTarget{inst: inst, eng: eng, stop: stop, done: make(chan error, 1)}
	go func() { t.done <- eng.Run(ctx) }()
	return t, nil
}

// close stops the engine and frees the model.
func (e *engineTarget) close() error {
	e.stop()
	err := <-e.done
	e.inst.Close()
	return err
}

// send submits one request as cloisond's /v1/completions hands it to the
// engine (greedy, ignore_eos and min_tokens when enforced) and measures it
// as sendStream does: TTFT at the first token with text, ITL between
// tokens with text, the output count from the engine's summary (the
// server's usage); Stages the engine's queue, prefill and decode times.
func (e *engineTarget) send(ctx context.Context, c serveConfig, t serveTenant, p servePlan, enforce bool) reqResult {
	r := reqResult{Tenant: t.Name, Input: len(p.prompt), Wanted: p.output}
	prompt := make([]int32, len(p.prompt))
	for i, id := range p.prompt {
		prompt[i] = int32(id)
	}
	q := engine.GenerateRequest{ID: cloison.RequestID(fmt.Sprintf("bench-%d", e.seq.Add(1))), Tenant: cloison.TenantID(t.Name),
		Prompt: prompt, MaxTokens: p.output}
	if enforce {
		q.IgnoreEOS, q.MinTokens = true, p.output
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	start := time.Now()
	st, err := e.eng.Submit(ctx, q)
	if err != nil {
		r.Err = "engine: " + err.Error()
		return r
	}
	var last time.Time
	chunks := 0
	for {
		tok, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			st.Cancel()
			r.Err = "engine: " + err.Error()
			return r
		}
		if tok.Text == "" {
			continue
		}
		now := time.Now()
		if chunks == 0 {
			r.TTFT = now.Sub(start)
		} else {
			r.ITL = append(r.ITL, now.Sub(last))
		}
		last = now
		chunks++
	}
	r.E2E = time.Since(start)
	r.Output = chunks
	if sum, ok := st.Summary(); ok {
		r.Output = sum.Generated
		ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
		r.Stages = map[string]float64{"queue": ms(sum.Queued), "prefill": ms(sum.Prefill), "decode": ms(sum.Decode)}
	}
	if chunks == 0 {
		r.Err = "no output"
	}
	return r
}
