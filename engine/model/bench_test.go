package model

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
)

// Benchmark models. Generated on first use into a temporary directory (only
// when a benchmark runs), memory-mapped from there.
var benchModels = []struct {
	name string
	cfg  synth.Config
}{
	{"4L-d512-Q8_0", synth.Config{Layers: 4, DModel: 512, Heads: 8, KVHeads: 4, FFN: 1408, Vocab: 8192, Context: 4096, DType: gguf.Q8_0, Seed: 1}},
	// The Q8_0 model's shape as a mixture of experts: 16 experts of 352, 4
	// routed per token (the same 1408 active feed-forward width).
	{"4L-d512-qwen3moe-16x4-Q8_0", synth.Config{Arch: "qwen3moe", Layers: 4, DModel: 512, Heads: 8, KVHeads: 4, FFN: 352, Experts: 16,
		ExpertsUsed: 4, Vocab: 8192, Context: 4096, DType: gguf.Q8_0, Seed: 1}},
	{"4L-d512-F32", synth.Config{Layers: 4, DModel: 512, Heads: 8, KVHeads: 4, FFN: 1408, Vocab: 8192, Context: 4096, DType: gguf.F32, Seed: 1}},
	// ~100M parameters, SmolLM-like shape: 12 layers, d=768, GQA 12/4, tied embeddings.
	{"100M-Q8_0", synth.Config{Layers: 12, DModel: 768, Heads: 12, KVHeads: 4, FFN: 2048, Vocab: 32000, Context: 4096, DType: gguf.Q8_0, Seed: 2, Tied: true}},
}

var bench struct {
	sync.Mutex
	dir   string
	files map[string]*gguf.File
}

func TestMain(m *testing.M) {
	code := m.Run()
	bench.Lock()
	for _, f := range bench.files {
		f.Close()
	}
	if bench.dir != "" {
		os.RemoveAll(bench.dir)
	}
	bench.Unlock()
	os.Exit(code)
}

func benchFile(b *testing.B, name string, c synth.Config) *gguf.File {
	bench.Lock()
	defer bench.Unlock()
	if f, ok := bench.files[name]; ok {
		return f
	}
	if bench.dir == "" {
		d, err := os.MkdirTemp("", "cloison-bench-")
		if err != nil {
			b.Fatal(err)
		}
		bench.dir, bench.files = d, map[string]*gguf.File{}
	}
	w, err := synth.Random(c)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(bench.dir, name+".gguf")
	if err := w.WriteFile(path); err != nil {
		b.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	bench.files[name] = f
	return f
}

// copyBandwidth measures copy() of a buffer far larger than the caches, in
// bytes copied per second (best of a few runs).
func copyBandwidth() float64 {
	const n = 256 << 20
	src, dst := make([]byte, n), make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	best := 0.0
	for r := 0; r < 5; r++ {
		t0 := time.Now()
		copy(dst, src)
		best = max(best, n/time.Since(t0).Seconds())
	}
	return best
}

// BenchmarkPrefill: prompt tokens/s. Batch 1 prefills one 128-token prompt;
// batch 16 prefills sixteen 32-token prompts in one step.
func BenchmarkPrefill(b *testing.B) {
	for _, bm := range benchModels {
		for _, bs := range []struct{ batch, prompt int }{{1, 128}, {16, 32}} {
			b.Run(fmt.Sprintf("%s/batch%d", bm.name, bs.batch), func(b *testing.B) {
				m := load(b, backend(b), benchFile(b, bm.name, bm.cfg))
				k := newKV(b, m, bs.batch*(bs.prompt/16+1), 16, "t")
				prompts := make([][]int32, bs.batch)
				for i := range prompts {
					prompts[i] = tokens(bs.prompt, m.Vocab, i)
				}
				b.ResetTimer()
				for it := 0; it < b.N; it++ {
					b.StopTimer()
					seqs := make([]*seq, bs.batch)
					for i := range seqs {
						seqs[i] = k.start(b, "t", fmt.Sprintf("r%d-%d", it, i), bs.prompt)
					}
					b.StartTimer()
					k.step(b, seqs, prompts, false)
					b.StopTimer()
					for _, s := range seqs {
						if err := k.pool.Release(s.lease); err != nil {
							b.Fatal(err)
						}
					}
					b.StartTimer()
				}
				b.ReportMetric(float64(b.N*bs.batch*bs.prompt)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}

// BenchmarkDecode: generated tokens/s with a 32-token context per sequence,
// and decode bandwidth efficiency: weight bytes streamed per second (the
// weights are read once per step, whatever the batch) over copy() bandwidth.
func BenchmarkDecode(b *testing.B) {
	cbw := copyBandwidth()
	for _, bm := range benchModels {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/batch%d", bm.name, batch), func(b *testing.B) {
				m := load(b, backend(b), benchFile(b, bm.name, bm.cfg))
				const prompt = 32
				ctx := prompt + b.N
				k := newKV(b, m, batch*(ctx/16+1), 16, "t")
				seqs := make([]*seq, batch)
				in := make([][]int32, batch)
				for i := range seqs {
					seqs[i] = k.start(b, "t", fmt.Sprintf("r%d", i), ctx)
					in[i] = tokens(prompt, m.Vocab, i)
				}
				k.step(b, seqs, in, false)
				for i := range in {
					in[i] = []int32{int32(i)}
				}
				b.ResetTimer()
				for it := 0; it < b.N; it++ {
					out := k.step(b, seqs, in, false)
					for i := range in {
						in[i][0] = argmax(out[i])
					}
				}
				steps := float64(b.N) / b.Elapsed().Seconds()
				b.ReportMetric(steps*float64(batch), "tok/s")
				b.ReportMetric(steps*float64(m.WeightBytes())/1e9, "weightGB/s")
				b.ReportMetric(cbw/1e9, "copyGB/s")
				b.ReportMetric(steps*float64(m.WeightBytes())/cbw, "bw-eff")
			})
		}
	}
}
