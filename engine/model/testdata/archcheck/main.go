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
	"strings"

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
		// Mixtures of experts: Qwen3-30B-A3B's routing (128 experts, 8
		// used) scaled to 8 experts, 2 used, of width 64; mixtral's (8, 2)
		// as 4 experts, 2 used, in a llama file.
		{Name: "qwen3moe-f32", Config: synth.Config{Arch: "qwen3moe", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32,
			FFN: 64, Experts: 8, ExpertsUsed: 2, Vocab: 300, Context: 256, DType: gguf.F32, Seed: 19, Tied: true, RopeBase: 1e6,
			RMSEps: 1e-6, Pre: "qwen2"}},
		{Name: "qwen3moe-f16", Config: synth.Config{Arch: "qwen3moe", Layers: 3, DModel: 64, Heads: 2, KVHeads: 1, HeadDim: 64,
			FFN: 96, Experts: 6, ExpertsUsed: 3, Vocab: 300, Context: 256, DType: gguf.F16, Seed: 20, RopeBase: 1e6,
			RMSEps: 1e-6, Pre: "qwen2"}},
		{Name: "mixtral-f32", Config: synth.Config{Arch: "mixtral", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96,
			Experts: 4, ExpertsUsed: 2, Vocab: 300, Context: 256, DType: gguf.F32, Seed: 23}},
		// Gemma3 scaled down: five sliding-window layers (window 5 < 16
		// tokens, local rope base 10000) then a global one (base 1e6).
		{Name: "gemma3-f32", Config: synth.Config{Arch: "gemma3", Layers: 6, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32,
			FFN: 96, Vocab: 300, Context: 256, DType: gguf.F32, Seed: 13, Tied: true, RopeBase: 1e6, RMSEps: 1e-6, Window: 5}},
		// Every layer local (mistral-style window 3, across 4-token pages),
		// and the final logit soft-cap.
		{Name: "gemma3-window-softcap-f32", Config: synth.Config{Arch: "gemma3", Layers: 2, DModel: 64, Heads: 2, KVHeads: 1, HeadDim: 32,
			FFN: 128, Vocab: 300, Context: 256, DType: gguf.F32, Seed: 14, RopeBase: 1e6, RopeBaseSWA: 5e4, RMSEps: 1e-6, Window: 3,
			SWAPattern: []bool{true, true}, FinalSoftcap: 2}},
		// Fused attn_qkv and gate_up, partial rotary (12 of 16 dims).
		{Name: "phi3-f32", Config: synth.Config{Arch: "phi3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 4,
			FFN: 96, Vocab: 300, Context: 256, DType: gguf.F32, Seed: 15, RopeDims: 12}},
		{Name: "granite-f32", Config: synth.Config{Arch: "granite", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2,
			FFN: 96, Vocab: 300, Context: 256, DType: gguf.F32, Seed: 16, Tied: true, LogitScale: 4, ResidualScale: 0.22,
			EmbedScale: 12, AttnScale: 0.1}},
		// 160 positions: attention crosses key blocks of 64 (kernels/cpu's
		// flash tiling and its online-softmax rescaling) in the prefill
		// half and in the decode steps.
		{Name: "llama-f32-long", Config: synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 264,
			Context: 256, DType: gguf.F32, Seed: 9}},
		// Windows across key blocks: a local layer of window 40 (its start
		// moves inside blocks of 64 and query-row tasks of 8) then a global
		// one, on the same 160 positions.
		{Name: "gemma3-window-long", Config: synth.Config{Arch: "gemma3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32,
			FFN: 96, Vocab: 264, Context: 256, DType: gguf.F32, Seed: 17, RopeBase: 1e6, RopeBaseSWA: 1e4, RMSEps: 1e-6, Window: 40,
			SWAPattern: []bool{true, false}}},
	}
	long := make([]int32, 160)
	for i := range long {
		long[i] = int32((i*37 + 11) % 264)
	}
	for i := range cases {
		c := &cases[i]
		c.File = filepath.Join(dir, c.Name+".gguf")
		c.Tokens = toks
		if strings.HasSuffix(c.Name, "-long") {
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
