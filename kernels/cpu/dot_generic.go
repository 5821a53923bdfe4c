//go:build !(goexperiment.simd && amd64)

package cpu

import "github.com/cloison/cloison/kernels"

// The default build uses the scalar kernels of dot.go everywhere.

func dot1x1(x, w []float32) float32 { return dot1x1Go(x, w) }

func dot1x4(x, w0, w1, w2, w3 []float32) (float32, float32, float32, float32) {
	return dot1x4Go(x, w0, w1, w2, w3)
}

func dot2x3(x0, x1, w0, w1, w2 []float32) (float32, float32, float32, float32, float32, float32) {
	return dot2x3Go(x0, x1, w0, w1, w2)
}

func q8dot1x1(x []float32, w []byte) float32 { return q8dot1x1Go(x, w) }

func q8dot1x4(x []float32, w0, w1, w2, w3 []byte) (float32, float32, float32, float32) {
	return q8dot1x4Go(x, w0, w1, w2, w3)
}

// inRegister reports whether decode (one-row) products of dt decode weights
// in registers (decodeRow) rather than into a scratch block.
func inRegister(dt kernels.DType) bool {
	return dt == kernels.Q8_0 || dt == kernels.F16 || dt == kernels.BF16
}

// SIMD reports whether the matrix kernels use vector instructions.
const SIMD = false

// q8acts is empty in the default build: Q8_0 products use float
// activations.
type q8acts struct{}

func (b *Backend) prepareQ8(*tensor, []product) *q8acts { return nil }

func q8IntMul(*tensor, *q8acts, *matrix, int, int, int, int) bool { return false }

func f16dot1x1(x []float32, w []uint16) float32 { return f16dot1x1Go(x, w) }

func f16dot1x4(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32) {
	return f16dot1x4Go(x, w0, w1, w2, w3)
}

func bf16dot1x1(x []float32, w []uint16) float32 { return bf16dot1x1Go(x, w) }

func bf16dot1x4(x []float32, w0, w1, w2, w3 []uint16) (float32, float32, float32, float32) {
	return bf16dot1x4Go(x, w0, w1, w2, w3)
}

func axpy4(o []float32, w *[4]float32, v0, v1, v2, v3 []float32) { axpy4Go(o, w, v0, v1, v2, v3) }

func axpy1(o []float32, w float32, v []float32) { axpy1Go(o, w, v) }
