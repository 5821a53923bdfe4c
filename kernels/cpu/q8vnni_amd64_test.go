package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestQ8IntExtremes: Q8_0 weight quants of any byte (−128 included, which
// ggml's quantizer never writes but a file may hold) and activations at
// ±127 give the VNNI kernels (biased weights, the quad order) and the avx2
// kernel (sign trick) the exact integer sums on all four rows (scales of 1
// and sums below 2²⁴: every float step is exact in both orders).
func TestQ8IntExtremes(t *testing.T) {
	if !slices.Contains(Paths(), AVX512) || !hasVNNI {
		t.Skip("no AVX512_VNNI")
	}
	r := rand.New(rand.NewPCG(11, 12))
	const nb = 7
	for trial := range 50 {
		xq, xd := make([]int8, nb*32), make([]float32, nb)
		for i := range xq {
			switch trial % 3 {
			case 0:
				xq[i] = int8(r.IntN(255) - 127)
			case 1:
				xq[i] = 127
			default:
				xq[i] = -127
			}
		}
		for b := range xd {
			xd[b] = 1
		}
		var rows [4][]byte
		for i := range rows {
			rows[i] = make([]byte, nb*34)
			for j := range rows[i] {
				rows[i][j] = byte(r.IntN(256))
				if trial%5 == 4 {
					rows[i][j] = 0x80 // every quant −128
				}
			}
			for b := range nb {
				rows[i][b*34], rows[i][b*34+1] = 0x00, 0x3c // scale 1: the sum is the exact integer
			}
		}
		v := kernelSet(AVX512)
		a := kernelSet(AVX2)
		g := [4]float32{}
		w := [4]float32{}
		g[0], g[1], g[2], g[3] = v.q8i1x4(xq, xd, rows[0], rows[1], rows[2], rows[3])
		w[0], w[1], w[2], w[3] = a.q8i1x4(xq, xd, rows[0], rows[1], rows[2], rows[3])
		for i := range 4 {
			var exact int64
			for b := range nb {
				for j := range 32 {
					exact += int64(int8(rows[i][b*34+2+j])) * int64(xq[b*32+j])
				}
			}
			if !same(g[i], w[i]) || float64(g[i]) != float64(exact) {
				t.Fatalf("trial %d row %d: vnni %v, avx2 %v, exact %d", trial, i, g[i], w[i], exact)
			}
		}
	}
}

// TestQ8Rows: the decode kernel of whole weight blocks (q8rows) gives every
// row the bits of the four-row kernel, for any row count, block count and
// row stride, and writes only its outputs.
func TestQ8Rows(t *testing.T) {
	// avx2's row kernel and avx512's (AVX2 instructions without VNNI; the
	// quad order's q8quadRows with it, its q8i1x4 the same kernel: TestQ8AMX
	// holds it to the order in Go).
	for _, p := range []Path{AVX2, AVX512} {
		k := kernelSet(p)
		if k.path != p || k.q8rows == nil {
			continue
		}
		t.Run(string(p), func(t *testing.T) { testQ8Rows(t, k) })
	}
}

func testQ8Rows(t *testing.T, k *kset) {
	r := rand.New(rand.NewPCG(15, 16))
	for _, nb := range []int{1, 2, 3, 24, 64} {
		for _, rows := range []int{1, 2, 3, 5, 24} {
			for _, pad := range []int{0, 6} {
				stride := nb*34 + pad
				x := make([]float32, nb*32)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				xq, xd, xc := make([]int8, nb*32), make([]float32, nb), make([]int32, nb*8)
				quantizeRowQ8(xq, xd, x)
				q8Corr(xc, xq)
				w := make([]byte, rows*stride)
				for i := range w {
					w[i] = byte(r.IntN(256))
				}
				for row := range rows {
					for b := range nb {
						h := uint16(0x2c00 + r.IntN(0x2000))
						w[row*stride+b*34], w[row*stride+b*34+1] = byte(h), byte(h>>8)
					}
				}
				got := make([]float32, rows+1)
				got[rows] = -7
				k.q8rows(xq, xc, xd, w[:(rows-1)*stride+nb*34], stride, got[:rows])
				for i := range rows {
					rw := w[i*stride : i*stride+nb*34]
					want, _, _, _ := k.q8i1x4(xq, xd, rw, rw, rw, rw)
					if !same(got[i], want) {
						t.Fatalf("nb=%d rows=%d stride=%d row %d: q8rows %v, four-row %v", nb, rows, stride, i, got[i], want)
					}
				}
				if got[rows] != -7 {
					t.Fatalf("nb=%d rows=%d: wrote past its outputs", nb, rows)
				}
			}
		}
	}
}
