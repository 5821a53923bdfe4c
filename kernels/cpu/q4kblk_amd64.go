//go:build amd64

package cpu

// The avx2 path's Q4_K in the amx order (q4kblk_amd64.s; the order in
// q4kamx_amd64.go): where the CPU has no AVX512_VNNI, the same bits as the
// amx path's Q4_K on one machine.

// vq4kblk1 is q4ki1x1 in the amx order on avx2.
func vq4kblk1(xq []int8, xd []float32, bs []int16, w []byte) float32 {
	nb := len(xd)
	if nb == 0 {
		return 0
	}
	xq, bs, w = xq[:nb*256], bs[:nb*16], w[:nb*144]
	var out float32
	q4kblkAVX2(&xq[0], &xd[0], &bs[0], &w[0], nb, &out, kqPrefetchAVX2)
	return out
}

// vq4kblkRows is q4krows in the amx order on avx2: vq4kblk1 of each row,
// one after the other (the prefetch runs ahead into the next).
func vq4kblkRows(xq []int8, xd []float32, bs []int16, w []byte, out []float32) {
	nb := len(xd)
	if nb == 0 {
		clear(out)
		return
	}
	xq, bs, w = xq[:nb*256], bs[:nb*16], w[:len(out)*nb*144]
	for r := range out {
		q4kblkAVX2(&xq[0], &xd[0], &bs[0], &w[r*nb*144], nb, &out[r], kqPrefetchAVX2)
	}
}

// vq4kblk is q4kamx on avx2 (after vq4kvnniPack): for each of the ng
// groups of 16 activation rows and each weight row, the 16 products in one
// call (q4kblkTileAVX2), those of rows lo ≤ i < hi stored.
func vq4kblk(xt []int8, xd []float32, xb []int32, ng int, dst []float32, ld, lo, hi int, s *q4kamxScratchT) {
	m, nsb := s.m, s.nsb
	if m < 1 || m > q8amxRows || ng < 1 || ng > 4 || nsb < 1 || nsb > q4kamxMaxBlocks || len(s.w) != m*nsb*144 ||
		len(xt) < ng*16*nsb*256 || len(xd) < ng*16*nsb || len(xb) < ng*16*nsb*4 ||
		lo < 0 || hi > 16*ng || lo >= hi || ld < m || len(dst) < (hi-1)*ld+m || len(s.b) < 256 {
		panic("kernels/cpu: q4kblk arguments")
	}
	var out [16]float32
	for g := range ng {
		r0, r1 := max(lo-16*g, 0), min(hi-16*g, 16)
		if r0 >= r1 {
			continue
		}
		gt, gd, gb := xt[g*16*nsb*256:], xd[g*16*nsb:], xb[g*16*nsb*4:]
		for j := range m {
			q4kblkTileAVX2(&s.w[j*nsb*144], nsb, &s.scal[j*q4kvnniScalRow], &gt[0], &gd[0], &gb[0], &out, &s.b[0])
			for r := r0; r < r1; r++ {
				dst[(16*g+r)*ld+j] = out[r]
			}
		}
	}
}

//go:noescape
func q4kblkAVX2(xq *int8, xd *float32, bs *int16, w *byte, nb int, out *float32, pf int)

//go:noescape
func q4kblkTileAVX2(w *byte, nsb int, scal *byte, xt *int8, xd *float32, xb *int32, out *[16]float32, scr *byte)
