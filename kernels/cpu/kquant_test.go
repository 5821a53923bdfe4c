package cpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// TestKQuantInt checks the integer Q4_0, Q4_K and Q6_K kernels of every
// vector path against the float64 product of the dequantized weights and
// the dequantized activations (the integer parts are exact; only the
// super-block scalings and the lane sums round), and that every path gives
// the same bits (they run one kernel; the amx path's Q4_K has its own
// order, within the same tolerance).
func TestKQuantInt(t *testing.T) {
	if len(Paths()) < 2 {
		t.Skip("no vector path on this CPU")
	}
	r := rand.New(rand.NewPCG(5, 6))
	for _, dt := range []kernels.DType{kernels.Q4_0, kernels.Q4_K, kernels.Q6_K} {
		for _, nsb := range []int{1, 2, 3, 16} {
			n := nsb * 256
			t.Run(fmt.Sprintf("%v/n=%d", dt, n), func(t *testing.T) {
				x := make([]float32, n)
				wf := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64())
					wf[i] = float32(r.NormFloat64())
				}
				if nsb == 3 { // a block of zeros and a large outlier
					clear(x[256:512])
					x[7] = 40
				}
				w, err := kernels.Quantize(dt, wf)
				if err != nil {
					t.Fatal(err)
				}
				if dt == kernels.Q6_K {
					// Negative sub-block scales (int8, as llama.cpp's
					// files hold them; the quantizer here writes them
					// non-negative): every third one negated.
					for sb := range nsb {
						for i := 0; i < 16; i += 3 {
							sc := &w[sb*210+192+i]
							*sc = byte(-int8(*sc))
						}
					}
				}
				wd := make([]float32, n)
				if err := kernels.Dequantize(wd, dt, w); err != nil {
					t.Fatal(err)
				}
				// The activations as the kernel sees them.
				xs := make([]float64, n)
				var xq []int8
				var xd []float32
				var bs []int16
				if dt == kernels.Q4_0 {
					xq, xd = make([]int8, n), make([]float32, n/32)
					quantizeRowQ8(xq, xd, x)
					for i := range xs {
						xs[i] = float64(xq[i]) * float64(xd[i/32])
					}
				} else {
					xq, xd, bs = make([]int8, n), make([]float32, n/256), make([]int16, n/16)
					quantizeRowQ8K(xq, xd, bs, x)
					for i := range xs {
						xs[i] = float64(xq[i]) * float64(xd[i/256])
					}
					for g := range bs {
						var s int
						for _, v := range xq[g*16 : g*16+16] {
							s += int(v)
						}
						if int(bs[g]) != s {
							t.Fatalf("bsum %d: got %d, want %d", g, bs[g], s)
						}
					}
					// Rounding bound of Q8_K: max|x_B|/254 per element.
					for i, v := range x {
						var amax float64
						for _, u := range x[i/256*256 : i/256*256+256] {
							amax = max(amax, math.Abs(float64(u)))
						}
						if math.Abs(xs[i]-float64(v)) > amax/254*(1+1e-6) {
							t.Fatalf("x[%d]=%v quantized to %v", i, v, xs[i])
						}
					}
				}
				var want, abs float64
				for i := range xs {
					want += xs[i] * float64(wd[i])
					abs += math.Abs(xs[i] * float64(wd[i]))
				}
				var got, amxOrder []float32
				for _, p := range Paths()[1:] {
					k := kernelSet(p)
					if !k.hasInt(dt) {
						continue // neon: float kernels (TestConformance)
					}
					var s float32
					switch dt {
					case kernels.Q4_0:
						s = k.q40i1x1(xq, xd, w)
					case kernels.Q4_K:
						s = k.q4ki1x1(xq, xd, bs, w)
					case kernels.Q6_K:
						s = k.q6ki1x1(xq, xd, bs, w)
					}
					// Per element: the scale products round once, the lane
					// sums (n/8 + 4 additions) once each; Q4_K's minimums
					// are a second term of the same size.
					tol := float64(n+16)*0x1p-24*abs*4 + 1e-30
					if math.Abs(float64(s)-want) > tol {
						t.Fatalf("%s: got %v, want %v ± %.3g", p, s, want, tol)
					}
					// Q4_K in the amx order (every amd64 vector path) is its
					// own (TestQ4KAMX), the same bits on each; the others
					// share theirs.
					if dt == kernels.Q4_K && k.q4kamx != nil {
						amxOrder = append(amxOrder, s)
					} else {
						got = append(got, s)
					}
				}
				for _, g := range [][]float32{got, amxOrder} {
					if slices.ContainsFunc(g, func(s float32) bool { return !same(s, g[0]) }) {
						t.Fatalf("paths differ: %v", g)
					}
				}
			})
		}
	}
}
