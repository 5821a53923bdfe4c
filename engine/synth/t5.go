package synth

import (
	"errors"
	"fmt"
	"math"

	"github.com/cloison/cloison/engine/gguf"
)

// T5 special token ids of T5Vocab (llama.cpp's Unigram defaults).
const (
	T5Pad = 0
	T5EOS = 1 // "</s>", appended to every input (add_eos_token)
	T5Unk = 2
)

// T5RelBuckets is attention.relative_buckets_count of a synthetic
// t5encoder, as T5's.
const T5RelBuckets = 32

// T5Vocab is a SentencePiece Unigram vocabulary as llama.cpp's converter
// stores T5's: <pad> 0, </s> 1, <unk> 2 (types control, control, unknown);
// then "▁" (the word boundary) and every printable ASCII character as a
// word start ("▁a") and a continuation ("a"), scored −10 and −11; then
// bertWords as word starts, scored −5 (the longer the piece, the likelier
// the Viterbi search takes it). Case is kept: T5 has no lowercasing.
func T5Vocab() (tokens []string, scores []float32, types []int32) {
	tokens = []string{"<pad>", "</s>", "<unk>", "▁"}
	scores = []float32{0, 0, 0, -9}
	types = []int32{3, 3, 2, 1}
	add := func(s string, score float32) {
		tokens, scores, types = append(tokens, s), append(scores, score), append(types, 1)
	}
	for ch := byte('!'); ch <= '~'; ch++ {
		add("▁"+string(ch), -10)
		add(string(ch), -11)
	}
	for _, w := range bertWords {
		add("▁"+w, -5)
	}
	return tokens, scores, types
}

// t5 writes a t5encoder (BertConfig.Arch, filled) with T5Vocab, in the
// layout llama.cpp's converter writes and its t5encoder loader reads:
// token_embd; per layer enc.blk.N.attn_norm, attn_q, attn_k, attn_v,
// attn_o, ffn_norm, ffn_gate (unless ReLU), ffn_up, ffn_down, and
// attn_rel_b on layer 0 only (T5 shares it); enc.output_norm. Matrices
// N(0, 1/fan_in) in DType, but attn_q N(0, 1/(fan_in·key_length)): T5's
// initialisation, which folds in the 1/sqrt(d) its attention lacks;
// embeddings N(0, 1) in DType, norm weights 1 + N(0, 0.1²) and the bias
// table N(0, 1) in F32.
func t5(c BertConfig) (*gguf.Writer, error) {
	w := gguf.NewWriter()
	tokens, scores, types := T5Vocab()
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
		{p + "attention.key_length", uint32(c.KeyLength)},
		{p + "attention.value_length", uint32(c.KeyLength)},
		{p + "attention.layer_norm_rms_epsilon", c.NormEps},
		{p + "attention.relative_buckets_count", uint32(T5RelBuckets)},
		// llama.cpp's converter writes no attention.causal for T5, and
		// llama_decode (its embedding path) then masks the encoder
		// causally; llama_encode and T5 itself do not. Written false, the
		// file runs bidirectionally on both paths.
		{p + "attention.causal", false},
		{p + "pooling_type", uint32(c.Pooling)},
		{"tokenizer.ggml.model", "t5"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", scores},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.add_space_prefix", true},
		{"tokenizer.ggml.remove_extra_whitespaces", true},
		{"tokenizer.ggml.add_bos_token", false},
		{"tokenizer.ggml.add_eos_token", true},
		{"tokenizer.ggml.eos_token_id", uint32(T5EOS)},
		{"tokenizer.ggml.unknown_token_id", uint32(T5Unk)},
		{"tokenizer.ggml.padding_token_id", uint32(T5Pad)},
	}
	for _, kv := range kvs {
		if err := w.Set(kv.k, kv.v); err != nil {
			return nil, err
		}
	}
	gen := tensorGen(w, c.Seed)
	d, ffn, q := uint64(c.DModel), uint64(c.FFN), uint64(c.Heads*c.KeyLength)
	matrix := func(name string, rows, cols uint64) error {
		return gen(name, c.DType, []uint64{cols, rows}, 0, float32(1/math.Sqrt(float64(cols))))
	}
	norm := func(name string) error { return gen(name, gguf.F32, []uint64{d}, 1, 0.1) }
	errs := []error{gen("token_embd.weight", c.DType, []uint64{d, uint64(len(tokens))}, 0, 1)}
	for l := range c.Layers {
		p := fmt.Sprintf("enc.blk.%d.", l)
		errs = append(errs, norm(p+"attn_norm.weight"),
			gen(p+"attn_q.weight", c.DType, []uint64{d, q}, 0, float32(1/math.Sqrt(float64(c.DModel*c.KeyLength)))),
			matrix(p+"attn_k.weight", q, d), matrix(p+"attn_v.weight", q, d),
			matrix(p+"attn_o.weight", d, q))
		if l == 0 {
			errs = append(errs, gen(p+"attn_rel_b.weight", gguf.F32, []uint64{uint64(c.Heads), T5RelBuckets}, 0, 1))
		}
		errs = append(errs, norm(p+"ffn_norm.weight"))
		if !c.ReLU {
			errs = append(errs, matrix(p+"ffn_gate.weight", ffn, d))
		}
		errs = append(errs, matrix(p+"ffn_up.weight", ffn, d), matrix(p+"ffn_down.weight", d, ffn))
	}
	errs = append(errs, norm("enc.output_norm.weight"))
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}
