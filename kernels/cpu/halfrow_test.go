package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// TestHalfRow: the vector row conversions give f16tab's and bf16's bits for
// every half (NaNs stay NaN) at every offset of the 8- and 32-value loops,
// and write nothing past the row.
func TestHalfRow(t *testing.T) {
	all := make([]uint16, 1<<16)
	for i := range all {
		all[i] = uint16(i)
	}
	want := func(bf bool, h uint16) float32 {
		if bf {
			return bf16(h)
		}
		return f16tab[h]
	}
	ran := false
	for _, p := range Paths() {
		k := kernelSet(p)
		if k.halfRow == nil {
			continue
		}
		ran = true
		for _, bf := range []bool{false, true} {
			dst := make([]float32, len(all))
			k.halfRow(bf, dst, all)
			for h, got := range dst {
				w := want(bf, uint16(h))
				if w != w {
					if got == got {
						t.Fatalf("%s bf16=%v half %#04x: got %v, want NaN", p, bf, h, got)
					}
					continue
				}
				if math.Float32bits(got) != math.Float32bits(w) {
					t.Fatalf("%s bf16=%v half %#04x: got %v, want %v", p, bf, h, got, w)
				}
			}
			for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 40, 63, 64, 65, 100} {
				src := all[12345 : 12345+n]
				out := make([]float32, n+3)
				for i := range out {
					out[i] = -7
				}
				k.halfRow(bf, out, src)
				for i := range n {
					if math.Float32bits(out[i]) != math.Float32bits(want(bf, src[i])) {
						t.Fatalf("%s bf16=%v n=%d [%d]: got %v, want %v", p, bf, n, i, out[i], want(bf, src[i]))
					}
				}
				for i := n; i < len(out); i++ {
					if out[i] != -7 {
						t.Fatalf("%s bf16=%v n=%d: wrote past the row at %d", p, bf, n, i)
					}
				}
			}
		}
	}
	if !ran && len(Paths()) > 1 {
		t.Fatal("no vector path has halfRow")
	}
}

// TestHalfDecodeBatch: a decode batch of F16 and BF16 weights (rows decoded
// to scratch blocks) gives every row the bits of the row computed alone (in
// registers), on every path: 5 rows of 100 (tails everywhere) and the 16
// rows of 768 a d=768 decode batch runs (whole register tiles, each
// prefetching the next weight block on avx512).
func TestHalfDecodeBatch(t *testing.T) {
	for _, sh := range []struct{ rows, cols, n int }{{5, 100, 53}, {16, 768, 80}} {
		halfDecodeBatch(t, sh.rows, sh.cols, sh.n)
	}
}

func halfDecodeBatch(t *testing.T, rows, cols, n int) {
	for _, p := range Paths() {
		b, err := NewWithPath(kernels.Options{Threads: 2}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range []kernels.DType{kernels.F16, kernels.BF16} {
			w := make([]float32, n*cols)
			for i := range w {
				w[i] = float32(math.Sin(float64(i)*0.37)) * 2
			}
			data, err := kernels.Quantize(dt, w)
			if err != nil {
				t.Fatal(err)
			}
			m, err := b.NewMatrix(dt, n, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			xs := make([]float32, rows*cols)
			for i := range xs {
				xs[i] = float32(math.Cos(float64(i) * 0.11))
			}
			x, _ := b.NewTensor(rows, cols)
			b.Upload(x, xs)
			dst, _ := b.NewTensor(rows, n)
			if err := b.MatMul(dst, x, m); err != nil {
				t.Fatal(err)
			}
			batch := Data(dst)
			for r := range rows {
				x1, _ := b.NewTensor(1, cols)
				b.Upload(x1, xs[r*cols:(r+1)*cols])
				d1, _ := b.NewTensor(1, n)
				if err := b.MatMul(d1, x1, m); err != nil {
					t.Fatal(err)
				}
				for o, v := range Data(d1) {
					if math.Float32bits(v) != math.Float32bits(batch[r*n+o]) {
						t.Fatalf("%s %v %d×%d row %d out %d: alone %v, in the batch %v", p, dt, rows, cols, r, o, v, batch[r*n+o])
					}
				}
			}
		}
		b.Close()
	}
}

// TestDecodeAllocsPerTask: a decode step's product (one activation row)
// allocates nothing per task, whatever the weight type: a product of 240
// weight rows (10 tasks) allocates as much as one of 24 (one task).
func TestDecodeAllocsPerTask(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's sync.Pool drops items at random; make test runs this without it")
	}
	const cols = 256
	for _, p := range Paths() {
		b, err := NewWithPath(kernels.Options{Threads: 1}, p)
		if err != nil {
			t.Fatal(err)
		}
		for _, dt := range []kernels.DType{kernels.F32, kernels.F16, kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q6_K} {
			allocs := func(rows int) float64 {
				w := make([]float32, rows*cols)
				for i := range w {
					w[i] = float32(i%9) - 4
				}
				data, err := kernels.Quantize(dt, w)
				if err != nil {
					t.Fatal(err)
				}
				m, err := b.NewMatrix(dt, rows, cols, data)
				if err != nil {
					t.Fatal(err)
				}
				x, _ := b.NewTensor(1, cols)
				b.Upload(x, w[:cols])
				dst, _ := b.NewTensor(1, rows)
				return testing.AllocsPerRun(20, func() { _ = b.MatMul(dst, x, m) })
			}
			if one, ten := allocs(24), allocs(240); ten > one {
				t.Errorf("%s %v: %v allocations for 10 tasks, %v for one", p, dt, ten, one)
			}
		}
		b.Close()
	}
}

// TestF16Rows: the F16 decode kernel of whole weight blocks (f16rows) gives
// every row the bits of the four-row kernel (which the scratch-block tiles
// share), for lengths with and without a tail, and writes only its outputs.
func TestF16Rows(t *testing.T) {
	k := kernelSet(Paths()[len(Paths())-1])
	if k.f16rows == nil {
		t.Skip("no F16 rows kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(21, 22))
	for _, n := range []int{1, 15, 16, 17, 768, 1000} {
		for _, rows := range []int{1, 2, 7, 24} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			w := make([]uint16, rows*n)
			for i := range w {
				w[i] = kernels.F32ToF16(float32(r.NormFloat64()))
			}
			out := make([]float32, rows+1)
			out[rows] = -7
			k.f16rows(x, w, out[:rows])
			for i := range rows {
				rw := w[i*n : (i+1)*n]
				want, _, _, _ := k.f16dot1x4(x, rw, rw, rw, rw)
				if math.Float32bits(out[i]) != math.Float32bits(want) {
					t.Fatalf("n=%d rows=%d row %d: f16rows %v, four-row kernel %v", n, rows, i, out[i], want)
				}
			}
			if out[rows] != -7 {
				t.Fatalf("n=%d rows=%d: wrote past its outputs", n, rows)
			}
		}
	}
}
