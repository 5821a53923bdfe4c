// Command encodercheck writes the synthetic GGUF files of the encoder
// cross-check (BERT-family and T5 encoders, qwen3 decoder rerankers and a
// last-token-pooling qwen3 embedding model that appends EOS) and
// cases.json (each file's config and the token lists or texts to embed or
// rank) into a directory, for
// scripts/encoder-check.mjs to run through llama.cpp (node-llama-cpp).
// scripts/encoder-check.sh drives both and records llama.cpp's vectors and
// scores in engine/model/testdata/llamacpp_encoders.json, which
// TestLlamaCppEncoders compares with ours.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
)

// Case is one file of the cross-check. Inputs are whole token lists
// ([CLS] … [SEP]; T5: … </s>); for a rank model each is [CLS] query [SEP] document
// [SEP], and Split the length of its [CLS] query [SEP] prefix.
//
// A decoder case (Decoder set: synth.Random's file, with Pooling written
// as {arch}.pooling_type and AddEOS as tokenizer.ggml.add_eos_token) has
// either Texts, which llama.cpp tokenizes and embeds itself (the tokens
// it evaluated are recorded beside the vectors), or, for a reranker
// (Decoder.Rerank), Inputs that are whole rerank prompts (the rerank
// template filled with a pair and tokenized as llama.cpp's server does),
// each scored as given.
type Case struct {
	Name    string           `json:"name"`
	File    string           `json:"file"`
	Config  synth.BertConfig `json:"config"`
	Decoder *synth.Config    `json:"decoder,omitempty"`
	Pooling int              `json:"pooling,omitempty"`
	AddEOS  bool             `json:"add_eos,omitempty"`
	Texts   []string         `json:"texts,omitempty"`
	Inputs  [][]int32        `json:"inputs"`
	Split   []int            `json:"split,omitempty"`
}

// Decoder is the decoder file of a case: synth.Random(c) with pooling_type
// pooling (when not 0) and add_eos_token (when addEOS). The test builds
// the same file from the recorded case.
func Decoder(c synth.Config, pooling int, addEOS bool) (*gguf.Writer, error) {
	w, err := synth.Random(c)
	if err != nil {
		return nil, err
	}
	if pooling != 0 {
		if err := w.Set(c.Arch+".pooling_type", uint32(pooling)); err != nil {
			return nil, err
		}
	}
	if addEOS {
		if err := w.Set("tokenizer.ggml.add_eos_token", true); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// rerankPairs are the query and document texts of the decoder reranker's
// prompts.
var rerankPairs = [][2]string{
	{"what is the capital of france", "paris is the capital and largest city of france"},
	{"what is the capital of france", "the quick brown fox jumps over the lazy dog"},
	{"how do bees make honey", "bees collect nectar from flowers and store it in the hive where it becomes honey"},
}

// rerankPrompts fills the file's rerank template with each pair and
// tokenizes it as llama.cpp's format_prompt_rerank does: the whole text,
// no special tokens added, control tokens parsed.
func rerankPrompts(file string) ([][]int32, error) {
	f, err := gguf.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	var out [][]int32
	for _, p := range rerankPairs {
		text := strings.ReplaceAll(strings.ReplaceAll(tk.RerankTemplate, "{query}", p[0]), "{document}", p[1])
		out = append(out, tk.Encode(text, false, true))
	}
	return out, nil
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: encodercheck DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	cls, sep := int32(synth.BertCLS), int32(synth.BertSep)
	wrap := func(ids ...int32) []int32 { return append(append([]int32{cls}, ids...), sep) }
	long := make([]int32, 40)
	for i := range long {
		long[i] = int32(104 + (i*37)%190)
	}
	embeds := [][]int32{wrap(150, 151, 152), wrap(260, 200, 170, 104, 290, 280, 120), wrap(long...), wrap()}
	q, docs := []int32{260, 270, 280}, [][]int32{{250, 251, 252, 253}, {110, 120, 130}, long[:25]}
	var pairs [][]int32
	var split []int
	for _, d := range docs {
		pairs = append(pairs, append(wrap(q...), append(append([]int32{}, d...), sep)...))
		split = append(split, len(q)+2)
	}
	cases := []Case{
		{Name: "bert-cls-f32", Config: synth.BertConfig{Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 128, DType: gguf.F32, Seed: 3, Pooling: 2}, Inputs: embeds},
		{Name: "bert-mean-f16", Config: synth.BertConfig{Layers: 3, DModel: 64, Heads: 2, FFN: 96, Context: 128, DType: gguf.F16, Seed: 4, Pooling: 1}, Inputs: embeds},
		{Name: "bert-mean-q8_0", Config: synth.BertConfig{Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 128, DType: gguf.Q8_0, Seed: 5, Pooling: 1}, Inputs: embeds},
		{Name: "nomic-bert-mean-f32", Config: synth.BertConfig{Arch: "nomic-bert", Layers: 2, DModel: 64, Heads: 4, FFN: 96, Context: 128, DType: gguf.F32, Seed: 6, Pooling: 1}, Inputs: embeds},
		{Name: "bert-rank-f32", Config: synth.BertConfig{Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 128, DType: gguf.F32, Seed: 7, Pooling: 4}, Inputs: pairs, Split: split},
		{Name: "qwen3-rerank-f32", Decoder: &synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 128, Vocab: 512, Context: 1024, DType: gguf.F32, Seed: 8, Rerank: true}},
		{Name: "qwen3-rerank-f16", Decoder: &synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 128, Vocab: 512, Context: 1024, DType: gguf.F16, Seed: 11, Rerank: true, Tied: true}},
		{Name: "qwen3-rerank-q8_0", Decoder: &synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 128, Vocab: 512, Context: 1024, DType: gguf.Q8_0, Seed: 9, Rerank: true, Tied: true}},
		{Name: "qwen3-last-eos-f32", Decoder: &synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 128, Vocab: 512, Context: 1024, DType: gguf.F32, Seed: 10},
			Pooling: 3, AddEOS: true, Texts: []string{"hello world", "the quick brown fox jumps over the lazy dog", "a"}},
	}
	// T5 encoders: inputs end in </s> (add_eos_token); the long one runs
	// past the exact relative-position buckets into the logarithmic ones.
	eos := int32(synth.T5EOS)
	t5long := make([]int32, 60)
	for i := range t5long {
		t5long[i] = int32(3 + (i*37)%239)
	}
	t5in := [][]int32{{40, 41, 42, 200, eos}, {7, 90, 130, 131, 17, 220, 9, 60, 61, 62, 63, eos}, append(t5long, eos), {eos}}
	cases = append(cases,
		Case{Name: "t5encoder-mean-f32", Config: synth.BertConfig{Arch: "t5encoder", Layers: 2, DModel: 64, Heads: 4, FFN: 96, Context: 128, DType: gguf.F32, Seed: 8, Pooling: 1}, Inputs: t5in},
		Case{Name: "t5encoder-cls-q8_0", Config: synth.BertConfig{Arch: "t5encoder", Layers: 3, DModel: 64, Heads: 4, FFN: 128, Context: 128, DType: gguf.Q8_0, Seed: 9, Pooling: 2}, Inputs: t5in},
		Case{Name: "t5encoder-relu-last-f16", Config: synth.BertConfig{Arch: "t5encoder", Layers: 2, DModel: 64, Heads: 4, KeyLength: 32, FFN: 96, Context: 128, DType: gguf.F16, Seed: 10, Pooling: 3, ReLU: true}, Inputs: t5in},
	)
	for i := range cases {
		c := &cases[i]
		var w *gguf.Writer
		var err error
		if c.Decoder != nil {
			w, err = Decoder(*c.Decoder, c.Pooling, c.AddEOS)
		} else {
			w, err = synth.Bert(c.Config)
		}
		if err != nil {
			fail(err)
		}
		c.File = filepath.Join(dir, c.Name+".gguf")
		if err := w.WriteFile(c.File); err != nil {
			fail(err)
		}
		if c.Decoder != nil && c.Decoder.Rerank {
			if c.Inputs, err = rerankPrompts(c.File); err != nil {
				fail(err)
			}
		}
	}
	b, err := json.MarshalIndent(cases, "", " ")
	if err != nil {
		fail(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), b, 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "encodercheck:", err)
	os.Exit(1)
}
