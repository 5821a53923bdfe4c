// Command archcheck writes the synthetic GGUF files of the architecture
// cross-check and cases.json (each file's synth.Config and the token ids to
// evaluate) into a directory, for scripts/arch-check.mjs to run through
// llama.cpp. scripts/arch-check.sh (make arch-check) drives both and
// records llama.cpp's logits in engine/model/testdata/llamacpp_logits.json,
// which TestLlamaCppLogits compares with ours.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
)

// Case is one file of the cross-check.
type Case struct {
	Name   string       `json:"name"`
	File   string       `json:"file"`
	Config synth.Config `json:"config"`
	Tokens []int32      `json:"tokens"`
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: archcheck DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	toks := []int32{17, 250, 3, 99, 120, 45, 201, 7, 64, 180, 33, 290, 12, 150, 77, 5}
	cases := []Case{
		{Name: "llama-f32", Config: synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300,
			Context: 256, DType: gguf.F32, Seed: 7}},
		// Qwen3's shape scaled down: Heads·HeadDim (128) ≠ d_model (64).
		{Name: "qwen3-f32", Config: synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32,
			FFN: 96, Vocab: 300, Context: 256, DType: gguf.F32, Seed: 11, Tied: true, RopeBase: 1e6, RMSEps: 1e-6, Pre: "qwen2"}},
		{Name: "qwen3-f16", Config: synth.Config{Arch: "qwen3", Layers: 3, DModel: 64, Heads: 2, KVHeads: 1, HeadDim: 64,
			FFN: 128, Vocab: 300, Context: 256, DType: gguf.F16, Seed: 12, RopeBase: 1e6, RMSEps: 1e-6, Pre: "qwen2"}},
		// 160 positions: attention crosses key blocks of 64 (kernels/cpu's
		// flash tiling and its online-softmax rescaling) in the prefill
		// half and in the decode steps.
		{Name: "llama-f32-long", Config: synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 264,
			Context: 256, DType: gguf.F32, Seed: 9}},
	}
	long := make([]int32, 160)
	for i := range long {
		long[i] = int32((i*37 + 11) % 264)
	}
	for i := range cases {
		c := &cases[i]
		c.File = filepath.Join(dir, c.Name+".gguf")
		c.Tokens = toks
		if c.Name == "llama-f32-long" {
			c.Tokens = long
		}
		w, err := synth.Random(c.Config)
		if err == nil {
			err = w.WriteFile(c.File)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	j, _ := json.MarshalIndent(cases, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "cases.json"), j, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
