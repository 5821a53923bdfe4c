package model

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/cloison/cloison/engine/synth"
)

// llamaCppEncoders is testdata/llamacpp_encoders.json, written by
// scripts/encoder-check.sh: llama.cpp's pooled embeddings (an embedding
// context) and rank scores (a ranking context's probability turned back
// into the head's logit), through node-llama-cpp on the CPU, on synthetic
// BERT-family files that engine/synth regenerates from the recorded config.
type llamaCppEncoders struct {
	Version string `json:"node_llama_cpp"`
	Cases   []struct {
		Name    string           `json:"name"`
		Arch    string           `json:"arch"`
		Config  synth.BertConfig `json:"config"`
		Inputs  [][]int32        `json:"inputs"`
		Vectors [][]float64      `json:"vectors"`
		Scores  []float64        `json:"scores"`
	} `json:"cases"`
}

// TestLlamaCppEncoders: on the same synthetic files, every pooled vector
// (bert CLS and mean; F32, F16 and Q8_0 weights; nomic-bert mean) is
// within cosine 0.9999 of llama.cpp's, and every rank score (bert, rank
// pooling: cls then cls.output on [CLS] query [SEP] document [SEP]) within
// 1e-3 of llama.cpp's logit.
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
			f := bertFile(t, c.Config)
			m := load(t, backend(t), f)
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
	for _, a := range []string{"bert", "nomic-bert", "t5encoder"} {
		if !archs[a] {
			t.Errorf("no llama.cpp record for %s", a)
		}
	}
}
