//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"gorgonia.org/cu"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// Benchmarks run on a GPU only (scripts/cuda-device-check.sh). Every timed
// loop ends with a device synchronisation, so asynchronous launches are
// counted in full.

func (b *Backend) sync(tb testing.TB) {
	if err := b.do(func(d driver) error { return d.sync() }); err != nil {
		tb.Fatal(err)
	}
}

// arenaGeometry is kernels/cpu's benchmark page: llama-3-8B-like, 32
// layers, 8 kv heads of 128, 16 tokens: 2 MiB a page.
var arenaGeometry = kernels.ArenaConfig{PageTokens: 16, Layers: 32, KVHeads: 8, HeadDim: 128}

// BenchmarkZeroPages zeroes 256 scattered pages (512 MiB, every other page:
// 256 runs) and 256 adjacent pages (one run) against one plain cuMemsetD8
// of the same bytes.
func BenchmarkZeroPages(b *testing.B) {
	be := open(b, kernels.Options{})
	c := arenaGeometry
	c.Pages = 512
	ka, err := be.NewArena(c)
	if err != nil {
		b.Fatal(err)
	}
	a := ka.(*arena)
	var scattered, adjacent []int32
	for p := int32(0); p < 512; p += 2 {
		scattered = append(scattered, p)
	}
	for p := int32(0); p < 256; p++ {
		adjacent = append(adjacent, p)
	}
	bytes := int64(256 * a.PageBytes())
	for _, bm := range []struct {
		name  string
		pages []int32
	}{{"ZeroPages/scattered", scattered}, {"ZeroPages/adjacent", adjacent}} {
		b.Run(bm.name, func(b *testing.B) {
			b.SetBytes(bytes)
			for b.Loop() {
				if err := a.ZeroPages(bm.pages); err != nil {
					b.Fatal(err)
				}
				be.sync(b)
			}
		})
	}
	b.Run("cuMemsetD8", func(b *testing.B) {
		b.SetBytes(bytes)
		for b.Loop() {
			if err := be.do(func(driver) error {
				if err := cu.MemsetD8(cu.DevicePtr(a.data), 0, bytes); err != nil {
					return err
				}
				return cu.Synchronize()
			}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkMatMul: a 4096×4096 weight matrix per dtype, decode (1 row:
// weight bandwidth) and prefill (64 and 512 rows: GFLOP/s).
func BenchmarkMatMul(b *testing.B) {
	be := open(b, kernels.Options{})
	const n = 4096
	r := rand.New(rand.NewPCG(3, 4))
	vals := make([]float32, n*n)
	for i := range vals {
		vals[i] = float32(r.NormFloat64()) * 0.02
	}
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.Q8_0, kernels.Q4_0, kernels.Q4_K} {
		data, err := kernels.Quantize(dt, vals)
		if err != nil {
			b.Fatal(err)
		}
		m, err := be.NewMatrix(dt, n, n, data)
		if err != nil {
			b.Fatal(err)
		}
		for _, rows := range []int{1, 64, 512} {
			b.Run(fmt.Sprintf("%v/rows=%d", dt, rows), func(b *testing.B) {
				x := upload(b, be, rows, n, vals[:rows*n])
				dst := upload(b, be, rows, n, nil)
				defer be.Free(x)
				defer be.Free(dst)
				for b.Loop() {
					if err := be.MatMul(dst, x, m); err != nil {
						b.Fatal(err)
					}
					be.sync(b)
				}
				s := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(2*float64(rows)*n*n/s/1e9, "GFLOP/s")
				b.ReportMetric(float64(len(data))/s/1e9, "weightGB/s")
			})
		}
	}
}

// BenchmarkAttention: decode attention (one query row per sequence) over
// 1024 and 4096 positions, 32 query heads, 8 kv heads of 128, for 1 and 16
// sequences; reports the KV bytes read per second.
func BenchmarkAttention(b *testing.B) {
	be := open(b, kernels.Options{})
	const pt, layers, kvHeads, heads, hd = 16, 1, 8, 32, 128
	for _, ctx := range []int{1024, 4096} {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("ctx=%d/batch=%d", ctx, batch), func(b *testing.B) {
				pages := batch * ctx / pt
				pool, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: pt})
				if err != nil {
					b.Fatal(err)
				}
				if err := pool.AddTenant(isolation.TenantConfig{ID: "t"}); err != nil {
					b.Fatal(err)
				}
				ka, err := be.NewArena(kernels.ArenaConfig{Pages: pages, PageTokens: pt, Layers: layers, KVHeads: kvHeads, HeadDim: hd})
				if err != nil {
					b.Fatal(err)
				}
				kv := upload(b, be, ctx, kvHeads*hd, make([]float32, ctx*kvHeads*hd))
				var spans []kernels.Span
				for i := range batch {
					l, err := pool.Allocate("t", cloison.RequestID(fmt.Sprint(i)), ctx)
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
					if err := ka.WriteKV(0, kv, kv, []kernels.Span{{Table: bt, N: ctx}}); err != nil {
						b.Fatal(err)
					}
					spans = append(spans, kernels.Span{Table: bt, Row: i, Pos: ctx - 1, N: 1})
				}
				q := upload(b, be, batch, heads*hd, nil)
				out := upload(b, be, batch, heads*hd, nil)
				for b.Loop() {
					if err := ka.Attention(0, out, q, spans); err != nil {
						b.Fatal(err)
					}
					be.sync(b)
				}
				s := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(float64(batch*ctx*2*kvHeads*hd*4)/s/1e9, "kvGB/s")
			})
		}
	}
}

// decodeModel is a ~1.0B-parameter llama-shaped model: 16 layers, d=2048,
// GQA 32/8, FFN 8192, vocabulary 32000, tied embeddings, Q8_0 (~1.1 GB).
var decodeModel = synth.Config{Layers: 16, DModel: 2048, Heads: 32, KVHeads: 8, FFN: 8192, Vocab: 32000, Context: 4096, DType: gguf.Q8_0, Seed: 1, Tied: true}

// BenchmarkDecode1B: generated tokens/s with engine/model on the synthetic
// ~1B model, on this backend and on kernels/cpu (all cores), batch 1 and
// 16, after a 32-token prompt.
func BenchmarkDecode1B(b *testing.B) {
	dir := b.TempDir()
	path := filepath.Join(dir, "1b.gguf")
	w, err := synth.Random(decodeModel)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		b.Fatal(err)
	}
	defer os.Remove(path)
	f, err := gguf.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.Logf("model: %d parameters", decodeModel.Params())
	backends := []struct {
		name string
		open func(testing.TB) kernels.Backend
	}{
		{"cuda", func(tb testing.TB) kernels.Backend { return open(tb, kernels.Options{}) }},
		{"cpu", func(tb testing.TB) kernels.Backend {
			c, err := cpu.New(kernels.Options{})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { c.Close() })
			return c
		}},
	}
	for _, be := range backends {
		for _, batch := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/batch=%d", be.name, batch), func(b *testing.B) {
				m, err := model.Load(be.open(b), f)
				if err != nil {
					b.Fatal(err)
				}
				defer m.Close()
				decode(b, m, batch)
			})
		}
	}
}

func decode(b *testing.B, m *model.Model, batch int) {
	const prompt, pt = 32, 16
	ctx := prompt + max(b.N, 1) + 1
	pages := batch * (ctx/pt + 1)
	pool, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: pt})
	if err != nil {
		b.Fatal(err)
	}
	if err := pool.AddTenant(isolation.TenantConfig{ID: "t"}); err != nil {
		b.Fatal(err)
	}
	a, err := m.Backend().NewArena(m.ArenaConfig(pages, pt, kernels.KVF32))
	if err != nil {
		b.Fatal(err)
	}
	leases := make([]isolation.Lease, batch)
	pos := make([]int, batch)
	in := make([][]int32, batch)
	for i := range leases {
		if leases[i], err = pool.Allocate("t", cloison.RequestID(fmt.Sprint(i)), ctx); err != nil {
			b.Fatal(err)
		}
		in[i] = make([]int32, prompt)
		for j := range in[i] {
			in[i][j] = int32((i*131 + j*17) % 32000)
		}
	}
	step := func() [][]float32 {
		seqs := make([]model.Seq, batch)
		for i, l := range leases {
			if err := pool.Write(l, len(in[i])); err != nil {
				b.Fatal(err)
			}
			bt, err := pool.BlockTable(l, pos[i]+len(in[i]))
			if err != nil {
				b.Fatal(err)
			}
			seqs[i] = model.Seq{Table: bt, Pos: pos[i], Tokens: in[i]}
		}
		out, err := m.Forward(a, seqs, false)
		if err != nil {
			if errors.Is(err, kernels.ErrClosed) {
				b.Skip(err)
			}
			b.Fatal(err)
		}
		for i := range pos {
			pos[i] += len(in[i])
		}
		return out
	}
	step()
	for i := range in {
		in[i] = []int32{int32(i)}
	}
	b.ResetTimer()
	for range b.N {
		out := step()
		for i := range in {
			in[i][0] = argmax(out[i])
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "tok/s")
}

func argmax(x []float32) int32 {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return int32(best)
}
