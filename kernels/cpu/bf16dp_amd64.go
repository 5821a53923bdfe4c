//go:build amd64

package cpu

import (
	"sync"

	"golang.org/x/sys/cpu"
)

// hasBF16: the avx512 path multiplies BF16 weights in the BF16 order
// (bf16dp.go) with VDPBF16PS.
var hasBF16 = hasAVX512 && cpu.X86.HasAVX512BF16

// bf16Order: the avx512 path multiplies BF16 weights in the BF16 order
// where the CPU has AVX512_BF16, except on Intel CPUs, where VDPBF16PS
// runs at about half the float multiply-adds' rate and BF16 takes the
// float order (BF16 widened exactly, the F32 tiles on blocks converted
// once, decode in bf16rows2AVX512) as on CPUs without it: Xeon family 6
// model 207 (avx512, AMX hidden by its hypervisor), BenchmarkMatMul BF16
// 74 GFLOP/s against F16's 125; 8 layers d=768 BF16 prefill of 128 tokens
// at 1 thread 582–609 → 790–1,082 tok/s (llama-bench 533–544), d=1536
// GQA 89–95 → 98–106 (llama-bench 88–97), decode even. The amx path on
// AMX-BF16 keeps its own order (hasAMXBF16).
var bf16Order = hasBF16 && !isIntel

// setBF16Order makes the avx512 set k multiply BF16 weights in the BF16
// order (bf16dp.go): VDPBF16PS on activations rounded to BF16, as
// llama.cpp does.
func setBF16Order(k *kset) {
	k.bf16dot1x4, k.bf16rows, k.bf16block, k.bf16round = vbf16dp1x4, vbf16dpRows, vbf16Block, vbf16RoundRow
	k.bf16dot1x1 = func(x []float32, w []uint16) float32 { s, _, _, _ := vbf16dp1x4(x, w, w, w, w); return s }
}

// vbf16dpRows sets out[r] to the BF16-order product of x with the r-th of
// the len(out) consecutive BF16 rows of w (len(x) values each), the rows
// two streams at a time (bf16dpRowsAVX512), the tail in Go. x is rounded
// to BF16 once a call (the kernel rounded it again for every row pair: a
// third of its instructions), the same bits.
func vbf16dpRows(x []float32, w []uint16, out []float32) {
	n, rows := len(x), len(out)
	if rows == 0 {
		return
	}
	w = w[:rows*n]
	nv := n &^ 31
	if nv == 0 {
		for r := range rows {
			out[r] = bf16dpTail(0, x, w[r*n:(r+1)*n], 0)
		}
		return
	}
	hp := bf16RowPool.Get().(*[]uint16)
	h := growAny(*hp, nv)
	vbf16RoundRow(h, x[:nv])
	if nv == n {
		bf16dpRowsAVX512(&h[0], &w[0], n, rows, &out[0], rowPrefetch)
	} else {
		// The kernel needs whole steps: rows with a tail run one at a
		// time on their first nv values, the tail in Go.
		for r := range rows {
			out[r] = 0
			bf16dpRowsAVX512(&h[0], &w[r*n], nv, 1, &out[r], rowPrefetch)
			out[r] = bf16dpTail(out[r], x, w[r*n:(r+1)*n], nv)
		}
	}
	*hp = h
	bf16RowPool.Put(hp)
}

// rowPrefetch is how far ahead (bytes) the F16 and BF16 decode kernels'
// two streams prefetch (f16rows2AVX512, bf16dpRowsAVX512; the same bits):
// 4 KB on Intel and on AMD from Zen 5 on, where the two prefetched streams
// were measured; none on earlier AMD (Zen 4, family 25: 8 layers d=768
// BF16 decode at 1 thread 188–204 → 205–215 tok/s without it, alternated;
// F16 in dot_amd64.go), as Q8_0 there.
var rowPrefetch = func() int {
	if isIntel || zen5On {
		return 4096
	}
	return 0
}()

// bf16RowPool holds vbf16dpRows' rounded activation rows.
var bf16RowPool = sync.Pool{New: func() any { return new([]uint16) }}

// vbf16dp1x4 is the BF16 order's product of x with four weight rows.
func vbf16dp1x4(x []float32, w0, w1, w2, w3 []uint16) (s0, s1, s2, s3 float32) {
	var out [4]float32
	for i, w := range [4][]uint16{w0, w1, w2, w3} {
		vbf16dpRows(x, w[:len(x)], out[i:i+1])
	}
	return out[0], out[1], out[2], out[3]
}

// bf16Scratch holds a task's activation rows rounded to BF16.
type bf16Scratch struct{ h []uint16 }

var bf16Pool = sync.Pool{New: func() any { return new(bf16Scratch) }}

// vbf16RoundRow sets dst[i] = bf16Round(src[i]) (VCVTNEPS2BF16).
func vbf16RoundRow(dst []uint16, src []float32) {
	n := len(src)
	dst = dst[:n]
	if nv := n &^ 15; nv > 0 {
		bf16RoundAVX512(&dst[0], &src[0], nv)
	}
	for j := n &^ 15; j < n; j++ {
		dst[j] = bf16Round(src[j])
	}
}

// vbf16Block computes dst[r][o] for r in [r0,r1), o in [o0,o1) of a BF16
// product in the BF16 order: four activation rows (rounded to BF16: xb,
// else here) against the block's weight rows four at a time
// (bf16dp4xnAVX512, the weights read in place), the rest by rows; every
// element with vbf16dpRows' bits.
func vbf16Block(dst, x *tensor, xa *bf16Acts, m *matrix, r0, r1, o0, o1 int) {
	xb := xa.rows()
	cols := m.cols
	nv := cols &^ 31
	nw := (o1 - o0) &^ 3
	r := r0
	if r1-r0 >= 4 && nv > 0 && nw > 0 {
		var s *bf16Scratch
		if xb == nil {
			s = bf16Pool.Get().(*bf16Scratch)
			s.h = growAny(s.h, 4*cols)
		}
		w := m.u16[o0*cols : o1*cols]
		for ; r+4 <= r1; r += 4 {
			h := xb[min(len(xb), r*cols):]
			if s != nil {
				h = s.h
				for i := range 4 {
					vbf16RoundRow(h[i*cols:(i+1)*cols], x.row(r+i))
				}
			}
			h = h[:4*cols]
			out := dst.data[r*dst.cols+o0 : (r+3)*dst.cols+o1]
			bf16dp4xnAVX512(&h[0], &h[cols], &h[2*cols], &h[3*cols], &w[0], 2*cols, nw, nv, &out[0], 4*dst.cols)
			for i := range 4 {
				xr, or := x.row(r+i), dst.row(r+i)
				if nv < cols {
					for o := o0; o < o0+nw; o++ {
						or[o] = bf16dpTail(or[o], xr, w[(o-o0)*cols:(o-o0+1)*cols], nv)
					}
				}
				vbf16dpRows(xr, w[nw*cols:], or[o0+nw:o1])
			}
		}
		if s != nil {
			bf16Pool.Put(s)
		}
	}
	for ; r < r1; r++ {
		vbf16dpRows(x.row(r), m.u16[o0*cols:o1*cols], dst.row(r)[o0:o1])
	}
}

//go:noescape
func bf16dpRowsAVX512(x *uint16, w *uint16, n int, rows int, out *float32, pf int)

//go:noescape
func bf16RoundAVX512(dst *uint16, src *float32, n int)

//go:noescape
func bf16dp4xnAVX512(x0, x1, x2, x3, w *uint16, wstride, nw, n int, out *float32, ostride int)
