package cpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestScores: a path's key-block score tile (avx2: 3 query rows, avx512 and
// amx: 4) gives every score the bits of the path's one-row kernel (dot1x1)
// and writes only its rows' scores.
func TestScores(t *testing.T) {
	ran := false
	for _, p := range Paths() {
		k := kernelSet(p)
		if k.scores == nil {
			continue
		}
		ran = true
		t.Run(string(p), func(t *testing.T) { testScores(t, k) })
	}
	if !ran && slices.Contains(Paths(), AVX2) {
		t.Fatal("no score tile on a CPU with the avx2 path")
	}
}

func testScores(t *testing.T, k *kset) {
	r := rand.New(rand.NewPCG(16, 1))
	for _, hd := range []int{k.tileStep, 64, 128, 136} {
		if hd%k.tileStep != 0 {
			continue
		}
		data := make([]float32, 200*hd)
		for i := range data {
			data[i] = float32(r.NormFloat64())
		}
		var x [4][]float32
		for i := range x {
			x[i] = make([]float32, hd)
			for j := range x[i] {
				x[i][j] = float32(r.NormFloat64() * 3)
			}
		}
		for _, n := range []int{4, 8, 60, 63, attnKeys} {
			offs := make([]int, n)
			for j := range offs {
				offs[j] = r.IntN(len(data) - hd + 1) // any offset, unaligned
			}
			out := make([]float32, 4*attnKeys)
			for i := range out {
				out[i] = -7
			}
			k.scores(&x, data, offs, hd, out)
			for i := range 4 {
				for j := range attnKeys {
					got := out[i*attnKeys+j]
					if i >= k.tileRows || j >= n&^3 {
						if got != -7 {
							t.Fatalf("hd=%d n=%d: row %d, score %d written", hd, n, i, j)
						}
						continue
					}
					want := k.dot1x1(x[i], data[offs[j]:offs[j]+hd])
					if math.Float32bits(got) != math.Float32bits(want) {
						t.Fatalf("hd=%d n=%d: row %d key %d: %v, one-row kernel %v", hd, n, i, j, got, want)
					}
				}
			}
		}
	}
	// An offset outside the arena is refused before any read.
	defer func() {
		if recover() == nil {
			t.Fatal("no panic for a key outside the arena")
		}
	}()
	var x [4][]float32
	hd := k.tileStep
	for i := range x {
		x[i] = make([]float32, hd)
	}
	k.scores(&x, make([]float32, 4*hd), []int{0, hd, 2 * hd, 3*hd + 1}, hd, make([]float32, 4*attnKeys))
}

// TestWsum4: four outputs summed at once have the bits of each summed alone
// with the path's wsum, on every path with a value tile (avx2: 16
// elements a pass, reading 8 spare offsets for prefetches).
func TestWsum4(t *testing.T) {
	for _, p := range Paths() {
		k := kernelSet(p)
		if k.wsum4 == nil {
			continue
		}
		t.Run(string(p), func(t *testing.T) { testWsum4(t, k) })
	}
}

func testWsum4(t *testing.T, k *kset) {
	r := rand.New(rand.NewPCG(16, 2))
	for _, hd := range []int{64, 128} {
		data := make([]float32, 100*hd)
		for i := range data {
			data[i] = float32(r.NormFloat64())
		}
		for _, n := range []int{0, 1, 5, attnKeys} {
			offs := make([]int, n+8) // the spare entries past n: valid offsets
			for j := range offs {
				offs[j] = r.IntN(len(data) - hd + 1)
			}
			offs = offs[:n]
			var o, s [4][]float32
			want := make([][]float32, 4)
			for i := range 4 {
				o[i], s[i] = make([]float32, hd), make([]float32, n)
				for j := range o[i] {
					o[i][j] = float32(r.NormFloat64())
				}
				for j := range s[i] {
					s[i][j] = float32(r.Float64())
				}
				want[i] = append([]float32(nil), o[i]...)
				if !k.wsum(want[i], s[i], data, offs) {
					t.Fatal("wsum refused")
				}
			}
			if !k.wsum4(&o, &s, data, offs) {
				t.Fatalf("hd=%d: wsum4 refused", hd)
			}
			for i := range 4 {
				for j := range hd {
					if math.Float32bits(o[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("hd=%d n=%d: output %d element %d: %v, wsum %v", hd, n, i, j, o[i][j], want[i][j])
					}
				}
			}
		}
	}
	var o, s [4][]float32
	for i := range 4 {
		o[i], s[i] = make([]float32, 8), make([]float32, 1)
	}
	if k.wsum4(&o, &s, make([]float32, 64), []int{0}) {
		t.Fatal("wsum4 accepted a head dimension of 8")
	}
}

// TestOnlineKernels: a path's fused softmax kernels (avx2 and avx512:
// scaleMax, expSum) give online's results: the scaled scores and weights with the
// bits of its loops (expf's), the block's maximum (NaN when a score is;
// either zero where the maximum is ±0) and the block sum in its order, for
// every length up to two key blocks and scores with infinities, NaN and
// signed zeros.
func TestOnlineKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	for _, p := range Paths() {
		k := kernelSet(p)
		if k.scaleMax == nil || k.expSum == nil {
			continue
		}
		for n := 1; n <= 2*attnKeys; n++ {
			for trial := range 5 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(r.NormFloat64() * 8)
					if trial == 4 {
						// weights from 1 down to denormals: sums that round
						x[i] = float32(r.NormFloat64() * 300)
					}
				}
				special := []float32{float32(math.Inf(-1)), 0, float32(math.Copysign(0, -1)), float32(math.NaN())}
				switch trial {
				case 1:
					x[r.IntN(n)] = special[r.IntN(3)]
				case 2:
					x[r.IntN(n)] = special[3]
				case 3:
					for i := range x {
						x[i] = special[1+r.IntN(2)]
					}
				}
				const scale = 0.125
				want := slices.Clone(x)
				wm := float32(math.Inf(-1))
				for i, v := range want {
					want[i] = float32(v * scale)
					wm = max(wm, want[i])
				}
				got := slices.Clone(x)
				gm := k.scaleMax(got, scale)
				for i := range got {
					if !same(got[i], want[i]) {
						t.Fatalf("%s n=%d: scaled score %d %v, want %v", p, n, i, got[i], want[i])
					}
				}
				if gm != wm && !(gm != gm && wm != wm) {
					t.Fatalf("%s n=%d trial %d: maximum %v, want %v", p, n, trial, gm, wm)
				}
				if wm != wm {
					continue // online's weights are NaN whatever the order
				}
				ws := slices.Clone(want)
				for i, v := range ws {
					ws[i] = expf(v - wm)
				}
				wl := blockSum(ws, [4]float64{})
				gl := k.expSum(got, wm)
				for i := range got {
					if !same(got[i], ws[i]) {
						t.Fatalf("%s n=%d: weight %d %v, expf %v", p, n, i, got[i], ws[i])
					}
				}
				if math.Float64bits(gl) != math.Float64bits(wl) {
					t.Fatalf("%s n=%d trial %d: block sum %v, online's order %v", p, n, trial, gl, wl)
				}
			}
		}
	}
}
