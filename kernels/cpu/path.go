package cpu

import (
	"fmt"
	"os"
	"slices"
	"unsafe"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/kernels"
)

// Path is a set of matrix and attention kernels, chosen once per backend
// from the CPU's features (golang.org/x/sys/cpu) or forced with the
// CLOISON_CPU environment variable.
type Path string

// The kernel paths. Each is deterministic and batch-invariant with its own
// fixed reduction order (see dot.go, dot_amd64.go and dot_arm64.go); results of two paths
// are not bit-identical to each other, both are within the conformance
// tolerances (kernels/kernelstest).
const (
	// Generic is the pure-Go kernels: every platform, the oracle.
	Generic Path = "generic"
	// AVX2 is Go assembly with AVX2, FMA and F16C (amd64): 8-lane float
	// dot products, F16 and BF16 converted in registers, Q8_0 as int8×int8
	// (VPMADDUBSW) on activations quantized per 32-block.
	AVX2 Path = "avx2"
	// AVX512 is Go assembly with AVX-512 F/BW/VL (amd64): 16-lane float dot
	// products and F16/BF16 conversion, Q8_0 with VPDPBUSD where the CPU has
	// AVX512_VNNI (else as AVX2), and then Q4_K in the amx path's order
	// (its prefill on a VNNI tile, the same bits as amx).
	AVX512 Path = "avx512"
	// AMX is avx512 with every Q8_0 and Q4_K product in its own order,
	// one float step per 32-value block of Q8_0 and two per Q4_K
	// super-block on exact integer sums (q8.go, kquant.go): prefill on AMX
	// tiles (TDPBSSD, TDPBUSD), decode on VNNI row kernels with the same
	// bits (amd64 Linux with AMX-TILE and AMX-INT8, after the OS granted
	// the tile state).
	AMX Path = "amx"
	// NEON is Go assembly with Advanced SIMD (arm64): 4-lane float dot
	// products, F16 and BF16 converted in registers (FCVTL, a shift), Q8_0
	// as int8×int8 on activations quantized per 32-block, with SDOT where
	// the CPU has ASIMDDP (else SMULL/SADALP, the same bits).
	NEON Path = "neon"
)

// EnvPath is the environment variable that forces a path at backend open.
const EnvPath = "CLOISON_CPU"

// ErrPath: CLOISON_CPU (or NewWithPath) names a path that does not exist or
// that this CPU lacks. Nothing was opened.
var ErrPath = cloison.NewError(cloison.CodeInvalid, "kernels/cpu: CPU kernel path not available")

// Paths returns the paths this CPU can run, slowest first; the last one is
// the default.
func Paths() []Path { return slices.Clone(available) }

// available is computed once from the CPU's features (dot_amd64.go,
// dot_arm64.go, dot_other.go).
var available = func() []Path {
	ps := []Path{Generic}
	for _, k := range vectorSets {
		ps = append(ps, k.path)
	}
	return ps
}()

// choosePath returns the path named by env ("" or "auto": the last of have)
// when have contains it.
//
// Errors: ErrPath for an unknown name or one not in have.
func choosePath(env string, have []Path) (Path, error) {
	if env == "" || env == "auto" {
		return have[len(have)-1], nil
	}
	p := Path(env)
	switch p {
	case Generic, AVX2, AVX512, AMX, NEON:
	default:
		return "", fmt.Errorf("%w: %s=%q is not one of generic, avx2, avx512, amx, neon", ErrPath, EnvPath, env)
	}
	if !slices.Contains(have, p) {
		return "", fmt.Errorf("%w: %s=%s but this CPU runs only %v", ErrPath, EnvPath, env, have)
	}
	return p, nil
}

// kset is one path's kernels. Every function of a set uses the same
// reduction order for every output element (the batch-invariance rule of
// dot.go), so a set may mix them freely.
type kset struct {
	path Path

	dot1x1 func(x, w []float32) float32
	dot1x4 func(x, w0, w1, w2, w3 []float32) (float32, float32, float32, float32)
	dot2x3 func(x0, x1, w0, w1, w2 []float32) (float32, float32, float32, float32, float32, float32)

	f16dot1x1, bf16dot1x1 func(x []float32, w []uint16) float32
	f16dot1x4, bf16dot1x4 func(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32)
	// f16rows sets out[r] to f16dot1x4's product with the r-th of the
	// len(out) consecutive F16 rows of w (len(x) halves each), with its
	// bits, the rows one after the other in one call (decode; nil where the
	// path has none).
	f16rows func(x []float32, w []uint16, out []float32)
	// bf16rows is the same for BF16 rows and bf16dot1x4 (nil where the
	// path has none).
	bf16rows func(x []float32, w []uint16, out []float32)

	// Q8_0 with float activations (generic), nil where intQ8 is set.
	q8dot1x1 func(x []float32, w []byte) float32
	// q8float: Q8_0 runs in the float order, weights dequantized exactly
	// (d·q) against float32 activations in the float kernels' lanes
	// (q8dot1x4 decode, q8row into scratch blocks for the float tiles),
	// not in integers, whatever int8 kernels the set also holds.
	q8float bool
	// q8row dequantizes a Q8_0 row into dst (nil: matrix.dequantRow).
	q8row    func(dst []float32, w []byte)
	q8dot1x4 func(x []float32, w0, w1, w2, w3 []byte) (float32, float32, float32, float32)

	// Q8_0 with activations quantized to Q8 blocks (q8.go), nil in generic.
	q8i1x1 func(xq []int8, xd []float32, w []byte) float32
	q8i1x4 func(xq []int8, xd []float32, w0, w1, w2, w3 []byte) (float32, float32, float32, float32)

	// q8rows sets out[i] to the product with the weight row at
	// w[i·stride:] for every i < len(out), with q8i1x4's bits (and
	// q8amx's where the path has it), from the activation row's −128·Σq
	// lanes xc (q8acts.c), the rows one after the other in one call
	// (decode; nil where the path has none, and then q8acts.c is not
	// computed).
	q8rows func(xq []int8, xc []int32, xd []float32, w []byte, stride int, out []float32)
	// q8corr: q8rows reads xc (VNNI; avx2's row kernel does not, and
	// q8acts.c is then not computed).
	q8corr bool

	// q8tile4xn sets out[i·os+j] for 4 activation rows of nb blocks (xq,
	// xd at strides xqs and xds elements) × the first nw weight rows of w
	// (ws bytes apart) with q8i1x4's bits, as many as its tile width
	// allows, and returns how many (prefill; nil where the path has none).
	q8tile4xn func(xq []int8, xqs int, xd []float32, xds, nb int, w []byte, ws, nw int, out []float32, os int) int
	// q8amx computes ng groups of 16 activation rows (q8acts.t, td, tc) ×
	// the m ≤ 16 weight rows at w[j·stride:] into dst[i·ld+j] for the rows
	// lo ≤ i < hi of the groups, with the bits of the path's q8rows: on
	// amx in the amx order on AMX tiles (vq8amx), on avx512 with VNNI in
	// the quad order (vq8quad); nil elsewhere.
	q8amx func(w []byte, stride, m, nb int, xt []int8, xd []float32, xc []int32, ng int, dst []float32, ld, lo, hi int, s *amxScratch)

	// q4kamxPack packs m ≤ 16 consecutive Q4_K weight rows into s, and
	// q4kamx computes ng groups of 16 activation rows (q8acts.kt, kd, kb)
	// × those rows into dst[i·ld+j] for the rows lo ≤ i < hi of the
	// groups, in the amx order, with the bits of the amx path's q4krows
	// (nil elsewhere).
	q4kamxPack func(w []byte, m, nsb int, s *q4kamxScratchT)
	q4kamx     func(xt []int8, xd []float32, xb []int32, ng int, dst []float32, ld, lo, hi int, s *q4kamxScratchT)
	// q4kfewPack and q4kfew are the same with the same bits for a block
	// of at most q4kFewRows activation rows, where packing the weights
	// would cost more than it saves (the amx path: the VNNI tile, which
	// reads the weight rows in place; nil: q4kamx for every block).
	q4kfewPack func(w []byte, m, nsb int, s *q4kamxScratchT)
	q4kfew     func(xt []int8, xd []float32, xb []int32, ng int, dst []float32, ld, lo, hi int, s *q4kamxScratchT)

	// Q4_0 on Q8 blocks, Q4_K and Q6_K on Q8_K blocks (kquant.go), nil in
	// generic (a nil one's weights take the float kernels, kset.hasInt).
	q40i1x1          func(xq []int8, xd []float32, w []byte) float32
	q4ki1x1, q6ki1x1 func(xq []int8, xd []float32, bs []int16, w []byte) float32

	// q4krows sets out[r] to q4ki1x1's product with the r-th of the
	// len(out) consecutive Q4_K weight rows of w, with its bits, in one
	// call (decode; nil where the path has none).
	q4krows func(xq []int8, xd []float32, bs []int16, w []byte, out []float32)
	// q4krowsX is q4krows (the same bits) for a multiple of 4 rows in the
	// interleaved layout (q4kx.go); where it is set, Q4_K matrices keep
	// such a copy, made by their first product.
	q4krowsX func(xq []int8, xd []float32, bs []int16, w []byte, out []float32)
	// q4kPackX is q4kamxPack for whole groups of the interleaved layout,
	// which q4kamx then reads in place (nil: blocks are copied out).
	q4kPackX func(w []byte, m, nsb int, s *q4kamxScratchT)
	// q6krows is the same for Q6_K weights and q6ki1x1 (bs unused).
	q6krows func(xq []int8, xd []float32, bs []int16, w []byte, out []float32)

	// tile computes out[4r+j] = x[r]·w[j] for r < tileRows, j < 4 with the
	// order of dot1x4 (prefill register tiles; nil in generic).
	tile func(x *[4][]float32, w *[4][]float32, out *[16]float32)
	// tilePF is tile that also prefetches the 2·len(x[0]) bytes at pf (nil:
	// use tile); the same bits.
	tilePF   func(x *[4][]float32, w *[4][]float32, out *[16]float32, pf unsafe.Pointer)
	tileRows int
	// scores computes tile's scores over an attention key block in one
	// call, for head dimensions that are multiples of tileStep:
	// out[r·attnKeys+j] = x[r]·data[offs[j]:][:hd] for r < tileRows and j
	// < len(offs)&^3, with tile's bits (nil where the path has none).
	scores func(x *[4][]float32, data []float32, offs []int, hd int, out []float32)
	// tileStep: the multiple of the row length that scores and tilexn
	// take (the vector's floats).
	tileStep int
	// tilexn computes out[r·os+j] = x[r]·(row j of w, ws apart) for r <
	// tileRows and the first nw&^3 rows, with tile's bits, in one call (the
	// block's weight rows four at a time; prefetching pf as tilePF), and
	// returns how many rows it did (0: none; nil in paths without it).
	tilexn func(x *[4][]float32, w []float32, ws, nw int, out []float32, os int, pf []byte) int
	// f16tilexn is tilexn on F16 weight rows converted in registers,
	// the same bits (nil where the path has none).
	f16tilexn func(x *[4][]float32, w []uint16, ws, nw int, out []float32, os int, pf []byte) int
	// f16convertCols: F16 prefill blocks of more than 16 activation rows
	// and at most this many columns are converted to float32 once and run
	// the float tiles instead (the same bits; for 16 rows or fewer, a
	// decode batch, the conversion costs more than it saves); 0:
	// f16tilexn for every block.
	f16convertCols int

	// wsum adds Σ_p s[p]·data[offs[p]:][:len(o)] to o with axpy's chain per
	// element; false when it cannot for this len(o) (nil in generic).
	wsum func(o, s, data []float32, offs []int) bool
	// wsum4 adds four vectors' weighted values at once, each value row
	// loaded once: o[r] += Σ_p s[r][p]·data[offs[p]:][:len(o[r])] with
	// wsum's chain per element; false (nothing done) when it cannot for
	// this head dimension; offs must hold 8 entries past len(offs) within
	// their capacity (avx2's reads them for prefetches; nil in generic).
	wsum4 func(o, s *[4][]float32, data []float32, offs []int) bool

	// expSub sets x[i] = expf(x[i] − m) with expf's bits (nil: use expf).
	expSub func(x []float32, m float32)
	// silu sets out[i] = silu(g[i])·u[i] (u nil: silu(g[i])) for the
	// first values of out with siluRow's bits and returns how many it did
	// (nil: siluRow's loops).
	silu func(out, g, u []float32) int
	// expSum is expSub that also returns the block sum of online's order
	// (float64 lanes of positions ≡ 0…3 mod 4 in order, the tail in lane
	// 0, then (s0+s1)+(s2+s3)); scaleMax sets x[i] = round32(x[i]·scale)
	// and returns their maximum (NaN when one is; which zero of ±0 is
	// unspecified: online's results do not depend on it). Nil: online's
	// loops.
	expSum   func(x []float32, m float32) float64
	scaleMax func(x []float32, scale float32) float32

	axpy4 func(o []float32, w *[4]float32, v0, v1, v2, v3 []float32)
	axpy1 func(o []float32, w float32, v []float32)

	// bf16block computes a block of a BF16 product in the path's BF16
	// order with bf16rows' bits (prefill; nil: weights converted to
	// float32 and the float tiles), from xb, x's rows rounded to BF16 by
	// bf16round and packed by bf16pack where the path has one (nil: it
	// rounds and packs the block's rows itself).
	bf16block func(dst, x *tensor, xb *bf16Acts, m *matrix, r0, r1, o0, o1 int)
	bf16round func(dst []uint16, src []float32)
	// bf16pack writes rounded row r (h, cols values) into p, the
	// activations in the layout the path's block reads (nil: none).
	bf16pack func(p []uint32, h []uint16, r, cols int)

	// halfRow converts a row of F16 (bf false) or BF16 weights to float32
	// with the values of f16tab and bf16 (scratch blocks; nil: one table
	// load per value).
	halfRow func(bf bool, dst []float32, src []uint16)
	// halfRows, where set, converts rows F16 rows of n halves (n a
	// multiple of 16) read stride halves apart into dst, n floats apart:
	// halfRow's values, a page of KV rows a call (halfBlock).
	halfRows func(dst []float32, src []uint16, n, rows, stride int)
}

var genericSet = &kset{
	path:       Generic,
	dot1x1:     dot1x1Go,
	dot1x4:     dot1x4Go,
	dot2x3:     dot2x3Go,
	f16dot1x1:  f16dot1x1Go,
	f16dot1x4:  f16dot1x4Go,
	bf16dot1x1: bf16dot1x1Go,
	bf16dot1x4: bf16dot1x4Go,
	q8dot1x1:   q8dot1x1Go,
	q8dot1x4:   q8dot1x4Go,
	axpy4:      axpy4Go,
	axpy1:      axpy1Go,
}

func kernelSet(p Path) *kset {
	for _, k := range vectorSets {
		if k.path == p {
			return k
		}
	}
	return genericSet
}

// avx512 reports whether k runs the avx512 kernels (the avx512 and amx
// paths).
func (k *kset) avx512() bool { return k.path == AVX512 || k.path == AMX }

// intQ8 reports whether block-type products (Q8_0, Q4_0, Q4_K, Q6_K)
// quantize activations to int8.
func (k *kset) intQ8() bool { return k.q8i1x4 != nil }

// inRegister reports whether decode (one-row) products of dt decode weights
// in registers (decodeRow) rather than into a scratch block.
func (k *kset) inRegister(dt kernels.DType) bool {
	return (dt == kernels.Q8_0 && !k.hasInt(dt)) || dt == kernels.F16 || dt == kernels.BF16
}

func envPath() string { return os.Getenv(EnvPath) }
