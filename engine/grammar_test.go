package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/grammar/grammartest"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/isolation"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"
)

func oracle(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("s.json")
	if err != nil {
		t.Fatalf("oracle cannot compile %s: %v", schema, err)
	}
	return sch
}

// TestConstrainedOutputValidates: with random schemas of the supported
// subset and a random-weight model sampled at temperature 1, every output
// that finishes parses as JSON and validates against its schema (oracle:
// santhosh-tekuri/jsonschema), and every output cut by max_tokens is a
// prefix the grammar can still complete (finish "length"). A random logit
// bias towards closing tokens keeps most outputs short enough to finish;
// the test requires that most do, so that it checks completed JSON and not
// only prefixes.
func TestConstrainedOutputValidates(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	var finished, cut int
	n := 0
	rapid.Check(t, func(rt *rapid.T) {
		schema := grammartest.Schema(rt)
		g, err := grammar.FromSchema([]byte(schema))
		if err != nil {
			rt.Fatalf("schema %s: %v", schema, err)
		}
		bias := map[int32]float64{}
		for _, c := range []byte(`"]}`) {
			bias[int32(c)] = rapid.Float64Range(0, 8).Draw(rt, "bias")
		}
		n++
		s, err := r.e.Submit(context.Background(), GenerateRequest{ID: reqID("v", n), Tenant: "a", Prompt: prompt(8, n), MaxTokens: 256,
			Sampling: sample.Params{Temperature: 1, Seed: rapid.Uint64().Draw(rt, "seed"), LogitBias: bias}, Grammar: g})
		if err != nil {
			rt.Fatal(err)
		}
		_, text, err := collect(t, s)
		if err != nil {
			rt.Fatalf("schema %s: %v", schema, err)
		}
		switch s.Finish() {
		case FinishStop:
			finished++
			if !json.Valid([]byte(text)) {
				rt.Fatalf("schema %s: output %q is not JSON", schema, text)
			}
			v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
			if err != nil {
				rt.Fatalf("schema %s: output %q: %v", schema, text, err)
			}
			if err := oracle(t, schema).Validate(v); err != nil {
				rt.Fatalf("schema %s: output %q does not validate: %v", schema, text, err)
			}
		case FinishLength:
			cut++
			if !g.MatchPrefix([]byte(text)) {
				rt.Fatalf("schema %s: cut output %q is not a prefix of the grammar", schema, text)
			}
		default:
			rt.Fatalf("finish %q", s.Finish())
		}
	})
	t.Logf("%d finished, %d cut by max_tokens", finished, cut)
	if finished < 3*cut {
		t.Errorf("%d finished, %d cut: want most outputs complete, so that validation is exercised", finished, cut)
	}
}

func reqID(p string, n int) cloison.RequestID { return cloison.RequestID(fmt.Sprintf("%s%d", p, n)) }

// TestConstrainedBatchInvariant: a constrained, sampled request produces
// the same tokens alone and batched with others (constrained by other
// schemas, or not at all): its mask depends on its own tokens only.
func TestConstrainedBatchInvariant(t *testing.T) {
	l := randomModel(t)
	schemas := []string{
		`{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"enum":["x","y"]}},"n":{"type":"integer"}},"required":["name","tags","n"],"additionalProperties":false}`,
		`{"type":"array","items":{"type":"number"},"maxItems":6}`,
	}
	grams := make([]*grammar.Grammar, len(schemas))
	for i, s := range schemas {
		g, err := grammar.FromSchema([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		grams[i] = g
	}
	req := func(id string, seed int, g *grammar.Grammar) GenerateRequest {
		return GenerateRequest{ID: cloison.RequestID(id), Tenant: "a", Prompt: prompt(20, seed), MaxTokens: 48,
			Sampling: sample.Params{Temperature: 0.9, Seed: uint64(seed), LogitBias: map[int32]float64{'"': 3}}, Grammar: g}
	}
	run := func(reqs []GenerateRequest) map[string][]int32 {
		r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 128}, tenants: []isolation.TenantConfig{{ID: "a"}},
			sched: SchedulerConfig{MaxBatchTokens: 512, MaxRunning: 16}})
		defer r.close()
		streams := make([]*Stream, len(reqs))
		for i, q := range reqs {
			s, err := r.e.Submit(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			streams[i] = s
		}
		out := map[string][]int32{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i, s := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids, _, err := collect(t, s)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				out[string(reqs[i].ID)] = ids
				mu.Unlock()
			}()
		}
		wg.Wait()
		return out
	}
	alone := run([]GenerateRequest{req("c", 5, grams[0])})["c"]
	if len(alone) == 0 {
		t.Fatal("no tokens")
	}
	batch := []GenerateRequest{req("o1", 1, grams[1]), req("o2", 2, nil), req("c", 5, grams[0]), req("o3", 3, grams[0]), req("o4", 4, grams[1])}
	batch[1].Grammar = nil
	together := run(batch)["c"]
	if !reflect.DeepEqual(alone, together) {
		t.Fatalf("alone %v, batched %v", alone, together)
	}
}

// TestConstrainedFinishes: a closed grammar ends the request with finish
// "stop" at its last byte; max_tokens first gives "length".
func TestConstrainedFinishes(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	g, err := grammar.FromSchema([]byte(`{"enum":["yes","no"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		max    int
		finish FinishReason
	}{{64, FinishStop}, {2, FinishLength}} {
		s, err := r.e.Submit(context.Background(), GenerateRequest{ID: reqID("f", i), Tenant: "a", Prompt: prompt(8, 1), MaxTokens: tc.max, Grammar: g})
		if err != nil {
			t.Fatal(err)
		}
		_, text, err := collect(t, s)
		if err != nil {
			t.Fatal(err)
		}
		if s.Finish() != tc.finish {
			t.Fatalf("max %d: finish %q, want %q (text %q)", tc.max, s.Finish(), tc.finish, text)
		}
		if tc.finish == FinishStop && text != `"yes"` && text != `"no"` {
			t.Fatalf("text %q, want an enum value", text)
		}
	}
}

// TestLogitBias: -100 bans a token (greedy never picks it), +100 forces
// it; an id outside the vocabulary is refused before anything is queued.
func TestLogitBias(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	gen := func(id string, bias map[int32]float64) []int32 {
		s, err := r.e.Submit(context.Background(), GenerateRequest{ID: cloison.RequestID(id), Tenant: "a", Prompt: prompt(16, 3), MaxTokens: 8, IgnoreEOS: true,
			Sampling: sample.Params{LogitBias: bias}})
		if err != nil {
			t.Fatal(err)
		}
		ids, _, err := collect(t, s)
		if err != nil {
			t.Fatal(err)
		}
		return ids
	}
	plain := gen("p", nil)
	banned := gen("b", map[int32]float64{plain[0]: -100})
	for _, tok := range banned {
		if tok == plain[0] {
			t.Fatalf("banned token %d generated: %v", tok, banned)
		}
	}
	forced := gen("f", map[int32]float64{42: 100})
	for _, tok := range forced {
		if tok != 42 {
			t.Fatalf("forced 42, got %v", forced)
		}
	}
	err := r.e.Check(GenerateRequest{ID: "x", Tenant: "a", Prompt: prompt(4, 1), MaxTokens: 4, Sampling: sample.Params{LogitBias: map[int32]float64{int32(l.m.Vocab): 1}}})
	if !errors.Is(err, sample.ErrInvalidParams) {
		t.Fatalf("bias outside the vocabulary: got %v, want ErrInvalidParams", err)
	}
}
