package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// directScores is the reference for prompt scoring: one forward pass of the
// whole prompt with every row's logits, and for position i ≥ 1
// log_softmax(logits after tokens[:i])[tokens[i]] computed here in float64,
// with the top alternatives by a full sort.
func directScores(t testing.TB, l *loaded, p []int32, top int) []Scored {
	t.Helper()
	pool, _ := isolation.NewPool(isolation.Config{Pages: 64, PageTokens: 16})
	pool.AddTenant(isolation.TenantConfig{ID: "solo"})
	arena, err := l.b.NewArena(l.m.ArenaConfig(64, 16, kernels.KVF32))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := pool.Allocate("solo", "r", len(p))
	if err != nil {
		t.Fatal(err)
	}
	pool.Write(lease, len(p))
	bt, err := pool.BlockTable(lease, len(p))
	if err != nil {
		t.Fatal(err)
	}
	out, err := l.m.Forward(arena, []model.Seq{{Table: bt, Pos: 0, Tokens: p}}, true)
	if err != nil {
		t.Fatal(err)
	}
	v := l.m.Vocab
	var want []Scored
	for i := 1; i < len(p); i++ {
		row := out[0][(i-1)*v : i*v]
		m := math.Inf(-1)
		for _, x := range row {
			m = max(m, float64(x))
		}
		s := 0.0
		for _, x := range row {
			s += math.Exp(float64(x) - m)
		}
		lse := m + math.Log(s)
		sc := Scored{Token: p[i], Logprob: float64(row[p[i]]) - lse}
		idx := make([]int, v)
		for j := range idx {
			idx[j] = j
		}
		for k := 0; k < top; k++ { // selection: best logit, lowest id on ties
			b := k
			for j := k + 1; j < v; j++ {
				if row[idx[j]] > row[idx[b]] || row[idx[j]] == row[idx[b]] && idx[j] < idx[b] {
					b = j
				}
			}
			idx[k], idx[b] = idx[b], idx[k]
			sc.Top = append(sc.Top, sample.TokenProb{Token: int32(idx[k]), Logprob: float64(row[idx[k]]) - lse})
		}
		want = append(want, sc)
	}
	return want
}

// readScored reads a stream: the PromptScores token (which must come before
// any generated token) and the generated ids.
func readScored(t testing.TB, s *Stream) (scores []Scored, ids []int32, err error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seen := 0
	for {
		tok, err := s.Next(ctx)
		if errors.Is(err, io.EOF) {
			if seen != 1 {
				return nil, nil, fmt.Errorf("%d PromptScores tokens, want 1", seen)
			}
			return scores, ids, nil
		}
		if err != nil {
			return nil, nil, err
		}
		switch {
		case tok.ID == PromptScores:
			if len(ids) > 0 {
				return nil, nil, fmt.Errorf("PromptScores after %d generated tokens", len(ids))
			}
			seen++
			scores = tok.Prompt
		case tok.ID >= 0:
			ids = append(ids, tok.ID)
		}
	}
}

func sameScores(t *testing.T, got, want []Scored, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d scores, want %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.Token != w.Token || math.Abs(g.Logprob-w.Logprob) > tol || len(g.Top) != len(w.Top) {
			t.Fatalf("position %d: got %+v, want %+v", i+1, g, w)
		}
		for k := range w.Top {
			if g.Top[k].Token != w.Top[k].Token || math.Abs(g.Top[k].Logprob-w.Top[k].Logprob) > tol {
				t.Fatalf("position %d alternative %d: got %+v, want %+v", i+1, k, g.Top[k], w.Top[k])
			}
		}
	}
}

// TestScorePromptMatchesDirect: the engine's prompt scores, computed chunk
// by chunk (chunks of 16, the default 64, or one) with or without other requests in flight
// and with the prefix cache on or off, equal the full forward pass's.
func TestScorePromptMatchesDirect(t *testing.T) {
	l := randomModel(t)
	p := prompt(70, 3)
	want := directScores(t, l, p, 5)
	wantGen := greedyDirect(t, l, p, 4)
	for _, tc := range []struct {
		name   string
		chunk  int
		prefix bool
		others int
		max    int
	}{
		{"one chunk alone", 256, false, 0, 4},
		{"default chunks (64) alone", 0, false, 0, 4},
		{"chunks of 16 alone", 16, false, 0, 4},
		{"chunks of 16 with others", 16, false, 3, 4},
		{"prefix cache with others", 16, true, 3, 4},
		{"max tokens 0", 16, false, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			batch := 40
			if tc.chunk > batch {
				batch = tc.chunk
			}
			r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}, {ID: "b"}},
				sched: SchedulerConfig{ChunkTokens: tc.chunk, ScoreChunkTokens: tc.chunk, MaxBatchTokens: batch, PrefixCache: tc.prefix}})
			ctx := context.Background()
			var others []*Stream
			for i := range tc.others {
				s, err := r.e.Submit(ctx, GenerateRequest{ID: fmtID("o", i), Tenant: "b", Prompt: prompt(30+i, 10+i), MaxTokens: 8, IgnoreEOS: true})
				if err != nil {
					t.Fatal(err)
				}
				others = append(others, s)
			}
			s, err := r.e.Submit(ctx, GenerateRequest{ID: "scored", Tenant: "a", Prompt: p, MaxTokens: tc.max, IgnoreEOS: true, ScorePrompt: true,
				Sampling: sample.Params{Logprobs: true, TopLogprobs: 5}})
			if err != nil {
				t.Fatal(err)
			}
			got, ids, err := readScored(t, s)
			if err != nil {
				t.Fatal(err)
			}
			sameScores(t, got, want, 0) // batch invariant: bit-identical
			if fmt.Sprint(ids) != fmt.Sprint(wantGen[:tc.max]) {
				t.Fatalf("generated %v, want %v", ids, wantGen[:tc.max])
			}
			if tc.max == 0 && s.Finish() != FinishLength {
				t.Fatalf("finish %q, want length", s.Finish())
			}
			for _, o := range others {
				if _, _, err := collect(t, o); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

func fmtID(p string, i int) cloison.RequestID { return cloison.RequestID(fmt.Sprintf("%s%d", p, i)) }

// TestScorePromptSkipsThePrefixCache: a prompt whose pages the tenant's
// prefix cache holds is still computed in full when scored (Cached 0), and
// every position is scored.
func TestScorePromptSkipsThePrefixCache(t *testing.T) {
	l := randomModel(t)
	p := prompt(64, 5)
	want := directScores(t, l, p, 2)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}, sched: SchedulerConfig{PrefixCache: true}})
	ctx := context.Background()
	s, err := r.e.Submit(ctx, GenerateRequest{ID: "warm", Tenant: "a", Prompt: p, MaxTokens: 1, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := collect(t, s); err != nil {
		t.Fatal(err)
	}
	again, err := r.e.Submit(ctx, GenerateRequest{ID: "again", Tenant: "a", Prompt: p, MaxTokens: 1, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := collect(t, again); err != nil {
		t.Fatal(err)
	}
	if sum, _ := again.Summary(); sum.Cached == 0 {
		t.Fatal("the prefix cache served nothing to an unscored request: the test proves nothing")
	}
	s, err = r.e.Submit(ctx, GenerateRequest{ID: "scored", Tenant: "a", Prompt: p, MaxTokens: 0, ScorePrompt: true, Sampling: sample.Params{TopLogprobs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	got, ids, err := readScored(t, s)
	if err != nil {
		t.Fatal(err)
	}
	sameScores(t, got, want, 0)
	sum, _ := s.Summary()
	if sum.Cached != 0 || len(ids) != 0 || sum.Generated != 0 {
		t.Fatalf("cached %d, generated %d (%v), want 0, 0", sum.Cached, sum.Generated, ids)
	}
}

// TestScorePromptAdmission: max_tokens 0 only with prompt scoring.
func TestScorePromptAdmission(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 16}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	if _, err := r.e.Submit(context.Background(), GenerateRequest{ID: "z", Tenant: "a", Prompt: prompt(4, 1), MaxTokens: 0}); !errors.Is(err, ErrMaxTokens) {
		t.Fatalf("got %v, want ErrMaxTokens", err)
	}
	if err := r.e.Check(GenerateRequest{ID: "z", Tenant: "a", Prompt: prompt(4, 1), MaxTokens: 0, ScorePrompt: true}); err != nil {
		t.Fatalf("got %v, want nil", err)
	}
	// A one-token prompt has nothing to score: an empty PromptScores.
	s, err := r.e.Submit(context.Background(), GenerateRequest{ID: "one", Tenant: "a", Prompt: prompt(1, 1), MaxTokens: 0, ScorePrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	got, ids, err := readScored(t, s)
	if err != nil || len(got) != 0 || len(ids) != 0 {
		t.Fatalf("got %v, %v, %v; want no score, no token", got, ids, err)
	}
}

// TestScorePromptUnderPreemption: requests that score their prompts, in a
// pool far too small for all of them at once (preempted and recomputed,
// some during decode), still get every position's direct-forward score
// once, before their tokens, and the direct greedy tokens. Whether a run
// preempts depends on how the loop interleaves with the submissions: runs
// repeat until one did (every run's answers are checked).
func TestScorePromptUnderPreemption(t *testing.T) {
	l := randomModel(t)
	var tenants []isolation.TenantConfig
	for i := range 4 {
		tenants = append(tenants, isolation.TenantConfig{ID: cloison.TenantID(fmt.Sprint("t", i))})
	}
	type job struct {
		p      []int32
		scores []Scored
		gen    []int32
	}
	jobs := make([]job, 16)
	for i := range jobs {
		j := job{p: prompt(10+i*5, 40+i)}
		j.scores, j.gen = directScores(t, l, j.p, 2), greedyDirect(t, l, j.p, 24)
		jobs[i] = j
	}
	for run := range 10 {
		r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 20, PageTokens: 8, DefaultZeroing: isolation.ZeroNever},
			tenants: tenants, served: 160, sched: SchedulerConfig{MaxBatchTokens: 64, ChunkTokens: 24}})
		streams := make([]*Stream, len(jobs))
		for i, j := range jobs {
			s, err := r.e.Submit(context.Background(), GenerateRequest{ID: fmtID("s", i), Tenant: cloison.TenantID(fmt.Sprint("t", i%4)), Prompt: j.p,
				MaxTokens: 24, IgnoreEOS: true, ScorePrompt: true, Sampling: sample.Params{TopLogprobs: 2}})
			if err != nil {
				t.Fatal(err)
			}
			streams[i] = s
		}
		preempted := 0
		for i, j := range jobs {
			got, ids, err := readScored(t, streams[i])
			if err != nil {
				t.Fatalf("run %d job %d: %v", run, i, err)
			}
			sameScores(t, got, j.scores, 0)
			if fmt.Sprint(ids) != fmt.Sprint(j.gen) {
				t.Fatalf("run %d job %d: generated %v, want %v", run, i, ids, j.gen)
			}
			sum, _ := streams[i].Summary()
			preempted += sum.Preemptions
		}
		r.close()
		if preempted > 0 {
			t.Logf("run %d: %d preemptions", run, preempted)
			return
		}
	}
	t.Fatal("nothing was preempted in 10 runs: the test did not exercise recomputation")
}
