// Command peer-quant prints the greedy tokens and the logits of each step of
// Cloison's CPU forward pass on a GGUF file (16 prompt tokens, then N greedy
// steps) as JSON, for scripts/peer-quant.sh to compare with llama.cpp.
//
//	go run ./scripts/peer-quant MODEL.gguf N
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

func main() {
	if len(os.Args) != 3 {
		check(fmt.Errorf("usage: peer-quant MODEL.gguf STEPS"))
	}
	path := os.Args[1]
	n, err := strconv.Atoi(os.Args[2])
	if err != nil || n < 1 || n > 1000 {
		check(fmt.Errorf("steps %q: want 1…1000", os.Args[2]))
	}
	f, err := gguf.Open(path)
	check(err)
	b, err := cpu.New(kernels.Options{Threads: 1})
	check(err)
	m, err := model.Load(b, f)
	check(err)
	prompt := make([]int32, 16)
	x := uint32(1)
	for i := range prompt {
		x = x*1664525 + 1013904223
		prompt[i] = int32(x>>8) % int32(m.Vocab)
	}
	const pt = 16
	pages := (len(prompt) + n + pt) / pt
	pool, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: pt})
	check(err)
	check(pool.AddTenant(isolation.TenantConfig{ID: "x"}))
	arena, err := b.NewArena(m.ArenaConfig(pages, pt, kernels.KVF32))
	check(err)
	l, err := pool.Allocate("x", cloison.RequestID("r"), len(prompt)+n)
	check(err)
	pos := 0
	step := func(toks []int32) []float32 {
		check(pool.Write(l, len(toks)))
		bt, err := pool.BlockTable(l, pos+len(toks))
		check(err)
		out, err := m.Forward(arena, []model.Seq{{Table: bt, Pos: pos, Tokens: toks}}, false)
		check(err)
		pos += len(toks)
		return out[0]
	}
	logits := step(prompt)
	var gen []int32
	var all [][]float32
	for range n {
		all = append(all, logits)
		best := int32(0)
		for i, v := range logits {
			if v > logits[best] {
				best = int32(i)
			}
		}
		gen = append(gen, best)
		logits = step([]int32{best})
	}
	json.NewEncoder(os.Stdout).Encode(map[string]any{"prompt": prompt, "tokens": gen, "logits": all})
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
