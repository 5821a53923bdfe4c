package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/kernels"
)

type kqTileFunc = func(xq []int8, xqs int, xd []float32, xds int, bs []int16, bss int, w []byte, out []float32, os int)

// TestKQTile: every element of the Q6_K prefill tile (4 rows) has the bits
// of the one-row kernel of the vector paths, so a row's result does not
// depend on the rows it shares a tile with; the tile writes only its
// outputs. (MatMul's batch invariance through the tiles is the conformance
// suite's; Q4_K's tiles: TestQ4KAMX.)
func TestKQTile(t *testing.T) {
	if q6kTile4 == nil {
		t.Skip("no k-quant tile on this CPU")
	}
	type tc struct {
		dt   kernels.DType
		rows int
		tile kqTileFunc
		one  func(xq []int8, xd []float32, bs []int16, w []byte) float32
	}
	cases := []tc{{kernels.Q6_K, 4, q6kTile4, vq6ki1x1}}
	r := rand.New(rand.NewPCG(16, 4))
	for _, c := range cases {
		for _, nsb := range []int{1, 2, 3, 9} {
			t.Run(fmt.Sprintf("%v/rows=%d/n=%d", c.dt, c.rows, nsb*256), func(t *testing.T) {
				testKQTile(t, r, c.dt, c.rows, nsb, c.tile, c.one)
			})
		}
	}
}

func testKQTile(t *testing.T, r *rand.Rand, dt kernels.DType, rows, nsb int, tile kqTileFunc, one func(xq []int8, xd []float32, bs []int16, w []byte) float32) {
	n := nsb * 256
	xq, xd, bs := make([]int8, rows*n), make([]float32, rows*n/256), make([]int16, rows*n/16)
	for i := range rows {
		x := make([]float32, n)
		for j := range x {
			x[j] = float32(r.NormFloat64() * math.Exp(float64(i%5)))
		}
		if nsb == 3 && i == 1 {
			clear(x[256:512]) // a zero block
			x[3] = 1e4        // an outlier
		}
		quantizeRowQ8K(xq[i*n:(i+1)*n], xd[i*n/256:(i+1)*n/256], bs[i*n/16:(i+1)*n/16], x)
	}
	const nw, os = 7, 9 // weight rows; output stride (> nw: the spare is untouched)
	wf := make([]float32, nw*n)
	for j := range wf {
		wf[j] = float32(r.NormFloat64())
	}
	w, err := kernels.Quantize(dt, wf)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, rows*os)
	for i := range out {
		out[i] = -7
	}
	tile(xq, n, xd, n/256, bs, n/16, w, out[:(rows-1)*os+nw], os)
	rb := len(w) / nw
	for i := range rows {
		for j := range nw {
			want := one(xq[i*n:(i+1)*n], xd[i*n/256:(i+1)*n/256], bs[i*n/16:(i+1)*n/16], w[j*rb:(j+1)*rb])
			if got := out[i*os+j]; math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("row %d, weight row %d: tile %v, one-row kernel %v", i, j, got, want)
			}
		}
		for j := nw; j < os; j++ {
			if out[i*os+j] != -7 {
				t.Fatalf("row %d: element %d outside the tile written", i, j)
			}
		}
	}
}

// TestQ4KRows: the Q4_K decode kernel of whole weight blocks (q4krows)
// gives every row the bits of the one-row kernel, on quantized weights and
// on random bytes (any scale and nibble patterns, finite d and dmin), and
// writes only its outputs.
func TestQ4KRows(t *testing.T) {
	// avx2's and avx512's (VNNI: the amx order, as the amx path's,
	// TestQ4KAMX).
	for _, p := range []Path{AVX2, AVX512} {
		if k := kernelSet(p); k.path == p && k.q4krows != nil {
			t.Run(string(p), func(t *testing.T) { testQ4KRows(t, k) })
		}
	}
}

func testQ4KRows(t *testing.T, k *kset) {
	r := rand.New(rand.NewPCG(17, 5))
	for _, nsb := range []int{1, 2, 3, 9} {
		for _, rows := range []int{1, 2, 5, 24} {
			for _, random := range []bool{false, true} {
				n := nsb * 256
				x := make([]float32, n)
				for j := range x {
					x[j] = float32(r.NormFloat64() * 3)
				}
				if nsb == 3 {
					clear(x[256:512])
					x[3] = 1e4
				}
				xq, xd, bs := make([]int8, n), make([]float32, nsb), make([]int16, n/16)
				quantizeRowQ8K(xq, xd, bs, x)
				var w []byte
				if random {
					w = make([]byte, rows*nsb*144)
					for i := range w {
						w[i] = byte(r.IntN(256))
					}
					for b := 0; b < len(w); b += 144 {
						for _, off := range []int{0, 2} { // d, dmin in [2⁻⁸, 2⁰)
							h := uint16(0x1c00 + r.IntN(0x2000))
							w[b+off], w[b+off+1] = byte(h), byte(h>>8)
						}
					}
				} else {
					wf := make([]float32, rows*n)
					for j := range wf {
						wf[j] = float32(r.NormFloat64())
					}
					var err error
					if w, err = kernels.Quantize(kernels.Q4_K, wf); err != nil {
						t.Fatal(err)
					}
				}
				out := make([]float32, rows+1)
				out[rows] = -7
				k.q4krows(xq, xd, bs, w, out[:rows])
				rb := nsb * 144
				for j := range rows {
					want := k.q4ki1x1(xq, xd, bs, w[j*rb:(j+1)*rb])
					if math.Float32bits(out[j]) != math.Float32bits(want) {
						t.Fatalf("n=%d rows=%d random=%v row %d: q4krows %v, one-row kernel %v", n, rows, random, j, out[j], want)
					}
				}
				if out[rows] != -7 {
					t.Fatalf("n=%d rows=%d: wrote past its outputs", n, rows)
				}
			}
		}
	}
}

// TestQ6KRows: the Q6_K decode kernel of whole weight blocks (q6krows)
// gives every row the bits of the one-row kernel, on quantized weights and
// on random bytes (any quant, high-bit and scale patterns, scales down to
// −128, finite d), and writes only its outputs.
func TestQ6KRows(t *testing.T) {
	for _, p := range []Path{AVX2, AVX512} {
		if k := kernelSet(p); k.path == p && k.q6krows != nil {
			t.Run(string(p), func(t *testing.T) { testQ6KRows(t, k) })
		}
	}
}

func testQ6KRows(t *testing.T, k *kset) {
	r := rand.New(rand.NewPCG(19, 7))
	for _, nsb := range []int{1, 2, 3, 9} {
		for _, rows := range []int{1, 2, 5, 24} {
			for _, random := range []bool{false, true} {
				n := nsb * 256
				x := make([]float32, n)
				for j := range x {
					x[j] = float32(r.NormFloat64() * 3)
				}
				if nsb == 3 {
					clear(x[256:512])
					x[3] = 1e4
				}
				xq, xd, bs := make([]int8, n), make([]float32, nsb), make([]int16, n/16)
				quantizeRowQ8K(xq, xd, bs, x)
				var w []byte
				if random {
					w = make([]byte, rows*nsb*210)
					for i := range w {
						w[i] = byte(r.IntN(256))
					}
					for b := 0; b < len(w); b += 210 {
						h := uint16(0x1c00 + r.IntN(0x2000)) // d in [2⁻⁸, 2⁰)
						w[b+208], w[b+209] = byte(h), byte(h>>8)
					}
				} else {
					wf := make([]float32, rows*n)
					for j := range wf {
						wf[j] = float32(r.NormFloat64())
					}
					var err error
					if w, err = kernels.Quantize(kernels.Q6_K, wf); err != nil {
						t.Fatal(err)
					}
				}
				out := make([]float32, rows+1)
				out[rows] = -7
				k.q6krows(xq, xd, bs, w, out[:rows])
				rb := nsb * 210
				for j := range rows {
					want := k.q6ki1x1(xq, xd, bs, w[j*rb:(j+1)*rb])
					if math.Float32bits(out[j]) != math.Float32bits(want) {
						t.Fatalf("n=%d rows=%d random=%v row %d: q6krows %v, one-row kernel %v", n, rows, random, j, out[j], want)
					}
				}
				if out[rows] != -7 {
					t.Fatalf("n=%d rows=%d: wrote past its outputs", n, rows)
				}
			}
		}
	}
}

// TestKQRowsPrefetch runs the decode kernels' tests (Q4_K, Q6_K, Q8_0 on
// every path this CPU has) with each prefetch setting: none, into L1 and
// into L2 (prefetch_amd64.h): the kernels' bits do not depend on it, and
// no setting skips or repeats the work around the prefetches.
func TestKQRowsPrefetch(t *testing.T) {
	kq, kq2, q8 := kqPrefetch, kqPrefetchAVX2, q8Prefetch
	defer func() { kqPrefetch, kqPrefetchAVX2, q8Prefetch = kq, kq2, q8 }()
	for _, pf := range []int{0, 2048, -2048} {
		kqPrefetch, kqPrefetchAVX2, q8Prefetch = pf, pf, pf
		t.Run(fmt.Sprintf("pf=%d", pf), func(t *testing.T) {
			TestQ4KRows(t)
			TestQ6KRows(t)
			TestQ4KAMX(t)
			TestQ8AMX(t)
			TestQ8Rows(t)
		})
	}
}
