package cpu

import (
	"unsafe"

	"github.com/cloison/cloison/kernels"
)

// The interleaved Q4_K layout (kset.q4krowsX): where a path decodes Q4_K
// four rows at a time in the lanes of one register, a matrix keeps a copy
// of its first rows&^3 rows interleaved four at a time, as llama.cpp's
// REPACK does, so that the decode kernel reads each register whole and
// the weights as one sequential stream. The copy is made by the first
// product that reads the matrix (interleaved), so a token embedding
// table that is only looked up (Embed) never gets one. Group g (rows
// 4g…4g+3) holds, per super-block b and piece j < 9, the 16 bytes at
// b·144+16j of each of its four rows one after the other: 64 bytes a
// piece, 576 a super-block (piece 0 the four headers, pieces 1…8 the
// quant bytes). The copy is 64-byte aligned, so every piece is one
// aligned load. Every product that reads Q4_K rows reads this copy where
// it exists (decode by q4krowsX, the VNNI prefill tile in place by
// q4kPackX, a block that is not whole groups copied back out by
// q4kRowsOut), so the original bytes (a mapped file's pages) are read
// once, by the first product, and after that only for a matrix's last
// rows%4 rows and dequantRow's single rows; where a model's bytes were
// read into memory rather than mapped, both copies stay.

const q4kPiece = 16

// interleaved returns m's interleaved copy, made on the first call (the
// callers' workers wait for it), or nil where the path keeps none.
func (m *matrix) interleaved() []byte {
	m.q4xOnce.Do(func() {
		if m.dt == kernels.Q4_K && m.b.k.q4krowsX != nil && m.rows >= 4 {
			m.q4x = q4kInterleave(m.data, m.rows, m.cols/256)
		}
	})
	return m.q4x
}

// q4kInterleave returns rows&^3 Q4_K rows of data (nb super-blocks a
// row) in the interleaved layout.
func q4kInterleave(data []byte, rows, nb int) []byte {
	rb := nb * 144
	n := (rows &^ 3) * rb
	buf := make([]byte, n+64)
	off := int(-uintptr(unsafe.Pointer(unsafe.SliceData(buf))) & 63)
	x := buf[off : off+n : off+n]
	for g := range rows / 4 {
		grp := x[g*4*rb : (g+1)*4*rb]
		for r := range 4 {
			row := data[(4*g+r)*rb : (4*g+r+1)*rb]
			for p, q := 0, r*q4kPiece; p < rb; p, q = p+q4kPiece, q+4*q4kPiece {
				*(*[q4kPiece]byte)(grp[q:]) = *(*[q4kPiece]byte)(row[p:])
			}
		}
	}
	return x
}

// q4kRowsOut copies rows [o0, o1) of m (all below m.rows&^3 read from the
// interleaved copy, the rest from m.data) into dst, one row after the
// other: whole groups by q4kDeintGroups where the platform has it, the
// others 16 bytes a move.
func (m *matrix) q4kRowsOut(dst []byte, o0, o1 int) {
	rb := m.rowBytes
	dst = dst[:(o1-o0)*rb]
	for o := o0; o < o1; o++ {
		if g1 := o1 &^ 3; q4kDeintGroups != nil && o%4 == 0 && o+4 <= g1 && g1 <= m.rows&^3 {
			q4kDeintGroups(dst[(o-o0)*rb:(g1-o0)*rb], m.q4x[o*rb:g1*rb], rb/144)
			o = g1 - 1
			continue
		}
		row := dst[(o-o0)*rb : (o-o0+1)*rb]
		if o >= m.rows&^3 {
			copy(row, m.data[o*rb:(o+1)*rb])
			continue
		}
		grp := m.q4x[(o/4)*4*rb : (o/4+1)*4*rb]
		for p, q := 0, (o%4)*q4kPiece; p < rb; p, q = p+q4kPiece, q+4*q4kPiece {
			*(*[q4kPiece]byte)(row[p:]) = *(*[q4kPiece]byte)(grp[q:])
		}
	}
}
