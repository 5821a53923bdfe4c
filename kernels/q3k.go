package kernels

import (
	"encoding/binary"
	"math"
)

// Q3_K (ggml's block_q3_K, 110 bytes per 256 elements):
//
//	hmask[32] (the third bits), qs[64] (the low two bits), scales[12]
//	(sixteen 6-bit scales, biased by 32), f16 d.
//
// Element i has sub-block i/16, low bits (qs[32·(i/128) + i%32] >> (2·((i%128)/32))) & 3
// and third bit (hmask[i%32] >> (i/32)) & 1; q = low − 4 when the third bit
// is clear, else low (−4…3), and x = d·(sc−32)·q. Scale j has its low four
// bits in scales[j] (j < 8) or scales[j−8]>>4 (j ≥ 8) and its top two bits
// at bit 2·(j/4) of scales[8 + j%4].

// q3KScale returns the 6-bit scale of sub-block j (0…15), minus 32.
func q3KScale(j int, s []byte) int8 {
	lo := s[j%8]
	if j >= 8 {
		lo >>= 4
	}
	return int8(lo&0xF|((s[8+j%4]>>(2*(j/4)))&3)<<4) - 32
}

// DequantizeQ3KBlock decodes one 110-byte Q3_K super-block into 256 floats,
// exactly as ggml's dequantize_row_q3_K (d·(sc−32) rounded to float32, then
// times q).
func DequantizeQ3KBlock(y []float32, blk []byte) {
	hm, q, s := blk[0:32], blk[32:96], blk[96:108]
	d := F16ToF32(binary.LittleEndian.Uint16(blk[108:]))
	for i := 0; i < 256; i += 16 {
		dl := d * float32(q3KScale(i/16, s))
		shift := 2 * ((i % 128) / 32)
		bit := uint(i / 32)
		base := 32*(i/128) + i%32
		for l := 0; l < 16; l++ {
			v := int8((q[base+l] >> shift) & 3)
			if (hm[i%32+l]>>bit)&1 == 0 {
				v -= 4
			}
			y[i+l] = dl * float32(v)
		}
	}
}

// quantizeQ3KBlock encodes 256 floats as a Q3_K super-block: per 16-element
// sub-block the scale that maps its values onto −4…3 (absmax search), the
// sixteen scales as 6-bit multiples of d = max scale/31 (rounded up so that
// no value clips beyond the grid), q = round(x/(d·sc)). A valid block of the
// layout, not llama.cpp's error-minimising one.
func quantizeQ3KBlock(blk []byte, x []float32) {
	var scale [16]float32
	var maxScale float32
	for j := 0; j < 16; j++ {
		lo, hi := minMax(x[j*16 : j*16+16])
		scale[j] = max(hi/3, -lo/4)
		maxScale = max(maxScale, scale[j])
	}
	d := F16ToF32(F32ToF16(maxScale / 31))
	clear(blk)
	hm, q, s := blk[0:32], blk[32:96], blk[96:108]
	var sc [16]int
	for j := 0; j < 16; j++ {
		if d > 0 {
			sc[j] = int(min(31, math.Ceil(float64(scale[j]/d))))
		}
		l := uint8(sc[j] + 32)
		if j < 8 {
			s[j] |= l & 0xF
		} else {
			s[j-8] |= (l & 0xF) << 4
		}
		s[8+j%4] |= (l >> 4) << (2 * (j / 4))
	}
	for i := 0; i < 256; i++ {
		ds := d * float32(sc[i/16])
		v := 0
		if ds > 0 {
			v = max(-4, min(3, int(math.Round(float64(x[i]/ds)))))
		}
		v += 4 // 0…7: bit 2 is the stored third bit
		q[32*(i/128)+i%32] |= uint8(v&3) << (2 * ((i % 128) / 32))
		hm[i%32] |= uint8(v>>2) << (i / 32)
	}
	binary.LittleEndian.PutUint16(blk[108:], F32ToF16(d))
}
