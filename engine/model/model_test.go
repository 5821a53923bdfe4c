package model

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

func small(dt gguf.TensorType, tied bool) synth.Config {
	return synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300,
		Context: 256, DType: dt, Seed: 7, Tied: tied}
}

// TestMatchesReference: logits of synthetic models, computed by prefill and
// then decode through the paged arena, match the float64 dense-KV reference.
func TestMatchesReference(t *testing.T) {
	// SmolLM2-135M's shape (d 576, 9 query / 3 KV heads of 64, ffn 1536,
	// rope base 100000, tied embeddings, "smollm" pre-tokenizer), 2 layers.
	smol := synth.Config{Layers: 2, DModel: 576, Heads: 9, KVHeads: 3, FFN: 1536, Vocab: 300,
		Context: 8192, DType: gguf.Q8_0, Seed: 5, Tied: true, RopeBase: 100000, Pre: "smollm"}
	tests := []struct {
		cfg   synth.Config
		qwen2 bool    // rewrite as a qwen2 file: NeoX RoPE and QKV biases
		tol   float64 // max |diff| relative to the largest |logit|
	}{
		{small(gguf.F32, false), false, 1e-5},
		{small(gguf.F16, true), false, 1e-5},
		// BF16 weights may meet activations rounded to BF16 (the avx512
		// path on CPUs with AVX512_BF16, as llama.cpp does): 8 significant
		// bits, as Q8_0's 8-bit activations.
		{small(gguf.BF16, false), false, 6e-2},
		// A backend may quantize activations to 8 bits for Q8_0, as llama.cpp
		// does (kernels/cpu under GOEXPERIMENT=simd: 3.5e-2 observed here;
		// float activations: 1e-6). Wrong RoPE, masks or layouts give O(1).
		{small(gguf.Q8_0, false), false, 6e-2},
		{small(gguf.F32, false), true, 1e-5},
		{smol, false, 6e-2},
		// Qwen3-0.6B's attention shape (16 query / 8 KV heads of 128 with
		// d_model 1024: Heads·HeadDim ≠ d_model), scaled down: 4/2 heads of
		// 32 with d_model 64, per-head Q/K norm, NeoX RoPE, base 1e6.
		{qwen3(gguf.F32), false, 1e-5},
		{qwen3(gguf.F16), false, 1e-5},
		{qwen3(gguf.Q8_0), false, 6e-2},
		{small(gguf.Q4_1, false), false, 1e-5},
		{synth.Config{Layers: 2, DModel: 256, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 300,
			Context: 256, DType: gguf.Q2_K, Seed: 11}, false, 1e-5},
		{small(gguf.Q5_0, true), false, 1e-5},
		{small(gguf.Q5_1, false), false, 1e-5},
		// Q5_K_M-style: Q5_K matrices, Q6_K output and layer-1 attn_v and
		// ffn_down (their activations may be quantized to Q8_K blocks).
		{synth.Config{Layers: 2, DModel: 256, Heads: 4, KVHeads: 2, FFN: 512, Vocab: 300,
			Context: 256, DType: gguf.Q5_K, KQuantMix: true, Seed: 9}, false, 6e-2},
		// Sliding windows narrower than the 20 tokens, across 4-token pages.
		{gemma3(gguf.F32, 5, nil, 0), false, 1e-5},
		{gemma3(gguf.F16, 5, nil, 0), false, 1e-5},
		{gemma3(gguf.Q8_0, 3, nil, 0), false, 6e-2},
		{gemma3(gguf.F32, 4, []bool{false, true, true, false, true, false}, 3), false, 1e-5},
		// Mistral-style: every layer local. llama.cpp ignores the window of
		// llama and phi3 files (phi3: "SWA is currently disabled"), so only
		// this reference checks them.
		{withWindow(small(gguf.F32, false), 6), false, 1e-5},
		{synth.Config{Arch: "phi3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300, Context: 256,
			DType: gguf.F32, Seed: 17, RopeDims: 8, Window: 7}, false, 1e-5},
		{synth.Config{Arch: "phi3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 4, FFN: 96, Vocab: 300, Context: 256,
			DType: gguf.Q8_0, Seed: 18}, false, 6e-2},
		{synth.Config{Arch: "granite", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300, Context: 256,
			DType: gguf.F32, Seed: 19, LogitScale: 6, ResidualScale: 0.3, EmbedScale: 10, AttnScale: 0.05}, false, 1e-5},
		{synth.Config{Layers: 2, DModel: 256, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 300,
			Context: 256, DType: gguf.Q3_K, Seed: 13}, false, 1e-5},
		{small(gguf.MXFP4, true), false, 1e-5},
		// Mixtures of experts: qwen3moe (8 experts, 2 used) and mixtral
		// (a llama file with 4 experts, 2 used), float, MXFP4 (gpt-oss's
		// expert type) and Q3_K weights. A wrong route (a softmax over the
		// top k instead of all, no renormalisation, another order) moves
		// the logits by O(1).
		{qwen3moe(gguf.F32), false, 1e-5},
		{qwen3moe(gguf.MXFP4), false, 1e-5},
		{mixtral(gguf.F32), false, 1e-5},
		{synth.Config{Arch: "mixtral", Layers: 2, DModel: 256, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 300,
			Context: 256, DType: gguf.Q3_K, Seed: 17, Experts: 4, ExpertsUsed: 2}, false, 1e-5},
	}
	for _, tc := range tests {
		n := name(tc.cfg)
		if tc.cfg.Arch != "" {
			n = tc.cfg.Arch + "-" + n
		}
		if tc.qwen2 {
			n = "qwen2-" + n
		}
		t.Run(n, func(t *testing.T) {
			f := randomFile(t, tc.cfg)
			if tc.qwen2 {
				f = toQwen2(t, f)
			}
			m := load(t, backend(t), f)
			if tc.qwen2 && (!m.QKVBias || !m.RoPE.NeoX || m.Arch != "qwen2") {
				t.Fatalf("got %+v, want qwen2 with biases and NeoX RoPE", m.Config)
			}
			if tc.cfg.Arch == "qwen3" && (!m.QKNorm || !m.RoPE.NeoX || m.HeadDim != tc.cfg.HeadDim || m.QKVBias) {
				t.Fatalf("got %+v, want qwen3 with Q/K norm, NeoX RoPE and head dim %d", m.Config, tc.cfg.HeadDim)
			}
			if m.Tied != tc.cfg.Tied {
				t.Fatalf("got Tied %v, want %v", m.Tied, tc.cfg.Tied)
			}
			toks := tokens(20, tc.cfg.Vocab, 1)
			want := newRef(t, f).forward(toks)
			k := newKV(t, m, 16, 4, "t")
			s := k.start(t, "t", "r", len(toks))
			got := k.step(t, []*seq{s}, [][]int32{toks[:13]}, true)[0]
			for p := 13; p < len(toks); p++ {
				got = append(got, k.step(t, []*seq{s}, [][]int32{toks[p : p+1]}, false)[0]...)
			}
			worst := 0.0
			for p := range toks {
				row := got[p*m.Vocab : (p+1)*m.Vocab]
				scale := 0.0
				for _, v := range want[p] {
					scale = math.Max(scale, math.Abs(v))
				}
				for i, v := range row {
					worst = math.Max(worst, math.Abs(float64(v)-want[p][i])/scale)
				}
			}
			if worst > tc.tol {
				t.Errorf("got max relative logit error %.3g, want ≤ %.3g", worst, tc.tol)
			}
			t.Logf("max relative logit error %.3g", worst)
		})
	}
}

// gemma3 is Gemma 3's layout scaled down: six layers (five local, one
// global unless pattern says otherwise), 4/2 heads of 32 with d_model 64.
func gemma3(dt gguf.TensorType, window int, pattern []bool, softcap float32) synth.Config {
	return synth.Config{Arch: "gemma3", Layers: 6, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 96,
		Vocab: 300, Context: 256, DType: dt, Seed: 21, Tied: true, RopeBase: 1e6, RMSEps: 1e-6, Window: window,
		SWAPattern: pattern, FinalSoftcap: softcap}
}

func withWindow(c synth.Config, w int) synth.Config { c.Window = w; return c }

func qwen3moe(dt gguf.TensorType) synth.Config {
	c := qwen3(dt)
	c.Arch, c.Experts, c.ExpertsUsed, c.FFN, c.Seed = "qwen3moe", 8, 2, 64, 19
	return c
}

func mixtral(dt gguf.TensorType) synth.Config {
	c := small(dt, false)
	c.Arch, c.Experts, c.ExpertsUsed, c.Seed = "mixtral", 4, 2, 23
	return c
}

func qwen3(dt gguf.TensorType) synth.Config {
	return synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 96,
		Vocab: 300, Context: 256, DType: dt, Seed: 11, Tied: true, RopeBase: 1e6, RMSEps: 1e-6, Pre: "qwen2"}
}

// TestQKNormMatters: a qwen3 file run without its per-head Q/K norm (the
// same weights relabelled llama, which differs only by that norm and by the
// RoPE layout) gives other logits; so TestMatchesReference's qwen3 cases
// can only pass if the norm is applied.
func TestQKNormMatters(t *testing.T) {
	f := randomFile(t, qwen3(gguf.F32))
	toks := tokens(8, 300, 3)
	want := newRef(t, f).forward(toks)
	m := load(t, backend(t), f)
	k := newKV(t, m, 16, 4, "t")
	got := k.step(t, []*seq{k.start(t, "t", "r", len(toks))}, [][]int32{toks}, true)[0]
	ref := newRef(t, f)
	for i := range ref.layers {
		ref.layers[i].qNorm, ref.layers[i].kNorm = nil, nil
	}
	without := ref.forward(toks)
	diff, err := 0.0, 0.0
	for p := range toks {
		for i := range want[p] {
			diff = math.Max(diff, math.Abs(want[p][i]-without[p][i]))
			err = math.Max(err, math.Abs(float64(got[p*m.Vocab+i])-want[p][i]))
		}
	}
	if diff < 100*err || diff < 1e-2 {
		t.Fatalf("logits without Q/K norm differ by %.3g, ours from the reference by %.3g: the norm has no visible effect", diff, err)
	}
}

// TestLoadRejectsQwen3: a qwen3 file whose per-head norms are missing or not
// HeadDim long is refused, not run without them.
func TestLoadRejectsQwen3(t *testing.T) {
	f := randomFile(t, qwen3(gguf.F32))
	load(t, backend(t), f)
	for _, tc := range []struct {
		name   string
		tensor func(*gguf.TensorInfo) bool
	}{
		{"no q norm", func(ti *gguf.TensorInfo) bool { return ti.Name != "blk.1.attn_q_norm.weight" }},
		{"no k norm", func(ti *gguf.TensorInfo) bool { return ti.Name != "blk.0.attn_k_norm.weight" }},
		{"k norm of d_model", func(ti *gguf.TensorInfo) bool {
			if ti.Name == "blk.0.attn_k_norm.weight" {
				ti.Dims = []uint64{16}
			}
			return true
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(backend(t), rewrite(t, f, nil, tc.tensor))
			if !errors.Is(err, ErrModel) || cloison.ErrorCode(err) != cloison.CodeInvalid {
				t.Fatalf("got %v, want ErrModel", err)
			}
		})
	}
}

// toQwen2 rewrites a synthetic llama file as qwen2: keys renamed, random QKV
// biases added.
func toQwen2(t testing.TB, f *gguf.File) *gguf.File {
	w := gguf.NewWriter()
	for _, e := range f.KV {
		k := e.Key
		if strings.HasPrefix(k, "llama.") {
			k = "qwen2." + strings.TrimPrefix(k, "llama.")
		}
		v := e.Value.Any()
		if k == "general.architecture" {
			v = "qwen2"
		}
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.Data(ti)); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{"q", "k", "v"} {
			if strings.HasSuffix(ti.Name, ".attn_"+p+".weight") {
				n := int(ti.Dims[1])
				bias := make([]float32, n)
				for i := range bias {
					bias[i] = float32(i%7-3) * 0.1
				}
				data, _ := kernels.Quantize(kernels.F32, bias)
				if err := w.AddTensor(strings.TrimSuffix(ti.Name, "weight")+"bias", gguf.F32, []uint64{uint64(n)}, data); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return parse(t, w)
}

// TestPagedIsBitIdentical: a sequence's logits do not depend on the page size,
// on where its pages lie in the arena, on how its prompt is split into steps,
// or on what else is in the batch (defence layer 3, ownership tags: attention reads
// only the lease's own pages, and the result is batch-invariant) — with
// sliding windows too (gemma3, window 5: windows that start mid-page).
func TestPagedIsBitIdentical(t *testing.T) {
	for _, cfg := range []synth.Config{small(gguf.Q8_0, true), gemma3(gguf.Q8_0, 5, nil, 0)} {
		t.Run(cfg.Arch+name(cfg), func(t *testing.T) { pagedIsBitIdentical(t, cfg) })
	}
}

func pagedIsBitIdentical(t *testing.T, cfg synth.Config) {
	f := randomFile(t, cfg)
	m := load(t, backend(t), f)
	toks := tokens(37, cfg.Vocab, 2)
	other := tokens(37, cfg.Vocab, 3)

	// Baseline: one page holds the whole sequence; one prefill step.
	base := newKV(t, m, 1, 64, "t")
	want := base.step(t, []*seq{base.start(t, "t", "r", len(toks))}, [][]int32{toks}, true)[0]

	tests := []struct {
		name       string
		pageTokens int
		chunks     []int // prefill chunk sizes; the rest decodes one token per step
		withOther  bool  // batch with another tenant's sequence whose pages interleave
	}{
		{"one-token pages, token by token", 1, nil, false},
		{"4-token pages, chunks 5+11, batched", 4, []int{5, 11}, true},
		{"2-token pages, whole prefill, batched", 2, []int{37}, true},
		{"16-token pages, decode only, batched", 16, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pages := 2 * (64/tc.pageTokens + 2)
			k := newKV(t, m, pages, tc.pageTokens, "t", "u")
			// Interleave page allocation: the two leases take pages
			// alternately, so neither sequence's pages are contiguous.
			var a, b *seq
			a = k.start(t, "t", "a", tc.pageTokens)
			if tc.withOther {
				b = k.start(t, "u", "b", tc.pageTokens)
			}
			for n := 2 * tc.pageTokens; n <= len(toks)+tc.pageTokens; n += tc.pageTokens {
				if err := k.pool.Extend(a.lease, min(n, len(toks))); err != nil {
					t.Fatal(err)
				}
				if b != nil {
					if err := k.pool.Extend(b.lease, min(n, len(toks))); err != nil {
						t.Fatal(err)
					}
				}
			}
			var got []float32
			run := func(n int) {
				seqs, in := []*seq{a}, [][]int32{toks[a.pos : a.pos+n]}
				if b != nil {
					seqs, in = []*seq{b, a}, [][]int32{other[b.pos : b.pos+n], toks[a.pos : a.pos+n]}
				}
				out := k.step(t, seqs, in, true)
				got = append(got, out[len(out)-1]...)
			}
			for _, c := range tc.chunks {
				run(c)
			}
			for a.pos < len(toks) {
				run(1)
			}
			if len(got) != len(want) {
				t.Fatalf("got %d logits, want %d", len(got), len(want))
			}
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("logit %d (position %d): got %v, want %v bit-identical", i, i/m.Vocab, got[i], want[i])
				}
			}
		})
	}
}

// TestContextBag: the context-bag model emits only tokens present in its own
// context under greedy decoding, even batched with sequences whose contexts
// are disjoint, and every absent token is ≥ 32 logits below every present one.
func TestContextBag(t *testing.T) {
	w, err := synth.ContextBag(synth.BagConfig{Context: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	f := parse(t, w)
	m := load(t, backend(t), f)
	if m.Context != 1<<20 {
		t.Fatalf("got advertised context %d, want 1048576", m.Context)
	}
	k := newKV(t, m, 256, 16, "t1", "t2", "t3")
	prompts := [][]int32{
		{10, 20, 30, 40, 50, 10, 10},
		{100, 101, 102},
		tokens(300, 128, 9), // ids 0…127, with repeats
	}
	for i := range prompts[2] {
		prompts[2][i] += 128 // ids 128…255: disjoint from the others
	}
	seqs := []*seq{k.start(t, "t1", "a", 400), k.start(t, "t2", "b", 400), k.start(t, "t3", "c", 400)}
	ctx := make([][]int32, len(prompts))
	in := make([][]int32, len(prompts))
	for i, p := range prompts {
		ctx[i] = slices.Clone(p)
		in[i] = p
	}
	for step := 0; step < 12; step++ {
		out := k.step(t, seqs, in, false)
		for i, logits := range out {
			present := map[int32]bool{}
			for _, id := range ctx[i] {
				present[id] = true
			}
			minPresent, maxAbsent := math.Inf(1), math.Inf(-1)
			for id, v := range logits {
				if present[int32(id)] {
					minPresent = math.Min(minPresent, float64(v))
				} else {
					maxAbsent = math.Max(maxAbsent, float64(v))
				}
			}
			if maxAbsent != 0 || minPresent-maxAbsent < 32 {
				t.Fatalf("seq %d step %d: absent max %v, present min %v; want absent exactly 0 and a gap ≥ 32", i, step, maxAbsent, minPresent)
			}
			next := argmax(logits)
			if !present[next] {
				t.Fatalf("seq %d step %d: emitted %d, absent from its context", i, step, next)
			}
			ctx[i] = append(ctx[i], next)
			in[i] = []int32{next}
		}
	}
}

// rewrite copies f into a new file, letting edit change or drop metadata
// (return nil to drop) and tensors.
func rewrite(t testing.TB, f *gguf.File, kv func(key string, v any) any, tensor func(ti *gguf.TensorInfo) bool) *gguf.File {
	w := gguf.NewWriter()
	for _, e := range f.KV {
		v := e.Value.Any()
		if kv != nil {
			v = kv(e.Key, v)
		}
		if v != nil {
			if err := w.Set(e.Key, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ti := range f.Tensors {
		data := f.Data(ti)
		if tensor != nil && !tensor(&ti) {
			continue
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data[:min(len(data), int(must(ti.Type.RowSize(ti.Elements()))))]); err != nil {
			t.Fatal(err)
		}
	}
	return parse(t, w)
}

func must(x uint64, err error) uint64 {
	if err != nil {
		panic(err)
	}
	return x
}

func TestLoadRejects(t *testing.T) {
	f := randomFile(t, small(gguf.F32, false))
	setKey := func(key string, val any) func(string, any) any {
		return func(k string, v any) any {
			if k == key {
				return val
			}
			return v
		}
	}
	dropKey := func(key string) func(string, any) any { return setKey(key, nil) }
	dropTensor := func(name string) func(*gguf.TensorInfo) bool {
		return func(ti *gguf.TensorInfo) bool { return ti.Name != name }
	}
	tests := []struct {
		name   string
		kv     func(string, any) any
		tensor func(*gguf.TensorInfo) bool
		want   error
	}{
		{"unknown arch", setKey("general.architecture", "gpt-neox"), nil, ErrUnsupported},
		{"no block count", dropKey("llama.block_count"), nil, ErrModel},
		{"no rms eps", dropKey("llama.attention.layer_norm_rms_epsilon"), nil, ErrModel},
		{"heads not multiple of kv", setKey("llama.attention.head_count_kv", uint32(3)), nil, ErrModel},
		{"zero layers", setKey("llama.block_count", uint32(0)), nil, ErrModel},
		{"missing layer tensor", nil, dropTensor("blk.1.ffn_up.weight"), ErrModel},
		{"missing norm", nil, dropTensor("output_norm.weight"), ErrModel},
		{"more layers than tensors", setKey("llama.block_count", uint32(3)), nil, ErrModel},
		{"wrong shape", nil, func(ti *gguf.TensorInfo) bool {
			if ti.Name == "blk.0.attn_k.weight" {
				ti.Dims = []uint64{32, 64}
			}
			return true
		}, ErrModel},
		{"vocab mismatch", setKey("tokenizer.ggml.tokens", []string{"a"}), nil, ErrModel},
		{"unsupported dtype", nil, func(ti *gguf.TensorInfo) bool {
			if ti.Name == "blk.0.attn_q.weight" {
				ti.Type = gguf.I32
			}
			return true
		}, ErrUnsupported},
	}
	tests = append(tests, []struct {
		name   string
		kv     func(string, any) any
		tensor func(*gguf.TensorInfo) bool
		want   error
	}{
		{"rope base not a number", setKey("llama.rope.freq_base", "yarn"), nil, ErrModel},
		{"eps not a number", setKey("llama.attention.layer_norm_rms_epsilon", "x"), nil, ErrModel},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := rewrite(t, f, tc.kv, tc.tensor)
			_, err := Load(backend(t), g)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if cloison.ErrorCode(err) != cloison.CodeInvalid {
				t.Errorf("got code %v, want %v", cloison.ErrorCode(err), cloison.CodeInvalid)
			}
		})
	}
	// Keys that the file lacks: YaRN and unknown rope scaling are refused.
	for _, typ := range []string{"yarn", "su"} {
		w := gguf.NewWriter()
		for _, e := range f.KV {
			w.Set(e.Key, e.Value)
		}
		w.Set("llama.rope.scaling.type", typ)
		w.Set("llama.rope.scaling.factor", float32(4))
		if _, err := ConfigFromGGUF(parse(t, w)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("rope scaling %q: got %v, want ErrUnsupported", typ, err)
		}
	}
}

func TestForwardRejectsBadBatch(t *testing.T) {
	cfg := small(gguf.F32, false)
	cfg.Context = 40
	m := load(t, backend(t), randomFile(t, cfg))
	k := newKV(t, m, 16, 4, "t")
	s := k.start(t, "t", "r", 40)
	if err := k.pool.Write(s.lease, 8); err != nil {
		t.Fatal(err)
	}
	bt, err := k.pool.BlockTable(s.lease, 8)
	if err != nil {
		t.Fatal(err)
	}
	other, err := m.Backend().NewArena(kernels.ArenaConfig{Pages: 16, PageTokens: 8, Layers: 2, KVHeads: 2, HeadDim: 16})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		arena kernels.Arena
		batch []Seq
	}{
		{"empty batch", k.arena, nil},
		{"no tokens", k.arena, []Seq{{Table: bt}}},
		{"token outside vocab", k.arena, []Seq{{Table: bt, Tokens: []int32{300}}}},
		{"negative token", k.arena, []Seq{{Table: bt, Tokens: []int32{-1}}}},
		{"past the table", k.arena, []Seq{{Table: bt, Pos: 7, Tokens: []int32{1, 2}}}},
		{"negative pos", k.arena, []Seq{{Table: bt, Pos: -1, Tokens: []int32{1}}}},
		{"past the context", k.arena, []Seq{{Table: bt, Pos: 40, Tokens: []int32{1}}}},
		{"page size mismatch", other, []Seq{{Table: bt, Tokens: []int32{1}}}},
		// Outside the isolation package only the zero BlockTable can be
		// made, and it covers nothing: an unapproved table reads nothing.
		{"unapproved (zero) table", k.arena, []Seq{{Table: isolation.BlockTable{}, Tokens: []int32{1}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := m.Forward(tc.arena, tc.batch, false); !errors.Is(err, ErrBatch) {
				t.Fatalf("got %v, want ErrBatch", err)
			}
		})
	}
}

// TestStaleTableCannotRead: a block table kept after its lease was released
// cannot touch the pages once another tenant's lease has written them
// (defence layer 3, ownership tags): Forward fails with an
// isolation_violation error and returns no logits.
func TestStaleTableCannotRead(t *testing.T) {
	for _, cfg := range []synth.Config{small(gguf.F32, false), withWindow(small(gguf.F32, false), 2)} {
		// With a 2-token window the stale pages lie outside what attention
		// reads: they are refused all the same.
		t.Run(name(cfg), func(t *testing.T) { staleTableCannotRead(t, cfg) })
	}
}

func staleTableCannotRead(t *testing.T, cfg synth.Config) {
	m := load(t, backend(t), randomFile(t, cfg))
	tests := []struct {
		name string
		pos  int
		n    int
		want error
	}{
		// The write lands in pages b now owns, under an older epoch: the
		// arena refuses to write over a later lease's KV.
		{"decode mid-page", 7, 1, kernels.ErrTagMismatch},
		{"chunk from a page start", 4, 4, kernels.ErrTagMismatch},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newKV(t, m, 2, 4, "a", "b")
			a := k.start(t, "a", "r1", 8)
			k.step(t, []*seq{a}, [][]int32{tokens(tc.pos, cfg.Vocab, 4)}, false)
			if err := k.pool.Write(a.lease, tc.n); err != nil {
				t.Fatal(err)
			}
			stale, err := k.pool.BlockTable(a.lease, tc.pos+tc.n)
			if err != nil {
				t.Fatal(err)
			}
			if err := k.pool.Release(a.lease); err != nil {
				t.Fatal(err)
			}
			b := k.start(t, "b", "r2", 8)
			k.step(t, []*seq{b}, [][]int32{tokens(8, cfg.Vocab, 5)}, false)
			out, err := m.Forward(k.arena, []Seq{{Table: stale, Pos: tc.pos, Tokens: tokens(tc.n, cfg.Vocab, 6)}}, false)
			if !errors.Is(err, tc.want) || out != nil {
				t.Fatalf("got logits %v, error %v; want none and %v", out != nil, err, tc.want)
			}
			if cloison.ErrorCode(err) != cloison.CodeIsolationViolation {
				t.Errorf("got code %v, want %v", cloison.ErrorCode(err), cloison.CodeIsolationViolation)
			}
		})
	}
}

// FuzzLoad: whatever a file holds, Load returns a model or an error; it never
// panics or allocates without bound. A loaded model runs one step. The seed is
// a whole model (~17 KB): fuzz with a short minimisation, e.g.
// go test -fuzz FuzzLoad -fuzzminimizetime 50x ./engine/model
// (1.5M execs in 30 s here), or the minimiser spends minutes per find.
func FuzzLoad(f *testing.F) {
	// One seed per layout: llama, a mixture of experts (qwen3moe, 4
	// experts, 2 used), gemma3 with windows, phi3's fused tensors,
	// granite's multipliers.
	for _, c := range []synth.Config{
		{Layers: 1, DModel: 32, Heads: 2, FFN: 32, Vocab: 259, Context: 16, DType: gguf.F16},
		{Arch: "qwen3moe", Layers: 1, DModel: 32, Heads: 2, HeadDim: 16, FFN: 32, Experts: 4, ExpertsUsed: 2, Vocab: 259, Context: 16, DType: gguf.F16},
		{Arch: "gemma3", Layers: 2, DModel: 32, Heads: 2, FFN: 32, Vocab: 259, Context: 16, DType: gguf.F16, Window: 2, FinalSoftcap: 5},
		{Arch: "phi3", Layers: 1, DModel: 32, Heads: 2, FFN: 32, Vocab: 259, Context: 16, DType: gguf.F16, RopeDims: 8},
		{Arch: "granite", Layers: 1, DModel: 32, Heads: 2, FFN: 32, Vocab: 259, Context: 16, DType: gguf.F16, ResidualScale: 0.5, AttnScale: 0.1},
	} {
		// A small seed without the tokenizer keys keeps the fuzzer fast.
		small := rewrite(f, randomFile(f, c), func(k string, v any) any {
			if strings.HasPrefix(k, "tokenizer.") {
				return nil
			}
			return v
		}, nil)
		w := gguf.NewWriter()
		for _, e := range small.KV {
			w.Set(e.Key, e.Value)
		}
		for _, ti := range small.Tensors {
			w.AddTensor(ti.Name, ti.Type, ti.Dims, small.Data(ti))
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	// An encoder (bert, rank pooling: the classification head too).
	var enc bytes.Buffer
	if w, err := synth.Bert(synth.BertConfig{Layers: 1, DModel: 32, Heads: 2, FFN: 32, Context: 16, DType: gguf.F16, Pooling: 4}); err != nil {
		f.Fatal(err)
	} else if _, err := w.WriteTo(&enc); err != nil {
		f.Fatal(err)
	}
	f.Add(enc.Bytes())
	b := backend(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := gguf.Parse(data)
		if err != nil {
			return
		}
		m, err := Load(b, g)
		if err != nil {
			return
		}
		defer m.Close()
		k := newKV(t, m, 1, 16, "t")
		if m.Encoder {
			k.encode(t, "t", [][]int32{{0}})
			return
		}
		k.step(t, []*seq{k.start(t, "t", "r", 1)}, [][]int32{{0}}, false)
	})
}

// TestContextBagReportsWhatItReads: the context-bag model emits the most
// frequent token of the KV it attends over, not an echo of its last input —
// otherwise a leak oracle built on it could never see a foreign read.
func TestContextBagReportsWhatItReads(t *testing.T) {
	w, err := synth.ContextBag(synth.BagConfig{})
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, backend(t), parse(t, w))
	ctx := []int32{'A', 'A', 'A', 'B', 'z'}
	k := newKV(t, m, 4, 16, "t")
	s := k.start(t, "t", "r", 8)
	if got := argmax(k.step(t, []*seq{s}, [][]int32{ctx}, false)[0]); got != 'A' {
		t.Fatalf("greedy token after AAABz: got %q, want 'A'", got)
	}
}

// TestContextBagGapBound checks the bound the synth package documents at its
// edge: with GapTokens = n and a context of n tokens in which one token
// appears once, that token's logit is ≥ 32 while every absent token's is
// exactly 0. Then, sampling at temperature 1, only context tokens come out.
func TestContextBagGapBound(t *testing.T) {
	const n = 512
	w, err := synth.ContextBag(synth.BagConfig{GapTokens: n})
	if err != nil {
		t.Fatal(err)
	}
	m := load(t, backend(t), parse(t, w))
	ctx := make([]int32, n)
	for i := range ctx {
		ctx[i] = int32(65 + i%4) // A B C D, ~128 times each
	}
	ctx[n/2] = 'z' // once
	k := newKV(t, m, n/16+4, 16, "t")
	s := k.start(t, "t", "r", n+32)
	logits := k.step(t, []*seq{s}, [][]int32{ctx}, false)[0]
	if got := logits['z']; got < 32 || math.IsInf(float64(got), 0) {
		t.Errorf("logit of a token seen once in %d: got %v, want ≥ 32 and finite", n, got)
	}
	for id, v := range logits {
		if !slices.Contains(ctx, int32(id)) && v != 0 {
			t.Fatalf("absent token %d has logit %v, want exactly 0", id, v)
		}
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for step := 0; step < 32; step++ {
		next := sample(logits, rng)
		if !slices.Contains(ctx, next) {
			t.Fatalf("step %d: sampled %d, absent from the context", step, next)
		}
		ctx = append(ctx, next)
		logits = k.step(t, []*seq{s}, [][]int32{{next}}, false)[0]
	}
}

// sample draws from softmax(logits) at temperature 1.
func sample(logits []float32, rng *rand.Rand) int32 {
	mx := logits[argmax(logits)]
	sum := 0.0
	for _, v := range logits {
		sum += math.Exp(float64(v - mx))
	}
	r := rng.Float64() * sum
	for i, v := range logits {
		if r -= math.Exp(float64(v - mx)); r <= 0 {
			return int32(i)
		}
	}
	return argmax(logits)
}

// TestSeqAll: a sequence that asks for every row (Seq.All, prompt scoring;
// Seq.Hidden, hidden states) gets exactly the rows a whole-batch all gives,
// and its neighbours exactly their last rows, bit for bit. A batch that
// needs fewer rows than it holds computes its last layer past the KV
// writes on those rows alone (Forward's compact batch): each model here
// covers a part of that layer (windowed attention and post norms, experts,
// LoRA adapters on every projection and the output).
func TestSeqAll(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  synth.Config
		lora bool
	}{
		{"llama", small(gguf.Q8_0, true), false},
		{"gemma3 local last layer", gemma3(gguf.F32, 4, []bool{false, true, true, false, true, true}, 3), false},
		{"gemma3 global last layer", gemma3(gguf.F32, 4, nil, 0), false},
		{"qwen3moe", qwen3moe(gguf.Q8_0), false},
		{"lora", synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 256, DType: gguf.Q8_0, Seed: 9}, true},
	} {
		t.Run(c.name, func(t *testing.T) { seqAll(t, c.cfg, c.lora) })
	}
}

func seqAll(t *testing.T, cfg synth.Config, lora bool) {
	f := randomFile(t, cfg)
	m := load(t, backend(t), f)
	in := [][]int32{tokens(9, cfg.Vocab, 1), tokens(13, cfg.Vocab, 2), tokens(5, cfg.Vocab, 3), tokens(7, cfg.Vocab, 4)}
	ads := make([]*Adapter, len(in))
	if lora {
		ads[1] = loadAdapter(t, m, loraBytes(t, f, synth.LoRAConfig{Rank: 8, Seed: 1, Output: true}))
		ads[2] = loadAdapter(t, m, loraBytes(t, f, synth.LoRAConfig{Rank: 4, Seed: 2, Targets: []string{"attn_output.weight", "ffn_down.weight"}}))
		ads[3] = ads[1]
	}
	// run returns each sequence's output; mark[i]: 'a' Seq.All, 'h'
	// Seq.Hidden.
	run := func(all bool, mark string) [][]float32 {
		k := newKV(t, m, 16, 16, "t")
		batch := make([]Seq, len(in))
		for i, toks := range in {
			s := k.start(t, "t", fmt.Sprint("r", i), len(toks))
			if err := k.pool.Write(s.lease, len(toks)); err != nil {
				t.Fatal(err)
			}
			bt, err := k.pool.BlockTable(s.lease, len(toks))
			if err != nil {
				t.Fatal(err)
			}
			batch[i] = Seq{Table: bt, Tokens: toks, All: mark[i] == 'a', Hidden: mark[i] == 'h', Adapter: ads[i]}
		}
		out, err := m.Forward(k.arena, batch, all)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	same := func(what string, got, want []float32) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
		}
		for i := range want {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("%s: value %d: got %v, want %v", what, i, got[i], want[i])
			}
		}
	}
	every, hidden := run(true, "...."), run(true, "hhhh")
	lastRow := func(rows []float32, width int) []float32 { return rows[len(rows)-width:] }
	for _, mark := range []string{"....", ".a..", "a..h", "h.a.", "aaa."} {
		got := run(false, mark)
		for i := range in {
			switch mark[i] {
			case 'a':
				same(fmt.Sprintf("%s: the All sequence %d", mark, i), got[i], every[i])
			case 'h':
				same(fmt.Sprintf("%s: the Hidden sequence %d", mark, i), got[i], hidden[i])
			default:
				same(fmt.Sprintf("%s: sequence %d's last row", mark, i), got[i], lastRow(every[i], m.Vocab))
			}
		}
	}
	if lora {
		with := ads
		ads = make([]*Adapter, len(in))
		without := run(true, "....")
		for _, i := range []int{1, 2} {
			if maxDiff(every[i], without[i]) == 0 {
				t.Fatalf("adapter %d leaves the logits unchanged", i)
			}
		}
		ads = with
	}
}
