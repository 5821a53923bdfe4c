package reference

import (
	"math"

	"github.com/cloison/cloison/kernels"
)

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

// q3K decodes element i (0…255) of a 110-byte Q3_K super-block: hmask[32]
// at 0, qs[64] at 32, scales[12] at 96, f16 d at 108. Sub-block s = i/16
// (sixteen of 16) has a 6-bit scale, biased by 32, whose low four bits are
// the low (s < 8) or high (s ≥ 8) nibble of scales[s%8] and whose top two
// bits are bits 2·(s/4)…2·(s/4)+1 of scales[8 + s%4]. The quant's low two
// bits are bits 2k…2k+1, k = (i%128)/32, of qs[32·(i/128) + i%32]; its
// third bit is bit i/32 of hmask[i%32], and a clear third bit subtracts 4:
// q in −4…3, x = (d·(sc−32))·q.
func q3K(blk []byte, i int) float64 {
	s := i / 16
	nib := blk[96+s%8] & 15
	if s >= 8 {
		nib = blk[96+s%8] >> 4
	}
	sc := int(nib) | int((blk[96+8+s%4]>>(2*(s/4)))&3)<<4
	q := int((blk[32+32*(i/128)+i%32] >> (2 * ((i % 128) / 32))) & 3)
	if (blk[i%32]>>(i/32))&1 == 0 {
		q -= 4
	}
	dl := half(blk[108:]) * float32(sc-32)
	return float64(dl * float32(q))
}

// mxfp4 decodes element j (0…31) of a 17-byte MXFP4 block: the E8M0 byte e
// at 0 is the scale 2^(e−127) and the nibble of element j (low nibble of
// qs[j] for j < 16, high nibble of qs[j−16] above) is an E2M1 number: bit 3
// the sign, bits 1–2 the exponent E, bit 0 the mantissa M, magnitude M/2
// for E = 0 (subnormal) and 2^(E−1)·(1 + M/2) otherwise. The product is
// exact in float64 and rounded to float32 (only the largest scales
// overflow to ±Inf there, as ggml's float32 product does).
func mxfp4(blk []byte, j int) float64 {
	nib := blk[1+j%16] & 15
	if j >= 16 {
		nib = blk[1+j%16] >> 4
	}
	e, m := int(nib>>1)&3, float64(nib&1)
	v := m / 2
	if e > 0 {
		v = math.Pow(2, float64(e-1)) * (1 + m/2)
	}
	if nib&8 != 0 && v != 0 {
		v = -v // ggml's integer table has no −0: nibble 8 is +0
	}
	return float64(float32(v * math.Pow(2, float64(int(blk[0])-127))))
}

// AttentionBias is Attention with the scores (q·k + bias(h, p))·scale for
// query head h and key position p (T5's relative-position bias; scale
// replaces 1/sqrt(head_dim)).
func AttentionBias(q []float64, keys, values [][]float64, qHeads, kvHeads, headDim int, scale float64, bias func(h, p int) float64) []float64 {
	out := make([]float64, qHeads*headDim)
	group := qHeads / kvHeads
	for h := range qHeads {
		kh := h / group
		scores := make([]float64, len(keys))
		for p := range keys {
			var s float64
			for d := range headDim {
				s += q[h*headDim+d] * keys[p][kh*headDim+d]
			}
			scores[p] = (s + bias(h, p)) * scale
		}
		w := Softmax(scores)
		for p := range values {
			for d := range headDim {
				out[h*headDim+d] += w[p] * values[p][kh*headDim+d]
			}
		}
	}
	return out
}
