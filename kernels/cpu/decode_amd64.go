//go:build amd64

package cpu

import "github.com/cloison/cloison/kernels"

func init() {
	if hasAVX512 {
		decodeK = &decodeKernels{group: 16, scores: vdecodeScores, wsum4: vdecodeWsum4}
	}
	if hasAVX2 {
		decodeK2 = &decodeKernels{group: 8, scores: vdecodeScores2, wsum4: vdecodeWsum42}
	}
}

// vdecodeScores2 is decodeKernels.scores on avx2: groups of 8 keys (offs:
// 8·ng+16 entries, the last 16 for prefetches only).
func vdecodeScores2(q []float32, nq, hd int, f32 []float32, f16 []uint16, offs []int, ng int, out []float32, ostride int) {
	if ng == 0 || nq == 0 {
		return
	}
	checkDecodeScores(q, nq, hd, f32, f16, offs, ng, out, ostride, 8)
	if f16 != nil {
		scores8F16AVX2(&q[0], &f16[0], &offs[0], ng, hd, nq, &out[0], ostride)
	} else {
		scores8AVX2(&q[0], &f32[0], &offs[0], ng, hd, nq, &out[0], ostride)
	}
}

// vdecodeWsum42 is decodeKernels.wsum4 on avx2 (len(o[r]) a multiple of
// 16; offs: n+8 entries, the last 8 for prefetches only).
func vdecodeWsum42(o, s *[4][]float32, f32 []float32, f16 []uint16, offs []int, n int) {
	if n == 0 {
		return
	}
	hd := checkDecodeValues(o, s, f32, f16, offs, n, 16)
	for c := 0; c < hd; c += 16 {
		if f16 != nil {
			wsum4x16F16AVX2(&o[0][c], &o[1][c], &o[2][c], &o[3][c], &s[0][0], &s[1][0], &s[2][0], &s[3][0], &f16[c], &offs[0], n)
		} else {
			wsum4x16AVX2(&o[0][c], &o[1][c], &o[2][c], &o[3][c], &s[0][0], &s[1][0], &s[2][0], &s[3][0], &f32[c], &offs[0], n)
		}
	}
}

//go:noescape
func scores8AVX2(q *float32, base *float32, offs *int, ng, hd, nq int, out *float32, ostride int)

//go:noescape
func scores8F16AVX2(q *float32, base *uint16, offs *int, ng, hd, nq int, out *float32, ostride int)

//go:noescape
func wsum4x16AVX2(o0, o1, o2, o3 *float32, s0, s1, s2, s3 *float32, base *float32, offs *int, n int)

//go:noescape
func wsum4x16F16AVX2(o0, o1, o2, o3 *float32, s0, s1, s2, s3 *float32, base *uint16, offs *int, n int)

// vdecodeScores is decodeKernels.scores on avx512. It checks every offset
// and length so that the assembly reads and writes only inside the slices
// (offs: 16·ng+32 entries, the last 32 read for prefetches only).
func vdecodeScores(q []float32, nq, hd int, f32 []float32, f16 []uint16, offs []int, ng int, out []float32, ostride int) {
	if ng == 0 || nq == 0 {
		return
	}
	checkDecodeScores(q, nq, hd, f32, f16, offs, ng, out, ostride, 16)
	if f16 != nil {
		scores16F16AVX512(&q[0], &f16[0], &offs[0], ng, hd, nq, &out[0], ostride)
	} else {
		scores16AVX512(&q[0], &f32[0], &offs[0], ng, hd, nq, &out[0], ostride)
	}
}

// vdecodeWsum4 is decodeKernels.wsum4 on avx512 (len(o[r]) a multiple of
// 64; offs: n+8 entries, the last 8 read for prefetches only).
func vdecodeWsum4(o, s *[4][]float32, f32 []float32, f16 []uint16, offs []int, n int) {
	if n == 0 {
		return
	}
	hd := checkDecodeValues(o, s, f32, f16, offs, n, 64)
	for c := 0; c < hd; c += 64 {
		if f16 != nil {
			wsum4x64F16AVX512(&o[0][c], &o[1][c], &o[2][c], &o[3][c], &s[0][0], &s[1][0], &s[2][0], &s[3][0], &f16[c], &offs[0], n)
		} else {
			wsum4x64pAVX512(&o[0][c], &o[1][c], &o[2][c], &o[3][c], &s[0][0], &s[1][0], &s[2][0], &s[3][0], &f32[c], &offs[0], n)
		}
	}
}

//go:noescape
func scores16AVX512(q *float32, base *float32, offs *int, ng, hd, nq int, out *float32, ostride int)

//go:noescape
func scores16F16AVX512(q *float32, base *uint16, offs *int, ng, hd, nq int, out *float32, ostride int)

//go:noescape
func wsum4x64pAVX512(o0, o1, o2, o3 *float32, s0, s1, s2, s3 *float32, base *float32, offs *int, n int)

//go:noescape
func wsum4x64F16AVX512(o0, o1, o2, o3 *float32, s0, s1, s2, s3 *float32, base *uint16, offs *int, n int)

func init() {
	if hasAVX2 {
		toHalfVec = vtoHalf
	}
}

// vtoHalf is toHalfVec on avx2 (F16C): eight at a time, the tail with
// kernels.F32ToF16; the same halves as F32ToF16 everywhere.
func vtoHalf(dst []uint16, src []float32) {
	n := len(src)
	dst = dst[:n]
	nv := n &^ 7
	if nv > 0 {
		toHalfAVX2(&dst[0], &src[0], nv)
	}
	for i := nv; i < n; i++ {
		dst[i] = kernels.F32ToF16(src[i])
	}
}

//go:noescape
func toHalfAVX2(dst *uint16, src *float32, n int)

// checkDecodeScores checks the arguments of a score kernel that takes
// groups of group keys (offs: group·ng+2·group entries, the last 2·group
// read for prefetches only), so that the assembly reads and writes only
// inside the slices.
func checkDecodeScores(q []float32, nq, hd int, f32 []float32, f16 []uint16, offs []int, ng int, out []float32, ostride, group int) {
	n := len(f32) + len(f16)
	if hd <= 0 || hd%group != 0 || len(q) < nq*hd || len(offs) < group*ng+2*group || len(out) < (nq-1)*ostride+group*ng || (f32 == nil) == (f16 == nil) {
		panic("kernels/cpu: decode score shapes")
	}
	for _, off := range offs[:group*ng+2*group] {
		if off < 0 || off+hd > n {
			panic("kernels/cpu: attention key outside the arena")
		}
	}
}

// checkDecodeValues checks the arguments of a value kernel that sums width
// elements a call (len(o[r]) a multiple of width; offs: n+8 entries, the
// last 8 read for prefetches only) and returns the head dimension.
func checkDecodeValues(o, s *[4][]float32, f32 []float32, f16 []uint16, offs []int, n, width int) int {
	hd := len(o[0])
	if hd == 0 || hd%width != 0 || len(offs) < n+8 || (f32 == nil) == (f16 == nil) {
		panic("kernels/cpu: decode value shapes")
	}
	for r := range 4 {
		if len(o[r]) != hd || len(s[r]) < n {
			panic("kernels/cpu: decode value shapes")
		}
	}
	m := len(f32) + len(f16)
	for _, off := range offs[:n+8] {
		if off < 0 || off+hd > m {
			panic("kernels/cpu: attention value outside the arena")
		}
	}
	return hd
}
