//go:build amd64

package cpu

// The avx512 path's Q8_0 order where the CPU has AVX512_VNNI, the quad
// order: per output, each block's exact integer sum Σ w·q, one float step a
// block into one of four accumulators by the block's index mod 4, from +0,
// combined at the end:
//
//	a[b mod 4] = fma(float32(Σ_{i<32} w_i·q_i), round32(d_w·d_x), a[b mod 4]) over blocks in order
//	out = (a[0] + a[1]) + (a[2] + a[3])
//
// The amx order's single accumulator would make a row's decode a chain of
// one fused multiply-add a block (4 cycles each on Zen 4, longer than the
// rest of a block's work: 23 GB/s in cache against 29–37 with four
// chains); four chains in the decode kernel's lanes (q8quadRows) cost
// nothing, and the prefill tile keeps four accumulators a row.
//
// Prefill and batches (vq8quad): the m ≤ 16 weight rows are packed once a
// call (q8blkPack: per block, dword k of the 16 rows in the lanes of one
// zmm, biased to unsigned, and their scales), then each 4 activation rows
// of a group of q8acts.t (q8quadTile) start every block's sum at −128·Σx
// (q8acts.tc), add VPDPBUSD of the packed dword k with the row's dword k
// broadcast, and take the float step: 16 outputs a register, a row's
// result stored whole. Decode (vq8quadRows): the weight rows one after the
// other, eight blocks' sums a step. An output depends on its own
// activation row only, whatever the group, the batch, m and ng.

// vq8quad computes, for ng ≤ 4 groups of 16 activation rows (xt, xd, xc:
// the groups of q8acts.t, td and tc) and the m ≤ 16 Q8_0 weight rows at
// w[j·stride:], dst[i·ld+j] = the product of activation row i with weight
// row j in the quad order, for lo ≤ i < hi only (a padded row of the last
// group is computed and not stored).
func vq8quad(w []byte, stride, m, nb int, xt []int8, xd []float32, xc []int32, ng int, dst []float32, ld, lo, hi int, s *amxScratch) {
	if m < 1 || m > q8amxRows || ng < 1 || ng > 4 || nb < 1 || stride < nb*34 ||
		len(w) < (m-1)*stride+nb*34 || len(xt) < ng*16*nb*32 || len(xd) < ng*16*nb || len(xc) < ng*16*nb ||
		nb > q8amxMaxBlocks || lo < 0 || hi > 16*ng || lo >= hi || ld < m || len(dst) < (hi-1)*ld+m {
		panic("kernels/cpu: q8quad arguments")
	}
	pk := s.pk.aligned(nb * q8blkBytes)
	// Rows past m repeat row m−1 (their lanes are not stored).
	var offs [q8amxRows]int64
	for j := range offs {
		offs[j] = int64(min(j, m-1) * stride)
	}
	q8blkPack(&w[0], &offs[0], nb, &pk[0], q8amxRows*stride)
	cmask := 1<<m - 1
	for g := range ng {
		for h := 0; h < 16; h += 4 {
			i0 := 16*g + h
			rmask := 0
			for r := range 4 {
				if i := i0 + r; i >= lo && i < hi {
					rmask |= 1 << r
				}
			}
			if rmask != 0 {
				q8quadTile(&pk[0], nb, &xt[16*g*nb*32+4*h], &xd[16*g*nb+h], &xc[16*g*nb+h], &dst[i0*ld], 4*ld, rmask, cmask)
			}
		}
	}
}

// vq8quadRows sets out[i] to the product of one activation row (xq, its
// −128·Σq lanes xc, xd) with the weight row at w[i·stride:] in the quad
// order, with vq8quad's bits, the rows one after the other in one call:
// the decode kernel.
func vq8quadRows(xq []int8, xc []int32, xd []float32, w []byte, stride int, out []float32) {
	nb, rows := len(xd), len(out)
	if rows == 0 {
		return
	}
	if nb == 0 {
		clear(out)
		return
	}
	if stride < nb*34 {
		panic("kernels/cpu: q8quadRows arguments")
	}
	xq, xc = xq[:nb*32], xc[:nb*8]
	w = w[:(rows-1)*stride+nb*34]
	q8quadRows(&xq[0], &xc[0], &xd[0], &w[0], stride, nb, rows, &out[0], q8Prefetch)
}

// rows1x4 is a path's q8i1x4 (four weight rows anywhere) through its
// decode kernel, in its order (the amx path's and avx512's with VNNI,
// where no hot loop calls it: their products all go to the group tile or
// the row kernel).
func rows1x4(rows func(xq []int8, xc []int32, xd []float32, w []byte, stride int, out []float32)) func(xq []int8, xd []float32, w0, w1, w2, w3 []byte) (float32, float32, float32, float32) {
	return func(xq []int8, xd []float32, w0, w1, w2, w3 []byte) (float32, float32, float32, float32) {
		nb := len(xd)
		if nb == 0 {
			return 0, 0, 0, 0
		}
		xc := make([]int32, nb*8)
		q8Corr(xc, xq[:nb*32])
		var out [4]float32
		for i, w := range [4][]byte{w0, w1, w2, w3} {
			rows(xq, xc, xd, w[:nb*34], nb*34, out[i:i+1])
		}
		return out[0], out[1], out[2], out[3]
	}
}

// q8blkBytes is one block of 16 packed weight rows (q8blkPack): 8 dwords
// of 16 rows, 64 bytes each, then 16 float32 scales.
const q8blkBytes = 576

//go:noescape
func q8blkPack(w *byte, offs *int64, nb int, pk *byte, next int)

//go:noescape
func q8quadTile(pk *byte, nb int, xt *int8, xd *float32, xc *int32, dst *float32, ld4 int, rmask int, cmask int)

//go:noescape
func q8quadRows(xq *int8, xc *int32, xd *float32, w *byte, stride, nb, rows int, out *float32, pf int)
