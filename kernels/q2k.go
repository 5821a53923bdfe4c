package kernels

import (
	"encoding/binary"
	"math"
)

// Q2_K (ggml's block_q2_K, 84 bytes per 256 elements):
//
//	scales[16] (per 16-element sub-block: 4-bit scale low, 4-bit min high),
//	qs[64] (2-bit quants), f16 d, f16 dmin.
//
// Element i has sub-block i/16 and quant (qs[32·(i/128) + i%32] >> (2·((i%128)/32))) & 3;
// x = d·sc·q − dmin·m.

// DequantizeQ2KBlock decodes one 84-byte Q2_K super-block into 256 floats,
// exactly as ggml's dequantize_row_q2_K.
func DequantizeQ2KBlock(y []float32, blk []byte) {
	scales := blk[0:16]
	q := blk[16:80]
	d := F16ToF32(binary.LittleEndian.Uint16(blk[80:]))
	dmin := F16ToF32(binary.LittleEndian.Uint16(blk[82:]))
	is := 0
	for n := 0; n < 256; n += 128 {
		shift := 0
		for j := 0; j < 4; j++ {
			for h := 0; h < 2; h++ {
				sc := scales[is]
				is++
				dl, ml := d*float32(sc&0xF), dmin*float32(sc>>4)
				out := y[n+32*j+16*h : n+32*j+16*h+16]
				for l := range out {
					out[l] = dl*float32((q[16*h+l]>>shift)&3) - ml
				}
			}
			shift += 2
		}
		q = q[32:]
	}
}

// quantizeQ2KBlock encodes 256 floats as a Q2_K super-block with a min/max
// search per 16-element sub-block (q in 0…3, 4-bit scales and mins): a
// valid block of the layout, not llama.cpp's error-minimising one.
func quantizeQ2KBlock(blk []byte, x []float32) {
	var scale, mins [16]float32
	var maxScale, maxMin float32
	for j := 0; j < 16; j++ {
		lo, hi := minMax(x[j*16 : j*16+16])
		lo = min(lo, 0)
		scale[j], mins[j] = (hi-lo)/3, -lo
		maxScale, maxMin = max(maxScale, scale[j]), max(maxMin, mins[j])
	}
	d, dmin := F16ToF32(F32ToF16(maxScale/15)), F16ToF32(F32ToF16(maxMin/15))
	var sc, mn [16]uint8
	for j := 0; j < 16; j++ {
		if d > 0 {
			sc[j] = uint8(min(15, math.Ceil(float64(scale[j]/d))))
		}
		if dmin > 0 {
			mn[j] = uint8(min(15, math.Round(float64(mins[j]/dmin))))
		}
		blk[j] = sc[j] | mn[j]<<4
	}
	q := blk[16:80]
	clear(q)
	for i := 0; i < 256; i++ {
		j := i / 16
		ds, ms := d*float32(sc[j]), dmin*float32(mn[j])
		var v int
		if ds > 0 {
			v = int(math.Round(float64((x[i] + ms) / ds)))
		}
		v = max(0, min(3, v))
		q[32*(i/128)+i%32] |= uint8(v) << (2 * ((i % 128) / 32))
	}
	binary.LittleEndian.PutUint16(blk[80:], F32ToF16(d))
	binary.LittleEndian.PutUint16(blk[82:], F32ToF16(dmin))
}
