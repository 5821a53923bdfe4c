package cpu

import (
	"sync"
	"unsafe"

	"github.com/cloison/cloison/kernels"
)

// Prefill tiles of the k-quant integer products (vector paths). Q6_K:
// four activation rows, quantized to Q8_K blocks (kquant.go), against each
// weight row of a task's block in one call; the weights' quants and scales
// are unpacked once for the four rows (what a one-row product spends most
// of its instructions on) and every output element keeps the integer
// lanes and float steps of the one-row kernel (q6ki1x1), so it has the
// same bits and a row's result is the same in any batch (TestKQTile).
// Q4_K runs the amx order on every amd64 vector path (q4kamx_amd64.go):
// groups of 16 activation rows against up to 16 weight rows a call
// (q4kAMX), on AMX tiles, the VNNI tile or avx2's (q4kblk_amd64.go).

// q6kTile4 sets out[r·os+j] = q6ki1x1 of activation row r (r < 4: q8kActs
// rows at strides xqs, xds, bss) with Q6_K weight row j of w (consecutive
// rows of xds super-blocks); nil where the CPU has no such kernel.
var q6kTile4 func(xq []int8, xqs int, xd []float32, xds int, bs []int16, bss int, w []byte, out []float32, os int)

// kqTile computes the outputs of rows [r0, r) of a Q4_K or Q6_K product
// block in tiles and returns r, the first row left to the caller (r0 when
// it does nothing: another type, no tile kernel, too few rows, or no Q8_K
// activations).
func (k *kset) kqTile(dst *tensor, acts *q8acts, m *matrix, r0, r1, o0, o1 int) int {
	if acts == nil || acts.k == nil || !needsQ8K(m.dt) || k.q4ki1x1 == nil {
		return r0
	}
	if m.dt == kernels.Q4_K {
		if k.q4kamx != nil {
			return k.q4kAMX(dst, acts, m, r0, r1, o0, o1)
		}
		return r0
	}
	if q6kTile4 == nil {
		return r0
	}
	a, cols := acts.k, m.cols
	nb := cols / 256
	r := r0
	for ; r+4 <= r1; r += 4 {
		xq, xd, bs := a.q[r*cols:(r+4)*cols], a.d[r*nb:(r+4)*nb], a.bs[r*cols/16:(r+4)*cols/16]
		q6kTile4(xq, cols, xd, nb, bs, cols/16, m.data[o0*m.rowBytes:o1*m.rowBytes], dst.data[r*dst.cols+o0:(r+3)*dst.cols+o1], dst.cols)
	}
	return r
}

const (
	// q4kamxMaxBlocks: longer rows (more than 32,768 values) take the
	// row kernel (q4krowsBlk), with the same bits.
	q4kamxMaxBlocks = 128
	// q4kamxScalRow: bytes of per-super-block scalars a weight row
	// (q4kamxPack's scal: 32 a super-block).
	q4kamxScalRow = 32 * q4kamxMaxBlocks
	// q4kvnniScalRow: the same for q4kvnniScal (64 a super-block).
	q4kvnniScalRow = 64 * q4kamxMaxBlocks
	// q4kamxScratch: the tile configuration and two slots of 2 KB (the
	// low and high sums of 16×16 outputs).
	q4kamxScratch = 64 + 2*2048
)

// q4kamxScratchT is a task's scratch for q4kamx: the tile configuration
// and slots (b, 64-byte aligned), the repacked weights (pk) and their
// scalars (scal).
type q4kamxScratchT struct {
	b    []byte
	pk   []byte
	scal []byte
	w    []byte // the rows themselves (q4kvnni)
	x    bool   // w in the interleaved layout (q4kx.go: q4kvnniTileX)
	rows []byte // a block's rows copied out of an interleaved matrix (q4kx.go)
	m    int    // weight rows packed
	nsb  int
}

var q4kamxPool = sync.Pool{New: func() any {
	s := new(q4kamxScratchT)
	b := make([]byte, q4kamxScratch+64)
	off := int(-uintptr(unsafe.Pointer(&b[0])) & 63)
	s.b = b[off : off+q4kamxScratch]
	s.scal = make([]byte, q8amxRows*max(q4kamxScalRow, q4kvnniScalRow))
	return s
}}

// q4kFewRows: blocks of at most this many activation rows take
// kset.q4kfew where the path has it.
const q4kFewRows = 16

// q4kAMX is kqTile on the amx path: tasks of at least q8amxMinRows rows
// run the AMX tile (groups of 16 activation rows, the last padded, × up
// to 16 weight rows a call, packed once per call of the task); the others
// return r0, their rows left to the row kernel (q4krows: the same bits).
// Tasks of at most q4kFewRows rows take kset.q4kfew where the path has it
// (no weights packed).
func (k *kset) q4kAMX(dst *tensor, acts *q8acts, m *matrix, r0, r1, o0, o1 int) int {
	cols := m.cols
	nb := cols / 256
	if r1-r0 < q8amxMinRows || nb > q4kamxMaxBlocks || int64(dst.cols) >= 1<<25 || acts.kt == nil {
		return r0
	}
	s := q4kamxPool.Get().(*q4kamxScratchT)
	pack, tile := k.q4kamxPack, k.q4kamx
	if k.q4kfew != nil && r1-r0 <= q4kFewRows {
		pack, tile = k.q4kfewPack, k.q4kfew
	}
	q4x := m.interleaved()
	for o := o0; o < o1; o += q8amxRows {
		mm := min(q8amxRows, o1-o)
		switch w := m.data[o*m.rowBytes : (o+mm)*m.rowBytes]; {
		case q4x != nil && k.q4kPackX != nil && o%4 == 0 && mm%4 == 0 && o+mm <= m.rows&^3:
			// Whole groups of the interleaved copy, read in place.
			k.q4kPackX(q4x[o*m.rowBytes:(o+mm)*m.rowBytes], mm, nb, s)
		case q4x != nil:
			// The block's rows copied out of the interleaved copy.
			s.rows = growAny(s.rows, mm*m.rowBytes)
			m.q4kRowsOut(s.rows, o, o+mm)
			pack(s.rows[:mm*m.rowBytes], mm, nb, s)
		default:
			pack(w, mm, nb, s)
		}
		for g0 := r0 &^ (q8amxRows - 1); g0 < r1; g0 += 4 * q8amxRows {
			ng := min(4, (r1-g0+q8amxRows-1)/q8amxRows)
			lo, hi := max(r0-g0, 0), min(r1-g0, 4*q8amxRows)
			tile(acts.kt[g0*cols:], acts.kd[g0*nb:], acts.kb[g0*cols/64:], ng, dst.data[g0*dst.cols+o:], dst.cols, lo, hi, s)
		}
	}
	q4kamxPool.Put(s)
	return r1
}

// q4kPairs writes row r (0 ≤ r < 16) of a group's 32-value sums for the
// AMX Q4_K tile (q8acts.kb): for super-block b and pair p < 4, the dword
// at kb[64b+16p+r] holds the sums of sub-blocks 2p and 2p+1 (int16 each,
// from the 16-value sums bs).
func q4kPairs(kb []int32, r int, bs []int16) {
	nsb := len(bs) / 16
	kb = kb[:64*nsb]
	for b := range nsb {
		s := bs[16*b : 16*b+16]
		for p := range 4 {
			lo, hi := s[4*p]+s[4*p+1], s[4*p+2]+s[4*p+3]
			kb[64*b+16*p+r] = int32(uint32(uint16(lo)) | uint32(uint16(hi))<<16)
		}
	}
}
