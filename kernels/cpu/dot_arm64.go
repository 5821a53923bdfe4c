//go:build arm64

package cpu

import (
	"golang.org/x/sys/cpu"

	"github.com/cloison/cloison/kernels"
)

// The neon path on arm64 (dot_arm64.s). Its fixed reduction order per
// output element of a float product (F32, and F16/BF16 weights converted
// in registers with FCVTL or a 16-bit shift, exactly f16tab's and bf16's
// values; n the reduction length):
//
//	lane[l] = fma(x[i], w[i], lane[l]) for i ≡ l (mod 4), i < n&^3, ascending
//	s = (l0+l1)+(l2+l3)   (FADDP twice)
//	s += round32(x[i]·w[i]) for the tail i ≥ n&^3, ascending
//
// identical in every kernel of the path: dot1x4, the one-row products (the
// four-row kernel on one row), the 4×4 prefill tile (tile4NEON: sixteen
// accumulators, each one element's lanes) and dot2x3 (the tile on two
// rows), so a row's result is the same in any batch. axpy is the generic
// Go code (no fused multiply-add), so attention's value sums have the
// generic path's bits.
//
// Q8_0 multiplies int8 by int8 on activations quantized to Q8 blocks
// (q8.go). Each block's integer Σ w·q (exact) is one int32 per row; the
// four rows of a call are the four lanes of one vector:
//
//	s_r = fma(float32(Σ_j w_j·q_j), round32(d_w·d_x), s_r) over blocks, ascending
//
// with SDOT where the CPU has ASIMDDP (q8dot4SDOT), else SMULL/SADALP
// (q8dot4NEON): the same integers, so the same bits. Q4_0 (one row per
// call, q40dot*) has the same order with q−8 unpacked from the nibbles:
//
//	s = fma(float32(Σ_j (q_j−8)·xq_j), round32(d_w·d_x), s) over blocks, ascending
//
// Q4_K and Q6_K: see nq4ki1x1 and nq6ki1x1 (one row per call, the
// sub-block integers in assembly, the scales in Go).

var (
	hasNEON = cpu.ARM64.HasASIMD && cpu.ARM64.HasFP
	hasSDOT = hasNEON && cpu.ARM64.HasASIMDDP
)

// vectorSets are the vector paths this CPU runs, slowest first.
var vectorSets = func() []*kset {
	if !hasNEON {
		return nil
	}
	return []*kset{neonSet(hasSDOT)}
}()

// neonSet returns the neon path's kernels, Q8_0 with SDOT when sdot.
func neonSet(sdot bool) *kset {
	k := &kset{
		path:   NEON,
		dot1x4: ndot1x4,
		f16dot1x4: func(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32) {
			return nhalf1x4(false, x, w0, w1, w2, w3)
		},
		bf16dot1x4: func(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32) {
			return nhalf1x4(true, x, w0, w1, w2, w3)
		},
		axpy4:    axpy4Go,
		axpy1:    axpy1Go,
		halfRow:  nhalfRow,
		tile:     ntile,
		tileRows: 4,
	}
	k.q4ki1x1 = func(xq []int8, xd []float32, bs []int16, w []byte) float32 { return nq4ki1x1(sdot, xq, xd, bs, w) }
	k.q6ki1x1 = func(xq []int8, xd []float32, _ []int16, w []byte) float32 { return nq6ki1x1(sdot, xq, xd, w) }
	k.q40i1x1 = func(xq []int8, xd []float32, w []byte) float32 { return nq40i1x1(sdot, xq, xd, w) }
	if sdot {
		k.q8i1x4 = func(xq []int8, xd []float32, w0, w1, w2, w3 []byte) (float32, float32, float32, float32) {
			return nq8i1x4(true, xq, xd, w0, w1, w2, w3)
		}
	} else {
		k.q8i1x4 = func(xq []int8, xd []float32, w0, w1, w2, w3 []byte) (float32, float32, float32, float32) {
			return nq8i1x4(false, xq, xd, w0, w1, w2, w3)
		}
	}
	k.dot2x3 = func(x0, x1, w0, w1, w2 []float32) (a0, a1, a2, b0, b1, b2 float32) {
		xs, ws := [4][]float32{x0, x1, x1, x1}, [4][]float32{w0, w1, w2, w2}
		var out [16]float32
		ntile(&xs, &ws, &out)
		return out[0], out[1], out[2], out[4], out[5], out[6]
	}
	// One-row products run the four-row kernel on the same row four times:
	// the same order, and rare (block tails, attention tails).
	k.dot1x1 = func(x, w []float32) float32 { s, _, _, _ := k.dot1x4(x, w, w, w, w); return s }
	k.f16dot1x1 = func(x []float32, w []uint16) float32 { s, _, _, _ := k.f16dot1x4(x, w, w, w, w); return s }
	k.bf16dot1x1 = func(x []float32, w []uint16) float32 { s, _, _, _ := k.bf16dot1x4(x, w, w, w, w); return s }
	k.q8i1x1 = func(xq []int8, xd []float32, w []byte) float32 { s, _, _, _ := k.q8i1x4(xq, xd, w, w, w, w); return s }
	return k
}

func ndot1x4(x, w0, w1, w2, w3 []float32) (s0, s1, s2, s3 float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	nv := n &^ 3
	var out [4]float32
	if nv > 0 {
		dot4NEON(&x[0], &w0[0], &w1[0], &w2[0], &w3[0], nv, &out)
	}
	s0, s1, s2, s3 = out[0], out[1], out[2], out[3]
	for i := nv; i < n; i++ {
		v := x[i]
		s0 += float32(v * w0[i])
		s1 += float32(v * w1[i])
		s2 += float32(v * w2[i])
		s3 += float32(v * w3[i])
	}
	return
}

// ntile sets out[4i+j] to the product of x[i] and w[j] with ndot1x4's bits.
func ntile(x *[4][]float32, w *[4][]float32, out *[16]float32) {
	n := len(x[0])
	var xs, ws [4][]float32
	var xp, wp [4]*float32
	for i := range 4 {
		xs[i], ws[i] = x[i][:n], w[i][:n]
	}
	nv := n &^ 3
	if nv > 0 {
		for i := range 4 {
			xp[i], wp[i] = &xs[i][0], &ws[i][0]
		}
		tile4NEON(&xp, &wp, nv, out)
	} else {
		*out = [16]float32{}
	}
	for i := range 4 {
		for j := range 4 {
			s := out[4*i+j]
			for e := nv; e < n; e++ {
				s += float32(xs[i][e] * ws[j][e])
			}
			out[4*i+j] = s
		}
	}
}

// nhalf1x4 is ndot1x4 on F16 (bf false) or BF16 weights converted in
// registers.
func nhalf1x4(bf bool, x []float32, w0, w1, w2, w3 []uint16) (s0, s1, s2, s3 float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	nv := n &^ 3
	var out [4]float32
	if nv > 0 {
		if bf {
			bf16dot4NEON(&x[0], &w0[0], &w1[0], &w2[0], &w3[0], nv, &out)
		} else {
			f16dot4NEON(&x[0], &w0[0], &w1[0], &w2[0], &w3[0], nv, &out)
		}
	}
	return halfTail4(bf, x, w0, w1, w2, w3, nv, out)
}

// nhalfRow sets dst[i] to the float32 of src[i] (bf: BF16, else F16).
func nhalfRow(bf bool, dst []float32, src []uint16) {
	n := len(src)
	dst = dst[:n]
	nv := n &^ 7
	if nv > 0 {
		if bf {
			bf16rowNEON(&dst[0], &src[0], nv)
		} else {
			f16rowNEON(&dst[0], &src[0], nv)
		}
	}
	for i := nv; i < n; i++ {
		if bf {
			dst[i] = bf16(src[i])
		} else {
			dst[i] = f16tab[src[i]]
		}
	}
}

// nq8i1x4 is the Q8_0 product of quantized activations (q8.go) with four
// weight rows; sdot picks SDOT (same integers, same bits).
func nq8i1x4(sdot bool, xq []int8, xd []float32, w0, w1, w2, w3 []byte) (s0, s1, s2, s3 float32) {
	nb := len(xd)
	if nb == 0 {
		return
	}
	xq = xq[:nb*32]
	w0, w1, w2, w3 = w0[:nb*34], w1[:nb*34], w2[:nb*34], w3[:nb*34]
	var out [4]float32
	if sdot {
		q8dot4SDOT(&xq[0], &xd[0], &w0[0], &w1[0], &w2[0], &w3[0], nb, &out)
	} else {
		q8dot4NEON(&xq[0], &xd[0], &w0[0], &w1[0], &w2[0], &w3[0], nb, &out)
	}
	return out[0], out[1], out[2], out[3]
}

// nq40i1x1 is the Q4_0 product of quantized activations (Q8 blocks) with
// one weight row; sdot picks SDOT (same integers, same bits).
func nq40i1x1(sdot bool, xq []int8, xd []float32, w []byte) float32 {
	nb := len(xd)
	if nb == 0 {
		return 0
	}
	xq, w = xq[:nb*32], w[:nb*18]
	var out float32
	if sdot {
		q40dotSDOT(&xq[0], &xd[0], &w[0], nb, &out)
	} else {
		q40dotNEON(&xq[0], &xd[0], &w[0], nb, &out)
	}
	return out
}

// nq4ki1x1 is the Q4_K product of activations quantized to Q8_K blocks
// (kquant.go) with one weight row: per super-block the integer sums of its
// eight sub-blocks (q4ksub*: SDOT or SMULL/SADALP, the same integers),
// isum = Σ sc_j·sum_j and msum = Σ m_j·(its 32 activations' sum) exact,
// then
//
//	s += round32(float32(isum)·round32(d·d_x)); s −= round32(float32(msum)·round32(dmin·d_x))
//
// over super-blocks in order.
func nq4ki1x1(sdot bool, xq []int8, xd []float32, bs []int16, w []byte) (s float32) {
	nb := len(xd)
	xq, bs, w = xq[:nb*256], bs[:nb*16], w[:nb*144]
	var sums [8]int32
	for b := range nb {
		blk := w[b*144 : b*144+144]
		if sdot {
			q4ksubSDOT(&xq[b*256], &blk[16], &sums)
		} else {
			q4ksubNEON(&xq[b*256], &blk[16], &sums)
		}
		var isum, msum int32
		for j := range 8 {
			sc, m := kernels.Q4KScaleMin(j, blk[4:16])
			isum += int32(sc) * sums[j]
			msum += int32(m) * (int32(bs[b*16+2*j]) + int32(bs[b*16+2*j+1]))
		}
		d := f16tab[uint16(blk[0])|uint16(blk[1])<<8]
		dmin := f16tab[uint16(blk[2])|uint16(blk[3])<<8]
		s += float32(float32(isum) * float32(d*xd[b]))
		s -= float32(float32(msum) * float32(dmin*xd[b]))
	}
	return s
}

// nq6ki1x1 is the Q6_K product of activations quantized to Q8_K blocks
// with one weight row: per super-block the integer sums of its sixteen
// 16-value sub-blocks (q6ksub*, q−32 unpacked from ql and qh; SDOT or
// SMULL/SADALP, the same integers), isum = Σ sc_k·sum_k exact, then
//
//	s += round32(float32(isum)·round32(d·d_x))
//
// over super-blocks in order.
func nq6ki1x1(sdot bool, xq []int8, xd []float32, w []byte) (s float32) {
	nb := len(xd)
	xq, w = xq[:nb*256], w[:nb*210]
	var sums [16]int32
	for b := range nb {
		blk := w[b*210 : b*210+210]
		if sdot {
			q6ksubSDOT(&xq[b*256], &blk[0], &blk[128], &sums)
		} else {
			q6ksubNEON(&xq[b*256], &blk[0], &blk[128], &sums)
		}
		var isum int32
		for k, v := range sums {
			isum += int32(int8(blk[192+k])) * v
		}
		d := f16tab[uint16(blk[208])|uint16(blk[209])<<8]
		s += float32(float32(isum) * float32(d*xd[b]))
	}
	return s
}

// Assembly kernels (dot_arm64.s). n is a multiple of 4 (8 for the row
// conversions), nb a number of Q8 blocks.

//go:noescape
func dot4NEON(x, w0, w1, w2, w3 *float32, n int, out *[4]float32)

//go:noescape
func f16dot4NEON(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)

//go:noescape
func bf16dot4NEON(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)

//go:noescape
func tile4NEON(x *[4]*float32, w *[4]*float32, n int, out *[16]float32)

//go:noescape
func f16rowNEON(dst *float32, src *uint16, n int)

//go:noescape
func bf16rowNEON(dst *float32, src *uint16, n int)

//go:noescape
func q8dot4SDOT(xq *int8, xd *float32, w0, w1, w2, w3 *byte, nb int, out *[4]float32)

//go:noescape
func q8dot4NEON(xq *int8, xd *float32, w0, w1, w2, w3 *byte, nb int, out *[4]float32)

//go:noescape
func q40dotSDOT(xq *int8, xd *float32, w *byte, nb int, out *float32)

//go:noescape
func q40dotNEON(xq *int8, xd *float32, w *byte, nb int, out *float32)

//go:noescape
func q4ksubSDOT(xq *int8, qs *byte, out *[8]int32)

//go:noescape
func q4ksubNEON(xq *int8, qs *byte, out *[8]int32)

//go:noescape
func q6ksubSDOT(xq *int8, ql, qh *byte, out *[16]int32)

//go:noescape
func q6ksubNEON(xq *int8, ql, qh *byte, out *[16]int32)
