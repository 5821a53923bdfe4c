package kernels

import (
	"encoding/binary"
	"fmt"
	"math"
)

// DType is a weight storage type, numbered as GGML's ggml_type (and so as the
// type field of a GGUF tensor info). Block layouts are GGUF's, byte for byte.
type DType uint32

// Supported types. Other GGML types exist; Valid reports false for them.
const (
	F32  DType = 0  // little-endian float32
	F16  DType = 1  // little-endian IEEE half
	Q4_0 DType = 2  // 32-element blocks: f16 scale d, 16 bytes of 4-bit q; x = (q−8)·d
	Q4_1 DType = 3  // 32-element blocks: f16 d, f16 m, 16 bytes of 4-bit q; x = q·d + m (20 bytes; legacy.go)
	Q5_0 DType = 6  // 32-element blocks: f16 d, 4 bytes of fifth bits, 16 bytes of low nibbles; x = (q−16)·d (22 bytes)
	Q5_1 DType = 7  // 32-element blocks: f16 d, f16 m, fifth bits, low nibbles; x = q·d + m (24 bytes)
	Q8_0 DType = 8  // 32-element blocks: f16 scale d, 32 int8 q; x = q·d (34 bytes)
	Q2_K DType = 10 // 256-element super-blocks: 16 bytes of 4-bit scale/min pairs, 64 bytes of 2-bit q, f16 d, f16 dmin (84 bytes; q2k.go)
	Q3_K DType = 11 // 256-element super-blocks: 32 bytes of third bits, 64 bytes of 2-bit q, 12 bytes of 6-bit scales, f16 d (110 bytes; q3k.go)
	Q4_K DType = 12 // 256-element super-blocks: f16 d, f16 dmin, 12 bytes of 6-bit scales/mins, 128 bytes of 4-bit q (144 bytes)
	Q5_K DType = 13 // as Q4_K plus 32 bytes of fifth bits before the low nibbles (176 bytes; q5k.go)
	Q6_K DType = 14 // 256-element super-blocks: 128 bytes low 4 bits, 64 bytes high 2 bits, 16 int8 scales, f16 d (210 bytes)
	BF16 DType = 30 // little-endian bfloat16 (upper half of a float32)
	// MXFP4: 32-element blocks: an E8M0 scale byte, 16 bytes of 4-bit E2M1
	// values (17 bytes; mxfp4.go). gpt-oss files carry their experts in it.
	MXFP4 DType = 39
)

var dtypeInfo = map[DType]struct {
	name       string
	block      int // elements per block
	blockBytes int
}{
	F32:   {"F32", 1, 4},
	F16:   {"F16", 1, 2},
	Q4_0:  {"Q4_0", 32, 18},
	Q4_1:  {"Q4_1", 32, 20},
	Q5_0:  {"Q5_0", 32, 22},
	Q5_1:  {"Q5_1", 32, 24},
	Q8_0:  {"Q8_0", 32, 34},
	Q2_K:  {"Q2_K", 256, 84},
	Q3_K:  {"Q3_K", 256, 110},
	Q4_K:  {"Q4_K", 256, 144},
	Q5_K:  {"Q5_K", 256, 176},
	Q6_K:  {"Q6_K", 256, 210},
	BF16:  {"BF16", 1, 2},
	MXFP4: {"MXFP4", 32, 17},
}

// DTypes lists the supported types in GGML order.
func DTypes() []DType {
	return []DType{F32, F16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, BF16, MXFP4}
}

func (d DType) String() string {
	if i, ok := dtypeInfo[d]; ok {
		return i.name
	}
	return fmt.Sprintf("DType(%d)", uint32(d))
}

// Valid reports whether d is a supported type.
func (d DType) Valid() bool { _, ok := dtypeInfo[d]; return ok }

// BlockSize returns the number of elements per block (1 for float types, 0
// for an unsupported type).
func (d DType) BlockSize() int { return dtypeInfo[d].block }

// BlockBytes returns the bytes per block (0 for an unsupported type).
func (d DType) BlockBytes() int { return dtypeInfo[d].blockBytes }

// RowBytes returns the bytes of a row of n elements. It returns an ErrShape
// error if d is unsupported or n is not a positive multiple of the block size.
func (d DType) RowBytes(n int) (int, error) {
	i, ok := dtypeInfo[d]
	if !ok {
		return 0, fmt.Errorf("%w: unsupported dtype %v", ErrShape, d)
	}
	if n <= 0 || n%i.block != 0 {
		return 0, fmt.Errorf("%w: %d elements is not a positive multiple of the %v block size %d", ErrShape, n, d, i.block)
	}
	return n / i.block * i.blockBytes, nil
}

// Dequantize decodes len(dst) elements of type d from src into dst. len(dst)
// must be a multiple of the block size and src exactly RowBytes(len(dst))
// long. It is the host-side reference decoder; backends have their own.
func Dequantize(dst []float32, d DType, src []byte) error {
	rb, err := d.RowBytes(len(dst))
	if err != nil {
		return err
	}
	if len(src) != rb {
		return fmt.Errorf("%w: %d %v elements need %d bytes, have %d", ErrShape, len(dst), d, rb, len(src))
	}
	le := binary.LittleEndian
	switch d {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(le.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = F16ToF32(le.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = BF16ToF32(le.Uint16(src[2*i:]))
		}
	case Q4_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*18 : b*18+18]
			s := F16ToF32(le.Uint16(blk))
			for j := 0; j < 16; j++ {
				dst[b*32+j] = float32(int(blk[2+j]&15)-8) * s
				dst[b*32+16+j] = float32(int(blk[2+j]>>4)-8) * s
			}
		}
	case Q8_0:
		for b := 0; b < len(dst)/32; b++ {
			blk := src[b*34 : b*34+34]
			s := F16ToF32(le.Uint16(blk))
			for j := 0; j < 32; j++ {
				dst[b*32+j] = float32(int8(blk[2+j])) * s
			}
		}
	case Q4_K:
		for b := 0; b < len(dst)/256; b++ {
			DequantizeQ4KBlock(dst[b*256:b*256+256], src[b*144:b*144+144])
		}
	case Q4_1:
		for b := 0; b < len(dst)/32; b++ {
			dequantizeQ4_1Block(dst[b*32:b*32+32], src[b*20:b*20+20])
		}
	case Q5_0:
		for b := 0; b < len(dst)/32; b++ {
			dequantizeQ5_0Block(dst[b*32:b*32+32], src[b*22:b*22+22])
		}
	case Q5_1:
		for b := 0; b < len(dst)/32; b++ {
			dequantizeQ5_1Block(dst[b*32:b*32+32], src[b*24:b*24+24])
		}
	case Q2_K:
		for b := 0; b < len(dst)/256; b++ {
			DequantizeQ2KBlock(dst[b*256:b*256+256], src[b*84:b*84+84])
		}
	case Q3_K:
		for b := 0; b < len(dst)/256; b++ {
			DequantizeQ3KBlock(dst[b*256:b*256+256], src[b*110:b*110+110])
		}
	case MXFP4:
		for b := 0; b < len(dst)/32; b++ {
			DequantizeMXFP4Block(dst[b*32:b*32+32], src[b*17:b*17+17])
		}
	case Q5_K:
		for b := 0; b < len(dst)/256; b++ {
			DequantizeQ5KBlock(dst[b*256:b*256+256], src[b*176:b*176+176])
		}
	case Q6_K:
		for b := 0; b < len(dst)/256; b++ {
			DequantizeQ6KBlock(dst[b*256:b*256+256], src[b*210:b*210+210])
		}
	}
	return nil
}

// Q4KScaleMin returns the 6-bit scale and min of sub-block j (0…7) of a Q4_K
// super-block from its 12 packed scale bytes (ggml's get_scale_min_k4).
func Q4KScaleMin(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return (q[j+4] & 0xF) | ((q[j-4] >> 6) << 4), (q[j+4] >> 4) | ((q[j] >> 6) << 4)
}

// DequantizeQ4KBlock decodes one 144-byte Q4_K super-block into 256 floats,
// exactly as ggml's dequantize_row_q4_K.
func DequantizeQ4KBlock(y []float32, blk []byte) {
	d := F16ToF32(binary.LittleEndian.Uint16(blk))
	dmin := F16ToF32(binary.LittleEndian.Uint16(blk[2:]))
	scales := blk[4:16]
	q := blk[16:144]
	is := 0
	for j := 0; j < 256; j += 64 {
		sc, m := Q4KScaleMin(is, scales)
		d1, m1 := d*float32(sc), dmin*float32(m)
		sc, m = Q4KScaleMin(is+1, scales)
		d2, m2 := d*float32(sc), dmin*float32(m)
		for l := 0; l < 32; l++ {
			y[j+l] = d1*float32(q[l]&0xF) - m1
			y[j+32+l] = d2*float32(q[l]>>4) - m2
		}
		q = q[32:]
		is += 2
	}
}

// DequantizeQ6KBlock decodes one 210-byte Q6_K super-block into 256 floats,
// exactly as ggml's dequantize_row_q6_K.
func DequantizeQ6KBlock(y []float32, blk []byte) {
	ql := blk[0:128]
	qh := blk[128:192]
	sc := blk[192:208]
	d := F16ToF32(binary.LittleEndian.Uint16(blk[208:]))
	for n := 0; n < 256; n += 128 {
		for l := 0; l < 32; l++ {
			is := l / 16
			q1 := int8((ql[l]&0xF)|((qh[l]>>0)&3)<<4) - 32
			q2 := int8((ql[l+32]&0xF)|((qh[l]>>2)&3)<<4) - 32
			q3 := int8((ql[l]>>4)|((qh[l]>>4)&3)<<4) - 32
			q4 := int8((ql[l+32]>>4)|((qh[l]>>6)&3)<<4) - 32
			y[n+l] = d * float32(int8(sc[is])) * float32(q1)
			y[n+l+32] = d * float32(int8(sc[is+2])) * float32(q2)
			y[n+l+64] = d * float32(int8(sc[is+4])) * float32(q3)
			y[n+l+96] = d * float32(int8(sc[is+6])) * float32(q4)
		}
		ql = ql[64:]
		qh = qh[32:]
		sc = sc[8:]
	}
}

// Quantize encodes src (len a multiple of the block size) as type d, the way
// llama.cpp's reference quantizers do for F32, F16, BF16, Q4_0, Q4_1, Q5_0,
// Q5_1, Q8_0 and MXFP4. For Q2_K, Q3_K, Q4_K, Q5_K and Q6_K it uses a simple
// min/max (Q2_K, Q4_K, Q5_K) or absmax (Q3_K, Q6_K) search per sub-block:
// valid blocks of that layout, not llama.cpp's error-minimising ones.
func Quantize(d DType, src []float32) ([]byte, error) {
	rb, err := d.RowBytes(len(src))
	if err != nil {
		return nil, err
	}
	out := make([]byte, rb)
	le := binary.LittleEndian
	switch d {
	case F32:
		for i, v := range src {
			le.PutUint32(out[4*i:], math.Float32bits(v))
		}
	case F16:
		for i, v := range src {
			le.PutUint16(out[2*i:], F32ToF16(v))
		}
	case BF16:
		for i, v := range src {
			le.PutUint16(out[2*i:], F32ToBF16(v))
		}
	case Q4_0:
		for b := 0; b < len(src)/32; b++ {
			x := src[b*32 : b*32+32]
			blk := out[b*18 : b*18+18]
			var amax, maxv float32
			for _, v := range x {
				if a := abs32(v); a > amax {
					amax, maxv = a, v
				}
			}
			dd := maxv / -8
			var id float32
			if dd != 0 {
				id = 1 / dd
			}
			le.PutUint16(blk, F32ToF16(dd))
			for j := 0; j < 16; j++ {
				x0 := min(15, int(x[j]*id+8.5))
				x1 := min(15, int(x[16+j]*id+8.5))
				blk[2+j] = uint8(x0) | uint8(x1)<<4
			}
		}
	case Q8_0:
		for b := 0; b < len(src)/32; b++ {
			QuantizeQ8Block(out[b*34:b*34+34], src[b*32:b*32+32])
		}
	case Q4_K:
		for b := 0; b < len(src)/256; b++ {
			quantizeQ4KBlock(out[b*144:b*144+144], src[b*256:b*256+256])
		}
	case Q4_1:
		for b := 0; b < len(src)/32; b++ {
			quantizeQ4_1Block(out[b*20:b*20+20], src[b*32:b*32+32])
		}
	case Q5_0:
		for b := 0; b < len(src)/32; b++ {
			quantizeQ5_0Block(out[b*22:b*22+22], src[b*32:b*32+32])
		}
	case Q5_1:
		for b := 0; b < len(src)/32; b++ {
			quantizeQ5_1Block(out[b*24:b*24+24], src[b*32:b*32+32])
		}
	case Q2_K:
		for b := 0; b < len(src)/256; b++ {
			quantizeQ2KBlock(out[b*84:b*84+84], src[b*256:b*256+256])
		}
	case Q3_K:
		for b := 0; b < len(src)/256; b++ {
			quantizeQ3KBlock(out[b*110:b*110+110], src[b*256:b*256+256])
		}
	case MXFP4:
		for b := 0; b < len(src)/32; b++ {
			quantizeMXFP4Block(out[b*17:b*17+17], src[b*32:b*32+32])
		}
	case Q5_K:
		for b := 0; b < len(src)/256; b++ {
			quantizeQ5KBlock(out[b*176:b*176+176], src[b*256:b*256+256])
		}
	case Q6_K:
		for b := 0; b < len(src)/256; b++ {
			quantizeQ6KBlock(out[b*210:b*210+210], src[b*256:b*256+256])
		}
	}
	return out, nil
}

// QuantizeQ8Block encodes 32 floats into a 34-byte Q8_0 block as llama.cpp's
// quantize_row_q8_0_ref: d = amax/127, q = round(x/d) (half away from zero).
func QuantizeQ8Block(blk []byte, x []float32) {
	var amax float32
	for _, v := range x[:32] {
		amax = max(amax, abs32(v))
	}
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	binary.LittleEndian.PutUint16(blk, F32ToF16(d))
	for j := 0; j < 32; j++ {
		blk[2+j] = uint8(int8(math.Round(float64(x[j] * id))))
	}
}

func quantizeQ4KBlock(blk []byte, x []float32) {
	// Per 32-element sub-block j: x ≈ sc_j·d·q − m_j·dmin with q in 0…15,
	// sc_j and m_j 6-bit.
	var scale, mins [8]float32
	var maxScale, maxMin float32
	for j := 0; j < 8; j++ {
		lo, hi := x[j*32], x[j*32]
		for _, v := range x[j*32 : j*32+32] {
			lo, hi = min(lo, v), max(hi, v)
		}
		lo = min(lo, 0) // the min term is subtracted: keep it ≥ 0
		scale[j] = (hi - lo) / 15
		mins[j] = -lo
		maxScale, maxMin = max(maxScale, scale[j]), max(maxMin, mins[j])
	}
	d, dmin := maxScale/63, maxMin/63
	// Round d and dmin to f16 first so that the 6-bit codes fit what is stored.
	d, dmin = F16ToF32(F32ToF16(d)), F16ToF32(F32ToF16(dmin))
	var sc, mn [8]uint8
	for j := 0; j < 8; j++ {
		if d > 0 {
			sc[j] = uint8(min(63, math.Round(float64(scale[j]/d))))
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
	q := blk[16:144]
	for j := 0; j < 8; j++ {
		ds := d * float32(sc[j])
		ms := dmin * float32(mn[j])
		for l := 0; l < 32; l++ {
			var v int
			if ds > 0 {
				v = int(math.Round(float64((x[j*32+l] + ms) / ds)))
			}
			v = max(0, min(15, v))
			idx := (j/2)*32 + l
			if j%2 == 0 {
				q[idx] = q[idx]&0xF0 | uint8(v)
			} else {
				q[idx] = q[idx]&0x0F | uint8(v)<<4
			}
		}
	}
}

func quantizeQ6KBlock(blk []byte, x []float32) {
	// Per 16-element sub-block: x ≈ d·sc·(q−32), q in 0…63, sc int8.
	var scale [16]float32
	var amax float32
	for j := 0; j < 16; j++ {
		var a float32
		for _, v := range x[j*16 : j*16+16] {
			a = max(a, abs32(v))
		}
		scale[j] = a / 31
		amax = max(amax, scale[j])
	}
	d := F16ToF32(F32ToF16(amax / 127))
	var sc [16]int8
	for j := range sc {
		if d > 0 {
			sc[j] = int8(min(127, math.Round(float64(scale[j]/d))))
		}
	}
	ql, qh := blk[0:128], blk[128:192]
	clear(ql)
	clear(qh)
	for j := 0; j < 16; j++ {
		blk[192+j] = uint8(sc[j])
	}
	binary.LittleEndian.PutUint16(blk[208:], F32ToF16(d))
	for i := 0; i < 256; i++ {
		ds := d * float32(sc[i/16])
		q := 32
		if ds != 0 {
			q = max(0, min(63, int(math.Round(float64(x[i]/ds)))+32))
		}
		// Inverse of DequantizeQ6KBlock's indexing.
		n, r := i/128, i%128
		quarter, l := r/32, r%32
		lo, hi := uint8(q&0xF), uint8(q>>4)
		qlIdx := n*64 + l + 32*(quarter%2)
		if quarter < 2 {
			ql[qlIdx] |= lo
		} else {
			ql[qlIdx] |= lo << 4
		}
		qh[n*32+l] |= hi << (2 * quarter)
	}
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// F16ToF32 converts an IEEE half to float32 exactly.
func F16ToF32(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf, nan
		return math.Float32frombits(sign | 0xff<<23 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		// Subnormal half: normalise.
		e := uint32(127 - 15 + 1)
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}

// F32ToF16 converts float32 to the nearest IEEE half (ties to even);
// overflow gives ±Inf, NaN stays NaN.
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int(b>>23) & 0xff
	mant := b & 0x7fffff
	if exp == 0xff {
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	}
	e := exp - 127 + 15
	if e >= 0x1f {
		return sign | 0x7c00
	}
	if e <= 0 {
		if e < -10 {
			return sign
		}
		// Subnormal result: shift the mantissa with its implicit 1.
		m := mant | 0x800000
		shift := uint(14 - e)
		half := uint32(1) << (shift - 1)
		r := m >> shift
		rem := m & (1<<shift - 1)
		if rem > half || (rem == half && r&1 == 1) {
			r++
		}
		return sign | uint16(r)
	}
	r := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && r&1 == 1) {
		r++ // may carry into the exponent, up to Inf: correct
	}
	return sign | uint16(r)
}

// BF16ToF32 converts a bfloat16 to float32 exactly.
func BF16ToF32(h uint16) float32 { return math.Float32frombits(uint32(h) << 16) }

// F32ToBF16 converts float32 to the nearest bfloat16 (ties to even), as
// ggml's GGML_FP32_TO_BF16; NaN stays NaN.
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 {
		return uint16(b>>16) | 64
	}
	return uint16((b + (0x7fff + (b>>16)&1)) >> 16)
}
