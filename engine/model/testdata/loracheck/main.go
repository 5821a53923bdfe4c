// Command loracheck writes the synthetic base models and LoRA adapters of
// the adapter cross-check and cases.json (each pair's synth configs and the
// token ids to evaluate) into a directory, for scripts/lora-check.mjs to run
// through llama.cpp with the adapter applied. scripts/lora-check.sh (make
// lora-check) drives both and records llama.cpp's logits in
// engine/model/testdata/llamacpp_lora_logits.json, which
// TestLlamaCppLoRALogits compares with ours.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
)

// Case is one base and adapter of the cross-check.
type Case struct {
	Name   string           `json:"name"`
	File   string           `json:"file"`
	LoRA   string           `json:"lora"`
	Config synth.Config     `json:"config"`
	Lora   synth.LoRAConfig `json:"lora_config"`
	Tokens []int32          `json:"tokens"`
}

// Cases are the cross-check's pairs.
var Cases = []Case{
	// Every projection and the output adapted, rank 8, alpha 16.
	{Name: "llama-f32-all", Config: synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300,
		Context: 256, DType: gguf.F32, Seed: 7}, Lora: synth.LoRAConfig{Rank: 8, Alpha: 16, Seed: 1, Output: true}},
	// Rank 16 on a subset (as PEFT's target_modules), qwen3 tied, no alpha
	// key's default (2·rank written).
	{Name: "qwen3-f32-qv", Config: synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32,
		FFN: 96, Vocab: 300, Context: 256, DType: gguf.F32, Seed: 11, Tied: true, RopeBase: 1e6, RMSEps: 1e-6, Pre: "qwen2"},
		Lora: synth.LoRAConfig{Rank: 16, Seed: 2, Targets: []string{"attn_q.weight", "attn_v.weight", "ffn_gate.weight"}}},
	// F16 pairs.
	{Name: "llama-f32-f16pairs", Config: synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300,
		Context: 256, DType: gguf.F32, Seed: 8}, Lora: synth.LoRAConfig{Rank: 16, Alpha: 8, Seed: 3, DType: gguf.F16}},
	// A Q8_0 base (both sides quantize the activations of its products).
	{Name: "llama-q8_0", Config: synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 96, Vocab: 300,
		Context: 256, DType: gguf.Q8_0, Seed: 8}, Lora: synth.LoRAConfig{Rank: 16, Seed: 5, Output: true}},
	// phi3: attn_output and ffn_down (its attn_qkv and gate+up ffn_up are
	// fused, not adapted).
	{Name: "phi3-f32", Config: synth.Config{Arch: "phi3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 4,
		FFN: 96, Vocab: 300, Context: 256, DType: gguf.F32, Seed: 15, RopeDims: 12}, Lora: synth.LoRAConfig{Rank: 4, Seed: 4}},
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: loracheck DIR")
		os.Exit(2)
	}
	dir := os.Args[1]
	toks := []int32{17, 250, 3, 99, 120, 45, 201, 7, 64, 180, 33, 290, 12, 150, 77, 5}
	cases := Cases
	for i := range cases {
		c := &cases[i]
		c.File = filepath.Join(dir, c.Name+".gguf")
		c.LoRA = filepath.Join(dir, c.Name+"-lora.gguf")
		c.Tokens = toks
		if err := write(c); err != nil {
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

func write(c *Case) error {
	w, err := synth.Random(c.Config)
	if err != nil {
		return err
	}
	if err := w.WriteFile(c.File); err != nil {
		return err
	}
	f, err := gguf.Open(c.File)
	if err != nil {
		return err
	}
	defer f.Close()
	lw, err := synth.LoRA(f, c.Lora)
	if err != nil {
		return err
	}
	return lw.WriteFile(c.LoRA)
}
