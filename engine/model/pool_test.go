package model

import (
	"errors"
	"math"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/isolation"
)

// TestForwardHidden: a sequence's hidden rows (Seq.Hidden) are DModel
// values per new token, the same bits alone and beside other sequences
// (batch invariance), and the same as a chunked prefill's; a sequence
// asking for logits beside it still gets its logits.
func TestForwardHidden(t *testing.T) {
	m := load(t, backend(t), randomFile(t, small(gguf.F32, false)))
	k := newKV(t, m, 32, 16, "a", "b")
	prompt := tokens(40, m.Vocab, 3)
	run := func(batch []Seq) [][]float32 {
		t.Helper()
		out, err := m.Forward(k.arena, batch, false)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	table := func(tenant, req string, n int) isolation.BlockTable {
		t.Helper()
		s := k.start(t, cloison.TenantID(tenant), req, n)
		if err := k.pool.Write(s.lease, n); err != nil {
			t.Fatal(err)
		}
		bt, err := k.pool.BlockTable(s.lease, n)
		if err != nil {
			t.Fatal(err)
		}
		return bt
	}
	alone := run([]Seq{{Table: table("a", "alone", len(prompt)), Tokens: prompt, Hidden: true}})[0]
	if len(alone) != len(prompt)*m.DModel {
		t.Fatalf("%d hidden values, want %d", len(alone), len(prompt)*m.DModel)
	}
	other := tokens(25, m.Vocab, 9)
	mixed := run([]Seq{
		{Table: table("b", "other", len(other)), Tokens: other},
		{Table: table("a", "beside", len(prompt)), Tokens: prompt, Hidden: true},
	})
	if len(mixed[0]) != m.Vocab {
		t.Fatalf("the logits sequence got %d values, want %d", len(mixed[0]), m.Vocab)
	}
	for i := range alone {
		if math.Float32bits(alone[i]) != math.Float32bits(mixed[1][i]) {
			t.Fatalf("hidden value %d: %v alone, %v in a batch", i, alone[i], mixed[1][i])
		}
	}
	bt := table("a", "chunked", len(prompt))
	first := run([]Seq{{Table: bt, Tokens: prompt[:17], Hidden: true}})[0]
	second := run([]Seq{{Table: bt, Pos: 17, Tokens: prompt[17:], Hidden: true}})[0]
	for i, x := range append(append([]float32{}, first...), second...) {
		if d := math.Abs(float64(x - alone[i])); d > 1e-4 {
			t.Fatalf("hidden value %d: %v chunked, %v at once", i, x, alone[i])
		}
	}
}

// TestPool: mean, CLS and last pooling as llama.cpp's, L2-normalised; no
// pooling and a zero vector are refused.
func TestPool(t *testing.T) {
	h := []float32{3, 0, 1, 4, 5, 0} // three tokens of two values
	for _, c := range []struct {
		p    Pooling
		want []float64
	}{
		{PoolMean, []float64{3, 4.0 / 3}},
		{PoolCLS, []float64{3, 0}},
		{PoolLast, []float64{5, 0}},
	} {
		got, err := Pool(c.p, h, 3, 2)
		if err != nil {
			t.Fatal(err)
		}
		n := math.Hypot(c.want[0], c.want[1])
		for j := range got {
			if math.Abs(float64(got[j])-c.want[j]/n) > 1e-7 {
				t.Fatalf("%s: got %v, want %v normalised", c.p, got, c.want)
			}
		}
	}
	if _, err := Pool(PoolNone, h, 3, 2); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("no pooling: %v", err)
	}
	if _, err := Pool(PoolMean, make([]float32, 4), 2, 2); !errors.Is(err, ErrBatch) {
		t.Fatalf("zero vector: %v", err)
	}
	if _, err := Pool(PoolMean, h, 2, 2); !errors.Is(err, ErrBatch) {
		t.Fatalf("rows that do not fit: %v", err)
	}
}

// BenchmarkEmbed: embeddings of 8 inputs of 128 tokens in one Forward
// (hidden rows, then Pool) on a d=512 synthetic model, in embeddings per
// second.
func BenchmarkEmbed(b *testing.B) {
	c := small(gguf.Q8_0, false)
	c.DModel, c.Heads, c.KVHeads, c.FFN, c.Layers, c.Context = 512, 8, 4, 1408, 4, 1024
	m := load(b, backend(b), randomFile(b, c))
	const n, tokensEach = 8, 128
	k := newKV(b, m, n*tokensEach/16+8, 16, "a")
	batch := make([]Seq, n)
	for i := range batch {
		s := k.start(b, "a", "r"+string(rune('a'+i)), tokensEach)
		if err := k.pool.Write(s.lease, tokensEach); err != nil {
			b.Fatal(err)
		}
		bt, err := k.pool.BlockTable(s.lease, tokensEach)
		if err != nil {
			b.Fatal(err)
		}
		batch[i] = Seq{Table: bt, Tokens: tokens(tokensEach, m.Vocab, i), Hidden: true}
	}
	b.ResetTimer()
	for range b.N {
		out, err := m.Forward(k.arena, batch, false)
		if err != nil {
			b.Fatal(err)
		}
		for _, h := range out {
			if _, err := Pool(PoolMean, h, tokensEach, m.DModel); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "embeddings/s")
}
