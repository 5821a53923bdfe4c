package model

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/kernels"
)

// reranker is a small synthetic qwen3 decoder reranker (synth.Config.Rerank).
func reranker(dt gguf.TensorType) synth.Config {
	return synth.Config{Arch: "qwen3", Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, HeadDim: 32, FFN: 96, Vocab: 300,
		Context: 256, DType: dt, Seed: 12, Rerank: true}
}

// TestDecoderRank: a qwen3 file with pooling rank and cls.output is a
// reranker whose two outputs are the softmax of cls.output·h over the last
// token's hidden state (after the output norm), computed from the file in
// float64; the first ("yes") is RankProbability. It still generates
// (logits), and serves no embedding (Pool refuses rank).
func TestDecoderRank(t *testing.T) {
	f := randomFile(t, reranker(gguf.F32))
	m := load(t, backend(t), f)
	if m.Pooling != PoolRank || m.RankOutputs() != 2 || m.Encoder {
		t.Fatalf("pooling %v, %d outputs, encoder %v", m.Pooling, m.RankOutputs(), m.Encoder)
	}
	k := newKV(t, m, 16, 16, "t")
	in := tokens(37, m.Vocab, 5)
	h := k.encode(t, "t", [][]int32{in})[0]
	got, err := m.Rank(h, len(in))
	if err != nil {
		t.Fatal(err)
	}
	w := refTensor(t, f, "cls.output.weight")
	d := m.DModel
	last := h[(len(in)-1)*d:]
	var l [2]float64
	for o := range 2 {
		for j := range d {
			l[o] += w[o*d+j] * float64(last[j])
		}
	}
	yes := 1 / (1 + math.Exp(l[1]-l[0]))
	if len(got) != 2 || math.Abs(float64(got[0])-yes) > 1e-6 || math.Abs(float64(got[1])-(1-yes)) > 1e-6 {
		t.Errorf("outputs %v, want [%v %v]", got, yes, 1-yes)
	}
	if p := m.RankProbability(got); p != float64(got[0]) {
		t.Errorf("RankProbability %v, want the first output %v", p, got[0])
	}
	if _, err := Pool(m.Pooling, h, len(in), d); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Pool on a reranker: %v", err)
	}
	// The first row alone (llama.cpp's rank pooling on other decoders)
	// would not change with the input; the last row does.
	other := append(slices.Clone(in[:len(in)-1]), (in[len(in)-1]+1)%int32(m.Vocab))
	h2 := k.encode(t, "t", [][]int32{other})[0]
	got2, err := m.Rank(h2, len(other))
	if err != nil {
		t.Fatal(err)
	}
	if got2[0] == got[0] {
		t.Errorf("a different last token gives the same score %v", got[0])
	}
}

// TestDecoderRankBatchInvariant: a reranker's score is the same bits alone,
// beside other inputs of other lengths in one Forward, in any order, and
// when its prompt is prefilled in chunks, on every weight type tried.
func TestDecoderRankBatchInvariant(t *testing.T) {
	for _, dt := range []gguf.TensorType{gguf.F32, gguf.Q8_0} {
		t.Run(dt.String(), func(t *testing.T) {
			m := load(t, backend(t), randomFile(t, reranker(dt)))
			k := newKV(t, m, 64, 8, "t")
			a := tokens(29, m.Vocab, 1)
			score := func(h []float32) []float32 {
				t.Helper()
				s, err := m.Rank(h, len(a))
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			alone := score(k.encode(t, "t", [][]int32{a})[0])
			for _, batch := range [][][]int32{
				{tokens(41, m.Vocab, 2), a, tokens(3, m.Vocab, 4)},
				{a, tokens(17, m.Vocab, 6)},
				{tokens(8, m.Vocab, 7), tokens(60, m.Vocab, 8), a},
			} {
				i := slices.IndexFunc(batch, func(x []int32) bool { return slices.Equal(x, a) })
				if got := score(k.encode(t, "t", batch)[i]); !slices.Equal(got, alone) {
					t.Errorf("score %v beside %d others, %v alone", got, len(batch)-1, alone)
				}
			}
			// Prefilled in two chunks, as the engine may split a prompt.
			s := k.start(t, "t", "chunked", len(a))
			if err := k.pool.Write(s.lease, len(a)); err != nil {
				t.Fatal(err)
			}
			bt, err := k.pool.BlockTable(s.lease, len(a))
			if err != nil {
				t.Fatal(err)
			}
			first, err := m.Forward(k.arena, []Seq{{Table: bt, Tokens: a[:11], Hidden: true}}, false)
			if err != nil {
				t.Fatal(err)
			}
			second, err := m.Forward(k.arena, []Seq{{Table: bt, Pos: 11, Tokens: a[11:], Hidden: true}}, false)
			if err != nil {
				t.Fatal(err)
			}
			if got := score(append(first[0], second[0]...)); !slices.Equal(got, alone) {
				t.Errorf("chunked score %v, whole %v", got, alone)
			}
		})
	}
}

// TestDecoderRankRefuses: rank pooling serves ranking only where llama.cpp
// computes a score that depends on the input — a qwen3 file with
// cls.output (last token); a llama file's rank pooling reads the first
// token, a qwen3 file without cls.output would softmax the hidden state:
// both load as generative models without pooling (PoolNone). A qwen3 head
// with tensors llama.cpp does not read, or rows that do not match the
// classifier labels, is refused.
func TestDecoderRankRefuses(t *testing.T) {
	set := func(c synth.Config, edit func(w *gguf.Writer) error) *gguf.File {
		t.Helper()
		w, err := synth.Random(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := edit(w); err != nil {
			t.Fatal(err)
		}
		return parse(t, w)
	}
	llama := small(gguf.F32, false)
	for _, tc := range []struct {
		name string
		f    *gguf.File
		want error // nil: loads with PoolNone
	}{
		{"llama rank", set(llama, func(w *gguf.Writer) error { return w.Set("llama.pooling_type", uint32(4)) }), nil},
		{"qwen3 rank without cls.output", set(synth.Config{Arch: "qwen3", Layers: 1, DModel: 64, Heads: 4, FFN: 96, Vocab: 300, Context: 64, DType: gguf.F32},
			func(w *gguf.Writer) error { return w.Set("qwen3.pooling_type", uint32(4)) }), nil},
		{"qwen3 with cls.weight", set(reranker(gguf.F32), func(w *gguf.Writer) error {
			return w.AddTensor("cls.weight", gguf.F32, []uint64{64, 64}, make([]byte, 64*64*4))
		}), ErrUnsupported},
		{"qwen3 with cls.output.bias", set(reranker(gguf.F32), func(w *gguf.Writer) error {
			return w.AddTensor("cls.output.bias", gguf.F32, []uint64{2}, make([]byte, 8))
		}), ErrUnsupported},
		{"labels and rows differ", set(reranker(gguf.F32), func(w *gguf.Writer) error {
			return w.Set("qwen3.classifier.output_labels", []string{"yes", "no", "maybe"})
		}), ErrModel},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Load(backend(t), tc.f)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("got %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Pooling != PoolNone || m.RankOutputs() != 0 {
				t.Errorf("pooling %v, %d rank outputs; want none", m.Pooling, m.RankOutputs())
			}
			if _, err := m.Rank(make([]float32, m.DModel), 1); !errors.Is(err, ErrUnsupported) {
				t.Errorf("Rank: %v, want ErrUnsupported", err)
			}
		})
	}
}

// TestDecoderRankStaleTableCannotRead: a reranker's pair runs in its
// tenant's pages like any prompt; a block table kept after its lease
// ended, whose pages another tenant's pair now holds, computes nothing
// (isolation_violation), so no score is made of another tenant's K/V.
func TestDecoderRankStaleTableCannotRead(t *testing.T) {
	m := load(t, backend(t), randomFile(t, reranker(gguf.F32)))
	k := newKV(t, m, 2, 4, "a", "b")
	in := tokens(8, m.Vocab, 4)
	a := k.start(t, "a", "r1", 8)
	if err := k.pool.Write(a.lease, 8); err != nil {
		t.Fatal(err)
	}
	stale, err := k.pool.BlockTable(a.lease, 8)
	if err != nil {
		t.Fatal(err)
	}
	h, err := m.Forward(k.arena, []Seq{{Table: stale, Tokens: in, Hidden: true}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Rank(h[0], len(in)); err != nil {
		t.Fatal(err)
	}
	if err := k.pool.Release(a.lease); err != nil {
		t.Fatal(err)
	}
	k.encode(t, "b", [][]int32{tokens(8, m.Vocab, 5)})
	out, err := m.Forward(k.arena, []Seq{{Table: stale, Pos: 7, Tokens: in[7:], Hidden: true}}, false)
	if !errors.Is(err, kernels.ErrTagMismatch) || out != nil || cloison.ErrorCode(err) != cloison.CodeIsolationViolation {
		t.Fatalf("stale table: hidden %v, error %v; want none and a tag mismatch", out != nil, err)
	}
}
