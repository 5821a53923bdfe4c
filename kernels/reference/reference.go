// Package reference is the slow, obviously-correct float64 definition of every
// kernel in package kernels. It is the oracle of the conformance suite
// (kernels/kernelstest) and of the engine's reference forward pass: plain
// loops over [][]float64, one element at a time, in the order the formula is
// written, with no blocking, no threads and no shortcuts.
//
// Weight decoding is written here per element from the GGUF block layouts,
// independently of kernels.Dequantize and of any backend's decoder.
package reference

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/cloison/cloison/kernels"
)

// Dequant decodes a rows×cols GGUF weight matrix of type dt to float64. The
// value of every element is computed from its own bits with the formula of
// ggml's dequantize_row_* (in float32 where ggml rounds to float32, so the
// results are exactly ggml's).
func Dequant(dt kernels.DType, rows, cols int, data []byte) ([][]float64, error) {
	rb, err := dt.RowBytes(cols)
	if err != nil {
		return nil, err
	}
	if len(data) != rows*rb {
		return nil, fmt.Errorf("reference: %d×%d %v needs %d bytes, have %d", rows, cols, dt, rows*rb, len(data))
	}
	out := make([][]float64, rows)
	for r := range out {
		row := data[r*rb : (r+1)*rb]
		out[r] = make([]float64, cols)
		for e := range cols {
			out[r][e] = element(dt, row, e)
		}
	}
	return out, nil
}

func u16(b []byte) uint16 { return binary.LittleEndian.Uint16(b) }

func half(b []byte) float32 { return halfBits(u16(b)) }

// halfBits decodes IEEE binary16 by its definition.
func halfBits(h uint16) float32 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 31
	frac := float64(h & 0x3ff)
	switch exp {
	case 0:
		return float32(sign * frac / 1024 * math.Pow(2, -14))
	case 31:
		if frac == 0 {
			return float32(sign * math.Inf(1))
		}
		return float32(math.NaN())
	}
	return float32(sign * (1 + frac/1024) * math.Pow(2, float64(exp-15)))
}

func element(dt kernels.DType, row []byte, e int) float64 {
	switch dt {
	case kernels.F32:
		return float64(math.Float32frombits(binary.LittleEndian.Uint32(row[4*e:])))
	case kernels.F16:
		return float64(halfBits(u16(row[2*e:])))
	case kernels.BF16:
		return float64(math.Float32frombits(uint32(u16(row[2*e:])) << 16))
	case kernels.Q4_0:
		blk := row[(e/32)*18:]
		i := e % 32
		q := int(blk[2+i%16] & 15)
		if i >= 16 {
			q = int(blk[2+i%16] >> 4)
		}
		return float64(float32(q-8) * half(blk))
	case kernels.Q4_1, kernels.Q5_0, kernels.Q5_1:
		return legacy32(dt, row[(e/32)*dt.BlockBytes():], e%32)
	case kernels.Q8_0:
		blk := row[(e/32)*34:]
		return float64(float32(int8(blk[2+e%32])) * half(blk))
	case kernels.Q4_K:
		blk := row[(e/256)*144:]
		i := e % 256
		sub := i / 32 // 8 sub-blocks of 32
		sc, m := scaleMinK4(sub, blk[4:16])
		qb := blk[16+(sub/2)*32+i%32]
		q := qb & 15
		if sub%2 == 1 {
			q = qb >> 4
		}
		d := half(blk) * float32(sc)
		mm := half(blk[2:]) * float32(m)
		return float64(d*float32(q) - mm)
	case kernels.Q2_K:
		return q2K(row[(e/256)*84:], e%256)
	case kernels.Q3_K:
		return q3K(row[(e/256)*110:], e%256)
	case kernels.MXFP4:
		return mxfp4(row[(e/32)*17:], e%32)
	case kernels.Q5_K:
		return q5K(row[(e/256)*176:], e%256)
	case kernels.Q6_K:
		blk := row[(e/256)*210:]
		i := e % 256
		n, r := i/128, i%128 // half, then quarter of 32 within it
		quarter, l := r/32, r%32
		qlb := blk[n*64+l+32*(quarter%2)]
		lo := qlb & 15
		if quarter >= 2 {
			lo = qlb >> 4
		}
		hi := (blk[128+n*32+l] >> (2 * quarter)) & 3
		q := int(lo|hi<<4) - 32
		sc := int8(blk[192+i/16])
		return float64(half(blk[208:]) * float32(sc) * float32(q))
	}
	panic(fmt.Sprintf("reference: unsupported dtype %v", dt))
}

// scaleMinK4 unpacks the 6-bit scale and min of sub-block j of a Q4_K
// super-block: sub-blocks 0–3 keep them in the low 6 bits of bytes j and j+4;
// sub-blocks 4–7 keep their low 4 bits in byte j+4 (scale low nibble, min
// high nibble) and their top 2 bits in the top bits of bytes j−4 and j.
func scaleMinK4(j int, s []byte) (sc, m int) {
	if j < 4 {
		return int(s[j] & 63), int(s[j+4] & 63)
	}
	sc = int(s[j+4]&15) | int(s[j-4]>>6)<<4
	m = int(s[j+4]>>4) | int(s[j]>>6)<<4
	return sc, m
}

// MatMul returns x·wᵀ: out[r][o] = Σᵢ x[r][i]·w[o][i].
func MatMul(x, w [][]float64) [][]float64 {
	out := make([][]float64, len(x))
	for r := range x {
		out[r] = make([]float64, len(w))
		for o := range w {
			var s float64
			for i := range x[r] {
				s += x[r][i] * w[o][i]
			}
			out[r][o] = s
		}
	}
	return out
}

// Embed returns rows ids of w.
func Embed(w [][]float64, ids []int32) [][]float64 {
	out := make([][]float64, len(ids))
	for r, id := range ids {
		out[r] = append([]float64(nil), w[id]...)
	}
	return out
}

// RMSNorm returns x / sqrt(mean(x²) + eps) ⊙ w.
func RMSNorm(x, w []float64, eps float64) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * inv * w[i]
	}
	return out
}

// RoPE returns the row x (heads × p.HeadDim) rotated for position pos.
func RoPE(x []float64, pos int, p kernels.RoPE) []float64 {
	dims := p.Dims
	if dims == 0 {
		dims = p.HeadDim
	}
	scale := float64(p.Scale)
	if scale == 0 {
		scale = 1
	}
	out := append([]float64(nil), x...)
	for h := 0; h < len(x)/p.HeadDim; h++ {
		head := out[h*p.HeadDim : (h+1)*p.HeadDim]
		for i := 0; i < dims/2; i++ {
			theta := float64(pos) * scale * math.Pow(float64(p.Base), -2*float64(i)/float64(dims))
			if p.Factors != nil {
				theta /= float64(p.Factors[i])
			}
			a, b := 2*i, 2*i+1
			if p.NeoX {
				a, b = i, i+dims/2
			}
			x0, x1 := head[a], head[b]
			head[a] = x0*math.Cos(theta) - x1*math.Sin(theta)
			head[b] = x0*math.Sin(theta) + x1*math.Cos(theta)
		}
	}
	return out
}

// SiLU returns x·sigmoid(x).
func SiLU(x float64) float64 { return x / (1 + math.Exp(-x)) }

// Softmax returns exp(x−max) / Σ exp(x−max).
func Softmax(x []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	out := make([]float64, len(x))
	var s float64
	for i, v := range x {
		out[i] = math.Exp(v - m)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}

// Attention returns causal grouped-query attention for one query row q
// (qHeads × headDim) over keys and values (one row of kvHeads × headDim per
// position 0…len(keys)−1; the caller passes exactly the positions the query
// may see).
func Attention(q []float64, keys, values [][]float64, qHeads, kvHeads, headDim int) []float64 {
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
			scores[p] = s / math.Sqrt(float64(headDim))
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
