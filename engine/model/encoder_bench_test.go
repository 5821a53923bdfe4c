package model

import (
	"flag"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
)

// BenchmarkEncoderEmbed: embeddings per second of a MiniLM-L6-shaped bert
// (6 layers, d 384, 12 heads, FFN 1536, Q8_0 and F16), one Forward over a
// batch of 64 inputs of 128 tokens, mean pooling included. The llama.cpp
// figure beside it: scripts/encoder-bench.mjs (node-llama-cpp's embedding
// context) on the same shape, written by cloisonctl model synth --arch bert
// --layers 6 --d-model 384 --heads 12 --ffn 1536 --context 512 --pooling 1.
// t5encoder-Q8_0: a T5 encoder of the same shape (gated GELU, relative
// position bias), beside the bert of the same run.
func BenchmarkEncoderEmbed(b *testing.B) {
	for _, run := range []struct {
		name string
		arch string
		dt   gguf.TensorType
	}{{"Q8_0", "bert", gguf.Q8_0}, {"F16", "bert", gguf.F16}, {"t5encoder-Q8_0", "t5encoder", gguf.Q8_0}} {
		b.Run(run.name, func(b *testing.B) {
			c := synth.BertConfig{Arch: run.arch, Layers: 6, DModel: 384, Heads: 12, FFN: 1536, Context: 512, DType: run.dt, Pooling: 1}
			m := load(b, backend(b), bertFile(b, c))
			k := newKV(b, m, 64*128/16, 16, "t")
			benchInputs := *benchInputsFlag
			inputs := make([][]int32, benchInputs)
			for i := range inputs {
				inputs[i] = tokens(128, m.Vocab, i)
			}
			b.ResetTimer()
			for range b.N {
				hidden := k.encode(b, "t", inputs)
				for i, h := range hidden {
					if _, err := m.PoolHidden(h, len(inputs[i])); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(benchInputs*b.N)/b.Elapsed().Seconds(), "embeddings/s")
		})
	}
}

// benchInputs is the batch of BenchmarkEncoderEmbed: 64 (the figure
// asked), fewer on a small machine (-encoder-bench-inputs 8).
var benchInputsFlag = flag.Int("encoder-bench-inputs", 64, "inputs of 128 tokens per BenchmarkEncoderEmbed batch")
