package synth

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/tokenizer"
)

func write(t *testing.T, w *gguf.Writer) ([]byte, *gguf.File) {
	t.Helper()
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), f
}

func TestRandom(t *testing.T) {
	tests := []Config{
		{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300, Context: 128, DType: gguf.F32, Seed: 1},
		{Layers: 1, DModel: 32, Heads: 2, FFN: 64, Vocab: 259, Context: 1 << 20, DType: gguf.F16, Seed: 2, Tied: true},
		{Layers: 1, DModel: 32, Heads: 2, FFN: 64, Vocab: 259, Context: 64, DType: gguf.BF16, Seed: 15},
		{Layers: 3, DModel: 64, Heads: 8, KVHeads: 1, FFN: 128, Vocab: 1000, Context: 4096, DType: gguf.Q8_0, Seed: 3},
		// qwen3: per-head Q/K norms, head dim apart from d_model/heads.
		{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 96, Vocab: 300, Context: 128, DType: gguf.Q8_0, Seed: 4, Tied: true},
		{Layers: 1, DModel: 256, Heads: 4, FFN: 512, Vocab: 300, Context: 256, DType: gguf.Q5_K, Seed: 4},
		{Layers: 1, DModel: 256, Heads: 4, FFN: 256, Vocab: 300, Context: 64, DType: gguf.Q2_K, Seed: 10},
		{Layers: 1, DModel: 64, Heads: 2, FFN: 96, Vocab: 300, Context: 64, DType: gguf.Q4_1, Seed: 6},
		{Layers: 1, DModel: 64, Heads: 2, FFN: 96, Vocab: 300, Context: 64, DType: gguf.Q5_0, Seed: 7},
		{Layers: 1, DModel: 64, Heads: 2, FFN: 96, Vocab: 300, Context: 64, DType: gguf.Q5_1, Seed: 8},
		{Layers: 8, DModel: 256, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 300, Context: 256, DType: gguf.Q5_K, Seed: 5, KQuantMix: true},
		{Layers: 1, DModel: 256, Heads: 4, FFN: 256, Vocab: 300, Context: 64, DType: gguf.Q3_K, Seed: 11},
		{Layers: 1, DModel: 64, Heads: 2, FFN: 96, Vocab: 300, Context: 64, DType: gguf.MXFP4, Seed: 12},
		// Mixtures of experts: F32 routers, 3-D expert stacks.
		{Arch: "qwen3moe", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 64, Experts: 8, ExpertsUsed: 2, Vocab: 300, Context: 128, DType: gguf.MXFP4, Seed: 13, Tied: true},
		{Arch: "mixtral", Layers: 8, DModel: 256, Heads: 4, KVHeads: 2, FFN: 256, Experts: 4, ExpertsUsed: 2, Vocab: 300, Context: 128, DType: gguf.Q4_K, KQuantMix: true, Seed: 14},
	}
	for _, c := range tests {
		arch := c.Arch
		if arch == "" {
			arch = "llama"
		}
		hd := c.HeadDim
		if hd == 0 {
			hd = c.DModel / c.Heads
		}
		name := arch + "-" + c.DType.String()
		if c.KQuantMix {
			name += "_M"
		}
		t.Run(name, func(t *testing.T) {
			w, err := Random(c)
			if err != nil {
				t.Fatal(err)
			}
			data, f := write(t, w)
			var params uint64
			for _, ti := range f.Tensors {
				params += ti.Elements()
				if strings.HasSuffix(ti.Name, "norm.weight") && ti.Type != gguf.F32 {
					t.Errorf("%s: got %v, want F32 norms", ti.Name, ti.Type)
				}
				if !strings.HasSuffix(ti.Name, "norm.weight") && ti.Type != c.TensorType(ti.Name) {
					t.Errorf("%s: got %v, want %v", ti.Name, ti.Type, c.TensorType(ti.Name))
				}
			}
			if int64(params) != c.Params() {
				t.Errorf("got %d weights in the file, Params() says %d", params, c.Params())
			}
			_, hasOutput := f.Tensor("output.weight")
			if hasOutput == c.Tied {
				t.Errorf("output.weight present %v with Tied %v", hasOutput, c.Tied)
			}
			kv := c.KVHeads
			if kv == 0 {
				kv = c.Heads
			}
			if arch == "mixtral" {
				arch = "llama" // a llama file with experts, as llama.cpp reads Mixtral
			}
			p := arch + "."
			wantInts := map[string]int64{
				p + "block_count": int64(c.Layers), p + "embedding_length": int64(c.DModel),
				p + "attention.head_count": int64(c.Heads), p + "attention.head_count_kv": int64(kv),
				p + "feed_forward_length": int64(c.FFN), p + "context_length": int64(c.Context),
				p + "rope.dimension_count":    int64(hd),
				"tokenizer.ggml.bos_token_id": EndOfText, "tokenizer.ggml.eot_token_id": IMEnd,
			}
			if c.Experts > 0 {
				wantInts[p+"expert_count"], wantInts[p+"expert_used_count"] = int64(c.Experts), int64(c.ExpertsUsed)
				for _, n := range []string{"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"} {
					ti, ok := f.Tensor("blk.1." + n + ".weight")
					rows, cols := c.FFN, c.DModel
					if n == "ffn_down_exps" {
						rows, cols = cols, rows
					}
					if !ok || !slices.Equal(ti.Dims, []uint64{uint64(cols), uint64(rows), uint64(c.Experts)}) {
						t.Errorf("%s: present %v dims %v", n, ok, ti.Dims)
					}
				}
				if r, ok := f.Tensor("blk.0.ffn_gate_inp.weight"); !ok || r.Type != gguf.F32 || !slices.Equal(r.Dims, []uint64{uint64(c.DModel), uint64(c.Experts)}) {
					t.Errorf("router: present %v type %v dims %v", ok, r.Type, r.Dims)
				}
				if _, ok := f.Tensor("blk.0.ffn_up.weight"); ok {
					t.Error("a dense ffn_up beside the experts")
				}
			}
			if arch == "qwen3moe" {
				wantInts[p+"expert_feed_forward_length"] = int64(c.FFN)
			}
			if arch != "llama" {
				wantInts[p+"attention.key_length"], wantInts[p+"attention.value_length"] = int64(hd), int64(hd)
			}
			if got, _ := f.String("general.architecture"); got != arch {
				t.Errorf("got architecture %q, want %q", got, arch)
			}
			for _, n := range []string{"attn_q_norm", "attn_k_norm"} {
				ti, ok := f.Tensor("blk.1." + n + ".weight")
				if ok != (arch == "qwen3" || arch == "qwen3moe") || ok && (len(ti.Dims) != 1 || ti.Dims[0] != uint64(hd)) {
					t.Errorf("%s: present %v dims %v (arch %s, head dim %d)", n, ok, ti.Dims, arch, hd)
				}
			}
			for k, want := range wantInts {
				if got, ok := f.Int(k); !ok || got != want {
					t.Errorf("%s: got %d, want %d", k, got, want)
				}
			}
			if pre, _ := f.String("tokenizer.ggml.pre"); pre != "gpt-2" {
				t.Errorf("got pre %q, want the default gpt-2", pre)
			}
			k, _ := f.Tensor("blk.0.attn_k.weight")
			if k.Dims[0] != uint64(c.DModel) || k.Dims[1] != uint64(kv*hd) {
				t.Errorf("attn_k dims %v", k.Dims)
			}
			o, _ := f.Tensor("blk.0.attn_output.weight")
			if o.Dims[0] != uint64(c.Heads*hd) || o.Dims[1] != uint64(c.DModel) {
				t.Errorf("attn_output dims %v", o.Dims)
			}
			// Same config, same bytes.
			w2, _ := Random(c)
			data2, _ := write(t, w2)
			if !bytes.Equal(data, data2) {
				t.Error("two generations of one config differ")
			}
			// The vocabulary builds a working tokenizer that round-trips text.
			tok, err := tokenizer.FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			text := "the quick brown fox, <|im_start|>ünïcode 🦙\n"
			ids := tok.Encode(text, true, false)
			if got := tok.Decode(ids, true); got != text {
				t.Errorf("round trip: got %q, want %q", got, text)
			}
			if tok.Len() != c.Vocab || tok.ChatTemplate != ChatTemplate || !tok.IsEOG(IMEnd) {
				t.Errorf("got vocab %d template %q", tok.Len(), tok.ChatTemplate)
			}
			if got := tok.Encode("<|im_start|>", false, true); len(got) != 1 || got[0] != IMStart {
				t.Errorf("special token: got %v, want [%d]", got, IMStart)
			}
		})
	}
}

func TestVocabMerges(t *testing.T) {
	tokens, types, merges := Vocab(2000)
	if len(tokens) != 2000 || len(types) != 2000 || len(merges) != 2000-259 {
		t.Fatalf("got %d tokens %d types %d merges", len(tokens), len(types), len(merges))
	}
	index := map[string]bool{}
	for _, s := range tokens {
		if index[s] {
			t.Fatalf("duplicate token %q", s)
		}
		index[s] = true
	}
	for i, m := range merges {
		a, b, _ := strings.Cut(m, " ")
		if !index[a] || !index[b] || tokens[259+i] != a+b {
			t.Fatalf("merge %d %q does not produce token %q from existing tokens", i, m, tokens[259+i])
		}
	}
}

func TestRandomRejects(t *testing.T) {
	ok := Config{Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 300, Context: 64, DType: gguf.F32}
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"no layers", func(c *Config) { c.Layers = 0 }},
		{"small vocab", func(c *Config) { c.Vocab = 258 }},
		{"heads do not divide", func(c *Config) { c.Heads = 5 }},
		{"odd head dim", func(c *Config) { c.DModel = 36; c.Heads = 4 }},
		{"kv heads do not divide", func(c *Config) { c.KVHeads = 3 }},
		{"q8 needs multiples of 32", func(c *Config) { c.DType = gguf.Q8_0; c.FFN = 48 }},
		{"q5_0 needs multiples of 32", func(c *Config) { c.DType = gguf.Q5_0; c.FFN = 48 }},
		{"k-quants need multiples of 256", func(c *Config) { c.DType = gguf.Q5_K; c.DModel = 512; c.FFN = 384 }},
		{"k-quant mix needs Q4_K or Q5_K", func(c *Config) { c.DType = gguf.Q8_0; c.KQuantMix = true }},
		{"unsupported dtype", func(c *Config) { c.DType = gguf.IQ4_NL }},
		{"mxfp4 needs multiples of 32", func(c *Config) { c.DType = gguf.MXFP4; c.FFN = 48 }},
		{"experts on llama", func(c *Config) { c.Experts, c.ExpertsUsed = 4, 2 }},
		{"moe without experts", func(c *Config) { c.Arch = "qwen3moe" }},
		{"more used than experts", func(c *Config) { c.Arch, c.Experts, c.ExpertsUsed = "mixtral", 2, 3 }},
		{"context too large", func(c *Config) { c.Context = 1 << 33 }},
		{"unknown arch", func(c *Config) { c.Arch = "gemma2" }},
		{"odd rope dims", func(c *Config) { c.RopeDims = 3 }},
		{"rope dims above head dim", func(c *Config) { c.RopeDims = 1024 }},
		{"pattern without window", func(c *Config) { c.SWAPattern = make([]bool, c.Layers) }},
		{"pattern of the wrong length", func(c *Config) { c.Window = 4; c.SWAPattern = []bool{true, false} }},
		{"odd explicit head dim", func(c *Config) { c.HeadDim = 15 }},
		{"q8 needs heads×head dim multiple of 32", func(c *Config) { c.DType = gguf.Q8_0; c.HeadDim = 10 }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.change(&c)
			if _, err := Random(c); err == nil {
				t.Error("got nil error")
			}
		})
	}
	if _, err := Random(ok); err != nil {
		t.Errorf("valid config: %v", err)
	}
}

// TestKQuantMix pins the tensor types of a Q5_K_M-style file to
// llama.cpp's use_more_bits layers (of 8: 0, 3, 6 and 7) and its file type.
func TestKQuantMix(t *testing.T) {
	c := Config{Layers: 8, DModel: 256, Heads: 4, FFN: 256, Vocab: 300, Context: 64, DType: gguf.Q5_K, KQuantMix: true}
	w, err := Random(c)
	if err != nil {
		t.Fatal(err)
	}
	_, f := write(t, w)
	want := map[string]gguf.TensorType{
		"output.weight": gguf.Q6_K, "token_embd.weight": gguf.Q5_K,
		"blk.0.attn_v.weight": gguf.Q6_K, "blk.0.ffn_down.weight": gguf.Q6_K, "blk.0.attn_q.weight": gguf.Q5_K,
		"blk.1.attn_v.weight": gguf.Q5_K, "blk.2.ffn_down.weight": gguf.Q5_K,
		"blk.3.attn_v.weight": gguf.Q6_K, "blk.3.ffn_down.weight": gguf.Q6_K, "blk.3.ffn_up.weight": gguf.Q5_K,
		"blk.4.ffn_down.weight": gguf.Q5_K, "blk.5.attn_v.weight": gguf.Q5_K,
		"blk.6.ffn_down.weight": gguf.Q6_K, "blk.7.attn_v.weight": gguf.Q6_K,
	}
	for name, dt := range want {
		ti, ok := f.Tensor(name)
		if !ok {
			t.Fatalf("%s missing", name)
		}
		if ti.Type != dt {
			t.Errorf("%s: got %v, want %v", name, ti.Type, dt)
		}
	}
	if ft, _ := f.Int("general.file_type"); ft != 17 {
		t.Errorf("general.file_type: got %d, want 17 (MOSTLY_Q5_K_M)", ft)
	}
}

func TestContextBagFile(t *testing.T) {
	w, err := ContextBag(BagConfig{Context: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	_, f := write(t, w)
	d, bias := BagDims(259)
	if d != 320 || bias != 259 {
		t.Fatalf("got d %d bias %d, want 320 259", d, bias)
	}
	if ctx, _ := f.Int("llama.context_length"); ctx != 1<<20 {
		t.Errorf("got context %d, want 1048576", ctx)
	}
	if n, _ := f.Int("llama.block_count"); n != 1 {
		t.Errorf("got %d layers, want 1", n)
	}
	for _, name := range []string{"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.ffn_down.weight"} {
		ti, _ := f.Tensor(name)
		if bytes.ContainsFunc(f.Data(ti), func(r rune) bool { return r != 0 }) {
			t.Errorf("%s is not all zero", name)
		}
	}
	if _, err := ContextBag(BagConfig{Vocab: 10}); err == nil {
		t.Error("vocab 10 accepted")
	}
}
