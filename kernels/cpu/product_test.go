package cpu

import (
	"testing"

	"github.com/cloison/cloison/kernels"
)

// productOnPath multiplies xs (rows × cols) by the dt weights data (n
// rows of cols) on a backend of path with threads workers, and returns
// the rows × n product.
func productOnPath(t *testing.T, path Path, threads int, dt kernels.DType, rows, cols, n int, data []byte, xs []float32) []float32 {
	t.Helper()
	return productOnSet(t, path, nil, threads, dt, rows, cols, n, data, xs)
}

// productOnSet is productOnPath on the kernels k where k is not nil (a
// variant of path's set).
func productOnSet(t *testing.T, path Path, k *kset, threads int, dt kernels.DType, rows, cols, n int, data []byte, xs []float32) []float32 {
	t.Helper()
	b, err := NewWithPath(kernels.Options{Threads: threads}, path)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if k != nil {
		b.k = k
	}
	m, err := b.NewMatrix(dt, n, cols, data)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := b.NewTensor(rows, cols)
	b.Upload(x, xs)
	dst, _ := b.NewTensor(rows, n)
	if err := b.MatMul(dst, x, m); err != nil {
		t.Fatal(err)
	}
	return Data(dst)
}
