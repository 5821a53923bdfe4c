package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/kernels"
)

func needBF16(t testing.TB) {
	t.Helper()
	if !hasBF16 {
		t.Skip("no AVX512_BF16 on this CPU: the BF16 order's kernels are not tested")
	}
}

// TestBF16Round: VCVTNEPS2BF16 (bf16RoundAVX512) rounds as bf16Round
// does: nearest even at every tie, denormals to zero, NaNs kept, infinities
// and the largest values.
func TestBF16Round(t *testing.T) {
	needBF16(t)
	r := rand.New(rand.NewPCG(61, 62))
	special := []float32{0, float32(math.Copysign(0, -1)), 1, -1, 1.00390625, 1.01171875, 1e-40, -1e-40, 1.1754942e-38,
		math.MaxFloat32, -math.MaxFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x3f808000), math.Float32frombits(0x3f818000), math.Float32frombits(0x7f7fffff)}
	xs := make([]float32, 1<<16)
	for i := range xs {
		switch {
		case i < len(special):
			xs[i] = special[i]
		case i%3 == 0:
			xs[i] = math.Float32frombits(r.Uint32()) // every bit pattern
		default:
			// Exact ties and near-ties of BF16.
			xs[i] = math.Float32frombits(r.Uint32()&0xffff0000 | 0x8000 ^ uint32(r.IntN(3)-1)&0xffff)
		}
	}
	got := make([]uint16, len(xs))
	bf16RoundAVX512(&got[0], &xs[0], len(xs))
	for i, v := range xs {
		if want := bf16Round(v); got[i] != want {
			t.Fatalf("%#08x: VCVTNEPS2BF16 %#04x, bf16Round %#04x", math.Float32bits(v), got[i], want)
		}
	}
}

// TestBF16DP: the BF16 order's kernels (the two-stream rows kernel, its
// four-row form, and the prefill block of 4×n tiles with its row tails)
// give every output bf16dpRef's bits, for lengths with and without a
// tail, weights with denormals and zeros, and write only their outputs.
// Pairing the even and odd elements the other way round, or one rounding
// per pair, fails it.
func TestBF16DP(t *testing.T) {
	needBF16(t)
	r := rand.New(rand.NewPCG(63, 64))
	for _, n := range []int{32, 37, 64, 768, 1000, 8960} {
		for _, rows := range []int{1, 2, 3, 7, 24, 25} {
			t.Run(fmt.Sprintf("n=%d/rows=%d", n, rows), func(t *testing.T) {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64() * math.Exp2(float64(r.IntN(16)-8)))
				}
				w := make([]uint16, rows*n)
				for i := range w {
					w[i] = uint16(math.Float32bits(float32(r.NormFloat64()*math.Exp2(float64(r.IntN(16)-8)))) >> 16)
					if i%97 == 0 {
						w[i] = uint16(r.IntN(0x80)) // a denormal (or zero)
					}
				}
				out := make([]float32, rows+1)
				out[rows] = -7
				vbf16dpRows(x, w, out[:rows])
				for i := range rows {
					if want := bf16dpRef(x, w[i*n:(i+1)*n]); !same(out[i], want) {
						t.Fatalf("row %d: %v, bf16dpRef %v", i, out[i], want)
					}
				}
				if out[rows] != -7 {
					t.Fatal("wrote past its outputs")
				}
				if rows >= 4 {
					s0, s1, s2, s3 := vbf16dp1x4(x, w[:n], w[n:2*n], w[2*n:3*n], w[3*n:4*n])
					for i, s := range []float32{s0, s1, s2, s3} {
						if !same(s, out[i]) {
							t.Fatalf("four-row %d: %v, rows kernel %v", i, s, out[i])
						}
					}
				}
			})
		}
	}
}

// TestBF16DPBlock: BF16 products on the avx512 path in the BF16 order
// (prefill blocks of 4×n tiles, decode rows; the path's set where the CPU
// takes that order, else a copy of it set to: Intel CPUs take the float
// order, bf16Order), 1 to 70 activation rows, on 1 and 2 threads, give
// each element bf16dpRef's bits: a row's result is the same in any batch.
func TestBF16DPBlock(t *testing.T) {
	needBF16(t)
	k := kernelSet(AVX512)
	if !bf16Order {
		c := *k
		setBF16Order(&c)
		k = &c
	}
	r := rand.New(rand.NewPCG(65, 66))
	for _, sh := range []struct{ rows, cols, n int }{{1, 64, 30}, {3, 96, 7}, {4, 37, 9}, {9, 768, 53}, {70, 512, 27}} {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%dx%dx%d/threads=%d", sh.rows, sh.cols, sh.n, threads), func(t *testing.T) {
				wf := make([]float32, sh.n*sh.cols)
				for i := range wf {
					wf[i] = float32(r.NormFloat64())
				}
				data := make([]byte, 2*len(wf))
				w := make([]uint16, len(wf))
				for i, v := range wf {
					w[i] = bf16Round(v)
					data[2*i], data[2*i+1] = byte(w[i]), byte(w[i]>>8)
				}
				xs := make([]float32, sh.rows*sh.cols)
				for i := range xs {
					xs[i] = float32(r.NormFloat64()) * float32(1+i%5)
				}
				got := productOnSet(t, AVX512, k, threads, kernels.BF16, sh.rows, sh.cols, sh.n, data, xs)
				for row := range sh.rows {
					for o := range sh.n {
						want := bf16dpRef(xs[row*sh.cols:(row+1)*sh.cols], w[o*sh.cols:(o+1)*sh.cols])
						if !same(got[row*sh.n+o], want) {
							t.Fatalf("row %d out %d: %v, want %v", row, o, got[row*sh.n+o], want)
						}
					}
				}
			})
		}
	}
}
