package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// TestExpf checks the float32 exponential against math.Exp over its range.
func TestExpf(t *testing.T) {
	for x := float32(-87); x <= 88.5; x += 0.0137 {
		want := math.Exp(float64(x))
		if got := expf(x); math.Abs(float64(got)-want) > 3e-7*want {
			t.Fatalf("expf(%v): got %v, want %v", x, got, want)
		}
	}
	for _, tt := range []struct{ x, want float32 }{{-1000, 0}, {0, 1}, {float32(math.Inf(-1)), 0}} {
		if got := expf(tt.x); got != tt.want {
			t.Errorf("expf(%v): got %v, want %v", tt.x, got, tt.want)
		}
	}
	if got := expf(1000); math.IsInf(float64(got), 0) || got < 3e38 {
		t.Errorf("expf(1000): got %v, want the largest finite float", got)
	}
	if nan := float32(math.NaN()); expf(nan) == expf(nan) {
		t.Error("expf(NaN) is not NaN")
	}
}

// TestZeroPagesZeroesBytes looks inside the arena: every byte of a zeroed
// page is zero and the other pages keep theirs.
func TestZeroPagesZeroesBytes(t *testing.T) {
	for _, kv := range []kernels.KVType{kernels.KVF32, kernels.KVF16} {
		t.Run(kv.String(), func(t *testing.T) { testZeroPagesZeroesBytes(t, kv) })
	}
}

func testZeroPagesZeroesBytes(t *testing.T, kv kernels.KVType) {
	b, _ := New(kernels.Options{Threads: 2})
	defer b.Close()
	c := kernels.ArenaConfig{Pages: 6, PageTokens: 4, Layers: 2, KVHeads: 1, HeadDim: 4, KV: kv}
	ka, err := b.NewArena(c)
	if err != nil {
		t.Fatal(err)
	}
	a := ka.(*arena)
	for i := range a.data {
		a.data[i] = 1
	}
	for i := range a.half {
		a.half[i] = 0x3c00
	}
	if len(a.data)+len(a.half) != c.Pages*a.pageLen {
		t.Fatalf("%d floats and %d halves for %d pages of %d", len(a.data), len(a.half), c.Pages, a.pageLen)
	}
	for p := range a.Tags {
		a.Tags[p] = isolation.Tag{Tenant: 1, Epoch: uint64(p + 1)}
	}
	if err := a.ZeroPages([]int32{4, 1, 2}); err != nil {
		t.Fatal(err)
	}
	for p := range int32(c.Pages) {
		zeroed := p == 1 || p == 2 || p == 4
		for i := int(p) * a.pageLen; i < int(p+1)*a.pageLen; i++ {
			nonzero := (a.data != nil && a.data[i] != 0) || (a.half != nil && a.half[i] != 0)
			if nonzero == zeroed {
				t.Fatalf("page %d element %d: nonzero %v, zeroed %v", p, i, nonzero, zeroed)
			}
		}
		if a.Tags[p].IsZero() != zeroed {
			t.Fatalf("page %d: tag %+v, zeroed %v", p, a.Tags[p], zeroed)
		}
	}
}

// TestThreadCountInvariance: the same products and attention with 1, 2 and
// 5 threads give the same bits.
func TestThreadCountInvariance(t *testing.T) {
	var ref []float32
	for _, threads := range []int{1, 2, 5} {
		b, _ := New(kernels.Options{Threads: threads})
		const rows, out, cols = 70, 53, 96
		w := make([]float32, out*cols)
		x := make([]float32, rows*cols)
		for i := range w {
			w[i] = float32(math.Sin(float64(i)))
		}
		for i := range x {
			x[i] = float32(math.Cos(float64(i) * 0.3))
		}
		data, _ := kernels.Quantize(kernels.Q8_0, w)
		m, _ := b.NewMatrix(kernels.Q8_0, out, cols, data)
		xt, _ := b.NewTensor(rows, cols)
		b.Upload(xt, x)
		dst, _ := b.NewTensor(rows, out)
		if err := b.MatMul(dst, xt, m); err != nil {
			t.Fatal(err)
		}
		got := Data(dst)
		if ref == nil {
			ref = append([]float32(nil), got...)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(ref[i]) {
				t.Fatalf("%d threads: element %d got %v, want %v", threads, i, got[i], ref[i])
			}
		}
		b.Close()
	}
}

func TestClosed(t *testing.T) {
	b, _ := New(kernels.Options{})
	b.Close()
	b.Close() // idempotent
	if _, err := b.NewTensor(1, 1); err != kernels.ErrClosed {
		t.Fatalf("got %v, want ErrClosed", err)
	}
	if _, err := New(kernels.Options{Threads: -1}); err == nil {
		t.Fatal("negative threads accepted")
	}
	if bk, err := kernels.Open(Name, kernels.Options{Threads: 1}); err != nil || bk.Name() != Name {
		t.Fatalf("Open(%q): %v", Name, err)
	} else {
		bk.Close()
	}
}

// TestConcurrentCallers: goroutines sharing one backend (each with its own
// tensors) get the results they would get alone.
func TestConcurrentCallers(t *testing.T) {
	b, _ := New(kernels.Options{Threads: 3})
	defer b.Close()
	const rows, out, cols = 5, 40, 64
	w := make([]float32, out*cols)
	for i := range w {
		w[i] = float32(math.Sin(float64(i) * 0.7))
	}
	data, _ := kernels.Quantize(kernels.F16, w)
	m, _ := b.NewMatrix(kernels.F16, out, cols, data)
	run := func(seed int) []float32 {
		x := make([]float32, rows*cols)
		for i := range x {
			x[i] = float32(math.Cos(float64(i*seed) * 0.01))
		}
		xt, _ := b.NewTensor(rows, cols)
		b.Upload(xt, x)
		dst, _ := b.NewTensor(rows, out)
		for range 20 {
			if err := b.MatMul(dst, xt, m); err != nil {
				t.Error(err)
			}
		}
		return Data(dst)
	}
	want := make([][]float32, 8)
	for g := range want {
		want[g] = append([]float32(nil), run(g+1)...)
	}
	got := make([][]float32, 8)
	done := make(chan int)
	for g := range got {
		go func() { got[g] = run(g + 1); done <- g }()
	}
	for range got {
		<-done
	}
	for g := range got {
		for i := range got[g] {
			if math.Float32bits(got[g][i]) != math.Float32bits(want[g][i]) {
				t.Fatalf("goroutine %d element %d: got %v, want %v", g, i, got[g][i], want[g][i])
			}
		}
	}
}

// TestDequantQ4K: the table decoder gives kernels.DequantizeQ4KBlock's bits
// for random blocks (any bytes are a valid block apart from NaN scales).
func TestDequantQ4K(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	var blk [144]byte
	var got [256]float32
	want := make([]float32, 256)
	for range 200 {
		for i := range blk {
			blk[i] = byte(r.Uint32())
		}
		blk[1] &= 0x7b // finite scales
		blk[3] &= 0x7b
		dequantQ4K(&got, &blk)
		kernels.DequantizeQ4KBlock(want, blk[:])
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("element %d: got %v, want %v", i, got[i], want[i])
			}
		}
	}
}
