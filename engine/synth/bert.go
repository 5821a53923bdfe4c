package synth

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/cloison/cloison/engine/gguf"
)

// BertConfig describes a random-weight BERT-family encoder.
type BertConfig struct {
	Name string // general.name; "synthetic-bert" if empty
	// Arch is "bert" (default: learned absolute positions, GELU),
	// "nomic-bert" (NeoX RoPE, fused attn_qkv, SwiGLU, no biases) or
	// "t5encoder" (T5's encoder: RMS norms, relative position bias, gated
	// GELU; a Unigram vocabulary, T5Vocab; see T5).
	Arch    string
	Layers  int
	DModel  int
	Heads   int
	FFN     int
	Context int // context_length, and position_embd's rows for bert
	// Pooling is {arch}.pooling_type: 1 mean, 2 CLS (default), 4 rank (a
	// cross-encoder: cls and cls.output tensors, RankLabels outputs).
	Pooling    int
	RankLabels int // classifier.output_labels; 0 means 1
	DType      gguf.TensorType
	Seed       uint64
	NormEps    float32 // 0 means 1e-12, as BERT's (t5encoder: 1e-6)
	// t5encoder only: KeyLength is attention.key_length (0: DModel/Heads);
	// ReLU selects T5's ReLU feed-forward instead of flan-T5's gated GELU.
	KeyLength int  `json:",omitempty"`
	ReLU      bool `json:",omitempty"`
}

// BERT special token ids of BertVocab (llama.cpp's defaults for "bert").
const (
	BertPad  = 0
	BertUnk  = 100
	BertCLS  = 101
	BertSep  = 102
	BertMask = 103
)

// bertWords are whole-word tokens of BertVocab, so that English text takes
// fewer tokens than characters.
var bertWords = []string{
	"the", "of", "and", "to", "in", "is", "was", "for", "on", "with", "as", "by", "at", "it", "from",
	"that", "this", "are", "be", "or", "an", "which", "not", "have", "has", "what", "how", "who",
	"cat", "dog", "sat", "mat", "paris", "france", "capital", "city", "river", "water", "tree",
	"hello", "world", "model", "tenant", "vector", "search", "query", "document", "rank", "score",
}

// BertVocab is a WordPiece vocabulary as llama.cpp's converter stores one:
// [PAD] 0, [unusedN] 1–99, [UNK] 100, [CLS] 101, [SEP] 102, [MASK] 103;
// then every printable ASCII character other than uppercase letters as a
// word start ("▁a", stored "##"-less) and as a continuation ("a"); then
// bertWords as word starts and a few suffixes as continuations. Its
// lowercasing normalizer makes uppercase letters unnecessary.
func BertVocab() (tokens []string, types []int32) {
	for i := range 104 {
		tokens, types = append(tokens, fmt.Sprintf("[unused%d]", i)), append(types, 5)
	}
	tokens[BertPad], tokens[BertUnk], tokens[BertCLS], tokens[BertSep], tokens[BertMask] = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
	for _, i := range []int{BertPad, BertUnk, BertCLS, BertSep, BertMask} {
		types[i] = 3
	}
	add := func(s string) { tokens, types = append(tokens, s), append(types, 1) }
	for c := byte('!'); c <= '~'; c++ {
		if c >= 'A' && c <= 'Z' {
			continue
		}
		add("▁" + string(c))
		add(string(c))
	}
	for _, w := range bertWords {
		add("▁" + w)
	}
	for _, s := range []string{"ing", "ed", "er", "es", "ly", "tion"} {
		add(s)
	}
	return tokens, types
}

func (c *BertConfig) fill() error {
	if c.Name == "" && c.Arch == "t5encoder" {
		c.Name = "synthetic-t5encoder"
	}
	if c.Name == "" {
		c.Name = "synthetic-bert"
	}
	if c.Arch == "" {
		c.Arch = "bert"
	}
	t5 := c.Arch == "t5encoder"
	if c.Arch != "bert" && c.Arch != "nomic-bert" && !t5 {
		return fmt.Errorf("synth: encoder architecture %q (bert, nomic-bert, t5encoder)", c.Arch)
	}
	if (c.KeyLength != 0 || c.ReLU) && !t5 {
		return fmt.Errorf("synth: key length and ReLU are t5encoder's")
	}
	switch {
	case c.Pooling == 0 && t5:
		c.Pooling = 1
	case c.Pooling == 0:
		c.Pooling = 2
	}
	switch {
	case t5 && c.Pooling != 1 && c.Pooling != 2 && c.Pooling != 3:
		return fmt.Errorf("synth: t5encoder pooling %d (1 mean, 2 CLS, 3 last)", c.Pooling)
	case !t5 && c.Pooling != 1 && c.Pooling != 2 && c.Pooling != 4:
		return fmt.Errorf("synth: encoder pooling %d (1 mean, 2 CLS, 4 rank)", c.Pooling)
	}
	if c.RankLabels == 0 {
		c.RankLabels = 1
	}
	switch {
	case c.NormEps == 0 && t5:
		c.NormEps = 1e-6
	case c.NormEps == 0:
		c.NormEps = 1e-12
	}
	if t5 {
		if c.KeyLength == 0 && c.Heads > 0 && c.DModel%c.Heads == 0 {
			c.KeyLength = c.DModel / c.Heads
		}
		if c.KeyLength < 1 || c.Heads < 1 || c.DModel < 1 || c.FFN < 1 || c.Layers < 1 || c.Context < 1 {
			return fmt.Errorf("synth: layers, d_model, heads, key length, ffn and context must be positive: %+v", *c)
		}
		if c.DType == gguf.Q8_0 && (c.Heads*c.KeyLength)%32 != 0 {
			return fmt.Errorf("synth: Q8_0 needs heads × key length to be a multiple of 32")
		}
	}
	switch {
	case c.Layers < 1 || c.DModel < 1 || c.Heads < 1 || c.FFN < 1 || c.Context < 1 || c.RankLabels < 1:
		return fmt.Errorf("synth: layers, d_model, heads, ffn, context and labels must be positive: %+v", *c)
	case !t5 && (c.DModel%c.Heads != 0 || (c.DModel/c.Heads)%2 != 0):
		return fmt.Errorf("synth: d_model %d with %d heads needs an even head dim", c.DModel, c.Heads)
	case c.Context > math.MaxUint32:
		return fmt.Errorf("synth: context %d does not fit context_length (uint32)", c.Context)
	}
	switch c.DType {
	case gguf.F32, gguf.F16:
	case gguf.Q8_0:
		if c.DModel%32 != 0 || c.FFN%32 != 0 {
			return fmt.Errorf("synth: Q8_0 needs d_model and ffn to be multiples of 32")
		}
	default:
		return fmt.Errorf("synth: encoder dtype %v (F32, F16, Q8_0)", c.DType)
	}
	return nil
}

// Bert returns a Writer holding a random-weight BERT-family encoder with
// BertVocab, in the layout llama.cpp's converter writes (and its bert and
// nomic-bert loaders read): token_embd, token_types (2 types),
// position_embd (bert), token_embd_norm; per layer attn_q/k/v (nomic-bert:
// attn_qkv), attn_output, attn_output_norm, ffn_up (nomic-bert: and
// ffn_gate), ffn_down and layer_output_norm, with biases for bert; cls and
// cls.output with pooling rank. Matrices are N(0, 1/fan_in) in DType;
// biases N(0, 0.02²), norm weights 1 + N(0, 0.1²) and norm biases
// N(0, 0.1²), all F32; embeddings N(0, 1) in DType.
func Bert(c BertConfig) (*gguf.Writer, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	if c.Arch == "t5encoder" {
		return t5(c)
	}
	w := gguf.NewWriter()
	tokens, types := BertVocab()
	p := c.Arch + "."
	kvs := []struct {
		k string
		v any
	}{
		{"general.architecture", c.Arch},
		{"general.name", c.Name},
		{"general.file_type", fileType(c.DType)},
		{p + "context_length", uint32(c.Context)},
		{p + "embedding_length", uint32(c.DModel)},
		{p + "block_count", uint32(c.Layers)},
		{p + "feed_forward_length", uint32(c.FFN)},
		{p + "attention.head_count", uint32(c.Heads)},
		{p + "attention.layer_norm_epsilon", c.NormEps},
		{p + "attention.causal", false},
		{p + "pooling_type", uint32(c.Pooling)},
		{"tokenizer.ggml.model", "bert"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.token_type_count", uint32(2)},
		{"tokenizer.ggml.bos_token_id", uint32(BertCLS)},
		{"tokenizer.ggml.seperator_token_id", uint32(BertSep)},
		{"tokenizer.ggml.unknown_token_id", uint32(BertUnk)},
		{"tokenizer.ggml.padding_token_id", uint32(BertPad)},
		{"tokenizer.ggml.mask_token_id", uint32(BertMask)},
	}
	if c.Arch == "nomic-bert" {
		kvs = append(kvs, struct {
			k string
			v any
		}{p + "rope.freq_base", float32(1000)})
	}
	if c.Pooling == 4 {
		labels := make([]string, c.RankLabels)
		for i := range labels {
			labels[i] = fmt.Sprintf("LABEL_%d", i)
		}
		kvs = append(kvs, struct {
			k string
			v any
		}{p + "classifier.output_labels", labels})
	}
	for _, kv := range kvs {
		if err := w.Set(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	gen := tensorGen(w, c.Seed)
	d := uint64(c.DModel)
	ffn := uint64(c.FFN)
	matrix := func(name string, rows, cols uint64) error {
		return gen(name, c.DType, []uint64{cols, rows}, 0, float32(1/math.Sqrt(float64(cols))))
	}
	bias := func(name string, n uint64) error { return gen(name, gguf.F32, []uint64{n}, 0, 0.02) }
	norm := func(name string) error {
		return errors.Join(gen(name+".weight", gguf.F32, []uint64{d}, 1, 0.1), gen(name+".bias", gguf.F32, []uint64{d}, 0, 0.1))
	}
	bert := c.Arch == "bert"
	errs := []error{
		gen("token_embd.weight", c.DType, []uint64{d, uint64(len(tokens))}, 0, 1),
		gen("token_types.weight", gguf.F32, []uint64{d, 2}, 0, 0.5),
	}
	if bert {
		errs = append(errs, gen("position_embd.weight", c.DType, []uint64{d, uint64(c.Context)}, 0, 0.5))
	}
	errs = append(errs, norm("token_embd_norm"))
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		if bert {
			errs = append(errs,
				matrix(p+"attn_q.weight", d, d), bias(p+"attn_q.bias", d),
				matrix(p+"attn_k.weight", d, d), bias(p+"attn_k.bias", d),
				matrix(p+"attn_v.weight", d, d), bias(p+"attn_v.bias", d),
				matrix(p+"attn_output.weight", d, d), bias(p+"attn_output.bias", d),
				norm(p+"attn_output_norm"),
				matrix(p+"ffn_up.weight", ffn, d), bias(p+"ffn_up.bias", ffn),
				matrix(p+"ffn_down.weight", d, ffn), bias(p+"ffn_down.bias", d),
				norm(p+"layer_output_norm"))
			continue
		}
		errs = append(errs,
			matrix(p+"attn_qkv.weight", 3*d, d),
			matrix(p+"attn_output.weight", d, d),
			norm(p+"attn_output_norm"),
			matrix(p+"ffn_up.weight", ffn, d),
			matrix(p+"ffn_gate.weight", ffn, d),
			matrix(p+"ffn_down.weight", d, ffn),
			norm(p+"layer_output_norm"))
	}
	if c.Pooling == 4 {
		labels := uint64(c.RankLabels)
		errs = append(errs,
			gen("cls.weight", gguf.F32, []uint64{d, d}, 0, float32(1/math.Sqrt(float64(d)))), bias("cls.bias", d),
			gen("cls.output.weight", gguf.F32, []uint64{d, labels}, 0, float32(1/math.Sqrt(float64(d)))), bias("cls.output.bias", labels))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}

// tensorGen returns a function that adds a tensor of the given dims (ggml
// order) to w whose values are mean + sd·N(0, 1), in dt, each tensor from
// its own stream of seed (the n-th tensor added: stream n).
func tensorGen(w *gguf.Writer, seed uint64) func(name string, dt gguf.TensorType, dims []uint64, mean, sd float32) error {
	idx := uint64(0)
	return func(name string, dt gguf.TensorType, dims []uint64, mean, sd float32) error {
		idx++
		stream := idx
		cols := int(dims[0])
		rows := 1
		for _, d := range dims[1:] {
			rows *= int(d)
		}
		return w.AddTensorFunc(name, dt, dims, func(b []byte) error {
			r := rand.New(rand.NewPCG(seed, stream))
			row := make([]float32, cols)
			rb := len(b) / rows
			for i := range rows {
				for j := range row {
					row[j] = mean + sd*float32(r.NormFloat64())
				}
				if dt == gguf.F32 {
					f32bytes(b[i*rb:], row)
					continue
				}
				enc, err := encode(dt, row)
				if err != nil {
					return err
				}
				copy(b[i*rb:], enc)
			}
			return nil
		})
	}
}
