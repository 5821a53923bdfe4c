package cpu_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
)

// TestAddLowRank: on every kernel path, dst[rows[i]] += s·(x[i]·bt) agrees
// with a float64 reference, leaves the other rows alone, and each row's
// result is bit-identical whatever the other rows (their number, their
// values, their order, direct or through row indices) and the thread count.
func TestAddLowRank(t *testing.T) {
	for _, p := range cpu.Paths() {
		for _, sh := range [][2]int{{16, 1408}, {8, 64}, {5, 37}, {1, 32}} {
			k, cols := sh[0], sh[1]
			t.Run(fmt.Sprintf("%s/k%d-cols%d", p, k, cols), func(t *testing.T) {
				b, err := cpu.NewWithPath(kernels.Options{Threads: 2}, p)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				r := rand.New(rand.NewPCG(uint64(k), uint64(cols)))
				randn := func(n int) []float32 {
					x := make([]float32, n)
					for i := range x {
						x[i] = float32(r.NormFloat64())
					}
					return x
				}
				tensor := func(rows, cols int, x []float32) kernels.Tensor {
					tt, err := b.NewTensor(rows, cols)
					if err != nil {
						t.Fatal(err)
					}
					if err := b.Upload(tt, x); err != nil {
						t.Fatal(err)
					}
					return tt
				}
				const n, s = 9, 0.37
				xs, bts, base := randn(n*k), randn(k*cols), randn(n*cols)
				x, bt := tensor(n, k, xs), tensor(k, cols, bts)
				// All rows at once, in order.
				dst := tensor(n, cols, base)
				if err := b.AddLowRank(dst, x, bt, nil, s); err != nil {
					t.Fatal(err)
				}
				all := make([]float32, n*cols)
				if err := b.Download(all, dst); err != nil {
					t.Fatal(err)
				}
				for i := range n {
					for o := range cols {
						want := 0.0
						for j := range k {
							want += float64(xs[i*k+j]) * float64(bts[j*cols+o])
						}
						want = float64(base[i*cols+o]) + s*want
						if got := float64(all[i*cols+o]); math.Abs(got-want) > 1e-4*(1+math.Abs(want)) {
							t.Fatalf("row %d col %d: %v, want %v", i, o, got, want)
						}
					}
				}
				// Rows scattered through indices, in another order, three of
				// nine: the same bits, and the rows not named untouched.
				rows := []int{2 * n, 0, n + 3}
				big := tensor(3*n, cols, make([]float32, 3*n*cols))
				for i, r := range rows {
					if err := b.Upload(big.Slice(r, r+1), base[i*cols:(i+1)*cols]); err != nil {
						t.Fatal(err)
					}
				}
				if err := b.AddLowRank(big, x.Slice(0, 3), bt, rows, s); err != nil {
					t.Fatal(err)
				}
				got := make([]float32, 3*n*cols)
				if err := b.Download(got, big); err != nil {
					t.Fatal(err)
				}
				named := map[int]int{}
				for i, r := range rows {
					named[r] = i
				}
				for r := range 3 * n {
					i, ok := named[r]
					for o := range cols {
						switch {
						case ok && math.Float32bits(got[r*cols+o]) != math.Float32bits(all[i*cols+o]):
							t.Fatalf("row %d through index %d: %v, %v in order", i, r, got[r*cols+o], all[i*cols+o])
						case !ok && got[r*cols+o] != 0:
							t.Fatalf("row %d not named was written", r)
						}
					}
				}
				// One thread: the same bits.
				one, err := cpu.NewWithPath(kernels.Options{Threads: 1}, p)
				if err != nil {
					t.Fatal(err)
				}
				defer one.Close()
				d1, _ := one.NewTensor(n, cols)
				x1, _ := one.NewTensor(n, k)
				b1, _ := one.NewTensor(k, cols)
				if err := errors.Join(one.Upload(d1, base), one.Upload(x1, xs), one.Upload(b1, bts), one.AddLowRank(d1, x1, b1, nil, s)); err != nil {
					t.Fatal(err)
				}
				got1 := make([]float32, n*cols)
				if err := one.Download(got1, d1); err != nil {
					t.Fatal(err)
				}
				for i := range got1 {
					if math.Float32bits(got1[i]) != math.Float32bits(all[i]) {
						t.Fatalf("element %d: %v on one thread, %v on two", i, got1[i], all[i])
					}
				}
			})
		}
	}
}

// TestAddLowRankRefuses: shapes, indices and aliasing are checked before
// anything is written.
func TestAddLowRankRefuses(t *testing.T) {
	b := open(t, 2)
	mk := func(r, c int) kernels.Tensor {
		tt, err := b.NewTensor(r, c)
		if err != nil {
			t.Fatal(err)
		}
		return tt
	}
	dst, x, bt := mk(4, 32), mk(2, 8), mk(8, 32)
	for _, tc := range []struct {
		name      string
		dst, x, w kernels.Tensor
		rows      []int
	}{
		{"rank", dst, mk(2, 7), bt, []int{0, 1}},
		{"cols", dst, x, mk(8, 16), []int{0, 1}},
		{"rows without indices", dst, x, bt, nil},
		{"index count", dst, x, bt, []int{0}},
		{"index outside", dst, x, bt, []int{0, 4}},
		{"index twice", dst, x, bt, []int{1, 1}},
		{"negative index", dst, x, bt, []int{-1, 0}},
		{"aliasing", bt, mk(8, 8), bt, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := b.AddLowRank(tc.dst, tc.x, tc.w, tc.rows, 1); !errors.Is(err, kernels.ErrShape) {
				t.Fatalf("got %v, want ErrShape", err)
			}
		})
	}
}
