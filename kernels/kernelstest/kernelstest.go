// Package kernelstest is the conformance suite of kernels.Backend: every
// backend (kernels/cpu, a future kernels/cuda) runs Run in its own tests and
// must pass it unchanged. It checks each kernel against the float64 reference
// (kernels/reference) within the tolerances stated below, batch invariance
// bit for bit, shape errors, and the isolation guarantees of the KV arena
// with block tables from a real isolation.Pool.
//
// Tolerances (ε = 2⁻²⁴, the float32 unit roundoff; n the reduction length):
//
//   - Embed, Copy, Add, weight decoding: exact (the reference's value
//     rounded to float32; Add: the float32 sum).
//   - MatMul: |got − want| ≤ (n+4)·ε·Σᵢ|xᵢ·wᵢ| + 1e-30, the worst-case bound
//     of any summation order in float32. Block types may quantize x to 8
//     bits per block first, as llama.cpp does (blocks of 32 for Q8_0 and
//     Q4_0, Q8_K blocks of 256 for Q4_K and Q6_K); for them the bound adds
//     Σ_blocks max|x_b|/254·Σ_b|wᵢ|, the activation rounding. BF16
//     weights may meet x rounded to BF16 (as llama.cpp does): the bound
//     adds 2⁻⁸·Σᵢ|xᵢ·wᵢ|.
//   - RMSNorm: 1e-5 relative to |x·scale·w| per element.
//   - RoPE: (2e-6 + 5e-7·pos)·(|x₀|+|x₁|) per rotated pair, so that a
//     backend may compute angles in float32.
//   - SiLU, SwiGLU: 4e-6 relative. Softmax: 1e-5 relative + 1e-9.
//   - Attention: 1e-4·max|v| + 1e-6 per output element.
//
// Bit-identical results are required for: a row computed alone and within
// any batch (matrix products, attention, every row-wise op); MultiMatMul and
// the MatMul calls it replaces; repeated calls.
package kernelstest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/reference"
)

// Run runs the whole conformance suite against b as subtests of t. Sizes are
// small: the suite takes seconds even under the race detector.
func Run(t *testing.T, b kernels.Backend) {
	t.Run("Dequantize", func(t *testing.T) { testDequantize(t) })
	t.Run("MatMul", func(t *testing.T) { testMatMul(t, b) })
	t.Run("MatMulBatchInvariance", func(t *testing.T) { testMatMulBatchInvariance(t, b) })
	t.Run("MatMulBatchInvarianceProperty", func(t *testing.T) { testMatMulProperty(t, b) })
	t.Run("MultiMatMul", func(t *testing.T) { testMultiMatMul(t, b) })
	t.Run("Embed", func(t *testing.T) { testEmbed(t, b) })
	t.Run("RMSNorm", func(t *testing.T) { testRMSNorm(t, b) })
	t.Run("RoPE", func(t *testing.T) { testRoPE(t, b) })
	t.Run("Activations", func(t *testing.T) { testActivations(t, b) })
	t.Run("Softmax", func(t *testing.T) { testSoftmax(t, b) })
	t.Run("AddCopySlice", func(t *testing.T) { testAddCopySlice(t, b) })
	t.Run("RowOpsBatchInvariance", func(t *testing.T) { testRowOpsBatchInvariance(t, b) })
	t.Run("ShapeErrors", func(t *testing.T) { testShapeErrors(t, b) })
	t.Run("ScaleGeGLU", func(t *testing.T) { testScaleGeGLU(t, b) })
	runArena(t, b)
	// The arena tests again with F16 KV: the reference attends over the
	// K and V rounded to halves. A backend that refuses KVF16 with
	// ErrKVType (kernels/cuda) skips them.
	t.Run("KV=f16", func(t *testing.T) {
		fb := kvBackend{b, kernels.KVF16}
		if _, err := fb.NewArena(tArena); errors.Is(err, kernels.ErrKVType) {
			t.Skipf("%s stores no f16 KV: %v", b.Name(), err)
		} else if err != nil {
			t.Fatal(err)
		}
		runArena(t, fb)
	})
}

// runArena runs the arena tests on b's arenas.
func runArena(t *testing.T, b kernels.Backend) {
	t.Run("Attention", func(t *testing.T) { testAttention(t, b) })
	t.Run("AttentionBatchInvariance", func(t *testing.T) { testAttentionBatchInvariance(t, b) })
	t.Run("WindowAttention", func(t *testing.T) { testWindowAttention(t, b) })
	t.Run("BiasAttention", func(t *testing.T) { testBiasAttention(t, b) })
	t.Run("ArenaIsolation", func(t *testing.T) { testArenaIsolation(t, b) })
	t.Run("ArenaLifecycleProperty", func(t *testing.T) { testArenaProperty(t, b) })
	t.Run("ZeroPages", func(t *testing.T) { testZeroPages(t, b) })
	t.Run("PageTransfer", func(t *testing.T) { testPageTransfer(t, b) })
	t.Run("StoredKV", func(t *testing.T) { testStoredKV(t, b) })
}

// kvBackend is a backend whose arenas store kv whatever their
// configuration says.
type kvBackend struct {
	kernels.Backend
	kv kernels.KVType
}

func (k kvBackend) NewArena(c kernels.ArenaConfig) (kernels.Arena, error) {
	c.KV = k.kv
	return k.Backend.NewArena(c)
}

const eps = 1.0 / (1 << 24)

// --- helpers -------------------------------------------------------------

func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x636c6f69736f6e)) }

func randFloats(r *rand.Rand, n int, scale float64) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = float32(r.NormFloat64() * scale)
	}
	return out
}

// tensor uploads rows×cols values into a new tensor of b.
func tensor(t tb, b kernels.Backend, rows, cols int, data []float32) kernels.Tensor {
	t.Helper()
	x, err := b.NewTensor(rows, cols)
	if err != nil {
		t.Fatalf("NewTensor(%d, %d): %v", rows, cols, err)
	}
	if data != nil {
		if err := b.Upload(x, data); err != nil {
			t.Fatalf("Upload: %v", err)
		}
	}
	return x
}

func download(t tb, b kernels.Backend, x kernels.Tensor) []float32 {
	t.Helper()
	out := make([]float32, x.Rows()*x.Cols())
	if err := b.Download(out, x); err != nil {
		t.Fatalf("Download: %v", err)
	}
	return out
}

// weights is a random weight matrix in some dtype with its float64 values.
type weights struct {
	dt         kernels.DType
	rows, cols int
	data       []byte
	ref        [][]float64
}

func randWeights(t tb, r *rand.Rand, dt kernels.DType, rows, cols int) weights {
	t.Helper()
	rb, err := dt.RowBytes(cols)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 0, rows*rb)
	for range rows {
		q, err := kernels.Quantize(dt, randFloats(r, cols, 0.5))
		if err != nil {
			t.Fatal(err)
		}
		data = append(data, q...)
	}
	ref, err := reference.Dequant(dt, rows, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	return weights{dt: dt, rows: rows, cols: cols, data: data, ref: ref}
}

func (w weights) matrix(t tb, b kernels.Backend) kernels.Matrix {
	t.Helper()
	m, err := b.NewMatrix(w.dt, w.rows, w.cols, w.data)
	if err != nil {
		t.Fatalf("NewMatrix(%v, %d, %d): %v", w.dt, w.rows, w.cols, err)
	}
	return m
}

func to64(rows, cols int, x []float32) [][]float64 {
	out := make([][]float64, rows)
	for r := range out {
		out[r] = make([]float64, cols)
		for c := range cols {
			out[r][c] = float64(x[r*cols+c])
		}
	}
	return out
}

func sameBits(a, b []float32) (int, bool) {
	if len(a) != len(b) {
		return -1, false
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i, false
		}
	}
	return 0, true
}

func checkBits(t tb, what string, got, want []float32) {
	t.Helper()
	if i, ok := sameBits(got, want); !ok {
		if i < 0 {
			t.Fatalf("%s: got %d values, want %d", what, len(got), len(want))
		}
		t.Fatalf("%s: element %d: got %v (%#x), want bit-identical %v (%#x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
	}
}

// within reports |got − want| ≤ tol, with NaN never within.
func within(got float32, want, tol float64) bool {
	return math.Abs(float64(got)-want) <= tol
}

func errIs(t tb, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("%s: got error %v, want %v", what, err, target)
	}
}

func fmtShape(rows, out, cols int) string { return fmt.Sprintf("%dx%d·%dx%d", rows, cols, out, cols) }

// tb is what the helpers need from *testing.T and *rapid.T.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}
