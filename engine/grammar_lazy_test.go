package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/grammar/grammartest"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/toolcall"
	"github.com/cloison/cloison/isolation"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"
)

// lazyCall is the lazy grammar of calls of f with arguments by schema,
// opened Llama 3's way (a "{" as the answer's first text) or by the
// control token <|im_start|> (standing for a marker such as Mistral's
// [TOOL_CALLS], a control token in its vocabulary).
func lazyCall(t testing.TB, schema string) *grammar.Grammar {
	t.Helper()
	call := grammar.Seq(grammar.Literal(`{"name": "f", "parameters": `), grammar.Schema([]byte(schema)), grammar.Literal("}"))
	g, err := grammar.CompileLazy([]grammar.Trigger{
		{Text: "{", AtStart: true, Body: call},
		{Text: synth.Specials[synth.IMStart-256], Body: grammar.Seq(grammar.Literal(synth.Specials[synth.IMStart-256]), call)},
	}, []string{synth.Specials[synth.IMStart-256]})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestLazyGrammarCalls: with a lazy grammar of strict calls (random schemas
// of the supported subset), a random-weight model whose call is started by
// logit_bias (the "{" byte, or the control token) writes a call that the
// Llama 3 parser reads, its arguments valid for the schema (oracle:
// santhosh-tekuri/jsonschema), whenever it finishes; without the bias it
// writes free text the grammar lets through.
func TestLazyGrammarCalls(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	tok := r.e.cfg.Tokenizer
	n, calls, free := 0, 0, 0
	rapid.Check(t, func(rt *rapid.T) {
		inner := grammartest.Schema(rt)
		if strings.Contains(inner, "$defs") || strings.Contains(inner, "definitions") || strings.Contains(inner, "$ref") {
			inner = `{"enum":["x",1]}` // $defs and $ref belong at the root: not inside the arguments object
		}
		schema := `{"type":"object","properties":{"v":` + inner + `},"required":["v"],"additionalProperties":false}`
		g := lazyCall(t, schema)
		start := rapid.SampledFrom([]string{"brace", "control", "none"}).Draw(rt, "start")
		bias := map[int32]float64{}
		for _, c := range []byte(`"]}`) {
			bias[int32(c)] = rapid.Float64Range(0, 8).Draw(rt, "bias")
		}
		switch start {
		case "brace":
			bias['{'] = 60
		case "control":
			bias[synth.IMStart] = 60
		}
		n++
		s, err := r.e.Submit(context.Background(), GenerateRequest{ID: reqID("lz", n), Tenant: "a", Prompt: prompt(8, n), MaxTokens: 200,
			Sampling: sample.Params{Temperature: 1, Seed: rapid.Uint64().Draw(rt, "seed"), LogitBias: bias}, Grammar: g})
		if err != nil {
			rt.Fatal(err)
		}
		ids, _, err := collect(t, s)
		if err != nil {
			rt.Fatalf("schema %s: %v", schema, err)
		}
		var text strings.Builder // what the API's parser reads: markers as their text
		for _, id := range ids {
			p := tok.Piece(id, false)
			if len(p) == 0 && id == synth.IMStart {
				p = tok.Piece(id, true)
			}
			text.Write(p)
		}
		out := text.String()
		if !g.MatchPrefix([]byte(out)) {
			rt.Fatalf("output %q is not a prefix of the lazy grammar", out)
		}
		if start == "none" {
			if !strings.HasPrefix(strings.TrimSpace(out), "{") && !strings.Contains(out, "<|im_start|>") {
				free++
			}
			return
		}
		if s.Finish() != FinishStop {
			return // cut by max_tokens: a prefix, checked above
		}
		content, cs := toolcall.Parse(toolcall.Llama3, []string{"f"}, strings.TrimPrefix(out, "<|im_start|>"))
		if strings.TrimSpace(content) != "" || len(cs) != 1 {
			rt.Fatalf("schema %s: output %q parsed as %q %+v, want one call", schema, out, content, cs)
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(cs[0].Arguments))
		if err != nil {
			rt.Fatal(err)
		}
		if err := oracle(t, schema).Validate(v); err != nil {
			rt.Fatalf("arguments %s do not validate against %s: %v", cs[0].Arguments, schema, err)
		}
		var raw map[string]json.RawMessage
		_ = json.Unmarshal([]byte(cs[0].Arguments), &raw)
		calls++
	})
	t.Logf("%d requests: %d finished calls, %d free answers", n, calls, free)
	if calls == 0 || free == 0 {
		t.Errorf("want some finished calls (%d) and some free answers (%d)", calls, free)
	}
}

// TestLazyBatchInvariant: a lazy-constrained request, sampled, produces the
// same tokens alone and batched with others (lazy, schema-constrained or
// not constrained), before and after its trigger.
func TestLazyBatchInvariant(t *testing.T) {
	l := randomModel(t)
	schema := `{"type":"object","properties":{"unit":{"enum":["c","f"]},"n":{"type":"integer"}},"required":["unit","n"],"additionalProperties":false}`
	other, err := grammar.FromSchema([]byte(`{"type":"array","items":{"type":"number"},"maxItems":6}`))
	if err != nil {
		t.Fatal(err)
	}
	req := func(id string, seed int, g *grammar.Grammar, trigger bool) GenerateRequest {
		bias := map[int32]float64{'"': 2}
		if trigger {
			bias[synth.IMStart] = 4 // now and then: the trigger fires mid-answer
		}
		return GenerateRequest{ID: reqID(id, seed), Tenant: "a", Prompt: prompt(20, seed), MaxTokens: 64,
			Sampling: sample.Params{Temperature: 0.9, Seed: uint64(seed), LogitBias: bias}, Grammar: g}
	}
	run := func(reqs []GenerateRequest) map[string][]int32 {
		r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 128}, tenants: []isolation.TenantConfig{{ID: "a"}},
			sched: SchedulerConfig{MaxBatchTokens: 512, MaxRunning: 16}})
		defer r.close()
		out := map[string][]int32{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for _, q := range reqs {
			s, err := r.e.Submit(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				ids, _, err := collect(t, s)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				out[string(q.ID)] = ids
				mu.Unlock()
			}()
		}
		wg.Wait()
		return out
	}
	fired := 0
	for seed := 5; seed < 8; seed++ {
		alone := run([]GenerateRequest{req("c", seed, lazyCall(t, schema), true)})[string(reqID("c", seed))]
		together := run([]GenerateRequest{req("o", 1, other, false), req("p", 2, nil, false), req("c", seed, lazyCall(t, schema), true),
			req("q", 3, lazyCall(t, schema), true), req("s", 4, lazyCall(t, schema), false)})[string(reqID("c", seed))]
		if len(alone) == 0 || !reflect.DeepEqual(alone, together) {
			t.Fatalf("seed %d: alone %v, batched %v", seed, alone, together)
		}
		if slices.Contains(alone, synth.IMStart) {
			fired++
		}
	}
	if fired == 0 {
		t.Error("the trigger never fired: the constrained phase went untested")
	}
}
