package cuda

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// Tests shared by the GPU (cuda_test.go, build tag cuda) and the emulated
// driver (emu_test.go, every build).

// openOracle opens kernels/cpu on its generic path: the float activations
// the CUDA kernels use too (the vector CPU paths quantize Q8_0 activations
// to int8, which moves results by more than this comparison allows).
func openOracle() (kernels.Backend, error) { return cpu.NewWithPath(kernels.Options{}, cpu.Generic) }

// testAgainstCPU compares a small llama-shaped layer step with kernels/cpu,
// the oracle: products, norms, RoPE, activations and attention through the
// same pool tables on both backends.
func testAgainstCPU(t *testing.T, g *Backend) {
	c, err := openOracle()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const (
		rows, heads, kvHeads, hd, pt = 6, 4, 2, 32, 4
	)
	r := rand.New(rand.NewPCG(1, 2))
	randn := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return x
	}
	for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.BF16, kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q6_K} {
		cols := 256
		w, err := kernels.Quantize(dt, randn(64*cols))
		if err != nil {
			t.Fatal(err)
		}
		x := randn(rows * cols)
		got := matmulOn(t, g, dt, 64, cols, w, rows, x)
		want := matmulOn(t, c, dt, 64, cols, w, rows, x)
		for i := range want {
			if math.Abs(float64(got[i]-want[i])) > 1e-3*(1+math.Abs(float64(want[i]))) {
				t.Fatalf("%v matmul element %d: got %v, want %v (cpu)", dt, i, got[i], want[i])
			}
		}
	}
	// Attention over one sequence, both backends fed the same K/V and q.
	pool, err := isolation.NewPool(isolation.Config{Pages: 8, PageTokens: pt})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.AddTenant(isolation.TenantConfig{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	lease, err := pool.Allocate("a", "r", rows)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Write(lease, rows); err != nil {
		t.Fatal(err)
	}
	table, err := pool.BlockTable(lease, rows)
	if err != nil {
		t.Fatal(err)
	}
	k, v, q := randn(rows*kvHeads*hd), randn(rows*kvHeads*hd), randn(rows*heads*hd)
	cfg := kernels.ArenaConfig{Pages: 8, PageTokens: pt, Layers: 1, KVHeads: kvHeads, HeadDim: hd}
	run := func(b kernels.Backend) []float32 {
		a, err := b.NewArena(cfg)
		if err != nil {
			t.Fatal(err)
		}
		kt, vt, qt, ot := upload(t, b, rows, kvHeads*hd, k), upload(t, b, rows, kvHeads*hd, v), upload(t, b, rows, heads*hd, q), upload(t, b, rows, heads*hd, nil)
		spans := []kernels.Span{{Table: table, Row: 0, Pos: 0, N: rows}}
		if err := a.WriteKV(0, kt, vt, spans); err != nil {
			t.Fatal(err)
		}
		if err := a.Attention(0, ot, qt, spans); err != nil {
			t.Fatal(err)
		}
		return download(t, b, ot)
	}
	got, want := run(g), run(c)
	for i := range want {
		if math.Abs(float64(got[i]-want[i])) > 1e-4*4+1e-6 {
			t.Fatalf("attention element %d: got %v, want %v (cpu)", i, got[i], want[i])
		}
	}
}

func matmulOn(t *testing.T, b kernels.Backend, dt kernels.DType, rows, cols int, w []byte, n int, x []float32) []float32 {
	t.Helper()
	m, err := b.NewMatrix(dt, rows, cols, w)
	if err != nil {
		t.Fatal(err)
	}
	xt, dst := upload(t, b, n, cols, x), upload(t, b, n, rows, nil)
	if err := b.MatMul(dst, xt, m); err != nil {
		t.Fatal(err)
	}
	return download(t, b, dst)
}

func upload(t testing.TB, b kernels.Backend, rows, cols int, x []float32) kernels.Tensor {
	t.Helper()
	tt, err := b.NewTensor(rows, cols)
	if err != nil {
		t.Fatal(err)
	}
	if x != nil {
		if err := b.Upload(tt, x); err != nil {
			t.Fatal(err)
		}
	}
	return tt
}

func download(t testing.TB, b kernels.Backend, x kernels.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Rows()*x.Cols())
	if err := b.Download(out, x); err != nil {
		t.Fatal(err)
	}
	return out
}

// setDevTag overwrites page p's tag on the device only, as a corrupted or
// stale device book would: the host books still match the table.
func setDevTag(t *testing.T, a *arena, p int32, tag isolation.Tag) {
	t.Helper()
	if err := a.b.do(func(d driver) error { return a.setDevTag(d, p, tag) }); err != nil {
		t.Fatal(err)
	}
}

// testDeviceTagMismatch proves that the device kernel, on its own, refuses
// a page whose device tag is not the one the block table expects: the host
// checks pass (or are skipped), paged_attention_check raises the flag,
// paged_attention reads and writes nothing, and Attention returns a
// *kernels.TagMismatchError naming the page and the device's tag.
func testDeviceTagMismatch(t *testing.T, b *Backend) {
	const pt, hd, kvHeads, heads, n = 4, 16, 1, 2, 10
	pool, err := isolation.NewPool(isolation.Config{Pages: 8, PageTokens: pt})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []cloison.TenantID{"a", "b"} {
		if err := pool.AddTenant(isolation.TenantConfig{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	la, err := pool.Allocate("a", "ra", n)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := pool.Allocate("b", "rb", n)
	if err != nil {
		t.Fatal(err)
	}
	ka, err := b.NewArena(kernels.ArenaConfig{Pages: 8, PageTokens: pt, Layers: 1, KVHeads: kvHeads, HeadDim: hd})
	if err != nil {
		t.Fatal(err)
	}
	a := ka.(*arena)
	tables := map[string]isolation.BlockTable{}
	for name, l := range map[string]isolation.Lease{"a": la, "b": lb} {
		if err := pool.Write(l, n); err != nil {
			t.Fatal(err)
		}
		bt, err := pool.BlockTable(l, n)
		if err != nil {
			t.Fatal(err)
		}
		tables[name] = bt
		ones := make([]float32, n*kvHeads*hd)
		for i := range ones {
			ones[i] = 1
		}
		kt := upload(t, b, n, kvHeads*hd, ones)
		if err := a.WriteKV(0, kt, kt, []kernels.Span{{Table: bt, N: n}}); err != nil {
			t.Fatal(err)
		}
	}
	ta, tb := tables["a"], tables["b"]
	q := upload(t, b, n, heads*hd, make([]float32, n*heads*hd))
	sentinel := make([]float32, n*heads*hd)
	for i := range sentinel {
		sentinel[i] = 42
	}
	spans := []kernels.Span{{Table: ta, N: n}}

	// Sanity: the genuine table reads.
	out := upload(t, b, n, heads*hd, sentinel)
	if err := a.Attention(0, out, q, spans); err != nil {
		t.Fatalf("attention through the owner's table: %v", err)
	}

	foreign := tb.Tag(0) // a page of tenant b
	victim := ta.Page(1)

	t.Run("device book differs, host books agree", func(t *testing.T) {
		setDevTag(t, a, victim, foreign)
		defer setDevTag(t, a, victim, ta.Tag(1))
		checkRefused(t, b, a, q, spans, victim, ta.Tag(1), foreign, sentinel)
	})
	t.Run("host checks skipped, page of another tenant", func(t *testing.T) {
		// Both books now say the page holds tenant b's KV (as after a
		// reuse the table does not know of). The host check would refuse;
		// with it off, only the device stands between a's table and b's tag.
		setDevTag(t, a, victim, foreign)
		a.Tags[victim] = foreign
		defer func() {
			a.Tags[victim] = ta.Tag(1)
			setDevTag(t, a, victim, ta.Tag(1))
		}()
		var tm *kernels.TagMismatchError
		if err := a.Attention(0, upload(t, b, n, heads*hd, nil), q, spans); !errors.As(err, &tm) {
			t.Fatalf("host check: got %v, want a *kernels.TagMismatchError", err)
		}
		a.skipHostChecks = true
		defer func() { a.skipHostChecks = false }()
		checkRefused(t, b, a, q, spans, victim, ta.Tag(1), foreign, sentinel)
	})
}

func checkRefused(t *testing.T, b *Backend, a *arena, q kernels.Tensor, spans []kernels.Span, page int32, want, got isolation.Tag, sentinel []float32) {
	t.Helper()
	out := upload(t, b, q.Rows(), q.Cols(), sentinel)
	err := a.Attention(0, out, q, spans)
	var tm *kernels.TagMismatchError
	if !errors.As(err, &tm) {
		t.Fatalf("Attention: got error %v, want a *kernels.TagMismatchError", err)
	}
	if tm.Page != page || tm.Want != want || tm.Got != got {
		t.Fatalf("mismatch: got page %d want %+v got %+v, want page %d want %+v got %+v", tm.Page, tm.Want, tm.Got, page, want, got)
	}
	if cloison.ErrorCode(err) != cloison.CodeIsolationViolation {
		t.Fatalf("code: got %v, want %v", cloison.ErrorCode(err), cloison.CodeIsolationViolation)
	}
	res := download(t, b, out)
	for i := range res {
		if res[i] != sentinel[i] {
			t.Fatalf("output element %d written (%v) after a device tag mismatch", i, res[i])
		}
	}
}

// testPanicBecomesError: a panic inside the device goroutine is an error
// at the boundary, and the goroutine keeps serving.
func testPanicBecomesError(t *testing.T, b *Backend) {
	err := b.do(func(driver) error { panic("boom") })
	if !errors.Is(err, ErrDevice) {
		t.Fatalf("got %v, want ErrDevice", err)
	}
	x := upload(t, b, 1, 4, []float32{1, 2, 3, 4})
	if got := download(t, b, x); got[3] != 4 {
		t.Fatalf("after a recovered panic: got %v", got)
	}
	b.Close()
	if err := b.Upload(x, []float32{1, 2, 3, 4}); !errors.Is(err, kernels.ErrClosed) {
		t.Fatalf("after Close: got %v, want ErrClosed", err)
	}
}

// testModelAgainstCPU runs engine/model on a small synthetic llama (Q8_0,
// GQA, tied embeddings) on b and on kernels/cpu: a prefill of two prompts,
// then decode steps, through a real pool; the logits must agree.
func testModelAgainstCPU(t *testing.T, b kernels.Backend) {
	for _, dt := range []gguf.TensorType{gguf.Q8_0, gguf.F16} {
		t.Run(fmt.Sprint(dt), func(t *testing.T) {
			cfg := synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 64, DType: dt, Seed: 7, Tied: true}
			path := filepath.Join(t.TempDir(), "m.gguf")
			w, err := synth.Random(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			c, err := openOracle()
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			got, want := runModel(t, b, f), runModel(t, c, f)
			for s := range want {
				for i := range want[s] {
					var scale float64
					for _, v := range want[s][i] {
						scale = math.Max(scale, math.Abs(float64(v)))
					}
					for j := range want[s][i] {
						if d := math.Abs(float64(got[s][i][j] - want[s][i][j])); d > 1e-3*scale+1e-5 {
							t.Fatalf("step %d sequence %d logit %d: got %v, want %v (cpu)", s, i, j, got[s][i][j], want[s][i][j])
						}
					}
				}
			}
		})
	}
}

// runModel returns the last-token logits of every step: a prefill of two
// prompts (7 and 3 tokens), then four decode steps of fixed tokens.
func runModel(t *testing.T, b kernels.Backend, f *gguf.File) [][][]float32 {
	t.Helper()
	m, err := model.Load(b, f)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	const pt = 4
	pool, err := isolation.NewPool(isolation.Config{Pages: 16, PageTokens: pt})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.AddTenant(isolation.TenantConfig{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	a, err := b.NewArena(m.ArenaConfig(16, pt, kernels.KVF32))
	if err != nil {
		t.Fatal(err)
	}
	in := [][]int32{{1, 50, 99, 7, 260, 3, 12}, {42, 8, 299}}
	leases := make([]isolation.Lease, len(in))
	pos := make([]int, len(in))
	for i := range leases {
		if leases[i], err = pool.Allocate("t", cloison.RequestID(fmt.Sprint(i)), 16); err != nil {
			t.Fatal(err)
		}
	}
	var steps [][][]float32
	for s := range 5 {
		batch := make([]model.Seq, len(in))
		for i, l := range leases {
			if err := pool.Write(l, len(in[i])); err != nil {
				t.Fatal(err)
			}
			bt, err := pool.BlockTable(l, pos[i]+len(in[i]))
			if err != nil {
				t.Fatal(err)
			}
			batch[i] = model.Seq{Table: bt, Pos: pos[i], Tokens: in[i]}
		}
		out, err := m.Forward(a, batch, false)
		if err != nil {
			t.Fatal(err)
		}
		steps = append(steps, out)
		for i := range in {
			pos[i] += len(in[i])
			in[i] = []int32{int32((s*31 + i*7) % 300)}
		}
	}
	return steps
}
