package kernels_test

import (
	"testing"

	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/reference"
)

// TestLegacyKnownBlocks decodes Q4_1, Q5_0 and Q5_1 blocks built by hand
// from ggml's block_q4_1 {d, m, qs[16]}, block_q5_0 {d, qh[4], qs[16]} and
// block_q5_1 {d, m, qh[4], qs[16]}, with kernels.Dequantize and the
// reference.
func TestLegacyKnownBlocks(t *testing.T) {
	tests := []struct {
		dt   kernels.DType
		blk  []byte
		want map[int]float32
	}{
		// d = 0.5, m = −1; qs[3] = 0x7a: element 3 is 10, element 19 is 7.
		{kernels.Q4_1, append([]byte{0x00, 0x38, 0x00, 0xbc, 0, 0, 0, 0x7a}, make([]byte, 12)...),
			map[int]float32{3: 10*0.5 - 1, 19: 7*0.5 - 1, 0: -1}},
		// d = 2; qh = bit 3 and bit 19 (bytes 0x08 and 0x08 at qh[0], qh[2]);
		// qs[3] = 0x7a: element 3 is 10+16, element 19 is 7+16; element 0 is 0.
		{kernels.Q5_0, append([]byte{0x00, 0x40, 0x08, 0, 0x08, 0, 0, 0, 0, 0x7a}, make([]byte, 12)...),
			map[int]float32{3: (26 - 16) * 2, 19: (23 - 16) * 2, 0: -32, 20: -32}},
		// d = 0.25, m = 1; qh bit 19 only; qs[3] = 0x7a.
		{kernels.Q5_1, append([]byte{0x00, 0x34, 0x00, 0x3c, 0, 0, 0x08, 0, 0, 0, 0, 0x7a}, make([]byte, 12)...),
			map[int]float32{3: 10*0.25 + 1, 19: 23*0.25 + 1, 0: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.dt.String(), func(t *testing.T) {
			if len(tc.blk) != tc.dt.BlockBytes() || tc.dt.BlockSize() != 32 {
				t.Fatalf("block of %d bytes, %v wants %d per %d", len(tc.blk), tc.dt, tc.dt.BlockBytes(), tc.dt.BlockSize())
			}
			got := make([]float32, 32)
			if err := kernels.Dequantize(got, tc.dt, tc.blk); err != nil {
				t.Fatal(err)
			}
			ref, err := reference.Dequant(tc.dt, 1, 32, tc.blk)
			if err != nil {
				t.Fatal(err)
			}
			for i, w := range tc.want {
				if got[i] != w {
					t.Errorf("Dequantize element %d: got %v, want %v", i, got[i], w)
				}
				if float32(ref[0][i]) != w {
					t.Errorf("reference element %d: got %v, want %v", i, ref[0][i], w)
				}
			}
		})
	}
}
