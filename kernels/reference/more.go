package reference

import "github.com/cloison/cloison/kernels"

// Decoders of the further k-quant and legacy block types, per element from
// ggml's block layouts (ggml-common.h) and dequantize_row_* formulas
// (ggml-quants.c).

// q5K decodes element i (0…255) of a 176-byte Q5_K super-block: f16 d at 0,
// f16 dmin at 2, the 12 scale/min bytes of Q4_K at 4, qh[32] at 16 and
// qs[128] at 48. Sub-block s = i/32 (eight of 32) has its 6-bit scale and
// min as Q4_K's; its low four bits are the low (s even) or high (s odd)
// nibble of qs[32·(s/2) + i%32], its fifth bit is bit s of qh[i%32].
func q5K(blk []byte, i int) float64 {
	sub, l := i/32, i%32
	sc, m := scaleMinK4(sub, blk[4:16])
	qb := blk[48+(sub/2)*32+l]
	q := int(qb & 15)
	if sub%2 == 1 {
		q = int(qb >> 4)
	}
	q += int((blk[16+l]>>sub)&1) << 4
	d := half(blk) * float32(sc)
	mm := half(blk[2:]) * float32(m)
	return float64(d*float32(q) - mm)
}

// legacy32 decodes element j (0…31) of a 32-element block of Q4_1, Q5_0 or
// Q5_1: q is the low (j < 16) or high (j ≥ 16) nibble of qs[j%16], plus 16
// times bit j of the little-endian uint32 qh for the 5-bit types; Q4_1 and
// Q5_1 give q·d + m (d at 0, m at 2), Q5_0 gives (q−16)·d.
func legacy32(dt kernels.DType, blk []byte, j int) float64 {
	var qs, qh []byte
	switch dt {
	case kernels.Q4_1:
		qs = blk[4:20]
	case kernels.Q5_0:
		qh, qs = blk[2:6], blk[6:22]
	case kernels.Q5_1:
		qh, qs = blk[4:8], blk[8:24]
	}
	q := int(qs[j%16] & 15)
	if j >= 16 {
		q = int(qs[j%16] >> 4)
	}
	if qh != nil {
		q += int(qh[j/8]>>(j%8)&1) << 4
	}
	d := half(blk)
	if dt == kernels.Q5_0 {
		return float64(float32(q-16) * d)
	}
	return float64(float32(q)*d + half(blk[2:]))
}

// q2K decodes element i (0…255) of an 84-byte Q2_K super-block: scales[16]
// at 0 (sub-block i/16 of 16: scale in the low nibble, min in the high),
// qs[64] at 16, f16 d at 80, f16 dmin at 82. The 2-bit quant is bits
// 2k…2k+1, k = (i%128)/32, of qs[32·(i/128) + i%32].
func q2K(blk []byte, i int) float64 {
	s := blk[i/16]
	q := (blk[16+32*(i/128)+i%32] >> (2 * ((i % 128) / 32))) & 3
	d := half(blk[80:]) * float32(s&15)
	m := half(blk[82:]) * float32(s>>4)
	return float64(d*float32(q) - m)
}
