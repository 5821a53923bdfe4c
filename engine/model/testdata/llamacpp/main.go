// Command llamacpp writes synthetic GGUF models and Cloison's tokenization and
// greedy continuations of them (ours.json) into a directory, for check.mjs to
// compare with llama.cpp. See README.md.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

func check(err error) {
	if err != nil {
		panic(err)
	}
}

var preTexts = []string{
	"Hello world", "hello  world", "a   b\n\n c", "it's what we'll do, they're HERE'S", "don'T 'sup",
	"numbers 1234567 and 3.14", " 12 345", "tabs\tand\r\nnewlines\n\n\n  x", "   leading", "trailing   ",
	"ünïcödé 🦙 中文 ok", "<|im_start|>user\nhi<|im_end|>", "x!!\n\ny", "(foo) \tbar", "a\u00a0b", "١٢٣ digits",
}

type result struct {
	File   string  `json:"file"`
	Text   string  `json:"text"`
	Prompt []int32 `json:"prompt"`
	Greedy []int32 `json:"greedy"`
}

func run(path, text string, steps int) result {
	f, err := gguf.Open(path)
	check(err)
	tok, err := tokenizer.FromGGUF(f)
	check(err)
	b, err := cpu.New(kernels.Options{})
	check(err)
	m, err := model.Load(b, f)
	check(err)
	p, _ := isolation.NewPool(isolation.Config{Pages: 64, PageTokens: 16})
	check(p.AddTenant(isolation.TenantConfig{ID: "t"}))
	a, err := b.NewArena(m.ArenaConfig(64, 16, kernels.KVF32))
	check(err)
	ids := tok.Encode(text, true, false)
	l, err := p.Allocate("t", cloison.RequestID("r"), len(ids)+steps)
	check(err)
	res := result{File: path, Text: text, Prompt: ids}
	in, pos := ids, 0
	for s := 0; s < steps; s++ {
		check(p.Write(l, len(in)))
		bt, err := p.BlockTable(l, pos+len(in))
		check(err)
		out, err := m.Forward(a, []model.Seq{{Table: bt, Pos: pos, Tokens: in}}, false)
		check(err)
		best := 0
		for i, v := range out[0] {
			if v > out[0][best] {
				best = i
			}
		}
		pos += len(in)
		in = []int32{int32(best)}
		res.Greedy = append(res.Greedy, int32(best))
	}
	return res
}

func main() {
	dir := "."
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	w, err := synth.Random(synth.Config{Layers: 2, DModel: 128, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 1000, Context: 512, DType: gguf.F32, Seed: 3})
	check(err)
	check(w.WriteFile(dir + "/rand_f32.gguf"))
	w, err = synth.Random(synth.Config{Layers: 2, DModel: 128, Heads: 4, KVHeads: 2, FFN: 256, Vocab: 1000, Context: 512, DType: gguf.Q8_0, Seed: 3, Tied: true})
	check(err)
	check(w.WriteFile(dir + "/rand_q8.gguf"))
	w, err = synth.Random(synth.Config{Layers: 2, DModel: 128, Heads: 4, KVHeads: 4, FFN: 256, Vocab: 1000, Context: 512, DType: gguf.F16, Seed: 4})
	check(err)
	check(w.WriteFile(dir + "/rand_f16.gguf"))
	w, err = synth.ContextBag(synth.BagConfig{Context: 1 << 20})
	check(err)
	check(w.WriteFile(dir + "/bag.gguf"))
	var rs []result
	rs = append(rs, run(dir+"/rand_f32.gguf", "the quick brown fox jumps over the lazy dog", 16))
	rs = append(rs, run(dir+"/rand_q8.gguf", "the quick brown fox jumps over the lazy dog", 16))
	rs = append(rs, run(dir+"/rand_f16.gguf", "hello there, general kenobi!", 16))
	rs = append(rs, run(dir+"/bag.gguf", "zebra quilt", 16))
	// Pre-tokenizer variants: tokenization only.
	for _, pre := range []string{"gpt-2", "smollm", "llama-bpe", "qwen2"} {
		w, err := synth.Random(synth.Config{Layers: 1, DModel: 32, Heads: 2, FFN: 64, Vocab: 3000, Context: 64, DType: gguf.F32, Pre: pre})
		check(err)
		path := dir + "/pre_" + pre + ".gguf"
		check(w.WriteFile(path))
		f, err := gguf.Open(path)
		check(err)
		tok, err := tokenizer.FromGGUF(f)
		check(err)
		for _, t := range preTexts {
			rs = append(rs, result{File: path, Text: t, Prompt: tok.Encode(t, false, false)})
		}
		f.Close()
	}
	j, _ := json.MarshalIndent(rs, "", " ")
	os.WriteFile(dir+"/ours.json", j, 0o644)
	fmt.Println(string(j))
}
