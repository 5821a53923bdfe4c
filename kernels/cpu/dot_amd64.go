//go:build amd64

package cpu

import "golang.org/x/sys/cpu"

// The vector paths on amd64. Their fixed reduction order per output element
// (L = 8 lanes on avx2, 16 on avx512; n the reduction length):
//
//	lane[l] = fma(x[i], w[i], lane[l]) for i ≡ l (mod L), i < n&^(L−1), ascending
//	s = hsum(lanes)   (avx512: lanes l and l+8 added first, then as avx2:)
//	                  ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7))
//	s += round32(x[i]·w[i]) for the tail i ≥ n&^(L−1), ascending
//
// identical in every kernel of a path (F32, F16 and BF16 weights decoded in
// registers or in a scratch block give the same values), so batch
// invariance holds exactly as on the generic path. axpy adds with fused
// multiply-adds element by element (tail: as axpy4Go). Q8_0: see q8.go;
// both paths give the same bits there (the block integers are exact, the
// lanes 8 wide on both).

var (
	hasAVX2 = cpu.X86.HasAVX && cpu.X86.HasAVX2 && cpu.X86.HasFMA && cpu.X86.HasF16C
	// The avx512 path also runs AVX2 code (Q8_0 without VNNI, the tails).
	hasAVX512 = hasAVX2 && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL
	hasVNNI   = hasAVX512 && cpu.X86.HasAVX512VNNI
)

// vectorSets are the vector paths this CPU runs, slowest first.
var vectorSets = func() []*kset {
	var s []*kset
	if hasAVX2 {
		s = append(s, vset(AVX2, false))
	}
	if hasAVX512 {
		s = append(s, vset(AVX512, true))
	}
	if hasAMX {
		// avx512 with every Q8_0 product on AMX tiles, in its own order
		// (q8.go): the VNNI kernels, in theirs, are not used.
		k := vset(AVX512, true)
		k.path, k.q8amx = AMX, vq8amx
		k.q8rows, k.q8i1x4 = vq8rowsBlk, rows1x4(vq8rowsBlk)
		// Q4_K likewise, two float steps per super-block (kquant.go).
		k.q4kamxPack, k.q4kamx = vq4kamxPack, vq4kamx
		k.q4kfewPack, k.q4kfew = vq4kvnniPack, vq4kvnni
		k.q4krows, k.q4ki1x1 = vq4krowsBlk, vq4kBlk1
		k.q4krowsX, k.q4kPackX = nil, nil
		// BF16 on AMX-BF16 tiles, in the amx path's BF16 order
		// (bf16amx_amd64.go); without AMX-BF16 it keeps avx512's.
		if hasAMXBF16 {
			k.bf16dot1x4, k.bf16rows, k.bf16block, k.bf16pack = vbf16amx1x4, vbf16amxRows, vbf16amxBlock, vbf16amxPack
		}
		s = append(s, k)
	}
	return s
}()

// vset returns the kernels of the avx2 (wide false) or avx512 path. The
// closures call the wrappers with a constant, so each asm call is direct and
// its output array stays on the stack.
func vset(p Path, wide bool) *kset {
	k := &kset{path: p}
	if wide {
		k.dot1x4 = func(x, w0, w1, w2, w3 []float32) (float32, float32, float32, float32) {
			return vdot1x4(true, x, w0, w1, w2, w3)
		}
		k.dot2x3 = func(x0, x1, w0, w1, w2 []float32) (float32, float32, float32, float32, float32, float32) {
			return vdot2x3(true, x0, x1, w0, w1, w2)
		}
		k.f16dot1x4 = func(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32) {
			return vhalf1x4(true, false, x, w0, w1, w2, w3)
		}
		k.bf16dot1x4 = func(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32) {
			return vhalf1x4(true, true, x, w0, w1, w2, w3)
		}
		k.axpy4 = func(o []float32, w *[4]float32, v0, v1, v2, v3 []float32) { vaxpy4(true, o, w, v0, v1, v2, v3) }
		k.axpy1 = func(o []float32, w float32, v []float32) { vaxpy1(true, o, w, v) }
		k.f16rows = func(x []float32, w []uint16, out []float32) { vf16rows(f16Streams, x, w, out) }
		// BF16 rows as two prefetched streams on every avx512 CPU: on
		// AMD Zen 5 too (127 → 160–184 decode tok/s, 8 layers d=768,
		// where F16's two streams gain nothing there).
		k.bf16rows = vbf16rows
		if bf16Order {
			setBF16Order(k)
		}
	} else {
		k.dot1x4 = func(x, w0, w1, w2, w3 []float32) (float32, float32, float32, float32) {
			return vdot1x4(false, x, w0, w1, w2, w3)
		}
		k.dot2x3 = func(x0, x1, w0, w1, w2 []float32) (float32, float32, float32, float32, float32, float32) {
			return vdot2x3(false, x0, x1, w0, w1, w2)
		}
		k.f16dot1x4 = func(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32) {
			return vhalf1x4(false, false, x, w0, w1, w2, w3)
		}
		k.bf16dot1x4 = func(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32) {
			return vhalf1x4(false, true, x, w0, w1, w2, w3)
		}
		k.axpy4 = func(o []float32, w *[4]float32, v0, v1, v2, v3 []float32) { vaxpy4(false, o, w, v0, v1, v2, v3) }
		k.axpy1 = func(o []float32, w float32, v []float32) { vaxpy1(false, o, w, v) }
	}
	if wide && hasVNNI {
		// Q8_0 in the quad order (q8blk_amd64.go): exact integer sums
		// per block, one float step each into four accumulators; prefill
		// and batches on the VNNI tile, decode on the row kernel, the
		// same bits.
		k.q8amx = vq8quad
		k.q8rows, k.q8corr = vq8quadRows, true
		// Q4_K in the amx order (q4kamx_amd64.go): exact integer sums
		// per super-block, two float steps; prefill on the VNNI tile,
		// decode on the row kernel, the same bits (and the amx path's).
		k.q4kamxPack, k.q4kamx = vq4kvnniPack, vq4kvnni
		k.q4krows = vq4krowsBlk
		if q4kFour {
			k.q4krowsX, k.q4kPackX = vq4krowsX, vq4kvnniPackX
		}
		k.q6krows = vq6krows
		k.q8i1x4 = rows1x4(vq8quadRows)
	} else {
		k.q8i1x4 = vq8i1x4
		// Decode reads the weight rows one after the other (AVX2
		// instructions, the same bits; avx512 without VNNI too).
		k.q8rows = vq8rowsAVX2
		k.q8tile4xn = vq8tile4xn
		k.q6krows = vq6krowsAVX2
		// Q4_K in the amx order (q4kblk_amd64.go): prefill on a tile of
		// 16 activation rows in the lanes, decode on the row kernel.
		k.q4kamxPack, k.q4kamx = vq4kvnniPack, vq4kblk
		k.q4krows = vq4kblkRows
	}
	k.q40i1x1, k.q4ki1x1, k.q6ki1x1 = vq40i1x1, vq4kblk1, vq6ki1x1
	if wide && hasVNNI {
		k.q4ki1x1 = vq4kBlk1
	}
	k.halfRow, k.halfRows = vhalfRow, vhalfRows
	if !wide {
		// Q8_0 in the float order: the float tiles on exactly
		// dequantized blocks outrun the int8 tile, whose every 32-value
		// block and output costs VPSIGNB, VPMADDUBSW, VPMADDWD, a
		// conversion and a multiply-add (AMD EPYC Zen 3, 1 thread, d=768
		// Q8_0, prompt 128: see doc.go). The int8 kernels stay in the set
		// for avx512 without VNNI, which keeps them, and their tests.
		k.q8float = true
		k.q8dot1x4, k.q8row = vq8fdot1x4, vq8rowFloat
	}
	k.tileRows = 3
	if wide {
		k.tileRows = 4
	}
	k.tile = func(x *[4][]float32, w *[4][]float32, out *[16]float32) { vtile(wide, x, w, out) }
	k.scores = func(x *[4][]float32, data []float32, offs []int, hd int, out []float32) {
		vscores(wide, x, data, offs, hd, out)
	}
	k.tileStep = lanes(wide)
	k.tilexn, k.f16tilexn = vtile3xn, vf16tile3xn
	if wide {
		k.tilePF = vtilePF
		k.tilexn, k.f16tilexn = vtile4xn, vf16tile4xn
	}
	if isIntel {
		// On Intel VCVTPH2PS takes a slot of an FMA port: converting
		// a block's weights once (into L2 up to 4,096 columns) and
		// running the float tiles is faster (Xeon family 6 model 207,
		// avx512, 8 layers d=768 F16, prompt 128, 1 thread: 805–906 →
		// 1,019–1,076 tok/s; d=1536 GQA, FFN 8,960: 124–131 → 135–138).
		k.f16convertCols = 4096
	}
	k.wsum = func(o, s, data []float32, offs []int) bool { return vwsum(wide, o, s, data, offs) }
	k.wsum4 = vwsum4AVX2
	if wide {
		k.wsum4 = vwsum4
	}
	k.expSub = vexpSubAVX2
	k.expSum, k.scaleMax = vexpSumAVX2, vscaleMaxAVX2
	if wide {
		k.expSub, k.expSum = vexpSub, vexpSum
	} else {
		k.silu = vsiluAVX2
	}
	// One-row products run the four-row kernel on the same row four times:
	// the same order, and rare (block tails, attention tails).
	k.dot1x1 = func(x, w []float32) float32 { s, _, _, _ := k.dot1x4(x, w, w, w, w); return s }
	k.f16dot1x1 = func(x []float32, w []uint16) float32 { s, _, _, _ := k.f16dot1x4(x, w, w, w, w); return s }
	k.bf16dot1x1 = func(x []float32, w []uint16) float32 { s, _, _, _ := k.bf16dot1x4(x, w, w, w, w); return s }
	k.q8i1x1 = func(xq []int8, xd []float32, w []byte) float32 { s, _, _, _ := k.q8i1x4(xq, xd, w, w, w, w); return s }
	if k.q8float {
		k.q8dot1x1 = func(x []float32, w []byte) float32 { s, _, _, _ := k.q8dot1x4(x, w, w, w, w); return s }
	}
	return k
}

func lanes(wide bool) int {
	if wide {
		return 16
	}
	return 8
}

func vdot1x4(wide bool, x, w0, w1, w2, w3 []float32) (s0, s1, s2, s3 float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	nv := n &^ (lanes(wide) - 1)
	var out [4]float32
	if nv > 0 {
		if wide {
			dot4AVX512(&x[0], &w0[0], &w1[0], &w2[0], &w3[0], nv, &out)
		} else {
			dot4AVX2(&x[0], &w0[0], &w1[0], &w2[0], &w3[0], nv, &out)
		}
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

func vdot2x3(wide bool, x0, x1, w0, w1, w2 []float32) (a0, a1, a2, b0, b1, b2 float32) {
	n := len(x0)
	x1, w0, w1, w2 = x1[:n], w0[:n], w1[:n], w2[:n]
	nv := n &^ (lanes(wide) - 1)
	var out [6]float32
	if nv > 0 {
		if wide {
			dot2x3AVX512(&x0[0], &x1[0], &w0[0], &w1[0], &w2[0], nv, &out)
		} else {
			dot2x3AVX2(&x0[0], &x1[0], &w0[0], &w1[0], &w2[0], nv, &out)
		}
	}
	a0, a1, a2, b0, b1, b2 = out[0], out[1], out[2], out[3], out[4], out[5]
	for i := nv; i < n; i++ {
		u, v := x0[i], x1[i]
		a0 += float32(u * w0[i])
		a1 += float32(u * w1[i])
		a2 += float32(u * w2[i])
		b0 += float32(v * w0[i])
		b1 += float32(v * w1[i])
		b2 += float32(v * w2[i])
	}
	return
}

// vhalf1x4 is vdot1x4 on F16 (bf false) or BF16 weights converted in
// registers (VCVTPH2PS; a 16-bit shift): exactly the values of f16tab and
// bf16, so the same bits as decoding to a scratch block first.
func vhalf1x4(wide, bf bool, x []float32, w0, w1, w2, w3 []uint16) (s0, s1, s2, s3 float32) {
	n := len(x)
	w0, w1, w2, w3 = w0[:n], w1[:n], w2[:n], w3[:n]
	nv := n &^ (lanes(wide) - 1)
	var out [4]float32
	if nv > 0 {
		switch {
		case wide && bf:
			bf16dot4AVX512(&x[0], &w0[0], &w1[0], &w2[0], &w3[0], nv, &out)
		case wide:
			f16dot4AVX512(&x[0], &w0[0], &w1[0], &w2[0], &w3[0], nv, &out)
		case bf:
			bf16dot4AVX2(&x[0], &w0[0], &w1[0], &w2[0], &w3[0], nv, &out)
		default:
			f16dot4AVX2(&x[0], &w0[0], &w1[0], &w2[0], &w3[0], nv, &out)
		}
	}
	return halfTail4(bf, x, w0, w1, w2, w3, nv, out)
}

// vq8i1x4 is the Q8_0 product of quantized activations (q8.go) with four
// weight rows in the lanes' order (AVX2 instructions: the avx2 path's
// integer kernels and avx512's without VNNI).
func vq8i1x4(xq []int8, xd []float32, w0, w1, w2, w3 []byte) (s0, s1, s2, s3 float32) {
	nb := len(xd)
	if nb == 0 {
		return
	}
	xq = xq[:nb*32]
	w0, w1, w2, w3 = w0[:nb*34], w1[:nb*34], w2[:nb*34], w3[:nb*34]
	var out [4]float32
	q8dot4AVX2(&xq[0], &xd[0], &w0[0], &w1[0], &w2[0], &w3[0], nb, &out)
	return out[0], out[1], out[2], out[3]
}

// f16Streams picks the F16 decode kernel of the avx512 path by how many
// sequential streams it reads a task's rows in: four on Intel CPUs
// (f16rows4AVX512), two on AMD from Zen 4 (family 25) on (f16rows2AVX512),
// one elsewhere (unmeasured; f16rowsAVX512). All have the same bits
// (doc.go has the figures). On Zen 4 the two streams gain without
// prefetching (rowPrefetch: d=1536 GQA 1 thread 24 → 27 tok/s, 2 threads
// 33 → 35; d=768 2 threads 242 → 255–265, 1 thread even), where with it
// they had lost to one. On Intel (Xeon family 6 model 207, avx512, 8
// layers d=1536 GQA, 2 threads, alternated with llama-bench) four gained
// over two: 28.8–29.3 → 31.0–32.1 tok/s against llama.cpp's 30.8–31.5.
var f16Streams = func() int {
	switch {
	case isIntel:
		return 4
	case cpuFamily() >= 25:
		return 2
	}
	return 1
}()

// zen5On reports an AMD CPU of Zen 5 (family 26) or later: where F16
// decode takes two streams and the Q8_0 and k-quant row kernels prefetch
// (measured there, slower or unmeasured on Zen 1–4).
var zen5On = !isIntel && cpuFamily() >= 26

// cpuFamily is the CPU's display family (CPUID leaf 1: the base family,
// plus the extended family where the base is 15).
func cpuFamily() int {
	a, _, _, _ := cpuid(1, 0)
	f := int(a>>8) & 0xf
	if f == 0xf {
		f += int(a>>20) & 0xff
	}
	return f
}

// isIntel reports whether the CPU's vendor (CPUID leaf 0) is GenuineIntel.
var isIntel = func() bool {
	_, b, c, d := cpuid(0, 0)
	return b == 0x756e6547 && d == 0x49656e69 && c == 0x6c65746e // "Genu" "ineI" "ntel"
}()

// vf16rows sets out[r] to vhalf1x4's (avx512, F16) product of x with the
// r-th of the len(out) consecutive rows of w (len(x) halves each), every
// row in one call, read as streams sequential streams: one
// (f16rowsAVX512), two (f16rows2AVX512) or four (f16rows4AVX512, a
// count not a multiple of four ending on the two), the same bits.
func vf16rows(streams int, x []float32, w []uint16, out []float32) {
	n, rows := len(x), len(out)
	if rows == 0 {
		return
	}
	w = w[:rows*n]
	nv := n &^ 15
	if nv == n && n > 0 {
		switch {
		case streams == 4 && rows >= 4:
			q := rows / 4
			f16rows4AVX512(&x[0], &w[0], n, q, &out[0], rowPrefetch)
			if rest := rows - 4*q; rest > 0 {
				f16rows2AVX512(&x[0], &w[4*q*n], n, rest, &out[4*q], rowPrefetch)
			}
		case streams >= 2:
			f16rows2AVX512(&x[0], &w[0], n, rows, &out[0], rowPrefetch)
		default:
			f16rowsAVX512(&x[0], &w[0], n, rows, &out[0])
		}
		return
	}
	for r := range rows {
		wr := w[r*n : (r+1)*n]
		out[r], _, _, _ = vhalf1x4(true, false, x, wr, wr, wr, wr)
	}
}

// vbf16rows is vf16rows's two streams on BF16 weights (bf16rows2AVX512):
// vhalf1x4's (avx512, BF16) bits.
func vbf16rows(x []float32, w []uint16, out []float32) {
	n, rows := len(x), len(out)
	if rows == 0 {
		return
	}
	w = w[:rows*n]
	if n&15 == 0 && n > 0 {
		bf16rows2AVX512(&x[0], &w[0], n, rows, &out[0])
		return
	}
	for r := range rows {
		wr := w[r*n : (r+1)*n]
		out[r], _, _, _ = vhalf1x4(true, true, x, wr, wr, wr, wr)
	}
}

// q8Prefetch is how far ahead (bytes) the Q8_0 decode kernels of avx512
// with VNNI (q8quadRows) and of amx (q8rowsBlk) prefetch their weights (the
// same bits; positive into L1, negative into L2, as kqPrefetch): 4 KB into
// L1 on AMD from Zen 4 (family 25) on. Zen 4, the quad order's kernel,
// alternated: d=768 1 thread 280–283 → 308 tok/s, 2 threads 374–414 →
// 417–423, d=1536 GQA 36–41 → 42–45; Zen 5, the lanes' order's kernel it
// replaced: d=1536 GQA 56–60 → 64–65 at 1 thread, 77–78 → 85–94 at 2
// (software prefetch had slowed the lanes' order's kernel on Zen 3/4).
// Intel: 4 KB into L2 (kqPrefetch's Xeon, amx's kernel, d=1536 GQA, 1
// thread: 19 → 23–24 tok/s; into L1 21).
var q8Prefetch = func() int {
	switch {
	case isIntel:
		return -4096
	case cpuFamily() >= 25:
		return 4096
	}
	return 0
}()

func vaxpy4(wide bool, o []float32, w *[4]float32, v0, v1, v2, v3 []float32) {
	n := len(o)
	v0, v1, v2, v3 = v0[:n], v1[:n], v2[:n], v3[:n]
	nv := n &^ (lanes(wide) - 1)
	if nv > 0 {
		if wide {
			axpy4AVX512(&o[0], w, &v0[0], &v1[0], &v2[0], &v3[0], nv)
		} else {
			axpy4AVX2(&o[0], w, &v0[0], &v1[0], &v2[0], &v3[0], nv)
		}
	}
	if nv < n {
		axpy4Go(o[nv:], w, v0[nv:], v1[nv:], v2[nv:], v3[nv:])
	}
}

func vaxpy1(wide bool, o []float32, w float32, v []float32) {
	n := len(o)
	v = v[:n]
	nv := n &^ (lanes(wide) - 1)
	if nv > 0 {
		if wide {
			axpy1AVX512(&o[0], w, &v[0], nv)
		} else {
			axpy1AVX2(&o[0], w, &v[0], nv)
		}
	}
	if nv < n {
		axpy1Go(o[nv:], w, v[nv:])
	}
}

// Assembly kernels (dot_amd64.s). n is a multiple of the lane count (8 for
// AVX2, 16 for AVX512), nb a number of Q8 blocks.

//go:noescape
func dot4AVX2(x, w0, w1, w2, w3 *float32, n int, out *[4]float32)

//go:noescape
func dot2x3AVX2(x0, x1, w0, w1, w2 *float32, n int, out *[6]float32)

//go:noescape
func f16dot4AVX2(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)

//go:noescape
func bf16dot4AVX2(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)

//go:noescape
func q8dot4AVX2(xq *int8, xd *float32, w0, w1, w2, w3 *byte, nb int, out *[4]float32)

//go:noescape
func axpy4AVX2(o *float32, w *[4]float32, v0, v1, v2, v3 *float32, n int)

//go:noescape
func axpy1AVX2(o *float32, w float32, v *float32, n int)

//go:noescape
func dot4AVX512(x, w0, w1, w2, w3 *float32, n int, out *[4]float32)

//go:noescape
func dot2x3AVX512(x0, x1, w0, w1, w2 *float32, n int, out *[6]float32)

//go:noescape
func f16dot4AVX512(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)

//go:noescape
func bf16dot4AVX512(x *float32, w0, w1, w2, w3 *uint16, n int, out *[4]float32)

//go:noescape
func f16rowsAVX512(x *float32, w *uint16, n int, rows int, out *float32)

//go:noescape
func bf16rows2AVX512(x *float32, w *uint16, n int, rows int, out *float32)

//go:noescape
func f16rows2AVX512(x *float32, w *uint16, n int, rows int, out *float32, pf int)

//go:noescape
func f16rows4AVX512(x *float32, w *uint16, n int, quads int, out *float32, pf int)

// cpuid returns EAX, EBX, ECX and EDX of CPUID leaf (subleaf sub).
func cpuid(leaf, sub uint32) (a, b, c, d uint32)

//go:noescape
func axpy4AVX512(o *float32, w *[4]float32, v0, v1, v2, v3 *float32, n int)

//go:noescape
func axpy1AVX512(o *float32, w float32, v *float32, n int)
