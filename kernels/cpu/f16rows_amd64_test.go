//go:build amd64

package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// TestF16RowsKernels: the F16 decode kernels of the avx512 path (one
// stream, f16rowsAVX512; two, f16rows2AVX512, prefetching 4 KB ahead or
// not; four, f16rows4AVX512, prefetching into L1, L2 or not; the CPU
// picks) give every row the bits of the four-row kernel, for row counts
// of every residue mod 4 and lengths with and without a 32-element tail,
// and write only their outputs.
func TestF16RowsKernels(t *testing.T) {
	if !slices.Contains(Paths(), AVX512) {
		t.Skip("no avx512 path on this CPU")
	}
	k := kernelSet(AVX512)
	r := rand.New(rand.NewPCG(23, 24))
	pf := rowPrefetch
	defer func() { rowPrefetch = pf }()
	for _, v := range []struct {
		streams, pf int
	}{{1, 0}, {2, 0}, {2, 4096}, {4, 0}, {4, 4096}, {4, -4096}} {
		streams := v.streams
		rowPrefetch = v.pf
		for _, n := range []int{16, 32, 48, 768, 1000, 8960} {
			for _, rows := range []int{1, 2, 3, 4, 7, 24, 25, 27} {
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
				vf16rows(streams, x, w, out[:rows])
				for i := range rows {
					rw := w[i*n : (i+1)*n]
					want, _, _, _ := k.f16dot1x4(x, rw, rw, rw, rw)
					if math.Float32bits(out[i]) != math.Float32bits(want) {
						t.Fatalf("streams=%d pf=%d n=%d rows=%d row %d: %v, four-row kernel %v", streams, v.pf, n, rows, i, out[i], want)
					}
				}
				if out[rows] != -7 {
					t.Fatalf("streams=%d pf=%d n=%d rows=%d: wrote past its outputs", streams, v.pf, n, rows)
				}
			}
		}
	}
}

// TestBF16Rows: the BF16 decode kernel of whole weight blocks (two
// prefetched streams, bf16rows2AVX512) gives every row the bits of the
// four-row kernel (the float order's, avx512 without AVX512_BF16) and
// writes only its outputs.
func TestBF16Rows(t *testing.T) {
	if !slices.Contains(Paths(), AVX512) {
		t.Skip("no avx512 path on this CPU")
	}
	r := rand.New(rand.NewPCG(25, 26))
	for _, n := range []int{1, 15, 16, 32, 48, 768, 1000, 8960} {
		for _, rows := range []int{1, 2, 3, 7, 24, 25} {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(r.NormFloat64())
			}
			w := make([]uint16, rows*n)
			for i := range w {
				w[i] = uint16(math.Float32bits(float32(r.NormFloat64())) >> 16)
			}
			out := make([]float32, rows+1)
			out[rows] = -7
			vbf16rows(x, w, out[:rows])
			for i := range rows {
				rw := w[i*n : (i+1)*n]
				want, _, _, _ := vhalf1x4(true, true, x, rw, rw, rw, rw)
				if math.Float32bits(out[i]) != math.Float32bits(want) {
					t.Fatalf("n=%d rows=%d row %d: %v, four-row kernel %v", n, rows, i, out[i], want)
				}
			}
			if out[rows] != -7 {
				t.Fatalf("n=%d rows=%d: wrote past its outputs", n, rows)
			}
		}
	}
}
