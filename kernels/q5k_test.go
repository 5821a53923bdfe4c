package kernels_test

import (
	"testing"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/reference"
)

// TestQ5KKnownBlock decodes a Q5_K super-block built by hand from ggml's
// block_q5_K (d, dmin, scales[12], qh[32], qs[128]) and the formula of
// dequantize_row_q5_K, with both kernels.Dequantize and the reference.
func TestQ5KKnownBlock(t *testing.T) {
	blk := make([]byte, 176)
	blk[0], blk[1] = 0x00, 0x3c // d = 1
	blk[2], blk[3] = 0x00, 0x38 // dmin = 0.5
	sc := blk[4:16]
	// Sub-blocks 0–3: scale in bytes 0–3, min in bytes 4–7 (6 bits each).
	sc[2], sc[6] = 3, 4 // sub-block 2: scale 3, min 4
	// Sub-block 5: low nibbles in byte 9 (scale | min<<4), top two bits
	// in bits 6–7 of bytes 1 (scale) and 5 (min): scale 0x12 = 18, min 0x21 = 33.
	sc[9] = 0x2 | 0x1<<4
	sc[1] |= 1 << 6
	sc[5] |= 2 << 6
	qh, qs := blk[16:48], blk[48:176]
	qh[3] = 1 << 2      // fifth bit of element 3 of sub-block 2 (element 67)
	qs[32+3] = 0x5a     // chunk 1: sub-block 2 low nibble 10, sub-block 3 high nibble 5
	qs[64+7] = 0x90     // chunk 2: sub-block 5 (element 167) high nibble 9
	qh[7] = 1<<5 | 1<<4 // fifth bits of element 7 of sub-blocks 5 and 4
	want := map[int]float32{
		67:  3*(10+16) - 0.5*4, // sub-block 2
		99:  0*5 - 0,           // sub-block 3: scale 0, min 0
		167: 18*(9+16) - 0.5*33,
		135: 0,  // sub-block 4, q = 0+16, scale 0
		66:  -2, // sub-block 2, q = 0: −dmin·m
	}
	got := make([]float32, 256)
	if err := kernels.Dequantize(got, kernels.Q5_K, blk); err != nil {
		t.Fatal(err)
	}
	ref, err := reference.Dequant(kernels.Q5_K, 1, 256, blk)
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
	if kernels.Q5_K.BlockBytes() != 176 || kernels.Q5_K.BlockSize() != 256 || kernels.Q5_K.String() != "Q5_K" {
		t.Errorf("Q5_K block: %d bytes per %d, name %q", kernels.Q5_K.BlockBytes(), kernels.Q5_K.BlockSize(), kernels.Q5_K)
	}
}

// TestQ2KKnownBlock decodes a Q2_K super-block built by hand from ggml's
// block_q2_K (scales[16], qs[64], d, dmin) and dequantize_row_q2_K.
func TestQ2KKnownBlock(t *testing.T) {
	blk := make([]byte, 84)
	blk[80], blk[81] = 0x00, 0x3c // d = 1
	blk[82], blk[83] = 0x00, 0x38 // dmin = 0.5
	blk[5] = 3 | 2<<4             // sub-block 5 (elements 80…95): scale 3, min 2
	blk[9] = 7 | 1<<4             // sub-block 9 (elements 144…159): scale 7, min 1
	// Element 83 = 0·128 + 2·32 + 16 + 3: qs[16+3], bits 4–5.
	blk[16+19] = 2 << 4
	// Element 147 = 128 + 0·32 + 16 + 3: qs[32+16+3], bits 0–1.
	blk[16+32+19] = 3
	want := map[int]float32{83: 3*2 - 0.5*2, 147: 7*3 - 0.5, 80: -1, 0: 0}
	got := make([]float32, 256)
	if err := kernels.Dequantize(got, kernels.Q2_K, blk); err != nil {
		t.Fatal(err)
	}
	ref, err := reference.Dequant(kernels.Q2_K, 1, 256, blk)
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
}
