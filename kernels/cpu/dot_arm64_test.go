//go:build arm64

package cpu

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// TestNEONChosen: on arm64 with ASIMD the neon path exists and is the
// default; SDOT is used exactly when the CPU has ASIMDDP (make arm64-check
// runs this under qemu-aarch64 -cpu max and cortex-a53).
func TestNEONChosen(t *testing.T) {
	if !hasNEON {
		t.Skip("no ASIMD")
	}
	if got := Paths(); !slices.Equal(got, []Path{Generic, NEON}) {
		t.Fatalf("Paths() = %v, want [generic neon]", got)
	}
	p, err := choosePath("", Paths())
	if err != nil || p != NEON {
		t.Fatalf("default path %v, %v; want neon", p, err)
	}
	t.Logf("ASIMDDP (SDOT): %v", hasSDOT)
}

// TestQ8SDOTSameBits: the SDOT and SMULL/SADALP Q8_0 and Q4_0 kernels give the same
// bits (the same exact block integers), extreme quants included, so a
// machine with or without ASIMDDP has one order.
func TestQ8SDOTSameBits(t *testing.T) {
	if !hasSDOT {
		t.Skip("no ASIMDDP: only the SMULL kernel runs (TestQ8Int)")
	}
	r := rand.New(rand.NewPCG(21, 22))
	for _, nb := range []int{1, 2, 3, 24} {
		n := nb * 32
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		xq, xd := make([]int8, n), make([]float32, nb)
		quantizeRowQ8(xq, xd, x)
		xq[0], xq[1] = 127, -127
		var w [4][]byte
		for i := range w {
			wf := make([]float32, n)
			for j := range wf {
				wf[j] = float32(r.NormFloat64())
			}
			w[i], _ = kernels.Quantize(kernels.Q8_0, wf)
			w[i][2], w[i][3] = 0x80, 0x81 // −128, −127
		}
		w4, _ := kernels.Quantize(kernels.Q4_0, x)
		w4[2], w4[3] = 0x0f, 0xf0 // quants 7, −8 and −8, 7
		if a, b := nq40i1x1(true, xq, xd, w4), nq40i1x1(false, xq, xd, w4); !same(a, b) {
			t.Fatalf("nb=%d Q4_0: SDOT %v, SMULL %v", nb, a, b)
		}
		a0, a1, a2, a3 := nq8i1x4(true, xq, xd, w[0], w[1], w[2], w[3])
		b0, b1, b2, b3 := nq8i1x4(false, xq, xd, w[0], w[1], w[2], w[3])
		for i, p := range [][2]float32{{a0, b0}, {a1, b1}, {a2, b2}, {a3, b3}} {
			if !same(p[0], p[1]) {
				t.Fatalf("nb=%d row %d: SDOT %v, SMULL %v", nb, i, p[0], p[1])
			}
		}
	}
}

// TestKQuantSDOTSameBits: the Q4_K and Q6_K kernels give the same bits
// with SDOT and with SMULL/SADALP, extreme quants and activations ±127
// included.
func TestKQuantSDOTSameBits(t *testing.T) {
	if !hasSDOT {
		t.Skip("no ASIMDDP: only the SMULL kernel runs (TestKQuantInt)")
	}
	r := rand.New(rand.NewPCG(25, 26))
	for _, nsb := range []int{1, 2, 5} {
		n := nsb * 256
		x, wf := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i], wf[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
		}
		x[3], x[300%n] = 50, -50
		xq, xd, bs := make([]int8, n), make([]float32, nsb), make([]int16, n/16)
		quantizeRowQ8K(xq, xd, bs, x)
		w, err := kernels.Quantize(kernels.Q4_K, wf)
		if err != nil {
			t.Fatal(err)
		}
		w[16], w[17] = 0xf0, 0x0f
		if a, b := nq4ki1x1(true, xq, xd, bs, w), nq4ki1x1(false, xq, xd, bs, w); !same(a, b) {
			t.Fatalf("n=%d Q4_K: SDOT %v, SMULL %v", n, a, b)
		}
		w6, err := kernels.Quantize(kernels.Q6_K, wf)
		if err != nil {
			t.Fatal(err)
		}
		w6[0], w6[128] = 0x0f, 0x03 // quant 63−32
		if a, b := nq6ki1x1(true, xq, xd, w6), nq6ki1x1(false, xq, xd, w6); !same(a, b) {
			t.Fatalf("n=%d Q6_K: SDOT %v, SMULL %v", n, a, b)
		}
	}
}

// TestNEONDot2x3: dot2x3 (the tile on two rows) gives dot1x4's bits.
func TestNEONDot2x3(t *testing.T) {
	if !hasNEON {
		t.Skip("no ASIMD")
	}
	k := kernelSet(NEON)
	r := rand.New(rand.NewPCG(23, 24))
	rnd := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	for _, n := range []int{1, 3, 4, 5, 8, 63, 64, 257} {
		x0, x1, w0, w1, w2 := rnd(n), rnd(n), rnd(n), rnd(n), rnd(n)
		a0, a1, a2, b0, b1, b2 := k.dot2x3(x0, x1, w0, w1, w2)
		c0, c1, c2, _ := k.dot1x4(x0, w0, w1, w2, w2)
		d0, d1, d2, _ := k.dot1x4(x1, w0, w1, w2, w2)
		got, want := []float32{a0, a1, a2, b0, b1, b2}, []float32{c0, c1, c2, d0, d1, d2}
		for i := range got {
			if !same(got[i], want[i]) {
				t.Fatalf("n=%d [%d]: dot2x3 %v, dot1x4 %v", n, i, got[i], want[i])
			}
		}
	}
}
