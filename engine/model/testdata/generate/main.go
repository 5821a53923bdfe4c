// Command generate runs a GGUF model (a user's real file or a synthetic one)
// through engine/model on the CPU backend, with the KV in isolation pool
// pages, and prints the continuation of a prompt. It is a developer tool until
// cloisonctl wires the engine:
//
//	go run ./engine/model/testdata/generate -m SmolLM2-135M-Instruct-Q8_0.gguf -p "What is the capital of France?"
//
// With -chat (the default when the file has a ChatML template) the prompt is
// wrapped as one user turn. Decoding is greedy unless -temp > 0.
package main

import (
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

func main() {
	path := flag.String("m", "", "GGUF model file")
	prompt := flag.String("p", "Hello", "prompt")
	n := flag.Int("n", 64, "tokens to generate")
	temp := flag.Float64("temp", 0, "sampling temperature; 0 is greedy")
	seed := flag.Uint64("seed", 1, "sampling seed")
	chat := flag.String("chat", "auto", "wrap the prompt as a ChatML user turn: auto, yes, no")
	flag.Parse()
	if err := run(*path, *prompt, *n, *temp, *seed, *chat); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func run(path, prompt string, n int, temp float64, seed uint64, chat string) error {
	f, err := gguf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return err
	}
	b, err := cpu.New(kernels.Options{})
	if err != nil {
		return err
	}
	defer b.Close()
	t0 := time.Now()
	m, err := model.Load(b, f)
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(os.Stderr, "%s: %d layers, d=%d, %d/%d heads, vocab %d, context %d, tied %v, loaded in %v\n",
		m.Arch, m.Layers, m.DModel, m.Heads, m.KVHeads, m.Vocab, m.Context, m.Tied, time.Since(t0).Round(time.Millisecond))
	text, special := prompt, false
	if chat == "yes" || (chat == "auto" && strings.Contains(tok.ChatTemplate, "<|im_start|>")) {
		text, special = "<|im_start|>user\n"+prompt+"<|im_end|>\n<|im_start|>assistant\n", true
	}
	ids := tok.Encode(text, true, special)
	const pageTokens = 16
	total := min(len(ids)+n, m.Context)
	pages := (total + pageTokens - 1) / pageTokens
	pool, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: pageTokens})
	if err != nil {
		return err
	}
	if err := pool.AddTenant(isolation.TenantConfig{ID: "local"}); err != nil {
		return err
	}
	arena, err := b.NewArena(m.ArenaConfig(pages, pageTokens, kernels.KVF32))
	if err != nil {
		return err
	}
	lease, err := pool.Allocate("local", "generate", total)
	if err != nil {
		return err
	}
	defer pool.Release(lease)
	rng := rand.New(rand.NewPCG(seed, 0))
	in, pos := ids, 0
	var start time.Time
	var prefill time.Duration
	generated := 0
	for pos+len(in) <= total && generated < n {
		if err := pool.Write(lease, len(in)); err != nil {
			return err
		}
		bt, err := pool.BlockTable(lease, pos+len(in))
		if err != nil {
			return err
		}
		s := time.Now()
		out, err := m.Forward(arena, []model.Seq{{Table: bt, Pos: pos, Tokens: in}}, false)
		if err != nil {
			return err
		}
		if pos == 0 {
			prefill = time.Since(s)
			start = time.Now()
		}
		next := pick(out[0], temp, rng)
		pos += len(in)
		in = []int32{next}
		generated++
		if tok.IsEOG(next) {
			break
		}
		os.Stdout.Write(tok.Piece(next, false))
	}
	fmt.Println()
	dec := time.Since(start)
	fmt.Fprintf(os.Stderr, "prefill %d tokens in %v (%.1f tok/s); decoded %d tokens at %.1f tok/s\n",
		len(ids), prefill.Round(time.Millisecond), float64(len(ids))/prefill.Seconds(), generated-1, float64(generated-1)/dec.Seconds())
	return nil
}

func pick(logits []float32, temp float64, rng *rand.Rand) int32 {
	best := 0
	for i, v := range logits {
		if v > logits[best] {
			best = i
		}
	}
	if temp <= 0 {
		return int32(best)
	}
	sum, ps := 0.0, make([]float64, len(logits))
	for i, v := range logits {
		ps[i] = math.Exp((float64(v) - float64(logits[best])) / temp)
		sum += ps[i]
	}
	r := rng.Float64() * sum
	for i, p := range ps {
		if r -= p; r <= 0 {
			return int32(i)
		}
	}
	return int32(best)
}
