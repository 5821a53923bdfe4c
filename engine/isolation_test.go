package engine

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/isolation"
)

// Co-tenant independence (defence layers 3 and 5, ownership tags and
// scrubbing: no tenant's output depends on another's KV): with greedy
// decoding on the batch-invariant CPU backend, every request's tokens are
// bit-identical alone and among 16 concurrent requests of 8 tenants, under
// forced preemption and cancellations.
func TestCoTenantIndependence(t *testing.T) {
	l := randomModel(t)
	type job struct {
		id     cloison.RequestID
		tenant cloison.TenantID
		prompt []int32
		n      int
		cancel bool
	}
	var jobs []job
	for i := range 16 {
		jobs = append(jobs, job{
			id:     cloison.RequestID(fmt.Sprintf("r%d", i)),
			tenant: cloison.TenantID(fmt.Sprintf("t%d", i%8)),
			prompt: prompt(10+i*5, i),
			n:      8 + i%5,
			cancel: i%5 == 3,
		})
	}
	want := map[cloison.RequestID][]int32{}
	for _, j := range jobs {
		want[j.id] = greedyDirect(t, l, j.prompt, j.n)
	}
	var tenants []isolation.TenantConfig
	for i := range 8 {
		z := []isolation.Zeroing{isolation.ZeroNever, isolation.ZeroCrossTenant, isolation.ZeroAlways}[i%3]
		tenants = append(tenants, isolation.TenantConfig{ID: cloison.TenantID(fmt.Sprintf("t%d", i)), Zeroing: z})
	}
	// 20 pages of 8 tokens hold far less than the 16 requests need at once:
	// the scheduler must preempt and recompute.
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 20, PageTokens: 8, DefaultZeroing: isolation.ZeroNever},
		tenants: tenants, served: 160, sched: SchedulerConfig{MaxBatchTokens: 64, ChunkTokens: 24}})
	var wg sync.WaitGroup
	got := make([][]int32, len(jobs))
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := r.e.Submit(ctx, GenerateRequest{ID: j.id, Tenant: j.tenant, Prompt: j.prompt, MaxTokens: j.n, IgnoreEOS: true})
		if err != nil {
			t.Fatalf("%s: %v", j.id, err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cancel()
			if j.cancel {
				// Read two tokens, then go away.
				for range 2 {
					if _, err := s.Next(context.Background()); err != nil {
						errs[i] = err
						return
					}
				}
				cancel()
			}
			got[i], _, errs[i] = collect(t, s)
		}()
	}
	wg.Wait()
	r.close()
	for i, j := range jobs {
		if j.cancel {
			if errs[i] != nil && !errors.Is(errs[i], ErrCanceled) {
				t.Errorf("%s: canceled request ended with %v", j.id, errs[i])
			}
			continue
		}
		if errs[i] != nil {
			t.Fatalf("%s: %v", j.id, errs[i])
		}
		if !reflect.DeepEqual(got[i], want[j.id]) {
			t.Errorf("%s: tokens among co-tenants %v, alone %v", j.id, got[i], want[j.id])
		}
	}
	preempted := 0
	for _, s := range r.summaries() {
		preempted += s.Preemptions
	}
	if preempted == 0 {
		t.Fatal("no request was preempted: the test did not exercise preemption")
	}
	if len(r.incidents()) != 0 {
		t.Fatalf("incidents: %+v", r.incidents())
	}
	if err := r.pool.Check(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d preemptions", preempted)
}

// oracleRun is one randomized multi-tenant run of the context-bag model.
type oracleRun struct {
	leaked  []string // "request: token" for every token absent from the request's own context
	errs    map[cloison.Code]int
	served  int
	done    int
	incs    int
	cutoffs int
}

// runOracle submits random requests of several tenants: over-long prompts,
// exact-capacity prompts, shared prefixes, cancellations, greedy and sampled
// decoding, and checks every emitted token against the request's own prompt.
func runOracle(t *testing.T, l *loaded, rng *rand.Rand, rc rigConfig, nreq int) oracleRun {
	t.Helper()
	r := newRig(t, l, rc)
	served := r.e.Attestation().ServedContext
	out := oracleRun{errs: map[cloison.Code]int{}, served: served}
	type sub struct {
		s      *Stream
		prompt map[int32]bool
		cancel context.CancelFunc
		cutAt  int
		id     cloison.RequestID
	}
	// Shared stems so that prefix-cache hits happen.
	stems := [][]int32{alphabetPrompt(rng, served/2, 0), alphabetPrompt(rng, served/2, 1)}
	var subs []sub
	for i := range nreq {
		tn := rc.tenants[rng.IntN(len(rc.tenants))].ID
		var p []int32
		switch rng.IntN(5) {
		case 0: // over-long
			p = alphabetPrompt(rng, served+1+rng.IntN(20), i)
		case 1: // exactly the served context with max tokens
			p = alphabetPrompt(rng, served-4, i)
		case 2: // shared stem + suffix
			p = append(append([]int32(nil), stems[rng.IntN(2)]...), alphabetPrompt(rng, rng.IntN(served/4), i)...)
		default:
			p = alphabetPrompt(rng, 1+rng.IntN(served/2), i)
		}
		maxTok := 1 + rng.IntN(12)
		if len(p)+maxTok > served && len(p) < served {
			maxTok = served - len(p)
		}
		sp := sample.Params{Seed: rng.Uint64()}
		if rng.IntN(2) == 0 {
			sp.Temperature = 0.3 + 0.7*rng.Float64()
			sp.TopP = 0.95
		}
		ctx, cancel := context.WithCancel(context.Background())
		id := cloison.RequestID(fmt.Sprintf("q%d", i))
		s, err := r.e.Submit(ctx, GenerateRequest{ID: id, Tenant: tn, Prompt: p, MaxTokens: maxTok, Sampling: sp, IgnoreEOS: true})
		if err != nil {
			cancel()
			out.errs[cloison.ErrorCode(err)]++
			continue
		}
		set := map[int32]bool{}
		for _, tok := range p {
			set[tok] = true
		}
		cut := -1
		if rng.IntN(6) == 0 {
			cut = rng.IntN(3)
			out.cutoffs++
		}
		subs = append(subs, sub{s: s, prompt: set, cancel: cancel, cutAt: cut, id: id})
	}
	for _, sb := range subs {
		n := 0
		for {
			if n == sb.cutAt {
				sb.cancel()
			}
			tok, err := sb.s.Next(context.Background())
			if err != nil {
				if !isEOF(err) {
					out.errs[cloison.ErrorCode(err)]++
				} else {
					out.done++
				}
				break
			}
			n++
			if tok.ID >= 0 && !sb.prompt[tok.ID] {
				out.leaked = append(out.leaked, fmt.Sprintf("%s: %d", sb.id, tok.ID))
			}
		}
		sb.cancel()
	}
	r.close()
	out.incs = len(r.incidents())
	if err := r.pool.Check(); err != nil {
		t.Fatal(err)
	}
	return out
}

// alphabetPrompt draws tokens from a per-request slice of the byte alphabet,
// so that requests rarely share tokens and a cross-request read shows.
func alphabetPrompt(rng *rand.Rand, n, salt int) []int32 {
	base := int32((salt * 37) % 200)
	width := int32(8 + rng.IntN(24))
	p := make([]int32, n)
	for i := range p {
		p[i] = base + rng.Int32N(width)
	}
	return p
}

// The leak oracle: 1,000 randomized multi-tenant runs never emit a token
// absent from the request's own context.
func TestLeakOracle(t *testing.T) {
	l := bagModel(t, 4096)
	runs := 1000
	if testing.Short() || raceEnabled {
		runs = 40
	}
	rng := rand.New(rand.NewPCG(2026, 1))
	total := oracleRun{errs: map[cloison.Code]int{}}
	for run := range runs {
		pt := []int{4, 8, 16}[rng.IntN(3)]
		pages := 8 + rng.IntN(24)
		var tenants []isolation.TenantConfig
		for i := range 2 + rng.IntN(7) {
			tc := isolation.TenantConfig{ID: cloison.TenantID(fmt.Sprintf("t%d", i)), Zeroing: isolation.Zeroing(rng.IntN(4))}
			if rng.IntN(4) == 0 {
				tc.Namespace = "public"
			}
			tenants = append(tenants, tc)
		}
		rc := rigConfig{
			pool:    isolation.Config{Pages: pages, PageTokens: pt, DefaultZeroing: isolation.ZeroNever, SharedNamespaces: []string{"public"}},
			tenants: tenants,
			served:  max(24, pages*pt/4),
			sched:   SchedulerConfig{MaxBatchTokens: 32 + rng.IntN(96), ChunkTokens: 8 + rng.IntN(32), PrefixCache: rng.IntN(2) == 0, MaxRunning: 2 + rng.IntN(8)},
		}
		o := runOracle(t, l, rng, rc, 3+rng.IntN(6))
		if len(o.leaked) > 0 {
			t.Fatalf("run %d leaked: %v", run, o.leaked)
		}
		if o.incs != 0 {
			t.Fatalf("run %d opened %d incidents with every defence on", run, o.incs)
		}
		total.done += o.done
		total.cutoffs += o.cutoffs
		for c, n := range o.errs {
			total.errs[c] += n
		}
	}
	if total.done == 0 || total.errs[cloison.CodeContextLengthExceeded] == 0 || total.errs[cloison.CodeCanceled] == 0 {
		t.Fatalf("the runs did not exercise completions, rejections and cancellations: %+v", total)
	}
	t.Logf("%d runs: %d completed, errors by code %v", runs, total.done, total.errs)
}

func isEOF(err error) bool { return err != nil && err.Error() == "EOF" }
