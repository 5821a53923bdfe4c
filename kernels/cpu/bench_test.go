package cpu_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// Benchmarks. Figures are per run of the op; custom metrics:
//
//	GFLOP/s       2·rows·out·cols per op / time, all threads
//	GFLOP/s/core  the same divided by the backend's threads
//	B/s (SetBytes) for products: weight bytes read; for copies: bytes copied
//
// Decode (one activation row) is memory-bound: its weights are several
// times larger than the last-level cache, and its B/s is to be compared with
// BenchmarkCopy's, the memory-bound limit.

const bigBytes = 96 << 20 // larger than the L3 of the machines we run on

func benchWeights(b *testing.B, be *cpu.Backend, dt kernels.DType, rows, cols, count int) []kernels.Matrix {
	b.Helper()
	r := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, cols)
	for i := range row {
		row[i] = float32(r.NormFloat64())
	}
	q, err := kernels.Quantize(dt, row)
	if err != nil {
		b.Fatal(err)
	}
	var ms []kernels.Matrix
	for range count {
		data := make([]byte, 0, rows*len(q))
		for range rows {
			data = append(data, q...)
		}
		m, err := be.NewMatrix(dt, rows, cols, data)
		if err != nil {
			b.Fatal(err)
		}
		ms = append(ms, m)
	}
	return ms
}

func openBench(b *testing.B, threads int) *cpu.Backend {
	b.Helper()
	be, err := cpu.New(kernels.Options{Threads: threads})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return be
}

func openBenchPath(b *testing.B, threads int, p cpu.Path) *cpu.Backend {
	b.Helper()
	be, err := cpu.NewWithPath(kernels.Options{Threads: threads}, p)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { be.Close() })
	return be
}

func benchDTypes() []kernels.DType {
	return []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q6_K}
}

// BenchmarkMatMul: prefill-shaped products (64 rows) on one thread and on
// all, weights in cache.
func BenchmarkMatMul(b *testing.B) {
	const rows, out, cols = 64, 512, 1024
	for _, threads := range []int{1, 0} {
		for _, dt := range benchDTypes() {
			for _, p := range cpu.Paths() {
				b.Run(fmt.Sprintf("%v/threads=%d/path=%s", dt, threads, p), func(b *testing.B) {
					be := openBenchPath(b, threads, p)
					m := benchWeights(b, be, dt, out, cols, 1)[0]
					x, _ := be.NewTensor(rows, cols)
					dst, _ := be.NewTensor(rows, out)
					rb, _ := dt.RowBytes(cols)
					b.SetBytes(int64(out * rb))
					for b.Loop() {
						if err := be.MatMul(dst, x, m); err != nil {
							b.Fatal(err)
						}
					}
					flops := 2 * float64(rows*out*cols) * float64(b.N) / b.Elapsed().Seconds() / 1e9
					b.ReportMetric(flops, "GFLOP/s")
					b.ReportMetric(flops/float64(be.Threads()), "GFLOP/s/core")
				})
			}
		}
	}
}

// BenchmarkMatVec: decode-shaped products (one row) cycling through weights
// larger than the cache, as a decode step does.
func BenchmarkMatVec(b *testing.B) {
	const out, cols = 2048, 2048
	for _, threads := range []int{1, 0} {
		for _, dt := range benchDTypes() {
			for _, p := range cpu.Paths() {
				b.Run(fmt.Sprintf("%v/threads=%d/path=%s", dt, threads, p), func(b *testing.B) {
					be := openBenchPath(b, threads, p)
					rb, _ := dt.RowBytes(cols)
					count := max(2, bigBytes/(out*rb))
					ms := benchWeights(b, be, dt, out, cols, count)
					x, _ := be.NewTensor(1, cols)
					dst, _ := be.NewTensor(1, out)
					b.SetBytes(int64(out * rb))
					i := 0
					for b.Loop() {
						if err := be.MatMul(dst, x, ms[i%count]); err != nil {
							b.Fatal(err)
						}
						i++
					}
					flops := 2 * float64(out*cols) * float64(b.N) / b.Elapsed().Seconds() / 1e9
					b.ReportMetric(flops/float64(be.Threads()), "GFLOP/s/core")
				})
			}
		}
	}
}

// BenchmarkCopy is the memory-bound reference: copy() of bigBytes.
func BenchmarkCopy(b *testing.B) {
	src, dst := make([]byte, bigBytes), make([]byte, bigBytes)
	for i := range src {
		src[i] = byte(i)
	}
	copy(dst, src) // fault the pages in before timing
	b.SetBytes(bigBytes)
	for b.Loop() {
		copy(dst, src)
	}
}

// arenaGeometry is a llama-3-8B-like KV page: 32 layers, 8 kv heads of
// 128, 16 tokens: 2 MiB a page.
var arenaGeometry = kernels.ArenaConfig{PageTokens: 16, Layers: 32, KVHeads: 8, HeadDim: 128}

// BenchmarkZeroPages zeroes 32 scattered pages (64 MiB) against clear() of
// the same bytes.
func BenchmarkZeroPages(b *testing.B) {
	c := arenaGeometry
	c.Pages = 64
	be := openBench(b, 0)
	a, err := be.NewArena(c)
	if err != nil {
		b.Fatal(err)
	}
	pages := make([]int32, 0, 32)
	for p := int32(0); p < 64; p += 2 { // every other page: 32 runs
		pages = append(pages, p)
	}
	all := make([]int32, 64)
	for i := range all {
		all[i] = int32(i)
	}
	if err := a.ZeroPages(all); err != nil { // fault the arena's memory in
		b.Fatal(err)
	}
	b.SetBytes(int64(len(pages) * a.PageBytes()))
	b.Run("ZeroPages", func(b *testing.B) {
		b.SetBytes(int64(len(pages) * a.PageBytes()))
		for b.Loop() {
			if err := a.ZeroPages(pages); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("ZeroPages/threads=1", func(b *testing.B) {
		one := openBench(b, 1)
		a1, err := one.NewArena(c)
		if err != nil {
			b.Fatal(err)
		}
		if err := a1.ZeroPages(all); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(pages) * a1.PageBytes()))
		for b.Loop() {
			if err := a1.ZeroPages(pages); err != nil {
				b.Fatal(err)
			}
		}
	})
	// clear() of the same number of bytes in one slice: at 64 MiB Go's
	// memclr switches to non-temporal stores (from 32 MiB on).
	b.Run("clear", func(b *testing.B) {
		buf := make([]byte, len(pages)*a.PageBytes())
		clear(buf)
		b.SetBytes(int64(len(buf)))
		for b.Loop() {
			clear(buf)
		}
	})
	// clear() of the same 32 scattered 2 MiB pages, one call per page: what
	// a scrubber without ZeroPages would do.
	b.Run("clear-per-page", func(b *testing.B) {
		pb := a.PageBytes()
		buf := make([]byte, 64*pb)
		clear(buf)
		b.SetBytes(int64(len(pages) * pb))
		for b.Loop() {
			for _, p := range pages {
				clear(buf[int(p)*pb : int(p+1)*pb])
			}
		}
	})
}

// BenchmarkPageCopy copies 16 pages out and in against copy() of the same
// bytes.
func BenchmarkPageCopy(b *testing.B) {
	c := arenaGeometry
	c.Pages = 32
	be := openBench(b, 0)
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
	const pages = 16
	l, err := pool.Allocate("t", "r", pages*c.PageTokens)
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.Write(l, pages*c.PageTokens); err != nil {
		b.Fatal(err)
	}
	bt, err := pool.BlockTable(l, pages*c.PageTokens)
	if err != nil {
		b.Fatal(err)
	}
	bufs := make([][]byte, pages)
	for i := range bufs {
		bufs[i] = make([]byte, a.PageBytes())
		if err := a.CopyIn(bt, i, bufs[i]); err != nil { // tags and fills
			b.Fatal(err)
		}
	}
	b.Run("CopyOut", func(b *testing.B) {
		b.SetBytes(int64(pages * a.PageBytes()))
		for b.Loop() {
			for i := range pages {
				if err := a.CopyOut(bufs[i], bt, i); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("CopyIn", func(b *testing.B) {
		b.SetBytes(int64(pages * a.PageBytes()))
		for b.Loop() {
			for i := range pages {
				if err := a.CopyIn(bt, i, bufs[i]); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("copy", func(b *testing.B) {
		src := make([]byte, pages*a.PageBytes())
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			for i := range pages {
				copy(bufs[i], src[i*a.PageBytes():])
			}
		}
	})
}

// BenchmarkAttention: one layer of decode attention for a batch of
// sequences (32 query heads, 8 kv heads of 128), and a prefill chunk.
func BenchmarkAttention(b *testing.B) {
	for _, bc := range []struct {
		name             string
		seqs, ctx, query int
	}{
		{"decode/batch=1/ctx=1024", 1, 1024, 1},
		{"decode/batch=16/ctx=512", 16, 512, 1},
		{"prefill/ctx=512", 1, 512, 512},
	} {
		b.Run(bc.name, func(b *testing.B) {
			c := kernels.ArenaConfig{PageTokens: 16, Layers: 1, KVHeads: 8, HeadDim: 128}
			per := (bc.ctx + 15) / 16
			c.Pages = bc.seqs * per
			be := openBench(b, 0)
			a, err := be.NewArena(c)
			if err != nil {
				b.Fatal(err)
			}
			pool, _ := isolation.NewPool(isolation.Config{Pages: c.Pages, PageTokens: 16})
			pool.AddTenant(isolation.TenantConfig{ID: "t"})
			var spans []kernels.Span
			kv, _ := be.NewTensor(bc.ctx, c.KVHeads*c.HeadDim)
			for s := range bc.seqs {
				l, err := pool.Allocate("t", cloisonID(s), bc.ctx)
				if err != nil {
					b.Fatal(err)
				}
				pool.Write(l, bc.ctx)
				bt, err := pool.BlockTable(l, bc.ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := a.WriteKV(0, kv, kv, []kernels.Span{{Table: bt, Pos: 0, N: bc.ctx}}); err != nil {
					b.Fatal(err)
				}
				spans = append(spans, kernels.Span{Table: bt, Row: s * bc.query, Pos: bc.ctx - bc.query, N: bc.query})
			}
			q, _ := be.NewTensor(bc.seqs*bc.query, 32*c.HeadDim)
			out, _ := be.NewTensor(bc.seqs*bc.query, 32*c.HeadDim)
			for b.Loop() {
				if err := a.Attention(0, out, q, spans); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAttentionPrefill is the attention of a 2,048-token prompt of
// the 8-layer d=768 benchmark model's shape (make peer-bench: 12 query
// heads over 4 KV heads of 64, F16 KV), one layer, 1 thread, random queries
// and keys (the running maximum moves); a share of its prefill.
func BenchmarkAttentionPrefill(b *testing.B) {
	const ctx, heads = 2048, 12
	c := kernels.ArenaConfig{PageTokens: 16, Layers: 1, KVHeads: 4, HeadDim: 64, KV: kernels.KVF16}
	c.Pages = ctx / c.PageTokens
	be := openBench(b, 1)
	a, err := be.NewArena(c)
	if err != nil {
		b.Fatal(err)
	}
	pool, _ := isolation.NewPool(isolation.Config{Pages: c.Pages, PageTokens: c.PageTokens})
	pool.AddTenant(isolation.TenantConfig{ID: "t"})
	l, err := pool.Allocate("t", cloisonID(0), ctx)
	if err != nil {
		b.Fatal(err)
	}
	pool.Write(l, ctx)
	bt, err := pool.BlockTable(l, ctx)
	if err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewPCG(3, 4))
	fill := func(rows, cols int) kernels.Tensor {
		v := make([]float32, rows*cols)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		t, _ := be.NewTensor(rows, cols)
		be.Upload(t, v)
		return t
	}
	k, v := fill(ctx, c.KVHeads*c.HeadDim), fill(ctx, c.KVHeads*c.HeadDim)
	spans := []kernels.Span{{Table: bt, Pos: 0, N: ctx}}
	if err := a.WriteKV(0, k, v, spans); err != nil {
		b.Fatal(err)
	}
	q := fill(ctx, heads*c.HeadDim)
	out, _ := be.NewTensor(ctx, heads*c.HeadDim)
	for b.Loop() {
		if err := a.Attention(0, out, q, spans); err != nil {
			b.Fatal(err)
		}
	}
	// Query-key pairs of the causal product, each a score and a value row.
	b.ReportMetric(float64(heads*ctx*(ctx+1)/2)*float64(b.N)/b.Elapsed().Seconds()/1e6, "Mpairs/s")
}

func cloisonID(i int) cloison.RequestID { return cloison.RequestID(fmt.Sprint("r", i)) }

// BenchmarkDecodeEfficiency reports, per weight type, the decode matrix-
// vector bandwidth (weight bytes read per second, all threads, weights larger
// than the cache) divided by copy() bandwidth measured in the same run: the
// fraction of the memory-bound limit that decode reaches.
func BenchmarkDecodeEfficiency(b *testing.B) {
	src, dst := make([]byte, bigBytes), make([]byte, bigBytes)
	for i := range src {
		src[i] = byte(i) // real pages: an untouched slice reads the shared zero page
	}
	copy(dst, src)
	copyBps := func() float64 {
		start := time.Now()
		const reps = 5
		for range reps {
			copy(dst, src)
		}
		return reps * bigBytes / time.Since(start).Seconds()
	}
	const out, cols = 2048, 2048
	for _, dt := range benchDTypes() {
		b.Run(dt.String(), func(b *testing.B) {
			be := openBench(b, 0)
			rb, _ := dt.RowBytes(cols)
			count := max(2, bigBytes/(out*rb))
			ms := benchWeights(b, be, dt, out, cols, count)
			x, _ := be.NewTensor(1, cols)
			y, _ := be.NewTensor(1, out)
			before := copyBps()
			i := 0
			for b.Loop() {
				if err := be.MatMul(y, x, ms[i%count]); err != nil {
					b.Fatal(err)
				}
				i++
			}
			mv := float64(out*rb) * float64(b.N) / b.Elapsed().Seconds()
			cp := (before + copyBps()) / 2
			b.ReportMetric(mv/1e9, "GB/s")
			b.ReportMetric(cp/1e9, "copy-GB/s")
			b.ReportMetric(mv/cp, "x-copy")
		})
	}
}
