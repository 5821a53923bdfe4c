package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/isolation"
	"pgregory.net/rapid"
)

// fairSim drives a Scheduler without a model: every item with logits
// samples token 7 and nothing stops before max_tokens. It measures each
// tenant's service from the batches themselves (prefill tokens at cost 1,
// decode tokens at cost 2, divided by the tenant's weight), independently
// of the scheduler's own counters.
type fairSim struct {
	t       *rapid.T
	pool    *isolation.Pool
	s       *Scheduler
	adm     *Admission
	weight  map[cloison.TenantID]float64
	service map[cloison.TenantID]float64
	ids     int
	step    int
	// submitted and first: the step a request was enqueued and the step
	// its first token was sampled.
	submitted map[cloison.RequestID]int
	first     map[cloison.RequestID]int
	tenantOf  map[cloison.RequestID]cloison.TenantID
}

func newFairSim(t *rapid.T, tenants []cloison.TenantID, weight map[cloison.TenantID]float64, pages int, cfg SchedulerConfig) *fairSim {
	pool, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	for _, tn := range tenants {
		if err := pool.AddTenant(isolation.TenantConfig{ID: tn}); err != nil {
			t.Fatal(err)
		}
	}
	cfg.TenantWeight = func(tn cloison.TenantID) float64 { return weight[tn] }
	return &fairSim{t: t, pool: pool, s: NewScheduler(pool, cfg), weight: weight,
		adm:       NewAdmission(AdmissionConfig{ServedContext: pages * 4, Vocab: 1000, Pool: pool}),
		service:   map[cloison.TenantID]float64{},
		submitted: map[cloison.RequestID]int{}, first: map[cloison.RequestID]int{}, tenantOf: map[cloison.RequestID]cloison.TenantID{}}
}

func (f *fairSim) submit(tn cloison.TenantID, prompt, max int) cloison.RequestID {
	f.ids++
	id := cloison.RequestID(fmt.Sprintf("%s-%d", tn, f.ids))
	tk, err := f.adm.Admit(Request{ID: id, Tenant: tn, Prompt: make([]int32, prompt), MaxTokens: max})
	if err != nil {
		f.t.Fatalf("admit %s: %v", id, err)
	}
	if err := f.s.Enqueue(tk); err != nil {
		f.t.Fatal(err)
	}
	f.submitted[id] = f.step
	f.tenantOf[id] = tn
	return id
}

func (f *fairSim) run() {
	rd := f.s.Ready()
	var res []Result
	for _, it := range rd.Batch {
		cost := 1.0
		if q := f.s.seqs[it.ID]; q != nil && q.state == Decoding {
			cost = 2
		}
		f.service[it.Tenant] += float64(len(it.Tokens)) * cost / f.weight[it.Tenant]
		if it.Logits {
			res = append(res, Result{ID: it.ID, Token: 7})
			if _, ok := f.first[it.ID]; !ok {
				f.first[it.ID] = f.step
			}
		}
	}
	for _, ev := range append(f.s.Events(), f.s.Advance(rd, res)...) {
		if ev.State == Failed {
			f.t.Fatalf("step %d: %s failed: %v", f.step, ev.ID, ev.Err)
		}
	}
	if err := f.pool.Check(); err != nil {
		f.t.Fatal(err)
	}
	if err := f.s.Err(); err != nil {
		f.t.Fatal(err)
	}
	f.step++
}

// TestFairShareProperties checks the Virtual Token Counter's guarantees
// (Sheng et al., OSDI 2024, Theorems 4.3–4.5) over random arrival sequences:
//
//   - two tenants that stay backlogged receive service (weighted by their
//     weights) that never differs by more than a constant: twice the cost
//     of a running set's worth of the largest request, whatever the run's
//     length;
//   - a tenant that becomes active, owed no less than those waiting, gets
//     its first token within a bound that does not grow with how long the
//     others have been served;
//   - once arrivals stop, every request finishes (none waits forever).
func TestFairShareProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		maxRun := rapid.IntRange(1, 6).Draw(t, "maxRunning")
		chunk := rapid.IntRange(1, 32).Draw(t, "chunk")
		batch := maxRun + rapid.IntRange(chunk, 64).Draw(t, "extraBudget")
		maxPrompt := rapid.IntRange(1, 64).Draw(t, "maxPrompt")
		maxNew := rapid.IntRange(1, 24).Draw(t, "maxNew")
		tenants := []cloison.TenantID{"a", "b", "c", "d"}
		weight := map[cloison.TenantID]float64{}
		for _, tn := range tenants {
			weight[tn] = float64(rapid.IntRange(1, 3).Draw(t, "weight-"+string(tn)))
		}
		// Enough pages for every running sequence at its largest: no
		// preemption, so service is what the counters order.
		pages := maxRun * ((maxPrompt+maxNew)/4 + 2)
		f := newFairSim(t, tenants, weight, pages, SchedulerConfig{MaxBatchTokens: batch, ChunkTokens: chunk, MaxRunning: maxRun})
		// a and b stay backlogged; each draws its request sizes from its own
		// range, so one may be all long prompts and the other all decode.
		size := map[cloison.TenantID][2]int{}
		for _, tn := range tenants {
			size[tn] = [2]int{rapid.IntRange(1, maxPrompt).Draw(t, "prompt-"+string(tn)), rapid.IntRange(1, maxNew).Draw(t, "new-"+string(tn))}
		}
		draw := func(tn cloison.TenantID) (int, int) {
			return rapid.IntRange(1, size[tn][0]).Draw(t, "p"), rapid.IntRange(1, size[tn][1]).Draw(t, "n")
		}
		var costMax float64
		for _, tn := range tenants {
			costMax = max(costMax, float64(size[tn][0]+size[tn][1]+2*size[tn][1])/weight[tn])
		}
		bound := 2 * float64(maxRun+1) * costMax
		steps := rapid.IntRange(20, 400).Draw(t, "steps")
		late := map[cloison.RequestID]bool{} // requests of c and d that found them idle and owed
		for range steps {
			// More queued than one step can admit: backlogged throughout.
			for _, tn := range []cloison.TenantID{"a", "b"} {
				for len(f.s.queues[tn]) <= maxRun {
					p, n := draw(tn)
					f.submit(tn, p, n)
				}
			}
			for _, tn := range []cloison.TenantID{"c", "d"} {
				if rapid.IntRange(0, 9).Draw(t, "arrive-"+string(tn)) == 0 {
					idle := true
					for _, q := range f.s.seqs {
						idle = idle && q.req.Tenant != tn
					}
					p, n := draw(tn)
					id := f.submit(tn, p, n)
					// The request that makes tn active, when tn is owed no
					// less than anyone waiting (one served more just before
					// waits, rightly, for the others to catch up: the drain
					// below bounds that).
					owed := true
					for o := range f.s.waiting() {
						owed = owed && (o == tn || f.s.vtc[tn] <= f.s.vtc[o])
					}
					if idle && owed {
						late[id] = true
					}
				}
			}
			f.run()
			if d := f.service["a"] - f.service["b"]; d > bound || -d > bound {
				t.Fatalf("step %d: service a=%.1f b=%.1f differ by more than %.1f", f.step, f.service["a"], f.service["b"], bound)
			}
		}
		// A request's life once running: its prompt in chunks, then its
		// tokens; the slots turn over at least that fast.
		life := (maxPrompt+chunk-1)/chunk + maxNew + 1
		waitBound := (len(tenants) + 1) * (life + 1) * maxRun
		for id := range late {
			fs, ok := f.first[id]
			if !ok {
				fs = f.step // not yet: it has waited this long so far
			}
			if w := fs - f.submitted[id]; w > waitBound {
				t.Fatalf("%s (tenant %s) waited %d steps for its first token, bound %d", id, f.tenantOf[id], w, waitBound)
			}
		}
		// Every step computes at least one token of the work left, so the
		// work left bounds the steps to drain.
		work := 2
		for _, q := range f.s.seqs {
			work += len(q.req.Prompt) + q.req.MaxTokens + 1
		}
		for range work {
			if f.s.Idle() {
				break
			}
			f.run()
		}
		if !f.s.Idle() {
			q, r := f.s.Len()
			t.Fatalf("arrivals stopped %d steps ago and %d requests still queued, %d running", work, q, r)
		}
	})
}

// TestFairShareNewTenant is the lift: a tenant back from idle is neither
// owed the service it did not ask for (it does not monopolise the engine
// until its counter catches up) nor starved by the ones that were served
// meanwhile (its first request takes the next slot and the first chunk).
func TestFairShareNewTenant(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		weight := map[cloison.TenantID]float64{"a": 1, "b": 1}
		f := newFairSim(t, []cloison.TenantID{"a", "b"}, weight, 64, SchedulerConfig{MaxBatchTokens: 40, ChunkTokens: 32, MaxRunning: 2})
		backlog := func(tn cloison.TenantID) {
			for len(f.s.queues[tn]) < 4 {
				f.submit(tn, 64, 8)
			}
		}
		for range rapid.IntRange(50, 150).Draw(t, "aloneSteps") {
			backlog("a")
			f.run()
		}
		// b arrives, and stays backlogged from then on.
		bs := []cloison.RequestID{f.submit("b", 64, 8)}
		a0, b0 := f.service["a"], f.service["b"]
		for range 100 {
			backlog("a")
			backlog("b")
			f.run()
		}
		_, first := f.first[bs[0]]
		if !first || f.first[bs[0]]-f.submitted[bs[0]] > 2*(64/32+8+2) {
			t.Fatalf("b's first request: first token at step %v, submitted at %d", f.first[bs[0]], f.submitted[bs[0]])
		}
		da, db := f.service["a"]-a0, f.service["b"]-b0
		if da < db/2 || db < da/2 {
			t.Fatalf("after b arrived: a got %.0f, b %.0f: not an equal share", da, db)
		}
	})
}

// TestFairShareEngine runs the engine on a synthesized model while tenant a
// floods it (24 long prompts, a step's budget holding two chunks) and
// tenant b then sends a few short requests: b's prompts are computed
// before the rest of a's backlog, so b's requests all finish before all but
// a couple of a's — counted in a's finishes, not in time.
func TestFairShareEngine(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 512, PageTokens: 16},
		tenants: []isolation.TenantConfig{{ID: "a"}, {ID: "b"}},
		sched:   SchedulerConfig{MaxBatchTokens: 64, ChunkTokens: 32, MaxRunning: 32}})
	ctx := context.Background()
	var streams []*Stream
	for i := range 24 {
		s, err := r.e.Submit(ctx, GenerateRequest{ID: cloison.RequestID(fmt.Sprintf("a%d", i)), Tenant: "a", Prompt: prompt(256, i), MaxTokens: 64, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, s)
	}
	// b arrives once a is running.
	if _, err := streams[0].Next(ctx); err != nil {
		t.Fatal(err)
	}
	var bs []*Stream
	for i := range 4 {
		s, err := r.e.Submit(ctx, GenerateRequest{ID: cloison.RequestID(fmt.Sprintf("b%d", i)), Tenant: "b", Prompt: prompt(16, 100+i), MaxTokens: 4, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		bs = append(bs, s)
	}
	for _, s := range append(bs, streams...) {
		ids, _, err := collect(t, s)
		if err != nil {
			t.Fatal(err)
		}
		_ = ids
	}
	r.close()
	var order []string
	aBefore := 0
	bLeft := 4
	for _, s := range r.summaries() {
		order = append(order, string(s.ID))
		if s.State != Finished {
			t.Fatalf("%s: %s", s.ID, s.State)
		}
		switch {
		case s.Tenant == "b":
			bLeft--
		case bLeft > 0:
			aBefore++
		}
	}
	// a's oldest request was decoding when b arrived; its prompt chunks
	// go first in the next step (its counter is lifted to a's, which then
	// grows with a's decode tokens first).
	if aBefore > 2 {
		t.Errorf("%d of a's requests finished before b's last: %v", aBefore, order)
	}
	t.Logf("finish order: %v", order)
}

// TestFairShareTierWeight: a tenant's weight is its tier's unless
// TenantWeight gives one, and two tenants that stay backlogged share the
// steps in the ratio of their weights — counted in the tokens each step
// schedules (prompt tokens at cost 1, decode tokens at cost 2), not timed.
func TestFairShareTierWeight(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dedicated float64                      // SchedulerConfig.DedicatedWeight (0: default)
		override  map[cloison.TenantID]float64 // TenantWeight (nil: none)
		want      float64                      // d's service over s's
	}{
		{name: "dedicated tier weighs 2 by default", want: 2},
		{name: "dedicated weight configured", dedicated: 3, want: 3},
		{name: "dedicated weight 1: equal shares", dedicated: 1, want: 1},
		{name: "TenantWeight overrides the tier", override: map[cloison.TenantID]float64{"s": 4}, want: 0.5},
		{name: "TenantWeight 0 falls back to the tier", override: map[cloison.TenantID]float64{"s": 0}, want: 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := isolation.NewPool(isolation.Config{Pages: 256, PageTokens: 4})
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range []isolation.TenantConfig{{ID: "s"}, {ID: "d", Tier: isolation.TierDedicated, Reserved: 96}} {
				if err := pool.AddTenant(c); err != nil {
					t.Fatal(err)
				}
			}
			cfg := SchedulerConfig{MaxBatchTokens: 24, ChunkTokens: 8, MaxRunning: 6, DedicatedWeight: tc.dedicated}
			if tc.override != nil {
				cfg.TenantWeight = func(tn cloison.TenantID) float64 { return tc.override[tn] }
			}
			s := NewScheduler(pool, cfg)
			adm := NewAdmission(AdmissionConfig{ServedContext: 1024, Vocab: 1000, Pool: pool})
			ids := 0
			service := map[cloison.TenantID]float64{}
			for step := range 3000 {
				for _, tn := range []cloison.TenantID{"s", "d"} {
					for len(s.queues[tn]) < 4 {
						ids++
						tk, err := adm.Admit(Request{ID: cloison.RequestID(fmt.Sprintf("%s%d", tn, ids)), Tenant: tn, Prompt: make([]int32, 8+ids%24), MaxTokens: 1 + ids%12})
						if err != nil {
							t.Fatal(err)
						}
						if err := s.Enqueue(tk); err != nil {
							t.Fatal(err)
						}
					}
				}
				rd := s.Ready()
				var res []Result
				for _, it := range rd.Batch {
					cost := 1.0
					if q := s.seqs[it.ID]; q != nil && q.state == Decoding {
						cost = 2
					}
					if step >= 500 { // past the start, where the running sets fill
						service[it.Tenant] += float64(len(it.Tokens)) * cost
					}
					if it.Logits {
						res = append(res, Result{ID: it.ID, Token: 7})
					}
				}
				for _, ev := range s.Advance(rd, res) {
					if ev.State == Failed {
						t.Fatalf("%s failed: %v", ev.ID, ev.Err)
					}
				}
			}
			got := service["d"] / service["s"]
			if got < tc.want*0.9 || got > tc.want*1.1 {
				t.Fatalf("d got %.0f, s %.0f: ratio %.2f, want %.2f ±10%%", service["d"], service["s"], got, tc.want)
			}
			t.Logf("d %.0f, s %.0f: ratio %.3f", service["d"], service["s"], got)
		})
	}
}

// TestFairShareContendedSteps: while tenant a floods the engine (long
// prompts, many streams) and tenant b sends one short request at a time,
// every step is at most ContendedBatchTokens long but for b's first chunk,
// which starts in the step after b's request arrives — so b waits for one
// short step in flight and its own, not for a long step of a. Two tenants
// that are both backlogged keep full steps (no one to wait for them).
// With a ContextSpan the bound counts each token at position p as
// 1+p/ContextSpan: a's chunks deep in its 700-token prompts take fewer
// tokens, and no step but b's first chunk costs more than the bound.
// Counted in the tokens of each step, not timed.
func TestFairShareContendedSteps(t *testing.T) {
	const batch, contended, bPrompt = 256, 32, 48
	for _, tc := range []struct {
		name      string
		contended int
		light     bool // b sends one request at a time (else it floods as a does)
		maxStep   int  // the longest step allowed
		maxFirst  int  // steps from b's request to its first token, at most
		span      float64
		minFirsts int // b's requests served, at least (default 100)
	}{
		{name: "light tenant beside a flood", contended: contended, light: true, maxStep: contended + bPrompt, maxFirst: 1},
		{name: "two floods keep full steps", contended: contended, maxStep: batch},
		{name: "light tenant beside a flood, by context", contended: contended, light: true, maxStep: contended + bPrompt, maxFirst: 1, span: 256},
		{name: "two floods keep full steps, by context", contended: contended, maxStep: batch, span: 256},
		// Every token costs more than the bound: a still advances, one
		// token in each step left empty (b too, once a is owed more: its
		// wait is not checked here).
		{name: "a token over the bound still runs", contended: contended, light: true, maxStep: contended + bPrompt, maxFirst: 1500, span: 1, minFirsts: 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool, err := isolation.NewPool(isolation.Config{Pages: 2048, PageTokens: 16})
			if err != nil {
				t.Fatal(err)
			}
			for _, tn := range []cloison.TenantID{"a", "b"} {
				if err := pool.AddTenant(isolation.TenantConfig{ID: tn}); err != nil {
					t.Fatal(err)
				}
			}
			s := NewScheduler(pool, SchedulerConfig{MaxBatchTokens: batch, ChunkTokens: 128, MaxRunning: 48, ContendedBatchTokens: tc.contended, ContextSpan: tc.span})
			adm := NewAdmission(AdmissionConfig{ServedContext: 2048 * 16, Vocab: 1000, Pool: pool})
			ids := 0
			submit := func(tn cloison.TenantID, prompt, max int) cloison.RequestID {
				ids++
				id := cloison.RequestID(fmt.Sprintf("%s%d", tn, ids))
				tk, err := adm.Admit(Request{ID: id, Tenant: tn, Prompt: make([]int32, prompt), MaxTokens: max})
				if err == nil {
					err = s.Enqueue(tk)
				}
				if err != nil {
					t.Fatal(err)
				}
				return id
			}
			live := map[cloison.TenantID]int{}
			var bID cloison.RequestID
			bAt, firsts, longest, aTokens := 0, 0, 0, 0
			for step := range 1500 {
				for live["a"] < 16 {
					submit("a", 700, 32)
					live["a"]++
				}
				if !tc.light {
					for live["b"] < 16 {
						submit("b", 700, 32)
						live["b"]++
					}
				} else if bID == "" && step >= 100 && step%5 == 0 {
					bID, bAt = submit("b", bPrompt, 3), step
				}
				rd := s.Ready()
				var res []Result
				n, cost, items := 0, 0.0, 0
				for _, it := range rd.Batch {
					n += len(it.Tokens)
					if it.Tenant == "a" && step >= 100 {
						aTokens += len(it.Tokens)
					}
					if it.ID != bID || it.Pos > 0 {
						// What the bound counts: all but b's first chunk.
						items += len(it.Tokens)
						for p := it.Pos; tc.span > 0 && p < it.Pos+len(it.Tokens); p++ {
							cost += 1 + float64(p)/tc.span
						}
					}
					if it.Logits {
						res = append(res, Result{ID: it.ID, Token: 7})
						if it.ID == bID && it.Pos < bPrompt {
							firsts++
							if w := step - bAt + 1; w > tc.maxFirst {
								t.Fatalf("step %d: b's request waited %d steps for its first token, want at most %d", step, w, tc.maxFirst)
							}
						}
					}
				}
				if step >= 100 && n > tc.maxStep {
					t.Fatalf("step %d: %d tokens, want at most %d", step, n, tc.maxStep)
				}
				if tc.span > 0 && tc.light && step >= 100 && cost > contended+1e-9 && items > 1 {
					t.Fatalf("step %d: cost %.1f, want at most %d", step, cost, contended)
				}
				longest = max(longest, n)
				for _, ev := range s.Advance(rd, res) {
					if ev.State != Finished {
						t.Fatalf("%s: %s %v", ev.ID, ev.State, ev.Err)
					}
					live[ev.Tenant]--
					if ev.ID == bID {
						bID = ""
					}
				}
			}
			if aTokens < 500 {
				t.Fatalf("a computed %d tokens after step 100", aTokens)
			}
			if tc.minFirsts == 0 {
				tc.minFirsts = 100
			}
			if tc.light && firsts < tc.minFirsts {
				t.Fatalf("b got %d first tokens", firsts)
			}
			if !tc.light && longest < batch {
				t.Fatalf("longest step %d tokens: two backlogged tenants should fill the budget (%d)", longest, batch)
			}
		})
	}
}

// TestContextSpan: the span comes from the model's shape (the benchmark's
// 4-layer llama: 1,440 multiply-adds of matrix products per position of
// attention, over attentionPenalty), and is 0 for a shape it cannot read.
func TestContextSpan(t *testing.T) {
	for _, tc := range []struct {
		c    model.Config
		want float64
	}{
		{model.Config{DModel: 256, Heads: 4, KVHeads: 2, HeadDim: 64, FFN: 704}, 360},
		{model.Config{DModel: 4096, Heads: 32, KVHeads: 8, HeadDim: 128, FFN: 14336}, (2*4096*4096 + 2*4096*1024 + 3*4096*14336) / float64(2*4096) / attentionPenalty},
		{model.Config{DModel: 256}, 0},
	} {
		if got := contextSpan(tc.c); got != tc.want {
			t.Errorf("%+v: span %v, want %v", tc.c, got, tc.want)
		}
	}
}
