//go:build unix

package engine

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
)

// benchSchema mixes structure (most tokens), enums, numbers and short
// strings, as tool arguments do.
const benchSchema = `{"type":"array","items":{"type":"object","properties":{"id":{"type":"integer"},"ok":{"type":"boolean"},` +
	`"tag":{"enum":["red","green","blue"]},"name":{"type":"string","maxLength":6}},"required":["id","ok","tag","name"],"additionalProperties":false}}`

// BenchmarkConstrainedDecode compares decode time per token with and
// without a JSON-schema grammar on a 32k-vocabulary random model (4 layers,
// d=256, Q8_0), one sequence at a time. shared=false compiles the schema
// afresh for each request, so its automaton and mask cache start cold;
// shared=true takes it from a grammar.Cache, as the API does for a schema
// it has seen (warm after the first request). Reported: process CPU time per token of each
// (not wall time: the machine may be shared) and their ratio (the target: ≤ 1.10). At temperature 1 the
// unconstrained sampler sorts the whole vocabulary while the constrained
// one sorts only the allowed tokens, so greedy decoding (temperature 0,
// argmax only) is the case that shows the grammar's own cost.
func BenchmarkConstrainedDecode(b *testing.B) {
	w, err := synth.Random(synth.Config{Layers: 4, DModel: 256, Heads: 4, KVHeads: 2, FFN: 704, Vocab: 32000, Context: 4096, DType: gguf.Q8_0, Seed: 3})
	l := loadWriter(b, w, err)
	r := newRig(b, l, rigConfig{pool: isolation.Config{Pages: 64, PageTokens: 16}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	for _, temp := range []float64{0, 1} {
		for _, shared := range []bool{false, true} {
			b.Run(fmt.Sprintf("temperature=%v/shared=%v", temp, shared), func(b *testing.B) { benchConstrained(b, r, temp, shared) })
		}
	}
}

// BenchmarkLazyFreeDecode measures a lazy grammar's free phase (tool_choice
// "auto" with a strict tool, before the model opens a call): decode time
// per token with and without it on the same 32k-vocabulary model, the
// grammar (Hermes <tool_call> trigger around benchSchema) compiled afresh
// for each request as the API does; the model never writes the trigger, so
// every step is a free one. Reported as BenchmarkConstrainedDecode does;
// the target is a ratio near 1 (no measurable cost).
func BenchmarkLazyFreeDecode(b *testing.B) {
	w, err := synth.Random(synth.Config{Layers: 4, DModel: 256, Heads: 4, KVHeads: 2, FFN: 704, Vocab: 32000, Context: 4096, DType: gguf.Q8_0, Seed: 3})
	l := loadWriter(b, w, err)
	r := newRig(b, l, rigConfig{pool: isolation.Config{Pages: 64, PageTokens: 16}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	lazy := func() (*grammar.Grammar, error) {
		call := grammar.Seq(grammar.Literal("<tool_call>\n{\"name\": \"f\", \"arguments\": "), grammar.Schema([]byte(benchSchema)), grammar.Literal("}\n</tool_call>"))
		return grammar.CompileLazy([]grammar.Trigger{{Text: "<tool_call>", Body: grammar.Repeat(call, "\n", 1, -1)}}, []string{"<tool_call>", "</tool_call>"})
	}
	for _, temp := range []float64{0, 1} {
		b.Run(fmt.Sprintf("temperature=%v", temp), func(b *testing.B) { benchGrammar(b, r, temp, "lazy", lazy, true) })
	}
}

func benchConstrained(b *testing.B, r *rig, temp float64, shared bool) {
	cache := grammar.NewCache(0)
	mk := func() (*grammar.Grammar, error) {
		if shared {
			return cache.FromSchema("bench", []byte(benchSchema))
		}
		return grammar.FromSchema([]byte(benchSchema))
	}
	benchGrammar(b, r, temp, fmt.Sprint(shared), mk, false)
}

// benchGrammar decodes alternately without a grammar and with mk's; with
// ignoreEOS both run to max_tokens (a lazy grammar's free phase ends where
// the plain decode does).
func benchGrammar(b *testing.B, r *rig, temp float64, name string, mk func() (*grammar.Grammar, error), ignoreEOS bool) {
	shared := name
	// CPU time of the process (the engine loop does all the work while a
	// request runs), robust to other load on a shared machine, unlike
	// wall time.
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	decode := func(id string, seed int, g *grammar.Grammar) (int, time.Duration) {
		start := cpu()
		s, err := r.e.Submit(context.Background(), GenerateRequest{ID: cloison.RequestID(id), Tenant: "a", Prompt: prompt(16, seed), MaxTokens: 96,
			IgnoreEOS: g == nil || ignoreEOS, Sampling: sample.Params{Temperature: temp, Seed: uint64(seed)}, Grammar: g})
		if err != nil {
			b.Fatal(err)
		}
		ids, _, err := collect(b, s)
		if err != nil {
			b.Fatal(err)
		}
		return len(ids), cpu() - start
	}
	decode(fmt.Sprintf("warm%v%v", temp, shared), 0, nil)
	var plainN, consN int
	var plainT, consT time.Duration
	for i := 0; b.Loop(); i++ {
		n, d := decode(fmt.Sprintf("p%v%v-%d", temp, shared, i), i, nil)
		plainN, plainT = plainN+n, plainT+d
		g, err := mk()
		if err != nil {
			b.Fatal(err)
		}
		n, d = decode(fmt.Sprintf("c%v%v-%d", temp, shared, i), i, g)
		consN, consT = consN+n, consT+d
	}
	pn := float64(plainT.Nanoseconds()) / float64(plainN)
	cn := float64(consT.Nanoseconds()) / float64(consN)
	b.ReportMetric(pn, "plain-cpu-ns/token")
	b.ReportMetric(cn, "constrained-cpu-ns/token")
	b.ReportMetric(cn/pn, "ratio")
}
