package model

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/kernels"
)

func writerBytes(t testing.TB, w *gguf.Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// loraBytes writes a synthetic adapter for base.
func loraBytes(t testing.TB, base *gguf.File, c synth.LoRAConfig) []byte {
	t.Helper()
	w, err := synth.LoRA(base, c)
	if err != nil {
		t.Fatal(err)
	}
	return writerBytes(t, w)
}

func loadAdapter(t testing.TB, m *Model, data []byte) *Adapter {
	t.Helper()
	ad, err := LoadAdapter(m, data)
	if err != nil {
		t.Fatal(err)
	}
	return ad
}

// stepAd is kv.step with an adapter per sequence.
func (k *kv) stepAd(t testing.TB, seqs []*seq, toks [][]int32, ads []*Adapter, all bool) [][]float32 {
	t.Helper()
	batch := make([]Seq, len(seqs))
	for i, s := range seqs {
		if err := k.pool.Write(s.lease, len(toks[i])); err != nil {
			t.Fatal(err)
		}
		bt, err := k.pool.BlockTable(s.lease, s.pos+len(toks[i]))
		if err != nil {
			t.Fatal(err)
		}
		batch[i] = Seq{Table: bt, Pos: s.pos, Tokens: toks[i], Adapter: ads[i]}
	}
	out, err := k.m.Forward(k.arena, batch, all)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range seqs {
		s.pos += len(toks[i])
	}
	return out
}

// merged returns base with every adapted tensor replaced by the F32 matrix
// W + scale·B·A (computed in float64): the oracle, run through the path
// without adapters.
func merged(t testing.TB, base *gguf.File, adapter []byte) *gguf.File {
	t.Helper()
	af, err := gguf.Parse(adapter)
	if err != nil {
		t.Fatal(err)
	}
	alpha, _ := af.Float("adapter.lora.alpha")
	deq := func(f *gguf.File, ti gguf.TensorInfo) []float32 {
		x := make([]float32, ti.Elements())
		if err := kernels.Dequantize(x, kernels.DType(ti.Type), f.Data(ti)); err != nil {
			t.Fatal(err)
		}
		return x
	}
	w := gguf.NewWriter()
	for _, e := range base.KV {
		if err := w.Set(e.Key, e.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range base.Tensors {
		ta, ok := af.Tensor(ti.Name + ".lora_a")
		if !ok {
			if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, base.Data(ti)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		tb, _ := af.Tensor(ti.Name + ".lora_b")
		in, out, rank := int(ti.Dims[0]), int(ti.Dims[1]), int(ta.Dims[1])
		W, A, B := deq(base, ti), deq(af, ta), deq(af, tb)
		scale := 1.0
		if alpha != 0 {
			scale = alpha / float64(rank)
		}
		res := make([]byte, 4*in*out)
		for o := range out {
			for i := range in {
				s := 0.0
				for r := range rank {
					s += float64(B[o*rank+r]) * float64(A[r*in+i])
				}
				v := float32(float64(W[o*in+i]) + scale*s)
				putF32(res[4*(o*in+i):], v)
			}
		}
		if err := w.AddTensor(ti.Name, gguf.F32, ti.Dims, res); err != nil {
			t.Fatal(err)
		}
	}
	return parse(t, w)
}

func putF32(b []byte, v float32) {
	u := math.Float32bits(v)
	b[0], b[1], b[2], b[3] = byte(u), byte(u>>8), byte(u>>16), byte(u>>24)
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// run prefills prompt and decodes n greedy tokens under ad, returning every
// step's last-token logits.
func runAd(t testing.TB, m *Model, ad *Adapter, prompt []int32, n int) [][]float32 {
	t.Helper()
	k := newKV(t, m, 8, 16, "t")
	s := k.start(t, "t", "r", len(prompt)+n)
	var out [][]float32
	in := prompt
	for range n + 1 {
		lg := k.stepAd(t, []*seq{s}, [][]int32{in}, []*Adapter{ad}, false)[0]
		out = append(out, lg)
		in = []int32{argmax(lg)}
	}
	return out
}

// TestLoRAMatchesMergedWeights: a sequence under an adapter gets the logits
// of the base with W + (alpha/rank)·B·A merged into its weights (the
// definition of LoRA, as llama.cpp applies it), for every adapted
// projection, on llama (output adapted too) and qwen3; and the adapter
// moves the logits far more than that tolerance (the test can fail).
func TestLoRAMatchesMergedWeights(t *testing.T) {
	for _, tc := range []struct {
		cfg synth.Config
		lc  synth.LoRAConfig
	}{
		{synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 3},
			synth.LoRAConfig{Rank: 8, Alpha: 16, Seed: 1, Output: true}},
		{synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 128, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 4},
			synth.LoRAConfig{Rank: 4, Seed: 2, Targets: []string{"attn_q.weight", "attn_v.weight", "ffn_down.weight"}}},
		{synth.Config{Layers: 1, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 5, Tied: true},
			synth.LoRAConfig{Rank: 16, Alpha: 8, Seed: 3, DType: gguf.F16}},
	} {
		t.Run(fmt.Sprintf("%s-r%d", name(tc.cfg), tc.lc.Rank), func(t *testing.T) {
			base := randomFile(t, tc.cfg)
			data := loraBytes(t, base, tc.lc)
			b := backend(t)
			m := load(t, b, base)
			ad := loadAdapter(t, m, data)
			if ad.Digest != sha256.Sum256(data) {
				t.Fatal("digest is not the file's SHA-256")
			}
			ref := load(t, b, merged(t, base, data))
			prompt := tokens(20, m.Vocab, 7)
			got := runAd(t, m, ad, prompt, 4)
			plain := runAd(t, m, nil, prompt, 0)
			// Teacher-force the merged model on the adapter's tokens.
			k := newKV(t, ref, 8, 16, "t")
			s := k.start(t, "t", "r", len(prompt)+4)
			in := prompt
			worst, moved := 0.0, maxDiff(got[0], plain[0])
			for i := range got {
				want := k.step(t, []*seq{s}, [][]int32{in}, false)[0]
				worst = max(worst, maxDiff(got[i], want))
				in = []int32{argmax(got[i])}
			}
			// F32 weights: the two differ only by rounding order.
			const bound = 1e-4
			t.Logf("max |Δlogit| adapter vs merged %.2g (bound %g); adapter vs base %.3g", worst, bound, moved)
			if worst > bound {
				t.Fatalf("adapter logits differ from the merged model's by %g > %g", worst, bound)
			}
			if moved < 10*bound {
				t.Fatalf("the adapter moved the logits by %g only: the comparison proves nothing", moved)
			}
		})
	}
}

// TestLoRABatchInvariant: a sequence's logits are bit-identical whatever
// adapters its neighbours carry (none, the same, another) and whatever the
// mix of prefill and decode rows: each run below is compared, sequence by
// sequence, with that sequence computed alone.
func TestLoRABatchInvariant(t *testing.T) {
	cfg := synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 256, DType: gguf.Q8_0, Seed: 9}
	base := randomFile(t, cfg)
	b := backend(t)
	m := load(t, b, base)
	adA := loadAdapter(t, m, loraBytes(t, base, synth.LoRAConfig{Rank: 8, Seed: 1, Output: true}))
	adB := loadAdapter(t, m, loraBytes(t, base, synth.LoRAConfig{Rank: 4, Seed: 2}))
	adC := loadAdapter(t, m, loraBytes(t, base, synth.LoRAConfig{Rank: 16, Seed: 3, Targets: []string{"attn_output.weight", "ffn_up.weight"}}))
	ads := []*Adapter{nil, adA, adB, adC}
	const n = 6
	prompts := make([][]int32, n)
	for i := range prompts {
		prompts[i] = tokens(5+3*i, m.Vocab, 100+i)
	}
	// alone[i][a]: sequence i under adapter a, alone: its logits per step
	// (prompt, then 3 decode steps with fixed tokens).
	decode := [][]int32{{1}, {2}, {3}}
	alone := map[[2]int][][]float32{}
	for i := range n {
		for a := range ads {
			k := newKV(t, m, 4, 16, "t")
			s := k.start(t, "t", "r", 64)
			var out [][]float32
			for _, in := range append([][]int32{prompts[i]}, decode...) {
				out = append(out, k.stepAd(t, []*seq{s}, [][]int32{in}, []*Adapter{ads[a]}, false)[0])
			}
			alone[[2]int{i, a}] = out
		}
	}
	for _, assign := range [][n]int{
		{0, 1, 2, 1, 0, 2},
		{1, 1, 1, 1, 1, 1},
		{3, 0, 3, 2, 1, 0},
		{2, 3, 1, 0, 3, 2},
		{0, 0, 0, 0, 0, 1},
	} {
		t.Run(fmt.Sprint(assign), func(t *testing.T) {
			k := newKV(t, m, n*4, 16, "t")
			seqs := make([]*seq, n)
			step := make([]int, n) // next input of each sequence: 0 prompt, then decode
			for i := range seqs {
				seqs[i] = k.start(t, "t", fmt.Sprint("r", i), 64)
			}
			// Staggered starts: prefill rows of some sequences beside
			// decode rows of others.
			for round := 0; round < n+len(decode); round++ {
				var ss []*seq
				var in [][]int32
				var sa []*Adapter
				var idx []int
				for i := range n {
					if i > round || step[i] > len(decode) {
						continue
					}
					ss, idx, sa = append(ss, seqs[i]), append(idx, i), append(sa, ads[assign[i]])
					if step[i] == 0 {
						in = append(in, prompts[i])
					} else {
						in = append(in, decode[step[i]-1])
					}
				}
				if len(ss) == 0 {
					continue
				}
				out := k.stepAd(t, ss, in, sa, false)
				for j, i := range idx {
					want := alone[[2]int{i, assign[i]}][step[i]]
					for x := range want {
						if math.Float32bits(want[x]) != math.Float32bits(out[j][x]) {
							t.Fatalf("round %d: sequence %d (adapter %d) logit %d is %v in the batch, %v alone", round, i, assign[i], x, out[j][x], want[x])
						}
					}
					step[i]++
				}
			}
		})
	}
	// The adapters do change the logits (else the test proves nothing).
	if maxDiff(alone[[2]int{0, 0}][0], alone[[2]int{0, 1}][0]) == 0 || maxDiff(alone[[2]int{0, 2}][0], alone[[2]int{0, 3}][0]) == 0 {
		t.Fatal("adapters leave the logits unchanged")
	}
}

// rewriteAdapter copies an adapter file through edit: kv may change or drop
// (return false) a key's value, tensor a tensor's name and dims.
func rewriteAdapter(t testing.TB, data []byte, kv func(key string, v any) (any, bool), tensor func(ti *gguf.TensorInfo) bool) []byte {
	t.Helper()
	f, err := gguf.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for _, e := range f.KV {
		v, keep := any(e.Value), true
		if kv != nil {
			v, keep = kv(e.Key, e.Value.Any())
		}
		if keep {
			if err := w.Set(e.Key, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ti := range f.Tensors {
		src := f.Data(ti)
		if tensor != nil && !tensor(&ti) {
			continue
		}
		n := int(ti.Elements()) * 4
		buf := make([]byte, n)
		copy(buf, src)
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, buf); err != nil {
			t.Fatal(err)
		}
	}
	return writerBytes(t, w)
}

// TestLoadAdapterRefuses: every file that is not a LoRA adapter of this
// base is refused, by name, before anything is served with it.
func TestLoadAdapterRefuses(t *testing.T) {
	cfg := synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 3}
	base := randomFile(t, cfg)
	b := backend(t)
	m := load(t, b, base)
	good := loraBytes(t, base, synth.LoRAConfig{Rank: 4, Seed: 1})
	loadAdapter(t, m, good)
	setKV := func(key string, val any) func(string, any) (any, bool) {
		return func(k string, v any) (any, bool) {
			if k == key {
				return val, val != nil
			}
			return v, true
		}
	}
	onTensor := func(name string, f func(ti *gguf.TensorInfo) bool) func(*gguf.TensorInfo) bool {
		return func(ti *gguf.TensorInfo) bool {
			if ti.Name == name {
				return f(ti)
			}
			return true
		}
	}
	tied := load(t, b, randomFile(t, synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 3, Tied: true}))
	moe := randomFile(t, synth.Config{Arch: "qwen3moe", Experts: 4, ExpertsUsed: 2, Layers: 1, DModel: 64, Heads: 4, KVHeads: 2, FFN: 64, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 3})
	otherBase := load(t, b, randomFile(t, synth.Config{Layers: 2, DModel: 128, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 3}))
	for _, tc := range []struct {
		name string
		m    *Model
		data []byte
		err  error
		says string
	}{
		{"model file", m, writerBytes(t, func() *gguf.Writer { w, _ := synth.Random(cfg); return w }()), ErrAdapter, "general.type"},
		{"not gguf", m, []byte("GGUF but not really"), gguf.ErrFormat, ""},
		{"adapter.type", m, rewriteAdapter(t, good, setKV("adapter.type", "control_vector"), nil), ErrAdapter, "adapter.type"},
		{"no adapter.type", m, rewriteAdapter(t, good, setKV("adapter.type", nil), nil), ErrAdapter, "adapter.type"},
		{"architecture", m, rewriteAdapter(t, good, setKV("general.architecture", "qwen3"), nil), ErrAdapter, `"qwen3"`},
		{"alpha type", m, rewriteAdapter(t, good, setKV("adapter.lora.alpha", "x"), nil), ErrAdapter, "alpha"},
		{"alpha NaN", m, rewriteAdapter(t, good, setKV("adapter.lora.alpha", float32(math.NaN())), nil), ErrAdapter, "alpha"},
		{"alpha infinite", m, rewriteAdapter(t, good, setKV("adapter.lora.alpha", float32(math.Inf(1))), nil), ErrAdapter, "alpha"},
		{"no alpha: scale 1", m, rewriteAdapter(t, good, setKV("adapter.lora.alpha", nil), nil), nil, ""},
		{"lone lora_a", m, rewriteAdapter(t, good, nil, onTensor("blk.1.ffn_up.weight.lora_b", func(*gguf.TensorInfo) bool { return false })), ErrAdapter, "blk.1.ffn_up.weight"},
		{"foreign tensor", m, rewriteAdapter(t, good, nil, onTensor("blk.0.attn_q.weight.lora_a", func(ti *gguf.TensorInfo) bool { ti.Name = "blk.0.attn_q.weight.extra"; return true })), ErrAdapter, "blk.0.attn_q.weight.extra"},
		{"layer beyond the base", m, rewriteAdapter(t, good, nil, func(ti *gguf.TensorInfo) bool {
			ti.Name = strings.Replace(ti.Name, "blk.1.", "blk.7.", 1)
			return true
		}), ErrAdapter, "blk.7.attn_q.weight"},
		{"layer number spelled 01", m, rewriteAdapter(t, good, nil, func(ti *gguf.TensorInfo) bool {
			ti.Name = strings.Replace(ti.Name, "blk.1.", "blk.01.", 1)
			return true
		}), ErrAdapter, "blk.01."},
		{"token_embd", m, rewriteAdapter(t, good, nil, func(ti *gguf.TensorInfo) bool {
			ti.Name = strings.Replace(ti.Name, "blk.0.attn_q.weight", "token_embd.weight", 1)
			return true
		}), ErrUnsupported, "token_embd.weight"},
		{"norm", m, rewriteAdapter(t, good, nil, func(ti *gguf.TensorInfo) bool {
			ti.Name = strings.Replace(ti.Name, "blk.0.attn_q.weight", "blk.0.attn_norm.weight", 1)
			return true
		}), ErrUnsupported, "blk.0.attn_norm.weight"},
		{"no pairs", m, rewriteAdapter(t, good, nil, func(*gguf.TensorInfo) bool { return false }), ErrAdapter, "no lora_a"},
		{"another base's shapes", otherBase, good, ErrAdapter, "blk.0.attn_q.weight"},
		{"output on a tied base", tied, loraBytes(t, randomFile(t, cfg), synth.LoRAConfig{Rank: 4, Output: true, Targets: []string{"none"}}), ErrAdapter, "output.weight"},
		{"experts", load(t, b, moe), rewriteAdapter(t, loraBytes(t, randomFile(t, cfg), synth.LoRAConfig{Rank: 4, Targets: []string{"ffn_down.weight"}}),
			setKV("general.architecture", "qwen3moe"), nil), ErrAdapter, "blk.0.ffn_down.weight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := LoadAdapter(tc.m, tc.data)
			if tc.err == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tc.err) {
				t.Fatalf("got %v, want %v", err, tc.err)
			}
			if !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("error %q does not name %q", err, tc.says)
			}
		})
	}
}

// TestLoadAdapterShapes: each half of a pair is checked against the base
// tensor's shape, and the two halves against each other, as llama.cpp does.
func TestLoadAdapterShapes(t *testing.T) {
	cfg := synth.Config{Layers: 1, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 3}
	base := randomFile(t, cfg)
	m := load(t, backend(t), base)
	for _, tc := range []struct {
		tensor string
		dims   []uint64
	}{
		{"blk.0.attn_k.weight.lora_a", []uint64{128, 4}},  // in of another tensor
		{"blk.0.attn_k.weight.lora_b", []uint64{4, 64}},   // out of another tensor
		{"blk.0.ffn_down.weight.lora_b", []uint64{8, 64}}, // rank of A is 4
		{"blk.0.attn_q.weight.lora_a", []uint64{64, 4, 1}},
	} {
		t.Run(tc.tensor, func(t *testing.T) {
			good := loraBytes(t, base, synth.LoRAConfig{Rank: 4, Seed: 1})
			var data []byte
			{
				f, _ := gguf.Parse(good)
				w := gguf.NewWriter()
				for _, e := range f.KV {
					_ = w.Set(e.Key, e.Value)
				}
				for _, ti := range f.Tensors {
					dims := ti.Dims
					if ti.Name == tc.tensor {
						dims = tc.dims
					}
					n := 4
					for _, d := range dims {
						n *= int(d)
					}
					buf := make([]byte, n)
					copy(buf, f.Data(ti))
					if err := w.AddTensor(ti.Name, ti.Type, dims, buf); err != nil {
						t.Fatal(err)
					}
				}
				data = writerBytes(t, w)
			}
			_, err := LoadAdapter(m, data)
			if !errors.Is(err, ErrAdapter) || !strings.Contains(err.Error(), strings.TrimSuffix(strings.TrimSuffix(tc.tensor, ".lora_a"), ".lora_b")) {
				t.Fatalf("got %v, want ErrAdapter naming %s", err, tc.tensor)
			}
		})
	}
}

// TestForwardRefusesForeignAdapter: an adapter loaded for one model is
// refused in another's batch (nothing computed).
func TestForwardRefusesForeignAdapter(t *testing.T) {
	cfg := synth.Config{Layers: 1, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 3}
	base := randomFile(t, cfg)
	b := backend(t)
	m1, m2 := load(t, b, base), load(t, b, base)
	ad := loadAdapter(t, m1, loraBytes(t, base, synth.LoRAConfig{Rank: 4}))
	k := newKV(t, m2, 4, 16, "t")
	s := k.start(t, "t", "r", 16)
	if err := k.pool.Write(s.lease, 3); err != nil {
		t.Fatal(err)
	}
	bt, err := k.pool.BlockTable(s.lease, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m2.Forward(k.arena, []Seq{{Table: bt, Tokens: []int32{1, 2, 3}, Adapter: ad}}, false); !errors.Is(err, ErrBatch) {
		t.Fatalf("got %v, want ErrBatch", err)
	}
}

// FuzzLoadAdapter: no file makes the loader panic; whatever it accepts
// runs.
func FuzzLoadAdapter(f *testing.F) {
	cfg := synth.Config{Layers: 1, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 3}
	base := randomFile(f, cfg)
	f.Add(loraBytes(f, base, synth.LoRAConfig{Rank: 2, Targets: []string{"attn_q.weight"}}))
	m := load(f, backend(f), base)
	f.Fuzz(func(t *testing.T, data []byte) {
		ad, err := LoadAdapter(m, data)
		if err != nil {
			return
		}
		runAd(t, m, ad, []int32{1, 2, 3}, 1)
	})
}

// BenchmarkLoRADecode: decode tokens/s of 16 sequences (32-token contexts)
// without adapters and of the same 16 spread over 4 different rank-16
// adapters (every projection adapted; sequence i under adapter i mod 4, so
// every adapter's rows are gathered), on the 4-layer d=512 benchmark
// models. The two batches alternate step by step in one loop so that a
// noisy machine slows both alike; ratio is adapters ÷ none (tokens/s),
// cpu-ratio the same from the process's CPU time (getrusage) rather than
// the wall clock.
func BenchmarkLoRADecode(b *testing.B) {
	for _, bm := range benchModels[:3:3] {
		if bm.cfg.Experts > 0 {
			continue
		}
		b.Run(bm.name, func(b *testing.B) {
			const batch, prompt, nAd = 16, 32, 4
			f := benchFile(b, bm.name, bm.cfg)
			m := load(b, backend(b), f)
			ads := make([]*Adapter, nAd)
			for i := range ads {
				ads[i] = loadAdapter(b, m, loraBytes(b, f, synth.LoRAConfig{Rank: 16, Seed: uint64(i + 1)}))
			}
			ctx := prompt + b.N + 1
			type run struct {
				k    *kv
				seqs []*seq
				in   [][]int32
				ads  []*Adapter
				d    time.Duration
				cpu  time.Duration
			}
			runs := make([]*run, 2)
			for r := range runs {
				k := newKV(b, m, batch*(ctx/16+1), 16, "t")
				ru := &run{k: k, seqs: make([]*seq, batch), in: make([][]int32, batch), ads: make([]*Adapter, batch)}
				for i := range ru.seqs {
					ru.seqs[i] = k.start(b, "t", fmt.Sprint("r", i), ctx)
					ru.in[i] = tokens(prompt, m.Vocab, i)
					if r == 1 {
						ru.ads[i] = ads[i%nAd]
					}
				}
				k.stepAd(b, ru.seqs, ru.in, ru.ads, false)
				for i := range ru.in {
					ru.in[i] = []int32{int32(i)}
				}
				runs[r] = ru
			}
			b.ResetTimer()
			for it := 0; it < b.N; it++ {
				for _, ru := range runs {
					t0, c0 := time.Now(), cpuTime()
					out := ru.k.stepAd(b, ru.seqs, ru.in, ru.ads, false)
					ru.d += time.Since(t0)
					ru.cpu += cpuTime() - c0
					for i := range ru.in {
						ru.in[i][0] = argmax(out[i])
					}
				}
			}
			base := float64(b.N*batch) / runs[0].d.Seconds()
			lora := float64(b.N*batch) / runs[1].d.Seconds()
			b.ReportMetric(base, "none-tok/s")
			b.ReportMetric(lora, "lora-tok/s")
			b.ReportMetric(lora/base, "ratio")
			// On a shared machine the wall clock counts the time the
			// process waits for a core; the CPU time it spends does not.
			b.ReportMetric(runs[0].cpu.Seconds()/runs[1].cpu.Seconds(), "cpu-ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// noExpand is the CPU backend without kernels.LowRankAdder (and without
// MultiMatMul): the expand through MatMul, Scale and Add.
type noExpand struct {
	kernels.Backend
	kernels.Scaler
}

// TestLoRAWithoutLowRankAdder: on a backend without kernels.LowRankAdder
// the adapter's expand runs as a matrix product: the same logits as the
// LowRankAdder's within rounding, and batch invariant too.
func TestLoRAWithoutLowRankAdder(t *testing.T) {
	cfg := synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 256, DType: gguf.F32, Seed: 9}
	base := randomFile(t, cfg)
	data := [][]byte{loraBytes(t, base, synth.LoRAConfig{Rank: 8, Seed: 1, Output: true}), loraBytes(t, base, synth.LoRAConfig{Rank: 4, Seed: 2})}
	cb := backend(t)
	plainB := noExpand{cb, cb.(kernels.Scaler)}
	if _, ok := kernels.Backend(plainB).(kernels.LowRankAdder); ok {
		t.Fatal("the wrapper still has AddLowRank")
	}
	m, mp := load(t, cb, base), load(t, plainB, base)
	ads, adsP := []*Adapter{nil}, []*Adapter{nil}
	for _, d := range data {
		ads, adsP = append(ads, loadAdapter(t, m, d)), append(adsP, loadAdapter(t, mp, d))
	}
	prompts := [][]int32{tokens(9, 300, 1), tokens(17, 300, 2), tokens(5, 300, 3), tokens(12, 300, 4)}
	assign := []int{1, 0, 2, 1}
	batchRun := func(m *Model, ads []*Adapter, idx []int) [][]float32 {
		k := newKV(t, m, 16, 16, "t")
		seqs, in, sa := make([]*seq, len(idx)), make([][]int32, len(idx)), make([]*Adapter, len(idx))
		for j, i := range idx {
			seqs[j], in[j], sa[j] = k.start(t, "t", fmt.Sprint("r", j), 32), prompts[i], ads[assign[i]]
		}
		return k.stepAd(t, seqs, in, sa, false)
	}
	mixed, mixedP := batchRun(m, ads, []int{0, 1, 2, 3}), batchRun(mp, adsP, []int{0, 1, 2, 3})
	for i := range prompts {
		if d := maxDiff(mixed[i], mixedP[i]); d > 1e-4 {
			t.Fatalf("sequence %d: the two expands differ by %g", i, d)
		}
		alone := batchRun(mp, adsP, []int{i})[0]
		for x := range alone {
			if math.Float32bits(alone[x]) != math.Float32bits(mixedP[i][x]) {
				t.Fatalf("sequence %d: logit %d is %v in the batch, %v alone", i, x, mixedP[i][x], alone[x])
			}
		}
	}
}
