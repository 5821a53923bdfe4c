package kernels_test

import (
	"math"
	"testing"

	"pgregory.net/rapid"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/reference"
)

// TestQ3KKnownBlock decodes a Q3_K super-block built by hand from ggml's
// block_q3_K (hmask[32], qs[64], scales[12], d) and the formula of
// dequantize_row_q3_K, with both kernels.Dequantize and the reference.
func TestQ3KKnownBlock(t *testing.T) {
	blk := make([]byte, 110)
	blk[108], blk[109] = 0x00, 0x3c // d = 1
	hm, qs, sc := blk[0:32], blk[32:96], blk[96:108]
	for j := range 8 {
		sc[j] = 0x22 // every scale's low nibble 2 …
	}
	for j := range 4 {
		sc[8+j] = 0xAA // … and top bits 2: 2 + 32 = 34, minus 32 = 2
	}
	// Sub-block 5 (elements 80…95): scale 0x3F − 32 = 31.
	sc[5] |= 0x0F
	sc[8+1] |= 3 << 2
	// Element 83: n = 0, k = 2 (bits 4–5 of qs[19]), third bit 2 of hmask[19].
	qs[19] = 3 << 4
	hm[19] = 1 << 2
	// Element 200: n = 1, k = (200%128)/32 = 2, qs[32+8] bits 4–5 = 1, third bit clear.
	qs[32+8] = 1 << 4
	// Element 31: sub-block 1, k = 0, qs[31] = 2, third bit 0 of hmask[31] set.
	qs[31] = 2
	hm[31] = 1
	want := map[int]float32{
		83:  31 * 3,       // q = 3
		200: 2 * (1 - 4),  // q = −3
		31:  2 * 2,        // q = 2
		0:   2 * (0 - 4),  // q = −4
		255: 2 * (0 - 4),  // q = −4
		84:  31 * (0 - 4), // sub-block 5, q = −4
	}
	got := make([]float32, 256)
	if err := kernels.Dequantize(got, kernels.Q3_K, blk); err != nil {
		t.Fatal(err)
	}
	ref, err := reference.Dequant(kernels.Q3_K, 1, 256, blk)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("Dequantize element %d: got %v, want %v", i, got[i], w)
		}
		if float32(ref[0][i]) != w {
			t.Errorf("reference element %d: got %v, want %v", i, ref[0][i], w)
		}
	}
	if kernels.Q3_K.BlockBytes() != 110 || kernels.Q3_K.BlockSize() != 256 || kernels.Q3_K.String() != "Q3_K" {
		t.Errorf("Q3_K block: %d bytes per %d, name %q", kernels.Q3_K.BlockBytes(), kernels.Q3_K.BlockSize(), kernels.Q3_K)
	}
}

// TestMXFP4KnownBlock decodes MXFP4 blocks built by hand: every nibble of
// E2M1 (±0, 0.5, 1, 1.5, 2, 3, 4, 6) at scale 2^(e−127) for ordinary
// exponents, the subnormal scales (e = 0, 1) and the largest (e = 254,
// where 6·2^127 overflows float32 as in ggml).
func TestMXFP4KnownBlock(t *testing.T) {
	e2m1 := []float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}
	for _, e := range []int{127, 130, 100, 1, 0, 254} {
		blk := make([]byte, 17)
		blk[0] = byte(e)
		for j := range 16 {
			blk[1+j] = byte(j) | byte(15-j)<<4
		}
		got := make([]float32, 32)
		if err := kernels.Dequantize(got, kernels.MXFP4, blk); err != nil {
			t.Fatal(err)
		}
		ref, err := reference.Dequant(kernels.MXFP4, 1, 32, blk)
		if err != nil {
			t.Fatal(err)
		}
		for j := range 32 {
			v := e2m1[j%16]
			if j >= 16 {
				v = e2m1[15-j%16]
			}
			want := float32(v * math.Pow(2, float64(e-127)))
			if got[j] != want || float32(ref[0][j]) != want {
				t.Errorf("e=%d element %d: Dequantize %v, reference %v, want %v", e, j, got[j], ref[0][j], want)
			}
		}
	}
	if kernels.MXFP4.BlockBytes() != 17 || kernels.MXFP4.BlockSize() != 32 || kernels.MXFP4.String() != "MXFP4" || uint32(kernels.MXFP4) != 39 {
		t.Errorf("MXFP4: %d bytes per %d, name %q, number %d", kernels.MXFP4.BlockBytes(), kernels.MXFP4.BlockSize(), kernels.MXFP4, uint32(kernels.MXFP4))
	}
}

// TestQ3KMXFP4Property: for any finite block, Quantize then Dequantize
// agrees with the reference decoder bit for bit and stays within the
// grid's error of the input (Q3_K: half a step of d·sc ≤ amax/3 + d per
// sub-block, bounded by 0.18·amax of the super-block; MXFP4: ggml's
// exponent choice clips at 1.5·2^⌊log2 amax⌋, within 0.26·amax of a
// 32-element block), and random bytes decode equally on both paths.
func TestQ3KMXFP4Property(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		dt := rapid.SampledFrom([]kernels.DType{kernels.Q3_K, kernels.MXFP4}).Draw(rt, "dtype")
		n := dt.BlockSize()
		scale := rapid.Float64Range(1e-3, 1e3).Draw(rt, "scale")
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rapid.Float64Range(-1, 1).Draw(rt, "x") * scale)
		}
		q, err := kernels.Quantize(dt, x)
		if err != nil {
			rt.Fatal(err)
		}
		back := make([]float32, n)
		if err := kernels.Dequantize(back, dt, q); err != nil {
			rt.Fatal(err)
		}
		ref, _ := reference.Dequant(dt, 1, n, q)
		var amax float64
		for _, v := range x {
			amax = max(amax, math.Abs(float64(v)))
		}
		tol := map[kernels.DType]float64{kernels.Q3_K: 0.18, kernels.MXFP4: 0.26}[dt] * amax
		for i := range x {
			if float64(back[i]) != ref[0][i] {
				rt.Fatalf("element %d: Dequantize %v, reference %v", i, back[i], ref[0][i])
			}
			if d := math.Abs(float64(back[i] - x[i])); d > tol {
				rt.Fatalf("element %d: %v came back as %v (|diff| %g > %g)", i, x[i], back[i], d, tol)
			}
		}
		raw := rapid.SliceOfN(rapid.Byte(), dt.BlockBytes(), dt.BlockBytes()).Draw(rt, "raw")
		if err := kernels.Dequantize(back, dt, raw); err != nil {
			rt.Fatal(err)
		}
		ref, _ = reference.Dequant(dt, 1, n, raw)
		for i := range back {
			if b, r := back[i], float32(ref[0][i]); math.Float32bits(b) != math.Float32bits(r) && !(b != b && r != r) {
				rt.Fatalf("random block element %d: Dequantize %v, reference %v", i, b, r)
			}
		}
	})
}
