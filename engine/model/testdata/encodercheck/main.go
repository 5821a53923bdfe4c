// Command encodercheck writes the synthetic encoder GGUF files (BERT
// family and T5) of the
// encoder cross-check and cases.json (each file's synth.BertConfig and the
// token lists to embed or rank) into a directory, for
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

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
)

// Case is one file of the cross-check. Inputs are whole token lists
// ([CLS] … [SEP]; T5: … </s>); for a rank model each is [CLS] query [SEP] document
// [SEP], and Split the length of its [CLS] query [SEP] prefix.
type Case struct {
	Name   string           `json:"name"`
	File   string           `json:"file"`
	Config synth.BertConfig `json:"config"`
	Inputs [][]int32        `json:"inputs"`
	Split  []int            `json:"split,omitempty"`
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
		w, err := synth.Bert(c.Config)
		if err != nil {
			fail(err)
		}
		c.File = filepath.Join(dir, c.Name+".gguf")
		if err := w.WriteFile(c.File); err != nil {
			fail(err)
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
