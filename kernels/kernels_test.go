package kernels_test

import (
	"errors"
	"math"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	_ "github.com/cloison/cloison/kernels/cpu"
)

type fake struct{ kernels.Backend }

func TestRegistry(t *testing.T) {
	kernels.Register("test-fake", func(kernels.Options) (kernels.Backend, error) { return fake{}, nil })
	b, err := kernels.Open("test-fake", kernels.Options{})
	if err != nil || b == nil {
		t.Fatalf("Open: %v, %v", b, err)
	}
	_, err = kernels.Open("no-such-backend", kernels.Options{})
	if !errors.Is(err, kernels.ErrUnknownBackend) {
		t.Fatalf("got %v, want ErrUnknownBackend", err)
	}
	for _, tt := range []struct {
		name string
		f    kernels.Factory
		id   string
	}{
		{"duplicate", func(kernels.Options) (kernels.Backend, error) { return nil, nil }, "test-fake"},
		{"empty name", func(kernels.Options) (kernels.Backend, error) { return nil, nil }, ""},
		{"nil factory", nil, "x"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Fatal("Register did not panic")
				}
			}()
			kernels.Register(tt.id, tt.f)
		})
	}
}

func TestErrors(t *testing.T) {
	tm := error(&kernels.TagMismatchError{Page: 3, Want: isolation.Tag{Tenant: 1, Epoch: 2}})
	uw := error(&kernels.UnwrittenError{Page: 3, Need: 4, Have: 1})
	for _, tt := range []struct {
		err    error
		target error
		code   cloison.Code
	}{
		{tm, kernels.ErrTagMismatch, cloison.CodeIsolationViolation},
		{uw, kernels.ErrUnwritten, cloison.CodeIsolationViolation},
		{kernels.ErrShape, kernels.ErrShape, cloison.CodeInvalid},
		{kernels.ErrReadOnlyPage, kernels.ErrReadOnlyPage, cloison.CodeIsolationViolation},
	} {
		if !errors.Is(tt.err, tt.target) {
			t.Errorf("%v: not errors.Is %v", tt.err, tt.target)
		}
		if got := cloison.ErrorCode(tt.err); got != tt.code {
			t.Errorf("%v: got code %q, want %q", tt.err, got, tt.code)
		}
	}
	if errors.Is(tm, kernels.ErrUnwritten) || errors.Is(uw, kernels.ErrTagMismatch) {
		t.Fatal("the two isolation errors match each other's sentinel")
	}
}

func TestDTypes(t *testing.T) {
	tests := []struct {
		dt                kernels.DType
		name              string
		block, blockBytes int
	}{
		{kernels.F32, "F32", 1, 4},
		{kernels.F16, "F16", 1, 2},
		{kernels.Q4_0, "Q4_0", 32, 18},
		{kernels.Q8_0, "Q8_0", 32, 34},
		{kernels.Q4_K, "Q4_K", 256, 144},
		{kernels.Q6_K, "Q6_K", 256, 210},
		{kernels.BF16, "BF16", 1, 2},
	}
	for _, tt := range tests {
		if tt.dt.String() != tt.name || tt.dt.BlockSize() != tt.block || tt.dt.BlockBytes() != tt.blockBytes || !tt.dt.Valid() {
			t.Errorf("%d: got %v %d %d, want %s %d %d", uint32(tt.dt), tt.dt, tt.dt.BlockSize(), tt.dt.BlockBytes(), tt.name, tt.block, tt.blockBytes)
		}
		if n, err := tt.dt.RowBytes(2 * tt.block); err != nil || n != 2*tt.blockBytes {
			t.Errorf("%v RowBytes: got %d, %v", tt.dt, n, err)
		}
	}
	if kernels.DType(9).Valid() || kernels.DType(9).String() != "DType(9)" {
		t.Error("Q8_1 (9) reported as supported")
	}
	if _, err := kernels.Q8_0.RowBytes(33); !errors.Is(err, kernels.ErrShape) {
		t.Errorf("RowBytes(33) of Q8_0: got %v, want ErrShape", err)
	}
}

// FuzzDequantize: any bytes of the right length decode without panicking,
// and a wrong length is an error.
func FuzzDequantize(f *testing.F) {
	f.Add(uint8(8), []byte{0x00, 0x3c})
	f.Add(uint8(12), make([]byte, 144))
	f.Add(uint8(14), make([]byte, 210))
	f.Add(uint8(11), make([]byte, 110))              // Q3_K
	f.Add(uint8(39), []byte{0xff, 0x77, 0x88, 0xf0}) // MXFP4: the largest scale, short
	f.Fuzz(func(t *testing.T, d uint8, data []byte) {
		dt := kernels.DType(d)
		if !dt.Valid() {
			return
		}
		n := len(data) / dt.BlockBytes() * dt.BlockSize()
		if n == 0 {
			return
		}
		dst := make([]float32, n)
		err := kernels.Dequantize(dst, dt, data)
		exact := len(data)%dt.BlockBytes() == 0
		if exact != (err == nil) {
			t.Fatalf("%v with %d bytes: got %v", dt, len(data), err)
		}
		for _, v := range dst {
			_ = math.IsNaN(float64(v))
		}
	})
}

// plain hides a backend's optional capabilities.
type plain struct{ kernels.Backend }

func TestMultiMatMulFallback(t *testing.T) {
	b, err := kernels.Open("cpu", kernels.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, ok := b.(kernels.MultiMatMuler); !ok {
		t.Fatal("cpu backend lost its MultiMatMul")
	}
	p := plain{b}
	x, _ := b.NewTensor(2, 32)
	xs := make([]float32, 64)
	for i := range xs {
		xs[i] = float32(i%7) - 3
	}
	b.Upload(x, xs)
	w1, _ := kernels.Quantize(kernels.Q8_0, xs)
	m1, _ := b.NewMatrix(kernels.Q8_0, 2, 32, w1)
	w2, _ := kernels.Quantize(kernels.F32, xs[:32])
	m2, _ := b.NewMatrix(kernels.F32, 1, 32, w2)
	d1, _ := b.NewTensor(2, 2)
	d2, _ := b.NewTensor(2, 1)
	e1, _ := b.NewTensor(2, 2)
	e2, _ := b.NewTensor(2, 1)
	if err := kernels.MultiMatMul(p, []kernels.Tensor{d1, d2}, x, []kernels.Matrix{m1, m2}); err != nil {
		t.Fatal(err)
	}
	if err := kernels.MultiMatMul(b, []kernels.Tensor{e1, e2}, x, []kernels.Matrix{m1, m2}); err != nil {
		t.Fatal(err)
	}
	for i, pair := range [][2]kernels.Tensor{{d1, e1}, {d2, e2}} {
		g := make([]float32, pair[0].Rows()*pair[0].Cols())
		w := make([]float32, len(g))
		b.Download(g, pair[0])
		b.Download(w, pair[1])
		for j := range g {
			if g[j] != w[j] {
				t.Fatalf("product %d element %d: fallback %v, capability %v", i, j, g[j], w[j])
			}
		}
	}
	if err := kernels.MultiMatMul(p, []kernels.Tensor{d1}, x, []kernels.Matrix{m1, m2}); !errors.Is(err, kernels.ErrShape) {
		t.Fatalf("mismatched lists: got %v, want ErrShape", err)
	}
}

func TestKVType(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want kernels.KVType
		size int
	}{{"f32", kernels.KVF32, 4}, {"F16", kernels.KVF16, 2}, {"f16", kernels.KVF16, 2}} {
		got, err := kernels.ParseKVType(tc.in)
		if err != nil || got != tc.want || got.Size() != tc.size {
			t.Errorf("ParseKVType(%q) = %v (size %d), %v; want %v, size %d", tc.in, got, got.Size(), err, tc.want, tc.size)
		}
		if back, err := kernels.ParseKVType(got.String()); err != nil || back != got {
			t.Errorf("ParseKVType(%v.String()) = %v, %v", got, back, err)
		}
	}
	for _, s := range []string{"", "bf16", "q8_0", "f32 "} {
		if _, err := kernels.ParseKVType(s); !errors.Is(err, kernels.ErrKVType) {
			t.Errorf("ParseKVType(%q): %v, want ErrKVType", s, err)
		}
	}
	if s := kernels.KVType(7).String(); s != "kvtype(7)" {
		t.Errorf("KVType(7).String() = %q", s)
	}
	c := kernels.ArenaConfig{Pages: 2, PageTokens: 4, Layers: 3, KVHeads: 2, HeadDim: 8}
	if c.PageBytes() != 3*2*4*2*8*4 {
		t.Errorf("f32 PageBytes %d", c.PageBytes())
	}
	c.KV = kernels.KVF16
	if c.PageBytes() != 3*2*4*2*8*2 || c.Validate() != nil {
		t.Errorf("f16 PageBytes %d, Validate %v", c.PageBytes(), c.Validate())
	}
	c.KV = 2
	if err := c.Validate(); !errors.Is(err, kernels.ErrKVType) {
		t.Errorf("Validate with KV type 2: %v, want ErrKVType", err)
	}
}

// TestRelativeBucket: T5's buckets (32, bidirectional, max distance 128,
// as Hugging Face's _relative_position_bucket gives them): exact below 8
// positions, logarithmic to 128, the last bucket beyond; keys after the
// query in the upper half. One-sided (decoder) buckets count only keys
// before the query.
func TestRelativeBucket(t *testing.T) {
	for _, c := range []struct {
		rel, want int
		bidir     bool
	}{
		{0, 0, true}, {-1, 1, true}, {1, 17, true}, {-7, 7, true}, {7, 23, true}, {-8, 8, true},
		{-20, 10, true}, {20, 26, true}, {-127, 15, true}, {-128, 15, true}, {-5000, 15, true}, {5000, 31, true},
		{0, 0, false}, {3, 0, false}, {-3, 3, false}, {-15, 15, false}, {-16, 16, false}, {-40, 23, false}, {-1000, 31, false},
	} {
		if got := kernels.RelativeBucket(c.rel, 32, 128, c.bidir); got != c.want {
			t.Errorf("RelativeBucket(%d, bidirectional %v) = %d, want %d", c.rel, c.bidir, got, c.want)
		}
	}
}
