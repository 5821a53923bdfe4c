package reference

import (
	"math"
	"testing"

	"github.com/cloison/cloison/kernels"
)

func TestHalf(t *testing.T) {
	for _, tt := range []struct {
		h    uint16
		want float64
	}{
		{0x3c00, 1}, {0xc000, -2}, {0x7bff, 65504}, {0x0001, math.Pow(2, -24)}, {0x0400, math.Pow(2, -14)}, {0x3555, 0.333251953125},
	} {
		if got := float64(halfBits(tt.h)); got != tt.want {
			t.Errorf("half %#04x: got %v, want %v", tt.h, got, tt.want)
		}
	}
	if !math.IsInf(float64(halfBits(0xfc00)), -1) || !math.IsNaN(float64(halfBits(0x7e00))) {
		t.Error("inf or nan decoded wrong")
	}
}

// TestQ4KByHand decodes a Q4_K super-block built by hand: d = 1, dmin = 0.5,
// sub-block j has scale 8j+7 and min 63−8j (6-bit fields split as the format
// says), every quant 3.
func TestQ4KByHand(t *testing.T) {
	blk := make([]byte, 144)
	blk[0], blk[1] = 0x00, 0x3c // d = 1
	blk[2], blk[3] = 0x00, 0x38 // dmin = 0.5
	for j := range 8 {
		sc, m := 8*j+7, 63-8*j
		if j < 4 {
			blk[4+j] = byte(sc)
			blk[8+j] = byte(m)
		} else {
			blk[12+j-4] = byte(sc&15) | byte(m&15)<<4
			blk[4+j-4] |= byte(sc>>4) << 6
			blk[8+j-4] |= byte(m>>4) << 6
		}
	}
	for i := range 128 {
		blk[16+i] = 0x33
	}
	got, err := Dequant(kernels.Q4_K, 1, 256, blk)
	if err != nil {
		t.Fatal(err)
	}
	for e, v := range got[0] {
		j := e / 32
		if want := float64(8*j+7)*3 - 0.5*float64(63-8*j); v != want {
			t.Fatalf("element %d: got %v, want %v", e, v, want)
		}
	}
}

func TestAttentionUniform(t *testing.T) {
	// Equal keys: attention is the mean of the values; GQA maps heads 0,1
	// to kv head 0 and 2,3 to kv head 1.
	keys := [][]float64{{1, 0, 0, 1}, {1, 0, 0, 1}, {1, 0, 0, 1}}
	vals := [][]float64{{1, 2, 10, 20}, {3, 4, 30, 40}, {5, 6, 50, 60}}
	q := []float64{0.3, 0.1, 1, 1, 0, 2, 5, 5}
	got := Attention(q, keys, vals, 4, 2, 2)
	want := []float64{3, 4, 3, 4, 30, 40, 30, 40}
	for i := range want {
		if math.Abs(got[i]-want[i]) > 1e-12 {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
}

func TestRoPE(t *testing.T) {
	x := []float64{1, 0, 0, 1}
	if got := RoPE(x, 0, kernels.RoPE{HeadDim: 4, Base: 10000}); got[0] != 1 || got[3] != 1 {
		t.Fatalf("position 0 is not the identity: %v", got)
	}
	// Normal layout pair (0,1) at position 1 rotates by 1 radian; NeoX pairs
	// (0,2) and (1,3).
	got := RoPE([]float64{1, 0, 1, 0}, 1, kernels.RoPE{HeadDim: 4, Base: 10000})
	if math.Abs(got[0]-math.Cos(1)) > 1e-15 || math.Abs(got[1]-math.Sin(1)) > 1e-15 {
		t.Fatalf("normal: got %v", got)
	}
	got = RoPE([]float64{1, 1, 0, 0}, 1, kernels.RoPE{HeadDim: 4, Base: 10000, NeoX: true})
	if math.Abs(got[0]-math.Cos(1)) > 1e-15 || math.Abs(got[2]-math.Sin(1)) > 1e-15 {
		t.Fatalf("neox: got %v", got)
	}
}

func TestSoftmaxRMSNorm(t *testing.T) {
	s := Softmax([]float64{1000, 1000})
	if s[0] != 0.5 || s[1] != 0.5 {
		t.Fatalf("softmax: got %v", s)
	}
	n := RMSNorm([]float64{3, 4}, []float64{1, 2}, 0)
	r := math.Sqrt(12.5)
	if math.Abs(n[0]-3/r) > 1e-15 || math.Abs(n[1]-8/r) > 1e-15 {
		t.Fatalf("rmsnorm: got %v", n)
	}
}
