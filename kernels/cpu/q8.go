package cpu

import (
	"math"
	"slices"
	"sync"
	"unsafe"

	"github.com/cloison/cloison/kernels"
)

// Q8_0 products on the vector paths multiply int8 by int8, as llama.cpp's
// ggml_vec_dot_q8_0_q8_0 does: each activation row is quantized to Q8
// blocks first (d = max|x|/127 per 32 values, q = round-half-even(x/d)),
// then every block contributes its exact integer dot product Σ w·q, scaled
// by round32(d_w·d_x). Where the float steps go depends on the path:
//
//   - avx512 without VNNI (AVX2 instructions: VPMADDUBSW of |w| and
//     sign(w)·q then VPMADDWD with ones), the lanes' order:
//
//     lane[l] = fma(float32(Σ of the block's 4 products in lane l), round32(d_w·d_x), lane[l])
//
//     over blocks in order, lanes combined as hsum8 (dot_amd64.go); decode
//     runs a row kernel reading four rows a quarter of the task apart
//     (q8rowsAVX2), prefill 4×3 tiles that share each weight block's |w|
//     among four activation rows and take each pair's scale from a
//     register (q8tile4x3AVX2), the same bits.
//   - avx512 with VNNI, the quad order (q8blk_amd64.go): one step a block
//     on the block's exact sum, into one of four accumulators by the
//     block's index mod 4, (a0 + a1) + (a2 + a3) at the end; VPDPBUSD of
//     the weights biased to unsigned, w+128, from −128·Σq (q8Corr, q8acts.c
//     and tc); prefill and batches on a VNNI tile of 16 weight rows in the
//     lanes, decode on a row kernel.
//   - amx, the amx order (amx_amd64.go, doc.go): one step a block on its
//     exact sum, one accumulator,
//
//     acc = fma(float32(Σ_{i<32} w_i·q_i), round32(d_w·d_x), acc)
//
//     prefill on AMX tiles, decode on a VNNI row kernel.
//
// The avx2 path itself runs Q8_0 in the float order instead (kset.q8float:
// the weights dequantized exactly, the float kernels' lanes). Every Q8_0
// product of a row on a path, decode or prefill, goes the path's way, so a
// row's result never depends on the batch. The activation rounding costs
// at most Σ_blocks max|x_b|/254·Σ_b|w| — the term the conformance suite
// adds to the MatMul tolerance for Q8_0.

// q8acts holds the activation rows of a product quantized to Q8 blocks
// (q, d: for Q8_0 and Q4_0 weights) and to Q8_K blocks (k: for Q4_K and
// Q6_K weights), each only when a product of the job needs it.
type q8acts struct {
	q []int8    // rows × cols
	d []float32 // rows × cols/32
	// c: rows × cols/4, −128·Σ of every 4 consecutive q (the start of a
	// Q8 block's VPDPBUSD lanes), where the path's q8rows reads them
	// (kset.q8corr).
	c []int32
	// t, td: the rows in groups of 16 (the last padded), each group's q
	// transposed by dwords, dword k of row r at [16·cols·g + 64k + 4r],
	// and its scales at [16·nb·g + 16b + r], for the AMX tile (q8amx),
	// where the path has it and x has the tile's rows; tc: each block's
	// −128·Σq where td has its scale (the start of q8quadTile's sums; the
	// AMX tile does not read it).
	t  []int8
	td []float32
	tc []int32
	k  *q8kActs
	// kt, kd, kb: the Q8_K rows (k) in groups of 16 the same way, for the
	// AMX Q4_K tile (q4kamx), where the path has it: q transposed by
	// dwords, the scales at [16·nsb·g + 16b + r], and the 32-value sums
	// in pairs at [64·nsb·g + 64b + 16p + r] (q4kPairs).
	kt []int8
	kd []float32
	kb []int32

	// Pooled storage behind q, d and k.
	bq  []int8
	bd  []float32
	bc  []int32
	bt  []int8
	bd2 []float32
	btc []int32
	bk  q8kActs
	bkt []int8
	bkd []float32
	bkb []int32
}

var actsPool = sync.Pool{New: func() any { return new(q8acts) }}

// release returns a to the pool; a must not be used afterwards.
func (a *q8acts) release() {
	if a != nil {
		actsPool.Put(a)
	}
}

func growAny[T any](s []T, n int) []T {
	if cap(s) < n {
		return make([]T, n)
	}
	return s[:n]
}

// prepareQ8 quantizes x's rows when the backend's path multiplies block
// types in integers and a product in ps needs it; otherwise it returns nil.
func (b *Backend) prepareQ8(x *tensor, ps []product) *q8acts {
	if !b.k.intQ8() || x.cols%32 != 0 {
		return nil
	}
	q8 := slices.ContainsFunc(ps, func(p product) bool { return b.k.hasInt(p.m.dt) && needsQ8(p.m.dt) })
	q8k := x.cols%256 == 0 && slices.ContainsFunc(ps, func(p product) bool { return b.k.hasInt(p.m.dt) && needsQ8K(p.m.dt) })
	if !q8 && !q8k {
		return nil
	}
	// Buffers come from a pool (every element is overwritten below): a
	// prefill quantizes megabytes per product, which would otherwise keep
	// the garbage collector, and its preemption of the workers, busy.
	a := actsPool.Get().(*q8acts)
	nb := x.cols / 32
	a.q, a.d, a.c, a.t, a.td, a.tc, a.k = nil, nil, nil, nil, nil, nil, nil
	a.kt, a.kd, a.kb = nil, nil, nil
	if q8 {
		a.q, a.d = growAny(a.bq, x.rows*x.cols), growAny(a.bd, x.rows*nb)
		a.bq, a.bd = a.q, a.d
		if b.k.q8rows != nil && b.k.q8corr {
			a.c = growAny(a.bc, x.rows*x.cols/4)
			a.bc = a.c
		}
		if b.k.q8amx != nil && x.rows >= q8amxMinRows {
			// Only where a task can have the tile's rows (decode takes
			// q8rows). Padded rows of the last group are left as they
			// are: a column of the tile depends on its own row only.
			rp := (x.rows + 15) &^ 15
			a.t, a.td, a.tc = growAny(a.bt, rp*x.cols), growAny(a.bd2, rp*nb), growAny(a.btc, rp*nb)
			a.bt, a.bd2, a.btc = a.t, a.td, a.tc
		}
	}
	if q8k {
		k := &a.bk
		k.q, k.d, k.bs = growAny(k.q, x.rows*x.cols), growAny(k.d, x.rows*x.cols/256), growAny(k.bs, x.rows*x.cols/16)
		a.k = k
		if b.k.q4kamx != nil {
			rp := (x.rows + 15) &^ 15
			a.kt, a.kd, a.kb = growAny(a.bkt, rp*x.cols), growAny(a.bkd, rp*x.cols/256), growAny(a.bkb, rp*x.cols/64)
			a.bkt, a.bkd, a.bkb = a.kt, a.kd, a.kb
		}
	}
	b.eachRow(x.rows, x.cols, func(r int) {
		if q8 {
			q := a.q[r*x.cols : (r+1)*x.cols]
			quantizeRowQ8(q, a.d[r*nb:(r+1)*nb], x.row(r))
			if a.c != nil {
				q8Corr(a.c[r*x.cols/4:(r+1)*x.cols/4], q)
			}
			if a.t != nil {
				q8Transpose(a.t[r&^15*x.cols:], a.td[r&^15*nb:], r&15, q, a.d[r*nb:(r+1)*nb])
				q8BlockCorr(a.tc[r&^15*nb:], r&15, q)
			}
		}
		if k := a.k; k != nil {
			quantizeRowQ8K(k.q[r*x.cols:(r+1)*x.cols], k.d[r*x.cols/256:(r+1)*x.cols/256], k.bs[r*x.cols/16:(r+1)*x.cols/16], x.row(r))
			if a.kt != nil {
				nsb := x.cols / 256
				q8Transpose(a.kt[r&^15*x.cols:], a.kd[r&^15*nsb:], r&15, k.q[r*x.cols:(r+1)*x.cols], k.d[r*nsb:(r+1)*nsb])
				q4kPairs(a.kb[r&^15*x.cols/64:], r&15, k.bs[r*x.cols/16:(r+1)*x.cols/16])
			}
		}
	})
	return a
}

// quantizeRowQ8 quantizes x to Q8 blocks: q (len(x) values) and one scale d
// per 32 values.
func quantizeRowQ8(q []int8, d []float32, x []float32) {
	for b := range d {
		xb := (*[32]float32)(x[b*32 : b*32+32])
		// The maximum on |v|'s bits, as quantizeRowQ8K; Go's float max
		// where the block holds a NaN.
		var m uint32
		for _, v := range xb {
			m = max(m, math.Float32bits(v)&^(1<<31))
		}
		amax := math.Float32frombits(m)
		if m > 0x7f800000 {
			amax = 0
			for _, v := range xb {
				amax = max(amax, abs32(v))
			}
		}
		dd := amax / 127
		var id float32
		if dd != 0 {
			id = 1 / dd
		}
		d[b] = dd
		qb := (*[32]int8)(q[b*32 : b*32+32])
		for j, v := range xb {
			// Round to nearest even by the 1.5·2²³ trick (|v·id| ≤ 127):
			// two float32 additions instead of a call.
			const magic = 12582912
			r := float32(float32(v*id)+magic) - magic
			qb[j] = int8(max(-127, min(127, int32(r))))
		}
	}
}

// q8Corr sets c[i] = −128·(q[4i]+q[4i+1]+q[4i+2]+q[4i+3]): the start of
// the VPDPBUSD lanes of weights biased to unsigned (w+128), so that each
// lane ends at the exact Σ w·q of its 4 products.
func q8Corr(c []int32, q []int8) {
	for i := range c {
		c[i] = -128 * (int32(q[4*i]) + int32(q[4*i+1]) + int32(q[4*i+2]) + int32(q[4*i+3]))
	}
}

// q8BlockCorr sets c[16b+r] = −128·Σ of block b of q (one row, r < 16, of
// a group as q8Transpose lays it out).
func q8BlockCorr(c []int32, r int, q []int8) {
	c = c[:len(q)/2]
	for b := range len(q) / 32 {
		var s int32
		for _, v := range q[32*b : 32*b+32] {
			s += int32(v)
		}
		c[16*b+r] = -128 * s
	}
}

// q8Transpose writes row r (0 ≤ r < 16) of a group of 16 quantized rows
// into the group's transposed layout (q8acts.t, td): dword k of q at
// t[64k+4r:], scale b at td[16b+r].
func q8Transpose(t []int8, td []float32, r int, q []int8, d []float32) {
	t = t[:len(q)*16]
	for k := 0; k < len(q); k += 4 {
		*(*[4]int8)(t[16*k+4*r:]) = *(*[4]int8)(q[k:])
	}
	td = td[:len(d)*16]
	for b, v := range d {
		td[16*b+r] = v
	}
}

// packScratch holds a task's packed weight rows (q8blkPack).
type packScratch struct{ b []byte }

// aligned returns n bytes of s starting 64-byte aligned.
func (s *packScratch) aligned(n int) []byte {
	if cap(s.b) < n+64 {
		s.b = make([]byte, n+64)
	}
	b := s.b[:n+64]
	off := int(-uintptr(unsafe.Pointer(&b[0])) & 63)
	return b[off : off+n]
}

// The group tiles (q8amx: AMX's, avx512's VNNI tile): 16 activation rows
// × up to 16 weight rows.
const (
	q8amxRows    = 16
	q8amxScratch = 64 + 2*1024
	// q8amxMinRows: a task with fewer activation rows takes them one at a
	// time (q8rows) rather than in a padded 16-row tile (the same bits).
	q8amxMinRows = 4
	// q8amxMaxBlocks: longer rows (more than 32,768 values) take the row
	// kernel (q8rows), with the same bits, as do outputs of 2²⁵ columns or
	// more (AMX's tile scatters with 32-bit offsets).
	q8amxMaxBlocks = 1024
)

// amxScratch is a task's scratch for q8amx: the tile configuration and two
// slots of block sums (b, 64-byte aligned) and the weight rows' scales
// (dw: 16 rows of q8amxMaxBlocks) for AMX's tile, the packed weight rows
// (pk) for the quad order's.
type amxScratch struct {
	b  []byte
	dw []float32
	pk packScratch
}

var amxPool = sync.Pool{New: func() any {
	s := new(amxScratch)
	b := make([]byte, q8amxScratch+64)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & 63)
	s.b = b[off : off+q8amxScratch]
	return s
}}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) &^ (1 << 31)) }

// q8IntMul computes the block of outputs of a block-type product from
// quantized activations; it reports false (and does nothing) when acts is
// nil or lacks the quantization m's type needs.
func (k *kset) q8IntMul(dst *tensor, acts *q8acts, m *matrix, r0, r1, o0, o1 int) bool {
	if acts == nil || !k.hasInt(m.dt) {
		return false
	}
	cols := m.cols
	row := func(o int) []byte { return m.data[o*m.rowBytes : (o+1)*m.rowBytes] }
	switch {
	case m.dt == kernels.Q8_0 && acts.q != nil:
		nb := cols / 32
		r := r0
		if k.q8amx != nil && (r1-r0 < q8amxMinRows || nb > q8amxMaxBlocks || int64(dst.cols) >= 1<<25) {
			// Decode on a path with a group tile (amx, avx512 with
			// VNNI): one activation row at a time, the task's weight rows
			// in one sequential stream (q8rowsBlk, q8quadRows), with the
			// bits of the tile.
			for ; r < r1; r++ {
				k.q8rows(acts.q[r*cols:(r+1)*cols], acts.c[r*cols/4:(r+1)*cols/4], acts.d[r*nb:(r+1)*nb],
					m.data[o0*m.rowBytes:o1*m.rowBytes], m.rowBytes, dst.row(r)[o0:o1])
			}
			return true
		}
		if k.q8amx != nil {
			// Prefill and batches on the group tile: groups of 16
			// activation rows (the last padded; only the task's rows
			// kept) × up to 16 weight rows a call, 4 groups at a time.
			s := amxPool.Get().(*amxScratch)
			for o := o0; o < o1; o += q8amxRows {
				mm := min(q8amxRows, o1-o)
				for g0 := r0 &^ (q8amxRows - 1); g0 < r1; g0 += 4 * q8amxRows {
					ng := min(4, (r1-g0+q8amxRows-1)/q8amxRows)
					lo, hi := max(r0-g0, 0), min(r1-g0, 4*q8amxRows)
					k.q8amx(m.data[o*m.rowBytes:(o+mm)*m.rowBytes], m.rowBytes, mm, nb,
						acts.t[g0*cols:], acts.td[g0*nb:], acts.tc[g0*nb:], ng, dst.data[g0*dst.cols+o:], dst.cols, lo, hi, s)
				}
			}
			amxPool.Put(s)
			return true
		}
		if k.q8tile4xn != nil && r1-r0 >= 4 {
			// Tiles of 4 activation rows × the task's weight rows (a
			// multiple of the tile's width in one call, the rest one by
			// one).
			for ; r+4 <= r1; r += 4 {
				w := m.data[o0*m.rowBytes : o1*m.rowBytes]
				out := dst.data[r*dst.cols+o0:]
				n := k.q8tile4xn(acts.q[r*cols:], cols, acts.d[r*nb:], nb, nb, w, m.rowBytes, o1-o0, out, dst.cols)
				for o := o0 + n; o < o1; o++ {
					for i := range 4 {
						dst.row(r + i)[o] = k.q8i1x1(acts.q[(r+i)*cols:(r+i+1)*cols], acts.d[(r+i)*nb:(r+i+1)*nb], row(o))
					}
				}
			}
		}
		for ; r < r1; r++ {
			xq, xd := acts.q[r*cols:(r+1)*cols], acts.d[r*nb:(r+1)*nb]
			out := dst.row(r)
			o := o0
			if k.q8rows != nil && (acts.c != nil || !k.q8corr) {
				// Every row of the block in one call, one after the
				// other: one sequential weight stream.
				var xc []int32
				if acts.c != nil {
					xc = acts.c[r*cols/4 : (r+1)*cols/4]
				}
				k.q8rows(xq, xc, xd, m.data[o0*m.rowBytes:o1*m.rowBytes], m.rowBytes, out[o0:o1])
				continue
			}
			for ; o+4 <= o1; o += 4 {
				out[o], out[o+1], out[o+2], out[o+3] = k.q8i1x4(xq, xd, row(o), row(o+1), row(o+2), row(o+3))
			}
			for ; o < o1; o++ {
				out[o] = k.q8i1x1(xq, xd, row(o))
			}
		}
	case m.dt == kernels.Q4_0 && acts.q != nil:
		nb := cols / 32
		for r := r0; r < r1; r++ {
			xq, xd := acts.q[r*cols:(r+1)*cols], acts.d[r*nb:(r+1)*nb]
			out := dst.row(r)
			for o := o0; o < o1; o++ {
				out[o] = k.q40i1x1(xq, xd, row(o))
			}
		}
	case needsQ8K(m.dt) && acts.k != nil:
		a, nb := acts.k, cols/256
		dot, rows := k.q4ki1x1, k.q4krows
		if m.dt == kernels.Q6_K {
			dot, rows = k.q6ki1x1, k.q6krows
		}
		q4x := m.interleaved()
		for r := r0; r < r1; r++ {
			xq, xd, bs := a.q[r*cols:(r+1)*cols], a.d[r*nb:(r+1)*nb], a.bs[r*cols/16:(r+1)*cols/16]
			out := dst.row(r)
			if q4x != nil && k.q4krowsX != nil {
				// The interleaved copy's groups, the rows around them
				// (a task not starting at a multiple of 4, the matrix's
				// last rows%4) in place: the same bits.
				if g0, g1 := (o0+3)&^3, o1&^3; g1 > g0 {
					rows(xq, xd, bs, m.data[o0*m.rowBytes:g0*m.rowBytes], out[o0:g0])
					k.q4krowsX(xq, xd, bs, q4x[g0*m.rowBytes:g1*m.rowBytes], out[g0:g1])
					rows(xq, xd, bs, m.data[g1*m.rowBytes:o1*m.rowBytes], out[g1:o1])
					continue
				}
			}
			if rows != nil {
				// Every weight row of the block in one call.
				rows(xq, xd, bs, m.data[o0*m.rowBytes:o1*m.rowBytes], out[o0:o1])
				continue
			}
			for o := o0; o < o1; o++ {
				out[o] = dot(xq, xd, bs, row(o))
			}
		}
	default:
		return false
	}
	return true
}
