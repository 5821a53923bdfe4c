//go:build amd64

package cpu

import (
	"encoding/binary"

	"golang.org/x/sys/cpu"
)

// hasAMX: the CPU has AMX-TILE and AMX-INT8 (CPUID leaf 7 EDX bits 24, 25)
// besides AVX-512 VNNI, and the OS granted the tile state (amxPermit).
var hasAMX = hasVNNI && cpu.X86.HasAMXTile && cpu.X86.HasAMXInt8 && amxPermit()

// vq8amx computes, for ng ≤ 4 groups of 16 activation rows (xt, xd: the
// groups of q8acts.t and q8acts.td; q8acts.tc is not read) and the m ≤ 16 Q8_0 weight rows at
// w[j·stride:], dst[i·ld+j] = the product of activation row i (of the
// 16·ng: group i/16, row i%16) with weight row j, for lo ≤ i < hi only, in
// the amx path's order (q8.go):
//
//	acc = fma(float32(Σ_{i<32} w_i·q_i), round32(d_w·d_x), acc) over blocks in order, from +0
//
// For each block, TDPBSSD (int8×int8 → int32) of the m weight rows' 32
// quants (A: m rows × 32 bytes, loaded in place from the weights, stride
// apart) with the block's 8 dwords of the 16 activation rows (B: 8 rows of
// 64 bytes, q8acts.t) gives the m×16 exact block sums, stored to a 1 KB
// slot; the float steps read them with the 16 activation rows in a
// register's lanes, one accumulator register a weight row, while the tile
// unit computes the next block's sums into the other slot; each weight
// row's 16 outputs are scattered down its column (VSCATTERDPS, the rows
// outside [lo, hi) masked). Each block step prefetches 544 bytes of the
// next call's weight rows (the m·stride bytes after these) into L2, in
// memory order: sixteen rows read a block at a time are too short a
// stream for the hardware prefetchers (Intel Xeon family 6 model 167, 8
// layers d=768 Q8_0, 16 sequences decoded together: 943–957 → 1,099–1,131
// tok/s; into L1 1,059–1,087). A column of the tile depends on its
// activation row only, so a row's result is the same whatever the group,
// the batch, m and ng.
//
// The tile configuration is loaded and the tiles released (TILERELEASE)
// within the one assembly call: no tile state outlives it, whichever OS
// thread the goroutine runs on next.
func vq8amx(w []byte, stride, m, nb int, xt []int8, xd []float32, _ []int32, ng int, dst []float32, ld, lo, hi int, s *amxScratch) {
	if m < 1 || m > q8amxRows || ng < 1 || ng > 4 || nb < 1 || stride < nb*34 ||
		len(w) < (m-1)*stride+nb*34 || len(xt) < ng*16*nb*32 || len(xd) < ng*16*nb ||
		nb > q8amxMaxBlocks || lo < 0 || hi > 16*ng || lo >= hi || ld < m || 64*ld >= 1<<31 || len(dst) < (hi-1)*ld+m {
		panic("kernels/cpu: q8amx arguments")
	}
	s.dw = growAny(s.dw, 16*q8amxMaxBlocks)
	var idx [16]int32
	for r := range idx {
		idx[r] = int32(4 * r * ld)
	}
	var masks [4]uint32
	for i := lo; i < hi; i++ {
		masks[i/16] |= 1 << (i % 16)
	}
	// Palette 1: tmm0 the block sums (m rows of 16 int32), tmm4 the
	// weights (m rows of 32 bytes), tmm6 the activations (8 rows of 64
	// bytes).
	cfg := s.b[:64]
	clear(cfg)
	cfg[0] = 1
	for _, t := range [...]struct{ tmm, colsb, rows int }{{0, 64, m}, {4, 32, m}, {6, 64, 8}} {
		binary.LittleEndian.PutUint16(cfg[16+2*t.tmm:], uint16(t.colsb))
		cfg[48+t.tmm] = byte(t.rows)
	}
	q8amxTile(&w[0], stride, nb, &xt[0], &xd[0], ng, &dst[0], &s.b[0], m, &s.dw[0], &idx[0], &masks[0], 64*ld)
}

//go:noescape
func q8amxTile(w *byte, stride, nb int, xt *int8, xd *float32, ng int, dst *float32, scr *byte, m int, dw *float32, idx *int32, masks *uint32, ld16 int)

// vq8rowsBlk sets out[i] to the product of one activation row (xq, its
// −128·Σq lanes xc, xd) with the weight row at w[i·stride:], in the amx
// order with vq8amx's bits, the rows one after the other in one call: the
// decode kernel of the amx path (a tile of 16 activation rows would
// compute 15 padding rows).
func vq8rowsBlk(xq []int8, xc []int32, xd []float32, w []byte, stride int, out []float32) {
	nb, rows := len(xd), len(out)
	if rows == 0 {
		return
	}
	if nb == 0 || stride < nb*34 {
		panic("kernels/cpu: q8rowsBlk arguments")
	}
	xq, xc = xq[:nb*32], xc[:nb*8]
	w = w[:(rows-1)*stride+nb*34]
	q8rowsBlk(&xq[0], &xc[0], &xd[0], &w[0], stride, nb, rows, &out[0], q8Prefetch)
}

//go:noescape
func q8rowsBlk(xq *int8, xc *int32, xd *float32, w *byte, stride, nb, rows int, out *float32, pf int)
