package kernels

import (
	"encoding/binary"
	"math"
)

// Q5_K (ggml's block_q5_K, 176 bytes per 256 elements):
//
//	f16 d, f16 dmin, 12 bytes of 6-bit scales and mins packed as Q4_K's,
//	qh[32]: the fifth bits, qs[128]: the low four bits.
//
// Element l (0…31) of the 64-element chunk c (0…3) has low bits
// qs[32c+l]&15 (first half of the chunk, sub-block 2c) or qs[32c+l]>>4
// (second half, sub-block 2c+1) and fifth bit (qh[l]>>(2c))&1 or
// (qh[l]>>(2c+1))&1; x = d·sc·q − dmin·m with q in 0…31.

// DequantizeQ5KBlock decodes one 176-byte Q5_K super-block into 256 floats,
// exactly as ggml's dequantize_row_q5_K.
func DequantizeQ5KBlock(y []float32, blk []byte) {
	d := F16ToF32(binary.LittleEndian.Uint16(blk))
	dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
	scales := blk[4:16]
	qh := blk[16:48]
	ql := blk[48:176]
	is := 0
	u1, u2 := uint8(1), uint8(2)
	for j := 0; j < 256; j += 64 {
		sc, m := Q4KScaleMin(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = Q4KScaleMin(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := 0; l < 32; l++ {
			q := ql[l] & 0xF
			if qh[l]&u1 != 0 {
				q += 16
			}
			y[j+l] = d1*float32(q) - m1
		}
		for l := 0; l < 32; l++ {
			q := ql[l] >> 4
			if qh[l]&u2 != 0 {
				q += 16
			}
			y[j+32+l] = d2*float32(q) - m2
		}
		ql = ql[32:]
		is += 2
		u1 <<= 2
		u2 <<= 2
	}
}

// quantizeQ5KBlock encodes 256 floats as a Q5_K super-block with the same
// min/max search per 32-element sub-block as quantizeQ4KBlock (q in 0…31):
// a valid block of the layout, not llama.cpp's error-minimising one.
func quantizeQ5KBlock(blk []byte, x []float32) {
	var scale, mins [8]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		lo, hi := x[j*32], x[j*32]
		for _, v := range x[j*32 : j*32+32] {
			lo, hi = min(lo, v), max(hi, v)
		}
		lo = min(lo, 0)
		scale[j] = (hi - lo) / 31
		mins[j] = -lo
		maxScale, maxMin = max(maxScale, scale[j]), max(maxMin, mins[j])
	}
	d, dmin := F16ToF32(F32ToF16(maxScale/63)), F16ToF32(F32ToF16(maxMin/63))
	var sc, mn [8]uint8
	for j := 0; j < 8; j++ {
		if d > 0 {
			// Round up so that d·sc covers the sub-block's range.
			sc[j] = uint8(min(63, math.Ceil(float64(scale[j]/d))))
		}
		if dmin > 0 {
			mn[j] = uint8(min(63, math.Round(float64(mins[j]/dmin))))
		}
	}
	le := binary.LittleEndian
	le.PutUint16(blk, F32ToF16(d))
	le.PutUint16(blk[2:], F32ToF16(dmin))
	s := blk[4:16]
	for j := 0; j < 4; j++ {
		s[j] = sc[j] | (sc[j+4]>>4)<<6
		s[j+4] = mn[j] | (mn[j+4]>>4)<<6
		s[j+8] = sc[j+4]&0xF | (mn[j+4]&0xF)<<4
	}
	qh, ql := blk[16:48], blk[48:176]
	clear(qh)
	clear(ql)
	for j := 0; j < 8; j++ {
		ds := d * float32(sc[j])
		ms := dmin * float32(mn[j])
		for l := 0; l < 32; l++ {
			var v int
			if ds > 0 {
				v = int(math.Round(float64((x[j*32+l] + ms) / ds)))
			}
			v = max(0, min(31, v))
			idx := (j/2)*32 + l
			if j%2 == 0 {
				ql[idx] |= uint8(v & 15)
			} else {
				ql[idx] |= uint8(v&15) << 4
			}
			qh[l] |= uint8(v>>4) << j
		}
	}
}
