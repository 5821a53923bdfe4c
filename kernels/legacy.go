package kernels

import "encoding/binary"

// The further 32-element block types of ggml (ggml-common.h), element j of
// a block being x[j] (j < 16: low nibble of qs[j]; j ≥ 16: high nibble of
// qs[j−16]); the fifth bit of Q5_0 and Q5_1 is bit j of the little-endian
// uint32 qh:
//
//	Q4_1 (20 bytes): f16 d, f16 m, qs[16];        x = q·d + m, q in 0…15
//	Q5_0 (22 bytes): f16 d, qh[4], qs[16];        x = (q−16)·d, q in 0…31
//	Q5_1 (24 bytes): f16 d, f16 m, qh[4], qs[16]; x = q·d + m, q in 0…31
//
// Decoding is ggml's dequantize_row_q4_1/q5_0/q5_1 (float32 product, then
// sum); encoding is its quantize_row_*_ref.

func dequantizeQ4_1Block(y []float32, blk []byte) {
	d := F16ToF32(binary.LittleEndian.Uint16(blk))
	m := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
	for j := 0; j < 16; j++ {
		y[j] = float32(float32(blk[4+j]&15)*d) + m
		y[16+j] = float32(float32(blk[4+j]>>4)*d) + m
	}
}

func dequantizeQ5_0Block(y []float32, blk []byte) {
	d := F16ToF32(binary.LittleEndian.Uint16(blk))
	qh := binary.LittleEndian.Uint32(blk[2:])
	qs := blk[6:22]
	for j := 0; j < 16; j++ {
		x0 := int32(qs[j]&15) | int32(qh>>j&1)<<4
		x1 := int32(qs[j]>>4) | int32(qh>>(j+16)&1)<<4
		y[j] = float32(x0-16) * d
		y[16+j] = float32(x1-16) * d
	}
}

func dequantizeQ5_1Block(y []float32, blk []byte) {
	d := F16ToF32(binary.LittleEndian.Uint16(blk))
	m := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
	qh := binary.LittleEndian.Uint32(blk[4:])
	qs := blk[8:24]
	for j := 0; j < 16; j++ {
		x0 := uint32(qs[j]&15) | (qh>>j&1)<<4
		x1 := uint32(qs[j]>>4) | (qh>>(j+16)&1)<<4
		y[j] = float32(float32(x0)*d) + m
		y[16+j] = float32(float32(x1)*d) + m
	}
}

// minMax returns the smallest and largest of x.
func minMax(x []float32) (lo, hi float32) {
	lo, hi = x[0], x[0]
	for _, v := range x {
		lo, hi = min(lo, v), max(hi, v)
	}
	return lo, hi
}

func quantizeQ4_1Block(blk []byte, x []float32) {
	lo, hi := minMax(x[:32])
	d := (hi - lo) / 15
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(blk, F32ToF16(d))
	binary.LittleEndian.PutUint16(blk[2:], F32ToF16(lo))
	for j := 0; j < 16; j++ {
		x0 := min(15, int(float32((x[j]-lo)*id)+0.5))
		x1 := min(15, int(float32((x[16+j]-lo)*id)+0.5))
		blk[4+j] = uint8(x0) | uint8(x1)<<4
	}
}

func quantizeQ5_0Block(blk []byte, x []float32) {
	var amax, maxv float32
	for _, v := range x[:32] {
		if a := abs32(v); a > amax {
			amax, maxv = a, v
		}
	}
	d := maxv / -16
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(blk, F32ToF16(d))
	var qh uint32
	for j := 0; j < 16; j++ {
		x0 := min(31, int(float32(x[j]*id)+16.5))
		x1 := min(31, int(float32(x[16+j]*id)+16.5))
		blk[6+j] = uint8(x0&15) | uint8(x1&15)<<4
		qh |= uint32(x0>>4) << j
		qh |= uint32(x1>>4) << (j + 16)
	}
	binary.LittleEndian.PutUint32(blk[2:], qh)
}

func quantizeQ5_1Block(blk []byte, x []float32) {
	lo, hi := minMax(x[:32])
	d := (hi - lo) / 31
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(blk, F32ToF16(d))
	binary.LittleEndian.PutUint16(blk[2:], F32ToF16(lo))
	var qh uint32
	for j := 0; j < 16; j++ {
		// ggml truncates to uint8 without a clamp: (x−min)·id ≤ 31 + rounding.
		x0 := min(31, int(float32((x[j]-lo)*id)+0.5))
		x1 := min(31, int(float32((x[16+j]-lo)*id)+0.5))
		blk[8+j] = uint8(x0&15) | uint8(x1&15)<<4
		qh |= uint32(x0>>4) << j
		qh |= uint32(x1>>4) << (j + 16)
	}
	binary.LittleEndian.PutUint32(blk[4:], qh)
}
