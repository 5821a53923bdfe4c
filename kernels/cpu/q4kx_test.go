package cpu

import (
	"bytes"
	"testing"
	"unsafe"

	"github.com/cloison/cloison/kernels"

	"pgregory.net/rapid"
)

// TestQ4KInterleave: the interleaved Q4_K layout (q4kx.go) holds every
// byte of a matrix's first rows&^3 rows, 64-byte aligned, piece j of
// group g's super-block b the four rows' bytes b·144+16j…, and
// q4kRowsOut gives back any range of rows exactly (the last rows%4 from
// the original bytes).
func TestQ4KInterleave(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rows := rapid.IntRange(1, 13).Draw(t, "rows")
		nb := rapid.IntRange(1, 3).Draw(t, "nb")
		rb := nb * 144
		data := rapid.SliceOfN(rapid.Byte(), rows*rb, rows*rb).Draw(t, "data")
		x := q4kInterleave(data, rows, nb)
		if len(x) != (rows&^3)*rb {
			t.Fatalf("interleaved %d bytes, want %d", len(x), (rows&^3)*rb)
		}
		if len(x) > 0 && uintptr(unsafe.Pointer(unsafe.SliceData(x)))%64 != 0 {
			t.Fatal("interleaved copy not 64-byte aligned")
		}
		for o := range rows &^ 3 {
			g, r := o/4, o%4
			for b := range nb {
				for j := range 9 {
					got := x[g*4*rb+b*576+j*64+r*16:][:16]
					if want := data[o*rb+b*144+j*16:][:16]; !bytes.Equal(got, want) {
						t.Fatalf("row %d super-block %d piece %d: % x, want % x", o, b, j, got, want)
					}
				}
			}
		}
		m := &matrix{rows: rows, rowBytes: rb, data: data, q4x: x}
		o0 := rapid.IntRange(0, rows-1).Draw(t, "o0")
		o1 := rapid.IntRange(o0+1, rows).Draw(t, "o1")
		out := make([]byte, (o1-o0)*rb)
		m.q4kRowsOut(out, o0, o1)
		if !bytes.Equal(out, data[o0*rb:o1*rb]) {
			t.Fatalf("rows %d…%d out of the interleaved copy differ from the originals", o0, o1)
		}
	})
}

// TestQ4KInterleavedLazily: where a path interleaves Q4_K (kset.q4krowsX),
// a matrix gets its copy on its first product and not before: a table
// only looked up (Embed) keeps none.
func TestQ4KInterleavedLazily(t *testing.T) {
	for _, p := range Paths() {
		if kernelSet(p).q4krowsX == nil {
			continue
		}
		t.Run(string(p), func(t *testing.T) {
			be, err := NewWithPath(kernels.Options{Threads: 1}, p)
			if err != nil {
				t.Fatal(err)
			}
			defer be.Close()
			const rows, cols = 8, 256
			wf := make([]float32, rows*cols)
			for i := range wf {
				wf[i] = float32(i%11) - 5
			}
			data, err := kernels.Quantize(kernels.Q4_K, wf)
			if err != nil {
				t.Fatal(err)
			}
			w, err := be.NewMatrix(kernels.Q4_K, rows, cols, data)
			if err != nil {
				t.Fatal(err)
			}
			m := w.(*matrix)
			emb, _ := be.NewTensor(2, cols)
			if err := be.Embed(emb, w, []int32{1, 6}); err != nil {
				t.Fatal(err)
			}
			if m.q4x != nil {
				t.Fatal("Embed made the interleaved copy")
			}
			x, _ := be.NewTensor(1, cols)
			dst, _ := be.NewTensor(1, rows)
			if err := be.MatMul(dst, x, w); err != nil {
				t.Fatal(err)
			}
			if len(m.q4x) != rows*m.rowBytes {
				t.Fatalf("after a product the interleaved copy holds %d bytes, want %d", len(m.q4x), rows*m.rowBytes)
			}
		})
	}
}
