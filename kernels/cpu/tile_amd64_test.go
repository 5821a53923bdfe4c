package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// TestTileXN: each amd64 path's n-column prefill tiles (avx2: 3 activation
// rows, avx512: 4), on float32 weight rows and on F16 rows converted in
// registers, give every output the bits of the path's four-row float
// kernel on the weights converted first (dot1x4), whichever of the two a
// CPU's blocks take (kset.f16convertCols), for 1–9 weight rows (the tile's
// remainder left to its caller), with and without prefetch memory, and
// write nothing past their outputs nor into the rows past tileRows.
func TestTileXN(t *testing.T) {
	ran := false
	for _, p := range Paths() {
		k := kernelSet(p)
		if k.tilexn == nil || (p != AVX2 && p != AVX512) {
			continue
		}
		ran = true
		t.Run(string(p), func(t *testing.T) { testTileXN(t, k) })
	}
	if !ran && hasAVX2 {
		t.Fatal("no n-column tile on an AVX2 CPU")
	}
}

func testTileXN(t *testing.T, k *kset) {
	r := rand.New(rand.NewPCG(69, 70))
	for _, cols := range []int{k.tileStep, 64, 768, 1040} {
		for _, nw := range []int{1, 4, 5, 8, 9} {
			for _, half := range []bool{false, true} {
				t.Run(fmt.Sprintf("cols=%d/nw=%d/f16=%v", cols, nw, half), func(t *testing.T) {
					var xs [4][]float32
					for i := range xs {
						xs[i] = make([]float32, cols)
						for j := range xs[i] {
							xs[i][j] = float32(r.NormFloat64())
						}
					}
					w := make([]uint16, nw*cols)
					dec := make([]float32, len(w))
					for i := range w {
						w[i] = kernels.F32ToF16(float32(r.NormFloat64()))
						dec[i] = f16tab[w[i]]
					}
					const os = 13
					out := make([]float32, 4*os)
					for i := range out {
						out[i] = -7
					}
					var pf []byte
					if nw > 4 {
						pf = make([]byte, 2*cols*8)
					}
					var done int
					if half {
						done = k.f16tilexn(&xs, w, cols, nw, out, os, pf)
					} else {
						done = k.tilexn(&xs, dec, cols, nw, out, os, pf)
					}
					if done != nw&^3 {
						t.Fatalf("done %d weight rows of %d", done, nw)
					}
					row := func(o int) []float32 { return dec[o*cols : (o+1)*cols] }
					for i := range 4 {
						for o := 0; o+4 <= done && i < k.tileRows; o += 4 {
							s0, s1, s2, s3 := k.dot1x4(xs[i], row(o), row(o+1), row(o+2), row(o+3))
							for j, s := range []float32{s0, s1, s2, s3} {
								if got := out[i*os+o+j]; !same(got, s) {
									t.Fatalf("row %d out %d: %v, float kernel on converted weights %v", i, o+j, got, s)
								}
							}
						}
						for o := 0; o < os; o++ {
							if (i >= k.tileRows || o >= done) && out[i*os+o] != -7 {
								t.Fatalf("row %d: wrote output %d past the tile's", i, o)
							}
						}
					}
				})
			}
		}
	}
}
