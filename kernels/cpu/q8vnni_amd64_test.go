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

// TestQ8Eight: the eight-row VNNI Q8_0 decode kernel gives every row the
// bits of the four-row kernel (which batch invariance and the prefill tile
// rest on), on any quant bytes and block counts.
func TestQ8Eight(t *testing.T) {
	k := kernelSet(AVX512) // the VNNI kernels (the amx path has its own Q8_0 order)
	if k.q8i8 == nil {
		t.Skip("no eight-row Q8_0 kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(13, 14))
	for _, nb := range []int{1, 2, 3, 24, 64} {
		stride := nb * 34
		x := make([]float32, nb*32)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		xq, xd := make([]int8, nb*32), make([]float32, nb)
		quantizeRowQ8(xq, xd, x)
		w := make([]byte, 8*stride)
		for i := range w {
			w[i] = byte(r.IntN(256))
		}
		for row := range 8 {
			for b := range nb {
				// A finite half scale in [2⁻⁴, 2⁴).
				h := uint16(0x2c00 + r.IntN(0x2000))
				w[row*stride+b*34], w[row*stride+b*34+1] = byte(h), byte(h>>8)
			}
		}
		got := k.q8i8(xq, xd, w, stride)
		for half := range 2 {
			rw := func(i int) []byte { return w[(4*half+i)*stride : (4*half+i+1)*stride] }
			s0, s1, s2, s3 := k.q8i1x4(xq, xd, rw(0), rw(1), rw(2), rw(3))
			for i, s := range []float32{s0, s1, s2, s3} {
				if !same(got[4*half+i], s) {
					t.Fatalf("nb=%d row %d: eight-row kernel %v, four-row %v", nb, 4*half+i, got[4*half+i], s)
				}
			}
		}
	}
}

// TestQ8Rows: the decode kernel of whole weight blocks (q8rows) gives every
// row the bits of the four-row kernel, for any row count, block count and
// row stride, and writes only its outputs.
func TestQ8Rows(t *testing.T) {
	// avx2's row kernel and avx512's VNNI one (the amx path has its own
	// Q8_0 order, TestQ8AMX).
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

// TestQ8Tile8: the 4×8 zmm tile (q8tile8, on weights packed by q8pack8) gives every output element the
// bits of the one-row decode kernel (q8rows) and of q8i1x4, for any block
// count and row stride, weight quants of any byte (−128 included) and
// activations at ±127; so a sequence's row is the same decoded alone or
// in a batch of 16.
func TestQ8Tile8(t *testing.T) {
	k := kernelSet(AVX512) // the VNNI kernels (the amx path has its own Q8_0 order)
	if k.q8tile8 == nil {
		t.Skip("no q8tile8 kernel on this CPU")
	}
	r := rand.New(rand.NewPCG(17, 18))
	for _, nb := range []int{1, 2, 3, 24, 64} {
		for _, pad := range []int{0, 6} {
			for trial := range 4 {
				stride, cols := nb*34+pad, nb*32
				xq, xd, xc := make([]int8, 4*cols), make([]float32, 4*nb), make([]int32, cols)
				for row := range 4 {
					x := make([]float32, cols)
					for i := range x {
						x[i] = float32(r.NormFloat64())
						if trial == 3 && i%3 == 0 {
							x[i] = 100 // quantized to ±127 in its block
						}
					}
					quantizeRowQ8(xq[row*cols:(row+1)*cols], xd[row*nb:(row+1)*nb], x)
					q8Corr(xc[row*cols/4:(row+1)*cols/4], xq[row*cols:(row+1)*cols])
				}
				w := make([]byte, 8*stride)
				for i := range w {
					w[i] = byte(r.IntN(256))
					if trial == 2 {
						w[i] = 0x80
					}
				}
				for row := range 8 {
					for b := range nb {
						h := uint16(0x2c00 + r.IntN(0x2000))
						w[row*stride+b*34], w[row*stride+b*34+1] = byte(h), byte(h>>8)
					}
				}
				var got [32]float32
				var ps packScratch
				pk := ps.aligned(nb * q8packBytes)
				k.q8pack8(w[:7*stride+nb*34], stride, nb, pk)
				xu := make([]byte, 8*cols)
				k.q8dup(xq, xu)
				k.q8tile8(xu, xd, pk, &got)
				for row := range 4 {
					rq, rc, rd := xq[row*cols:(row+1)*cols], xc[row*cols/4:(row+1)*cols/4], xd[row*nb:(row+1)*nb]
					want := make([]float32, 8)
					k.q8rows(rq, rc, rd, w[:7*stride+nb*34], stride, want)
					for j := range 8 {
						rw := w[j*stride : j*stride+nb*34]
						four, _, _, _ := k.q8i1x4(rq, rd, rw, rw, rw, rw)
						if !same(got[8*row+j], want[j]) || !same(want[j], four) {
							t.Fatalf("nb=%d stride=%d trial %d: out[%d][%d] = %v, q8rows %v, q8i1x4 %v", nb, stride, trial, row, j, got[8*row+j], want[j], four)
						}
					}
				}
			}
		}
	}
}
