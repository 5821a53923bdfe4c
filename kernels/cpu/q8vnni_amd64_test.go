package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// TestQ8IntExtremes: Q8_0 weight quants of any byte (−128 included, which
// ggml's quantizer never writes but a file may hold) and activations at
// ±127 give the VNNI kernel (biased weights) the bits of the avx2 kernel
// (sign trick) on all four rows, and the exact integer sums.
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
