//go:build amd64

package cpu

import (
	"encoding/binary"
	"sync"
	"unsafe"

	"golang.org/x/sys/cpu"
)

// hasAMXBF16: the amx path multiplies BF16 weights on AMX-BF16 tiles
// (TDPBF16PS), in the amx path's own BF16 order.
var hasAMXBF16 = hasAMX && hasBF16 && cpu.X86.HasAMXBF16

// The amx path's BF16 order. The activations are rounded to BF16 first
// (bf16Round, as the avx512 order does); each output element is then
//
//	C = +0; C = tdpbf16ps(C, x'[32kc:32kc+32], w[32kc:32kc+32]) for each whole 32-value chunk kc, in order
//	s = C; s += x'[i]·w[i] for the tail i ≥ n&^31, ascending (bf16dpTail)
//
// where tdpbf16ps is one element of the tile instruction: the hardware's
// own sum of a chunk's 32 exact products into the float32 accumulator. It
// is not any sequence of float32 roundings (on an Intel Xeon of family 6
// model 207 it matched none of even- or odd-first fused steps, pairs
// rounded once, chunks rounded once, or truncation: about half of random
// elements differ by an ulp or two from each), so there is no Go model of
// it; the tests hold it to the products' float64 sum within the
// conformance bound, and to itself: an element depends only on its two
// rows (the same bits in any tile row and column, with 1 or 16 activation
// columns, and any number of weight rows), which makes a row's result the
// same in a decode step (one activation column, the rows read in place)
// and in any prefill batch (16 columns a tile, packed below).

// bf16amxScratch is a task's tile configuration, packed activations and
// tile outputs.
type bf16amxScratch struct {
	cfg [64]byte
	h   []uint16  // activation rows rounded to BF16 (when not prepared)
	xp  []uint32  // up to 4 groups of 16 rounded activation rows, VNNI order
	out []float32 // the prefill tiles' outputs, 256 a (weight, activation) group pair
}

var bf16amxPool = sync.Pool{New: func() any { return new(bf16amxScratch) }}

// config sets palette 1: tmm0–3 m rows of n float32 (C), tmm4 m weight
// rows of 32 BF16 values (A), tmm5–6 16 pairs of n activation columns (B).
func (s *bf16amxScratch) config(m, n int) {
	c := &s.cfg
	clear(c[:])
	c[0] = 1
	set := func(t, colsb, rows int) {
		binary.LittleEndian.PutUint16(c[16+2*t:], uint16(colsb))
		c[48+t] = byte(rows)
	}
	for t := range 4 {
		set(t, 4*n, m)
	}
	set(4, 64, m)
	set(5, 4*n, 16)
	set(6, 4*n, 16)
}

// vbf16amxRows sets out[r] to the amx BF16 order's product of x with the
// r-th of the len(out) consecutive BF16 rows of w (len(x) values each):
// the decode kernel, one activation column, the weights read in place.
func vbf16amxRows(x []float32, w []uint16, out []float32) {
	s := bf16amxPool.Get().(*bf16amxScratch)
	s.h = growAny(s.h, len(x))
	vbf16RoundRow(s.h, x)
	bf16amxRows(s, s.h, x, w, out)
	bf16amxPool.Put(s)
}

// bf16amxRows is vbf16amxRows with x rounded to BF16 in h.
func bf16amxRows(s *bf16amxScratch, h []uint16, x []float32, w []uint16, out []float32) {
	n, rows := len(x), len(out)
	if rows == 0 {
		return
	}
	if len(h) < n || len(w) < rows*n || 2*n >= 1<<31 {
		panic("kernels/cpu: bf16amx rows arguments")
	}
	nk := n / 32
	if nk > 0 {
		weightGroups(rows, func(o, m, nwg int) {
			s.config(m, 1)
			bf16amxTile(&s.cfg[0], &w[o*n], 2*n, nwg, nk, (*uint32)(unsafe.Pointer(&h[0])), 1, 0, 4, &out[o], 0, 64)
		})
	} else {
		clear(out)
	}
	if nk*32 < n {
		for r := range rows {
			out[r] = bf16dpTail(out[r], x, w[r*n:(r+1)*n], nk*32)
		}
	}
}

// weightGroups calls fn for rows weight rows in tile calls: nwg whole
// groups of m = 16 rows from row o, then one group of the m < 16 left.
func weightGroups(rows int, fn func(o, m, nwg int)) {
	for o := 0; o < rows; {
		m, nwg := min(16, rows-o), 1
		if m == 16 {
			nwg = (rows - o) / 16
		}
		fn(o, m, nwg)
		o += nwg * m
	}
}

// vbf16amx1x4 is the amx BF16 order's product of x with four weight rows.
func vbf16amx1x4(x []float32, w0, w1, w2, w3 []uint16) (s0, s1, s2, s3 float32) {
	var out [4]float32
	for i, w := range [4][]uint16{w0, w1, w2, w3} {
		vbf16amxRows(x, w[:len(x)], out[i:i+1])
	}
	return out[0], out[1], out[2], out[3]
}

// vbf16amxPack writes rounded activation row r (h, cols values) into p,
// the layout vbf16amxBlock's tiles read: groups of 16 rows, each its whole
// chunks' pairs in the VNNI order, p[(g·16·pairs) + 16·q + r%16] = pair q
// of row r = 16g + r%16 (pairs = cols/32·16).
func vbf16amxPack(p []uint32, h []uint16, r, cols int) {
	pairs := cols / 32 * 16
	if pairs == 0 {
		return
	}
	src := unsafe.Slice((*uint32)(unsafe.Pointer(&h[0])), pairs)
	dst := p[r/16*16*pairs : (r/16+1)*16*pairs]
	for q, v := range src {
		dst[16*q+r%16] = v
	}
}

// vbf16amxBlock computes dst[r][o] for r in [r0,r1), o in [o0,o1) of a
// BF16 product in the amx BF16 order: one row on the decode kernel, more
// in tiles of 16 weight rows × 16 activation rows, the weights read in
// place, the activations rounded to BF16 and packed by vbf16amxPack (xa,
// once a product, else here four groups at a time; r0 is a multiple of
// 16).
func vbf16amxBlock(dst, x *tensor, xa *bf16Acts, m *matrix, r0, r1, o0, o1 int) {
	cols := m.cols
	w := m.u16[o0*cols : o1*cols]
	s := bf16amxPool.Get().(*bf16amxScratch)
	defer bf16amxPool.Put(s)
	xb := xa.rows()
	round := func(r int) []uint16 {
		if len(xb) >= (r+1)*cols {
			return xb[r*cols : (r+1)*cols]
		}
		h := s.h[(r-r0)*cols : (r-r0+1)*cols]
		vbf16RoundRow(h, x.row(r))
		return h
	}
	if len(xb) < r1*cols {
		s.h = growAny(s.h, (r1-r0)*cols)
	}
	if r1-r0 == 1 {
		bf16amxRows(s, round(r0), x.row(r0), w, dst.row(r0)[o0:o1])
		return
	}
	nk, rows := cols/32, o1-o0
	if nk == 0 {
		for r := r0; r < r1; r++ {
			or := dst.row(r)
			for o := o0; o < o1; o++ {
				or[o] = bf16dpTail(0, x.row(r), w[(o-o0)*cols:(o-o0+1)*cols], 0)
			}
		}
		return
	}
	if 2*cols >= 1<<31 || r0%16 != 0 {
		panic("kernels/cpu: bf16amx block arguments")
	}
	pairs := nk * 16 // a row's pairs in whole chunks
	packed := xa != nil && len(xa.p) >= (r1+15)/16*16*pairs
	if !packed {
		s.xp = growAny(s.xp, 4*16*pairs)
	}
	s.out = growAny(s.out, 4*256*((rows+15)/16))
	for a0 := r0; a0 < r1; a0 += 64 {
		a1 := min(r1, a0+64)
		ng := (a1 - a0 + 15) / 16
		xp := s.xp
		if packed {
			xp = xa.p[a0*pairs:]
		} else {
			clear(xp[(ng-1)*16*pairs : ng*16*pairs])
			for a := a0; a < a1; a++ {
				vbf16amxPack(xp, round(a), a-a0, cols)
			}
		}
		weightGroups(rows, func(o, mr, nwg int) {
			s.config(mr, 16)
			bf16amxTile(&s.cfg[0], &w[o*cols], 2*cols, nwg, nk, &xp[0], ng, 64*pairs, 64, &s.out[0], 1024, ng*1024)
			for wg := range nwg {
				for g := range ng {
					t := s.out[(wg*ng+g)*256:]
					for r := range min(16, a1-a0-16*g) {
						or := dst.row(a0 + 16*g + r)[o0+o+16*wg:]
						for j := range mr {
							or[j] = t[16*j+r]
						}
					}
				}
			}
		})
	}
	if nk*32 < cols {
		for r := r0; r < r1; r++ {
			xr, or := x.row(r), dst.row(r)
			for o := o0; o < o1; o++ {
				or[o] = bf16dpTail(or[o], xr, w[(o-o0)*cols:(o-o0+1)*cols], nk*32)
			}
		}
	}
}

//go:noescape
func bf16amxTile(cfg *byte, w *uint16, wstride, nwg, nk int, xp *uint32, ng, gstride, cx int, out *float32, ostep, wgstep int)
