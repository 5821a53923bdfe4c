package cpu

import (
	"fmt"
	"math"
	"testing"

	"github.com/cloison/cloison/kernels"
)

// TestBlockDecodeBatch: a block-type product's row is bit-identical
// computed alone (the one-row decode kernels) and in a batch of rows (the
// register tiles: Q8_0's 4×8 and 4×4 tiles, the k-quant tiles), on every
// path and thread count, with weight row counts that leave tails after
// the 8- and 4-row tiles and batches that leave tails after the 4-row
// tiles and cross an activation tile (xTile).
func TestBlockDecodeBatch(t *testing.T) {
	for _, sh := range []struct{ rows, cols, n int }{{16, 768, 80}, {21, 256, 53}, {70, 512, 44}} {
		for _, threads := range []int{1, 2} {
			for _, p := range Paths() {
				for _, dt := range []kernels.DType{kernels.Q8_0, kernels.Q4_0, kernels.Q4_K, kernels.Q6_K} {
					t.Run(fmt.Sprintf("%s/%v/%dx%dx%d/threads=%d", p, dt, sh.rows, sh.cols, sh.n, threads), func(t *testing.T) {
						blockDecodeBatch(t, p, dt, threads, sh.rows, sh.cols, sh.n)
					})
				}
			}
		}
	}
}

func blockDecodeBatch(t *testing.T, p Path, dt kernels.DType, threads, rows, cols, n int) {
	b, err := NewWithPath(kernels.Options{Threads: threads}, p)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	w := make([]float32, n*cols)
	for i := range w {
		w[i] = float32(math.Sin(float64(i)*0.37)) * 2
	}
	data, err := kernels.Quantize(dt, w)
	if err != nil {
		t.Fatal(err)
	}
	m, err := b.NewMatrix(dt, n, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	xs := make([]float32, rows*cols)
	for i := range xs {
		xs[i] = float32(math.Cos(float64(i)*0.11)) * float32(1+i%5)
	}
	x, _ := b.NewTensor(rows, cols)
	b.Upload(x, xs)
	dst, _ := b.NewTensor(rows, n)
	if err := b.MatMul(dst, x, m); err != nil {
		t.Fatal(err)
	}
	batch := Data(dst)
	for r := range rows {
		x1, _ := b.NewTensor(1, cols)
		b.Upload(x1, xs[r*cols:(r+1)*cols])
		d1, _ := b.NewTensor(1, n)
		if err := b.MatMul(d1, x1, m); err != nil {
			t.Fatal(err)
		}
		for o, v := range Data(d1) {
			if math.Float32bits(v) != math.Float32bits(batch[r*n+o]) {
				t.Fatalf("row %d out %d: alone %v, in the batch %v", r, o, v, batch[r*n+o])
			}
		}
	}
}
