package kernels

import "math"

// MXFP4 (ggml's block_mxfp4, the OCP microscaling FP4 format of gpt-oss
// files; 17 bytes per 32 elements):
//
//	e: an E8M0 scale (a bare exponent, 2^(e−127)), qs[16]: 4-bit E2M1
//	values, element j in the low nibble of qs[j] and element 16+j in the
//	high nibble.
//
// An E2M1 nibble is a sign bit and the magnitudes 0, 0.5, 1, 1.5, 2, 3, 4, 6.
// ggml stores them doubled as the integers kvalues_mxfp4 (0, 1, 2, 3, 4, 6,
// 8, 12 and their negatives) and halves the scale instead: x = k·2^(e−128),
// which is exact in float32 for every e (e < 2 gives the subnormals 2^−128
// and 2^−127, as ggml_e8m0_to_fp32_half).

// mxfp4Values are E2M1's values doubled, indexed by the nibble.
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// mxfp4HalfScale returns 2^(e−128) as ggml_e8m0_to_fp32_half does.
func mxfp4HalfScale(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// DequantizeMXFP4Block decodes one 17-byte MXFP4 block into 32 floats,
// exactly as ggml's dequantize_row_mxfp4.
func DequantizeMXFP4Block(y []float32, blk []byte) {
	d := mxfp4HalfScale(blk[0])
	for j := 0; j < 16; j++ {
		y[j] = float32(mxfp4Values[blk[1+j]&0xF]) * d
		y[16+j] = float32(mxfp4Values[blk[1+j]>>4]) * d
	}
}

// quantizeMXFP4Block encodes 32 floats as an MXFP4 block the way ggml's
// reference quantizer chooses: the exponent e = floor(log2(amax)) + 125
// (clamped to a byte), then per element the nearest of the sixteen values
// (the first on a tie).
func quantizeMXFP4Block(blk []byte, x []float32) {
	var amax float32
	for _, v := range x[:32] {
		amax = max(amax, abs32(v))
	}
	var e uint8
	if amax > 0 {
		e = uint8(max(0, min(255, math.Floor(math.Log2(float64(amax)))-2+127)))
	}
	blk[0] = e
	d := mxfp4HalfScale(e)
	nearest := func(v float32) uint8 {
		best, bestErr := 0, abs32(float32(mxfp4Values[0])*d-v)
		for i := 1; i < 16; i++ {
			if err := abs32(float32(mxfp4Values[i])*d - v); err < bestErr {
				best, bestErr = i, err
			}
		}
		return uint8(best)
	}
	for j := 0; j < 16; j++ {
		blk[1+j] = nearest(x[j]) | nearest(x[16+j])<<4
	}
}
