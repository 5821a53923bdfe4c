//go:build amd64

package cpu

import (
	"encoding/binary"

	"golang.org/x/sys/cpu"
)

// The amx order's Q4_K kernels (q4kamx_amd64.s): the amx path's, and the
// avx512 path's where the CPU has AVX512_VNNI. The order per output
// (kquant.go): per super-block b, from +0,
//
//	isum = Σ_{i<256} sc_{j(i)}·q_i·x_i, msum = Σ_{j<8} m_j·Σ_{i∈j} x_i (exact int32)
//	acc = fma(float32(isum), round32(d·d_x), acc)
//	acc = fma(−float32(msum), round32(dmin·d_x), acc)
//
// Prefill: q4kamxPack writes each sub-block's products sc·q (≤ 945) as two
// byte planes, low and high bytes, so that TDPBUSD (weights unsigned,
// activations signed) sums a whole super-block of them in two tiles, 64
// values a step: isum = lo + 256·hi, exact. msum comes from the
// activations' 32-value sums (q8acts.kb) with VPDPWSSD. Decode:
// q4krowsBlk, exact integer lanes (VPDPWSSD) summed per super-block,
// then the same two fused multiply-adds.

// vq4kamxPack repacks the m ≤ 16 consecutive Q4_K weight rows of w (nsb
// super-blocks each) into s for vq4kamx.
func vq4kamxPack(w []byte, m, nsb int, s *q4kamxScratchT) {
	if m < 1 || m > q8amxRows || nsb < 1 || nsb > q4kamxMaxBlocks || len(w) < m*nsb*144 {
		panic("kernels/cpu: q4kamx pack arguments")
	}
	s.pk = growAny(s.pk, m*nsb*512)
	s.m, s.nsb = m, nsb
	q4kamxPack(&w[0], m, nsb, &s.pk[0], &s.scal[0])
}

//go:noescape
func q4kamxPack(w *byte, m, nsb int, pk *byte, scal *byte)

// vq4kamx computes, for ng ≤ 4 groups of 16 activation rows (xt, xd, xb:
// the groups of q8acts.kt, kd and kb) and the weight rows packed in s
// (vq4kamxPack), dst[i·ld+j] = the product of activation row i (of the
// 16·ng) with weight row j, for lo ≤ i < hi only, in the amx order. Per
// super-block, TDPBUSD of the packed low and high product bytes (A: m rows
// × 64 bytes) with the 16 activation rows' dwords (B: 16 rows of 64
// bytes) sums isum's two parts in two tiles, stored to a 2 KB slot; the
// float steps read them with the 16 activation rows in a register's
// lanes, one accumulator a weight row, while the tile unit computes the
// next super-block into the other slot. A column of the tile depends on
// its activation row only. The tile configuration is loaded and released
// within the one assembly call.
func vq4kamx(xt []int8, xd []float32, xb []int32, ng int, dst []float32, ld, lo, hi int, s *q4kamxScratchT) {
	m, nsb := s.m, s.nsb
	if m < 1 || m > q8amxRows || ng < 1 || ng > 4 || nsb < 1 || nsb > q4kamxMaxBlocks || len(s.pk) < m*nsb*512 ||
		len(xt) < ng*16*nsb*256 || len(xd) < ng*16*nsb || len(xb) < ng*16*nsb*4 ||
		lo < 0 || hi > 16*ng || lo >= hi || ld < m || 64*ld >= 1<<31 || len(dst) < (hi-1)*ld+m {
		panic("kernels/cpu: q4kamx arguments")
	}
	var idx [16]int32
	for r := range idx {
		idx[r] = int32(4 * r * ld)
	}
	var masks [4]uint32
	for i := lo; i < hi; i++ {
		masks[i/16] |= 1 << (i % 16)
	}
	// Palette 1: tmm0, tmm1 the low and high sums (m rows of 16 int32),
	// tmm2, tmm3 the weights' low and high bytes (m rows of 64), tmm4 the
	// activations (16 rows of 64 bytes).
	cfg := s.b[:64]
	clear(cfg)
	cfg[0] = 1
	for _, t := range [...]struct{ tmm, colsb, rows int }{{0, 64, m}, {1, 64, m}, {2, 64, m}, {3, 64, m}, {4, 64, 16}} {
		binary.LittleEndian.PutUint16(cfg[16+2*t.tmm:], uint16(t.colsb))
		cfg[48+t.tmm] = byte(t.rows)
	}
	q4kamxTile(&s.pk[0], nsb*512, nsb, &s.scal[0], &xt[0], &xd[0], &xb[0], ng, &dst[0], &s.b[0], m, &idx[0], &masks[0], 64*ld)
}

//go:noescape
func q4kamxTile(pk *byte, pstride, nsb int, scal *byte, xt *int8, xd *float32, xb *int32, ng int, dst *float32, scr *byte, m int, idx *int32, masks *uint32, ld16 int)

// vq4kvnniPack prepares m ≤ 16 consecutive Q4_K weight rows of w (nsb
// super-blocks each) for vq4kvnni: their scalars into s (q4kvnniScal);
// the tile reads the rows themselves.
func vq4kvnniPack(w []byte, m, nsb int, s *q4kamxScratchT) {
	if m < 1 || m > q8amxRows || nsb < 1 || nsb > q4kamxMaxBlocks || len(w) < m*nsb*144 {
		panic("kernels/cpu: q4kvnni pack arguments")
	}
	s.w, s.m, s.nsb, s.x = w[:m*nsb*144], m, nsb, false
	q4kvnniScal(&w[0], m, nsb, &s.scal[0])
}

// vq4kvnni is vq4kamx on AVX512_VNNI (the avx512 path where the CPU has
// it): the same exact integer sums per super-block, from the Q4_K rows
// themselves (q4kvnniTile), the same float steps, the same bits.
func vq4kvnni(xt []int8, xd []float32, xb []int32, ng int, dst []float32, ld, lo, hi int, s *q4kamxScratchT) {
	m, nsb := s.m, s.nsb
	if m < 1 || m > q8amxRows || ng < 1 || ng > 4 || nsb < 1 || nsb > q4kamxMaxBlocks || len(s.w) != m*nsb*144 ||
		len(xt) < ng*16*nsb*256 || len(xd) < ng*16*nsb || len(xb) < ng*16*nsb*4 ||
		lo < 0 || hi > 16*ng || lo >= hi || ld < m || 64*ld >= 1<<31 || len(dst) < (hi-1)*ld+m {
		panic("kernels/cpu: q4kvnni arguments")
	}
	var idx [16]int32
	for r := range idx {
		idx[r] = int32(4 * r * ld)
	}
	var masks [4]uint32
	for i := lo; i < hi; i++ {
		masks[i/16] |= 1 << (i % 16)
	}
	if s.x {
		q4kvnniTileX(&s.w[0], nsb*144, nsb, &s.scal[0], &xt[0], &xd[0], &xb[0], ng, &dst[0], &s.b[0], m, &idx[0], &masks[0], 64*ld)
		return
	}
	q4kvnniTile(&s.w[0], nsb*144, nsb, &s.scal[0], &xt[0], &xd[0], &xb[0], ng, &dst[0], &s.b[0], m, &idx[0], &masks[0], 64*ld)
}

//go:noescape
func q4kvnniScal(w *byte, m, nsb int, scal *byte)

// vq4kvnniPackX is vq4kvnniPack for m (a multiple of 4) rows in the
// interleaved layout (q4kx.go: w their groups): vq4kvnni then reads them
// in place (q4kvnniTileX), the same bits.
func vq4kvnniPackX(w []byte, m, nsb int, s *q4kamxScratchT) {
	if m < 4 || m > q8amxRows || m%4 != 0 || nsb < 1 || nsb > q4kamxMaxBlocks || len(w) < m*nsb*144 {
		panic("kernels/cpu: q4kvnni interleaved pack arguments")
	}
	s.w, s.m, s.nsb, s.x = w[:m*nsb*144], m, nsb, true
	q4kvnniScalX(&w[0], m, nsb, &s.scal[0])
}

//go:noescape
func q4kvnniScalX(w *byte, m, nsb int, scal *byte)

//go:noescape
func q4kvnniTileX(w *byte, wstride, nsb int, scal *byte, xt *int8, xd *float32, xb *int32, ng int, dst *float32, scr *byte, m int, idx *int32, masks *uint32, ld16 int)

//go:noescape
func q4kvnniTile(w *byte, wstride, nsb int, scal *byte, xt *int8, xd *float32, xb *int32, ng int, dst *float32, scr *byte, m int, idx *int32, masks *uint32, ld16 int)

// vq4krowsBlk sets out[r] to the product of one activation row (xq, xd,
// bs: Q8_K) with the r-th of the len(out) consecutive Q4_K weight rows of
// w, in the amx order with vq4kamx's bits (the amx path's decode kernel).
func vq4krowsBlk(xq []int8, xd []float32, bs []int16, w []byte, out []float32) {
	nb, rows := len(xd), len(out)
	if rows == 0 {
		return
	}
	if nb == 0 {
		clear(out)
		return
	}
	if len(w) != rows*nb*144 {
		panic("kernels/cpu: q4k rows shapes")
	}
	xq, bs = xq[:nb*256], bs[:nb*16]
	if q4kFour && rows >= 4 {
		r4 := rows &^ 3
		q4krows4Blk(&xq[0], &xd[0], &bs[0], &w[0], nb, r4, &out[0])
		if r4 == rows {
			return
		}
		w, out, rows = w[r4*nb*144:], out[r4:], rows-r4
	}
	if hasVBMI {
		q4krowsPairBlk(&xq[0], &xd[0], &bs[0], &w[0], nb, rows, &out[0], kqPrefetch)
		return
	}
	q4krowsBlk(&xq[0], &xd[0], &bs[0], &w[0], nb, rows, &out[0], kqPrefetch)
}

// q4kFour: decode runs four rows at a time (q4krows4Blk, the same bits),
// the rest one at a time: on AMD Zen 4 (family 25 with AVX-512), where the
// one-row kernels are bound by their instructions (zmm at half width:
// 18–20 GB/s of Q4_K weights in cache and from memory) and the four-row
// kernel read 23–25 in cache and 24.7 from memory; 8 layers d=768 Q4_K
// decode at 1 thread 456 → 526–541 tok/s, at 2 threads 731 → 842, d=1536
// GQA 72 → 79–80 at 1 thread and about 5% less at 2 (both threads then
// share the memory bus, 100–115 against 95–106 tok/s; alternated). With
// the rows' bytes loaded whole and transposed by lanes, the high nibbles
// taken in place and one VPDPWSSD a chunk: 20–23 → 22–26 GB/s on 256
// rows of 1,536 and 18–22 → 19–25 on 1,536 rows of 8,960 (Zen 4, family
// 25 model 17, eight alternated rounds). Not measured elsewhere (Zen 5
// reads two interleaved rows slowly).
var q4kFour = hasVNNI && !isIntel && cpuFamily() == 25

//go:noescape
func q4krows4Blk(xq *int8, xd *float32, bs *int16, w *byte, nb, rows int, out *float32)

// hasVBMI: q4krowsPairBlk's VPERMB.
var hasVBMI = hasVNNI && cpu.X86.HasAVX512VBMI

//go:noescape
func q4krowsPairBlk(xq *int8, xd *float32, bs *int16, w *byte, nb int, rows int, out *float32, pf int)

//go:noescape
func q4krowsBlk(xq *int8, xd *float32, bs *int16, w *byte, nb int, rows int, out *float32, pf int)

// vq4kBlk1 is vq4krowsBlk for one weight row.
func vq4kBlk1(xq []int8, xd []float32, bs []int16, w []byte) float32 {
	var out [1]float32
	vq4krowsBlk(xq, xd, bs, w[:len(xd)*144], out[:])
	return out[0]
}

//go:noescape
func q4krows4X(xq *int8, xd *float32, bs *int16, w *byte, nb, groups int, out *float32)

// vq4krowsX is vq4krowsBlk for len(out) (a multiple of 4) weight rows
// interleaved four at a time (q4kInterleave's layout: w holds
// len(out)/4 groups): the same bits.
func vq4krowsX(xq []int8, xd []float32, bs []int16, w []byte, out []float32) {
	nb, rows := len(xd), len(out)
	if rows%4 != 0 || len(w) != rows*nb*144 {
		panic("kernels/cpu: q4k interleaved rows shapes")
	}
	if rows == 0 {
		return
	}
	if nb == 0 {
		clear(out)
		return
	}
	xq, bs = xq[:nb*256], bs[:nb*16]
	q4krows4X(&xq[0], &xd[0], &bs[0], &w[0], nb, rows/4, &out[0])
}

//go:noescape
func q4kDeint(dst, src *byte, groups, nb int)

// q4kDeintGroups copies the whole groups of src (the interleaved layout,
// nb super-blocks a row) back to their rows in dst, one after the other
// (q4kDeint).
var q4kDeintGroups = func(dst, src []byte, nb int) {
	n := len(src)
	if nb < 1 || n%(4*nb*144) != 0 || len(dst) != n {
		panic("kernels/cpu: q4k deinterleave shapes")
	}
	if n > 0 {
		q4kDeint(&dst[0], &src[0], n/(4*nb*144), nb)
	}
}
