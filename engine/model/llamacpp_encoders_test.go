package model

import (
	"encoding/json"
	"math"
	"os"
	"slices"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
)

// llamaCppEncoders is testdata/llamacpp_encoders.json, written by
// scripts/encoder-check.sh: llama.cpp's pooled embeddings (an embedding
// context) and rank scores (a ranking context's probability turned back
// into the head's logit; a decoder reranker's probability as it is),
// through node-llama-cpp on the CPU, on synthetic encoder and decoder
// files that engine/synth regenerates from the recorded config.
type llamaCppEncoders struct {
	Version string `json:"node_llama_cpp"`
	Cases   []struct {
		Name    string           `json:"name"`
		Arch    string           `json:"arch"`
		Config  synth.BertConfig `json:"config"`
		Decoder *synth.Config    `json:"decoder"`
		Pooling int              `json:"pooling"`
		AddEOS  bool             `json:"add_eos"`
		Texts   []string         `json:"texts"`
		Inputs  [][]int32        `json:"inputs"`
		Vectors [][]float64      `json:"vectors"`
		Scores  []float64        `json:"scores"`
		// Probabilities: a decoder reranker's scores (qwen3: the softmax's
		// "yes" probability, as llama.cpp computes it).
		Probabilities []float64 `json:"probabilities"`
	} `json:"cases"`
}

// decoderCaseFile is a decoder case's file, as encodercheck writes it:
// synth.Random with pooling_type and add_eos_token when set.
func decoderCaseFile(t testing.TB, c synth.Config, pooling int, addEOS bool) *gguf.File {
	t.Helper()
	w, err := synth.Random(c)
	if err != nil {
		t.Fatal(err)
	}
	if pooling != 0 {
		if err := w.Set(c.Arch+".pooling_type", uint32(pooling)); err != nil {
			t.Fatal(err)
		}
	}
	if addEOS {
		if err := w.Set("tokenizer.ggml.add_eos_token", true); err != nil {
			t.Fatal(err)
		}
	}
	return parse(t, w)
}

// TestLlamaCppEncoders: on the same synthetic files, every pooled vector
// (bert CLS and mean; F32, F16 and Q8_0 weights; nomic-bert mean;
// t5encoder mean, first and last token; a qwen3 decoder with last-token
// pooling and add_eos_token, whose texts our
// tokenizer ends with EOS exactly as llama.cpp's did) is within cosine
// 0.9999 of llama.cpp's, every rank score (bert, rank pooling: cls then
// cls.output on [CLS] query [SEP] document [SEP]) within 1e-3 of
// llama.cpp's logit, and every decoder reranker score (qwen3, rank
// pooling: the last token's state through cls.output and a softmax, on
// whole rerank prompts; F32, F16 and Q8_0) within 1e-3 of llama.cpp's
// probability, and its logit log(p/(1−p)) within 1e-3 of llama.cpp's too
// (2e-2 for Q8_0 weights, as the bert Q8_0 vectors' looser cosine).
func TestLlamaCppEncoders(t *testing.T) {
	data, err := os.ReadFile("testdata/llamacpp_encoders.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec llamaCppEncoders
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	archs := map[string]bool{}
	for _, c := range rec.Cases {
		t.Run(c.Name, func(t *testing.T) {
			var f *gguf.File
			if c.Decoder != nil {
				f = decoderCaseFile(t, *c.Decoder, c.Pooling, c.AddEOS)
			} else {
				f = bertFile(t, c.Config)
			}
			m := load(t, backend(t), f)
			if c.Texts != nil {
				tk, err := tokenizer.FromGGUF(f)
				if err != nil {
					t.Fatal(err)
				}
				for i, text := range c.Texts {
					if got, want := tk.Encode(text, true, false), c.Inputs[i]; !slices.Equal(got, want) {
						t.Errorf("text %q: tokens %v, llama.cpp evaluated %v", text, got, want)
					}
				}
			}
			if m.Arch != c.Arch {
				t.Fatalf("arch %s, llama.cpp read %s", m.Arch, c.Arch)
			}
			archs[c.Arch] = true
			k := newKV(t, m, 64, 16, "t")
			hidden := k.encode(t, "t", c.Inputs)
			worst, worstScore := 1.0, 0.0
			for i, in := range c.Inputs {
				got, err := m.PoolHidden(hidden[i], len(in))
				if err != nil {
					t.Fatal(err)
				}
				if c.Probabilities != nil {
					p, want := float64(got[0]), c.Probabilities[i]
					if p != m.RankProbability(got) {
						t.Errorf("pair %d: RankProbability %v, Rank's first output %v", i, m.RankProbability(got), p)
					}
					d := max(math.Abs(p-want), math.Abs(math.Log(p/(1-p))-math.Log(want/(1-want))))
					worstScore = max(worstScore, d)
					bound := 1e-3
					if c.Decoder.DType == gguf.Q8_0 {
						// llama.cpp quantizes every product's activations
						// to Q8_0. Where the kernel path does too (avx512,
						// amx, neon) both sides round differently: the bert
						// Q8_0 vectors' cosine 0.99996 is ≈ 1% relative,
						// and so is 2e-2 on a logit of 2. Where it runs
						// Q8_0 in the float order (avx2, generic: no
						// activation quantization) the difference is
						// llama.cpp's quantization alone: 0.029 on this
						// pair's logit of 2.0 (1.4%, AMD EPYC Zen 3).
						bound = 4e-2
					}
					if d > bound {
						t.Errorf("pair %d: probability %v, llama.cpp %v", i, p, want)
					}
					continue
				}
				if c.Scores != nil {
					d := math.Abs(float64(got[0]) - c.Scores[i])
					worstScore = max(worstScore, d)
					if d > 1e-3 {
						t.Errorf("pair %d: score %v, llama.cpp %v", i, got[0], c.Scores[i])
					}
					continue
				}
				cs := cosine(got, c.Vectors[i])
				worst = min(worst, cs)
				if cs < 0.9999 {
					t.Errorf("input %d: cosine %.7f to llama.cpp's vector", i, cs)
				}
			}
			t.Logf("%s: worst cosine %.9f, worst score difference %.2g", c.Name, worst, worstScore)
		})
	}
	for _, a := range []string{"bert", "nomic-bert", "t5encoder", "qwen3"} {
		if !archs[a] {
			t.Errorf("no llama.cpp record for %s", a)
		}
	}
}
