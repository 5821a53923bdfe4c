package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// TestBF16AMX: BF16 products on the amx path (AMX-BF16 tiles), 1 to 70
// activation rows × 1 to 53 weight rows, lengths with and without a tail,
// on 1 and 2 threads: every element is the same bits as the decode kernel
// gives its row alone (a row's result does not depend on its batch, its
// place in a tile or the tile's shape), and within the products' float64
// sum by the float32 accumulation's bound. A wrong chunk step, a group's
// activations taken from another, or a weight group skipped each fail it.
func TestBF16AMX(t *testing.T) {
	if !hasAMXBF16 {
		t.Skip("no AMX-BF16 on this CPU (or the OS did not grant the tile state)")
	}
	r := rand.New(rand.NewPCG(67, 68))
	for _, sh := range []struct{ rows, cols, n int }{{1, 64, 30}, {2, 32, 16}, {3, 96, 7}, {4, 37, 9}, {9, 768, 53}, {17, 1000, 33}, {70, 512, 27}, {33, 20, 5}} {
		for _, threads := range []int{1, 2} {
			t.Run(fmt.Sprintf("%dx%dx%d/threads=%d", sh.rows, sh.cols, sh.n, threads), func(t *testing.T) {
				data := make([]byte, 2*sh.n*sh.cols)
				w := make([]uint16, sh.n*sh.cols)
				for i := range w {
					w[i] = bf16Round(float32(r.NormFloat64() * math.Exp2(float64(r.IntN(12)-6))))
					if i%97 == 0 {
						w[i] = uint16(r.IntN(0x80)) // a denormal (or zero)
					}
					data[2*i], data[2*i+1] = byte(w[i]), byte(w[i]>>8)
				}
				xs := make([]float32, sh.rows*sh.cols)
				for i := range xs {
					xs[i] = float32(r.NormFloat64()*math.Exp2(float64(r.IntN(12)-6))) * float32(1+i%5)
				}
				got := productOnPath(t, AMX, threads, kernels.BF16, sh.rows, sh.cols, sh.n, data, xs)
				one := make([]float32, sh.n+1)
				for row := range sh.rows {
					xr := xs[row*sh.cols : (row+1)*sh.cols]
					one[sh.n] = -7
					vbf16amxRows(xr, w, one[:sh.n])
					if one[sh.n] != -7 {
						t.Fatal("the rows kernel wrote past its outputs")
					}
					for o := range sh.n {
						if !same(got[row*sh.n+o], one[o]) {
							t.Fatalf("row %d out %d: %v in the batch, %v alone", row, o, got[row*sh.n+o], one[o])
						}
						var sum, abs float64
						for i, v := range xr {
							p := float64(bf16DAZ(bf16Round(v))) * float64(bf16DAZ(w[o*sh.cols+i]))
							sum += p
							abs += math.Abs(p)
						}
						if d := math.Abs(float64(one[o]) - sum); d > float64(sh.cols)*0x1p-23*abs+1e-30 {
							t.Fatalf("row %d out %d: %v, float64 sum %v (%g apart, bound %g)", row, o, one[o], sum, d, float64(sh.cols)*0x1p-23*abs)
						}
					}
					s0, s1, s2, s3 := vbf16amx1x4(xr, w[:sh.cols], w[:sh.cols], w[:sh.cols], w[:sh.cols])
					for _, s := range []float32{s0, s1, s2, s3} {
						if !same(s, one[0]) {
							t.Fatalf("row %d: four-row form %v, rows kernel %v", row, s, one[0])
						}
					}
				}
			})
		}
	}
}
