package cpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// TestF16Tile4xn: the F16 prefill tile converting its weights in
// registers gives every output the bits of the four-row float kernel on
// the weights converted first (dot1x4), whichever of the two a CPU's
// blocks take (kset.f16convertCols), for 1–9 weight rows (the tile's
// remainder left to its caller), with and without prefetch memory, and
// writes nothing past its outputs.
func TestF16Tile4xn(t *testing.T) {
	if !hasAVX512 {
		t.Skip("no AVX-512 on this CPU")
	}
	k := vset(AVX512, true)
	r := rand.New(rand.NewPCG(69, 70))
	for _, cols := range []int{16, 64, 768, 1040} {
		for _, nw := range []int{1, 4, 5, 8, 9} {
			t.Run(fmt.Sprintf("cols=%d/nw=%d", cols, nw), func(t *testing.T) {
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
				out := make([]float32, 3*os+nw+1)
				for i := range out {
					out[i] = -7
				}
				pf := make([]byte, 2*cols*8)
				done := k.f16tile4xn(&xs, w, cols, nw, out, os, pf)
				if done != nw&^3 {
					t.Fatalf("done %d weight rows of %d", done, nw)
				}
				row := func(o int) []float32 { return dec[o*cols : (o+1)*cols] }
				for i := range 4 {
					for o := 0; o+4 <= done; o += 4 {
						s0, s1, s2, s3 := k.dot1x4(xs[i], row(o), row(o+1), row(o+2), row(o+3))
						for j, s := range []float32{s0, s1, s2, s3} {
							if got := out[i*os+o+j]; !same(got, s) {
								t.Fatalf("row %d out %d: %v, float kernel on converted weights %v", i, o+j, got, s)
							}
						}
					}
					for o := done; o < nw; o++ {
						if out[i*os+o] != -7 {
							t.Fatalf("row %d: wrote output %d past the tile's", i, o)
						}
					}
				}
			})
		}
	}
}
