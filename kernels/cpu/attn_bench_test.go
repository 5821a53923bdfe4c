package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// BenchmarkAttentionDecode: one layer of decode attention, one query row
// after ctx tokens, at 1 thread, with the KV stored as f32 and as f16. The
// shape is a small llama's (12 query heads, 4 kv heads of 64, pages of
// 16 tokens); the arena holds 32 layers' pages so that one layer's keys and
// values are not all in the cache from the previous iteration at long
// contexts, as in a forward pass.
func BenchmarkAttentionDecode(b *testing.B) {
	for _, ctx := range []int{128, 2048, 8192} {
		for _, kv := range []kernels.KVType{kernels.KVF32, kernels.KVF16} {
			b.Run(fmt.Sprintf("ctx=%d/kv=%v", ctx, kv), func(b *testing.B) {
				benchDecodeAttention(b, ctx, kv)
			})
		}
	}
}

func benchDecodeAttention(b *testing.B, ctx int, kv kernels.KVType) {
	const qHeads, layers = 12, 8
	c := kernels.ArenaConfig{PageTokens: 16, Layers: layers, KVHeads: 4, HeadDim: 64, KV: kv}
	c.Pages = (ctx + 15) / 16
	be := openBench(b, 1)
	a, err := be.NewArena(c)
	if err != nil {
		b.Fatal(err)
	}
	pool, err := isolation.NewPool(isolation.Config{Pages: c.Pages, PageTokens: c.PageTokens})
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.AddTenant(isolation.TenantConfig{ID: "t"}); err != nil {
		b.Fatal(err)
	}
	l, err := pool.Allocate("t", "r", ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.Write(l, ctx); err != nil {
		b.Fatal(err)
	}
	bt, err := pool.BlockTable(l, ctx)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	rnd := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	kvw := c.KVHeads * c.HeadDim
	k, _ := be.NewTensor(ctx, kvw)
	v, _ := be.NewTensor(ctx, kvw)
	q, _ := be.NewTensor(1, qHeads*c.HeadDim)
	out, _ := be.NewTensor(1, qHeads*c.HeadDim)
	for layer := range layers {
		if err := be.Upload(k, rnd(ctx*kvw)); err != nil {
			b.Fatal(err)
		}
		if err := be.Upload(v, rnd(ctx*kvw)); err != nil {
			b.Fatal(err)
		}
		if err := a.WriteKV(layer, k, v, []kernels.Span{{Table: bt, N: ctx}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := be.Upload(q, rnd(qHeads*c.HeadDim)); err != nil {
		b.Fatal(err)
	}
	spans := []kernels.Span{{Table: bt, Pos: ctx - 1, N: 1}}
	i := 0
	for b.Loop() {
		if err := a.Attention(i%layers, out, q, spans); err != nil {
			b.Fatal(err)
		}
		i++
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(ctx), "ns/token")
}
