package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cloison/cloison"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
)

// randomModelConfig is randomModel's.
var randomModelConfig = synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 320, Context: 2048, DType: gguf.F32, Seed: 7}

// adapters loads synthetic rank-8 LoRA adapters of seeds 1…n for
// randomModel's l.
func adapters(t testing.TB, l *loaded, n int) []*model.Adapter {
	t.Helper()
	w, err := synth.Random(randomModelConfig)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	base, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]*model.Adapter, n)
	for i := range out {
		lw, err := synth.LoRA(base, synth.LoRAConfig{Rank: 8, Seed: uint64(i + 1), Strength: 1, Output: true})
		if err != nil {
			t.Fatal(err)
		}
		var ab bytes.Buffer
		if _, err := lw.WriteTo(&ab); err != nil {
			t.Fatal(err)
		}
		if out[i], err = model.LoadAdapter(l.m, ab.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func runOne(t testing.TB, r *rig, req GenerateRequest) ([]int32, Summary) {
	t.Helper()
	s, err := r.e.Submit(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	toks, _, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := s.Summary()
	return toks, sum
}

// TestAdapterPrefixCache: the prefix cache key includes the adapter. The
// same tenant sends the same prompt under adapter A, none, B, then A and
// none again: only a repeat under the same adapter (or none) is served
// from the cache, and what it is served gives the tokens the uncached run
// gave; KV computed under one adapter is never read under another or none
// (their tokens differ, so a shared page would show).
func TestAdapterPrefixCache(t *testing.T) {
	l := randomModel(t)
	ads := adapters(t, l, 2)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}, sched: SchedulerConfig{PrefixCache: true}})
	p := prompt(40, 3) // two full pages and 8 tokens
	type run struct {
		ad     *model.Adapter
		cached int
	}
	runs := []run{{ads[0], 0}, {nil, 0}, {ads[1], 0}, {ads[0], 32}, {nil, 32}, {ads[1], 32}}
	toks := map[*model.Adapter][]int32{}
	for i, rn := range runs {
		got, sum := runOne(t, r, GenerateRequest{ID: cloisonID("r", i), Tenant: "a", Prompt: p, MaxTokens: 12, IgnoreEOS: true, Adapter: rn.ad})
		if sum.Cached != rn.cached {
			t.Fatalf("run %d: %d prompt tokens from the cache, want %d", i, sum.Cached, rn.cached)
		}
		var want [32]byte
		if rn.ad != nil {
			want = rn.ad.Digest
		}
		if sum.Adapter != want {
			t.Fatalf("run %d: summary names adapter %x, want %x", i, sum.Adapter[:4], want[:4])
		}
		if prev, ok := toks[rn.ad]; ok && !slices.Equal(prev, got) {
			t.Fatalf("run %d: tokens %v from the cache, %v computed", i, got, prev)
		}
		toks[rn.ad] = got
	}
	if slices.Equal(toks[nil], toks[ads[0]]) || slices.Equal(toks[ads[0]], toks[ads[1]]) {
		t.Fatal("the adapters do not change the tokens: the test proves nothing")
	}
}

func cloisonID(p string, i int) cloison.RequestID { return cloison.RequestID(fmt.Sprint(p, i)) }

// TestAdapterMixedBatch: requests of three tenants under two adapters and
// none, running together (batched decode and prefill chunks, preemptions
// forced by a small pool, recomputed under the same adapter), each produce
// the greedy tokens they produce alone.
func TestAdapterMixedBatch(t *testing.T) {
	l := randomModel(t)
	ads := adapters(t, l, 2)
	assign := []*model.Adapter{nil, ads[0], ads[1], ads[0], nil, ads[1], ads[0], ads[1]}
	reqs := make([]GenerateRequest, len(assign))
	for i, ad := range assign {
		reqs[i] = GenerateRequest{ID: cloisonID("r", i), Tenant: []cloison.TenantID{"a", "b", "c"}[i%3], Prompt: prompt(20+7*i, 10+i),
			MaxTokens: 10, IgnoreEOS: true, Adapter: ad}
	}
	tenants := []isolation.TenantConfig{{ID: "a"}, {ID: "b"}, {ID: "c"}}
	alone := make([][]int32, len(reqs))
	for i, req := range reqs {
		r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: tenants})
		alone[i], _ = runOne(t, r, req)
		r.close()
	}
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 12, PageTokens: 8}, tenants: tenants, sched: SchedulerConfig{MaxBatchTokens: 48}})
	var wg sync.WaitGroup
	got := make([][]int32, len(reqs))
	errs := make([]error, len(reqs))
	sums := make([]Summary, len(reqs))
	for i, req := range reqs {
		s, err := r.e.Submit(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _, errs[i] = collect(t, s)
			sums[i], _ = s.Summary()
		}()
	}
	wg.Wait()
	preempted := 0
	for _, sum := range sums {
		preempted += sum.Preemptions
	}
	if preempted == 0 {
		t.Fatal("no request was preempted: the recomputation under an adapter is not exercised")
	}
	for i := range reqs {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		if !slices.Equal(got[i], alone[i]) {
			t.Fatalf("request %d (adapter %v): %v in the mix, %v alone", i, assign[i] != nil, got[i], alone[i])
		}
	}
}

// TestAdapterRefused: an adapter loaded for another model is refused at
// Submit, before admission.
func TestAdapterRefused(t *testing.T) {
	l, other := randomModel(t), randomModel(t)
	ad := adapters(t, other, 1)[0]
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 16}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	_, err := r.e.Submit(context.Background(), GenerateRequest{ID: "x", Tenant: "a", Prompt: prompt(8, 1), MaxTokens: 2, Adapter: ad})
	if !errors.Is(err, ErrAdapterModel) {
		t.Fatalf("got %v, want ErrAdapterModel", err)
	}
}

// TestAdaptersTenantScoped: a tenant reaches its own adapters only. Another
// tenant's adapter is, for Lookup and Unregister, exactly an adapter that
// does not exist (the same error, the same text), List shows none of it,
// and the same name is free for every tenant.
func TestAdaptersTenantScoped(t *testing.T) {
	l := randomModel(t)
	ads := adapters(t, l, 2)
	s := NewAdapters()
	if err := s.Register("a", "support-bot", ads[0]); err != nil {
		t.Fatal(err)
	}
	if err := s.Register("a", "support-bot", ads[1]); !errors.Is(err, ErrAdapterExists) {
		t.Fatalf("duplicate: got %v, want ErrAdapterExists", err)
	}
	if err := s.Register("b", "support-bot", ads[1]); err != nil {
		t.Fatalf("another tenant's same name: %v", err)
	}
	if got, err := s.Lookup("a", "support-bot"); err != nil || got != ads[0] {
		t.Fatalf("a's own: %v, %v", got, err)
	}
	if got, err := s.Lookup("b", "support-bot"); err != nil || got != ads[1] {
		t.Fatalf("b's own: %v, %v", got, err)
	}
	_, missing := s.Lookup("c", "nothing-here")
	for _, probe := range []struct {
		tenant cloison.TenantID
		name   string
	}{{"c", "support-bot"}, {"a", "nothing-here"}, {"", "support-bot"}} {
		_, err := s.Lookup(probe.tenant, probe.name)
		if !errors.Is(err, ErrAdapterNotFound) || err.Error() != missing.Error() || cloison.ErrorCode(err) != cloison.CodeModelNotFound {
			t.Fatalf("lookup %v: %v, want exactly %v", probe, err, missing)
		}
		if _, err := s.Unregister(probe.tenant, probe.name); err == nil || err.Error() != missing.Error() {
			t.Fatalf("unregister %v: %v, want exactly %v", probe, err, missing)
		}
	}
	if got := s.List("c"); len(got) != 0 {
		t.Fatalf("c lists %v", got)
	}
	if got := s.List("a"); len(got) != 1 || got[0].Name != "support-bot" || got[0].Digest != ads[0].Digest {
		t.Fatalf("a lists %+v", got)
	}
	for _, bad := range []string{"", "a:b", "x/y", strings.Repeat("n", 65), "space d"} {
		if err := s.Register("a", bad, ads[0]); !errors.Is(err, ErrAdapterName) {
			t.Fatalf("name %q: got %v", bad, err)
		}
	}
	if got, err := s.Unregister("a", "support-bot"); err != nil || got != ads[0] {
		t.Fatalf("unregister: %v, %v", got, err)
	}
	if _, err := s.Lookup("a", "support-bot"); !errors.Is(err, ErrAdapterNotFound) {
		t.Fatalf("after unregister: %v", err)
	}
	if _, err := s.Lookup("b", "support-bot"); err != nil {
		t.Fatalf("b's survives a's unregister: %v", err)
	}
}

// TestPrefixSalt: the prefix-cache salt is nil only without a client salt
// and an adapter, and distinct for every other pair — a client salt never
// equals an adapter's, whatever bytes it holds (here: another pair's whole
// encoding).
func TestPrefixSalt(t *testing.T) {
	l := randomModel(t)
	ads := adapters(t, l, 2)
	if prefixSalt(nil, nil) != nil || prefixSalt([]byte{}, nil) != nil {
		t.Fatal("no salt and no adapter must be the tenant's namespace itself")
	}
	clients := [][]byte{nil, []byte("x"), prefixSalt(nil, ads[0]), prefixSalt([]byte("x"), nil), append(prefixSalt(nil, nil), 0)}
	seen := map[string]string{}
	for ci, c := range clients {
		for ai, ad := range []*model.Adapter{nil, ads[0], ads[1]} {
			if ci == 0 && ai == 0 {
				continue
			}
			s := string(prefixSalt(c, ad))
			name := fmt.Sprintf("client %d adapter %d", ci, ai)
			if prev, dup := seen[s]; dup {
				t.Fatalf("%s and %s share a salt", name, prev)
			}
			seen[s] = name
		}
	}
}
