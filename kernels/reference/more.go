package reference

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
