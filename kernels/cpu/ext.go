package cpu

import (
	"math"

	"github.com/cloison/cloison/kernels"
)

// Scale sets dst = s·x (kernels.Scaler).
func (b *Backend) Scale(dst, x kernels.Tensor, s float32) error {
	ts, err := b.sameShape("scale", dst, x)
	if err != nil {
		return err
	}
	d, xt := ts[0], ts[1]
	b.eachRow(d.rows, d.cols, func(r int) {
		out, in := d.row(r), xt.row(r)
		in = in[:len(out)]
		for i := range out {
			out[i] = in[i] * s
		}
	})
	return nil
}

// GeGLU sets dst = gelu(gate) ⊙ up (kernels.GeGLUer), gelu in the tanh
// approximation evaluated in float64 and rounded once. llama.cpp's CPU
// kernel looks gelu up in an F16 table instead (ggml_vec_geglu_f32 with
// GGML_GELU_FP16): its result differs from this one by up to F16 rounding.
func (b *Backend) GeGLU(dst, gate, up kernels.Tensor) error {
	return b.gated("geglu", dst, gate, up, gelu)
}

// gelu is the tanh approximation of GELU that ggml_gelu computes, in
// float64, rounded to float32.
func gelu(x float32) float32 {
	const sqrt2OverPi = 0.79788456080286535587989211986876
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(sqrt2OverPi*v*(1+0.044715*v*v))))
}
