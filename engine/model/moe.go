package model

import (
	"fmt"
	"math"
	"slices"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/kernels"
)

// moeBackends are the backends whose mixture-of-experts runs were checked
// against llama.cpp and for batch invariance (TestLlamaCppLogits,
// TestMoEBatchInvariance). Load refuses a MoE file on any other backend:
// the layer is built from generic Backend operations, but a backend that
// has not run these tests is not trusted with it.
var moeBackends = map[string]bool{"cpu": true}

// moeLayer holds one layer's router and experts. The experts of the merged
// 3-D tensors (ggml dims [cols, rows, experts]) are sliced into one Matrix
// each, over the file's bytes.
type moeLayer struct {
	router         kernels.Matrix // Experts×DModel
	gate, up, down []kernels.Matrix
}

func (m *Model) loadMoE(f *gguf.File, p string) (*moeLayer, error) {
	c := m.Config
	l := &moeLayer{}
	var err error
	if l.router, err = m.matrix(f, p+"ffn_gate_inp.weight", c.Experts, c.DModel, true); err != nil {
		return nil, err
	}
	stack := func(name string, rows, cols int) ([]kernels.Matrix, error) {
		name = p + name
		t, ok := f.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("%w: tensor %s missing (experts must be merged in ffn_*_exps; per-expert tensors are not read)", ErrModel, name)
		}
		if len(t.Dims) != 3 || t.Dims[0] != uint64(cols) || t.Dims[1] != uint64(rows) || t.Dims[2] != uint64(c.Experts) {
			return nil, fmt.Errorf("%w: tensor %s has shape %v, want [%d %d %d]", ErrModel, name, t.Dims, cols, rows, c.Experts)
		}
		dt := kernels.DType(t.Type)
		if !dt.Valid() {
			return nil, fmt.Errorf("%w: tensor %s has type %v", ErrUnsupported, name, t.Type)
		}
		rb, err := dt.RowBytes(cols)
		if err != nil {
			return nil, fmt.Errorf("%w: tensor %s: %v", ErrModel, name, err)
		}
		data := f.Data(t)
		size := rows * rb
		if len(data) != size*c.Experts {
			return nil, fmt.Errorf("%w: tensor %s has %d bytes, want %d", ErrModel, name, len(data), size*c.Experts)
		}
		out := make([]kernels.Matrix, c.Experts)
		for e := range out {
			if out[e], err = m.b.NewMatrix(dt, rows, cols, data[e*size:(e+1)*size:(e+1)*size]); err != nil {
				return nil, fmt.Errorf("model: tensor %s expert %d: %w", name, e, err)
			}
		}
		// A decode step reads ExpertsUsed of the experts.
		m.wbytes += int64(size) * int64(c.ExpertsUsed)
		return out, nil
	}
	if l.gate, err = stack("ffn_gate_exps.weight", c.FFN, c.DModel); err != nil {
		return nil, err
	}
	if l.up, err = stack("ffn_up_exps.weight", c.FFN, c.DModel); err != nil {
		return nil, err
	}
	if l.down, err = stack("ffn_down_exps.weight", c.DModel, c.FFN); err != nil {
		return nil, err
	}
	return l, nil
}

// route returns, for one token's router logits, the ExpertsUsed chosen
// experts in descending order of probability (the lower index first on a
// tie) and their weights, as llama.cpp's build_moe_ffn with softmax gating
// and norm_w: softmax over all experts (exp in float32, the sum in
// float64, then times its float32 reciprocal, as ggml_soft_max), the top k,
// and their probabilities divided by their sum (clamped below at
// 6.103515625e-5).
func route(logits []float32, k int, sel []int, w []float32) {
	mx := float32(math.Inf(-1))
	for _, v := range logits {
		mx = max(mx, v)
	}
	probs := make([]float32, len(logits))
	var sum float64
	for i, v := range logits {
		probs[i] = float32(math.Exp(float64(v - mx)))
		sum += float64(probs[i])
	}
	inv := float32(1 / sum)
	for i := range probs {
		probs[i] *= inv
	}
	idx := make([]int, len(logits))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case probs[a] > probs[b]:
			return -1
		case probs[a] < probs[b]:
			return 1
		}
		return 0
	})
	var ws float64
	for j := 0; j < k; j++ {
		sel[j] = idx[j]
		ws += float64(probs[idx[j]])
	}
	s := max(float32(ws), 6.103515625e-5)
	for j := 0; j < k; j++ {
		w[j] = probs[sel[j]] / s
	}
}

// moeFFN adds the mixture of experts of h (rows×DModel, the normalised
// residual) to x. The router runs on the backend; routing and the weighted
// sum run on the host, per token; each expert runs its SwiGLU on the rows
// routed to it, gathered in row order, with the backend's (batch-invariant)
// products. Token r's output is Σ_j w_j·expert_{sel_j}(h_r), multiplied and
// added in float32 in the order j = 0…k−1 (descending weight), as
// llama.cpp sums its expert views: nothing depends on the other tokens of
// the batch.
func (m *Model) moeFFN(l *moeLayer, x, h kernels.Tensor, rows int) error {
	b, s := m.b, &m.sc
	E, k, d := m.Experts, m.ExpertsUsed, m.DModel
	router := s.router.Slice(0, rows)
	if err := b.MatMul(router, h, l.router); err != nil {
		return err
	}
	hb := &s.moe
	hb.grow(rows, E, k, d)
	logits, sel, w, outs, tmp := hb.logits[:rows*E], hb.sel[:rows*k], hb.w[:rows*k], hb.outs[:rows*k*d], hb.tmp[:rows*d]
	if err := b.Download(logits, router); err != nil {
		return err
	}
	byExpert := hb.byExpert // slots r·k+j routed to each expert, in row order
	for e := range byExpert {
		byExpert[e] = byExpert[e][:0]
	}
	for r := 0; r < rows; r++ {
		route(logits[r*E:(r+1)*E], k, sel[r*k:(r+1)*k], w[r*k:(r+1)*k])
		for j := 0; j < k; j++ {
			byExpert[sel[r*k+j]] = append(byExpert[sel[r*k+j]], r*k+j)
		}
	}
	for e, slots := range byExpert {
		n := len(slots)
		if n == 0 {
			continue
		}
		xe, ge, ue, de := s.o.Slice(0, n), s.gate.Slice(0, n), s.up.Slice(0, n), s.dwn.Slice(0, n)
		for i, slot := range slots {
			r := slot / k
			if err := b.Copy(xe.Slice(i, i+1), h.Slice(r, r+1)); err != nil {
				return err
			}
		}
		if err := kernels.MultiMatMul(b, []kernels.Tensor{ge, ue}, xe, []kernels.Matrix{l.gate[e], l.up[e]}); err != nil {
			return err
		}
		if err := b.SwiGLU(ge, ge, ue); err != nil {
			return err
		}
		if err := b.MatMul(de, ge, l.down[e]); err != nil {
			return err
		}
		if err := b.Download(tmp[:n*d], de); err != nil {
			return err
		}
		for i, slot := range slots {
			copy(outs[slot*d:(slot+1)*d], tmp[i*d:(i+1)*d])
		}
	}
	sum := tmp[:rows*d]
	for r := 0; r < rows; r++ {
		acc := sum[r*d : (r+1)*d]
		for j := 0; j < k; j++ {
			wj, v := w[r*k+j], outs[(r*k+j)*d:(r*k+j+1)*d]
			for i := range acc {
				if j == 0 {
					acc[i] = float32(wj * v[i])
				} else {
					// The conversion rounds the product: no fused multiply-add.
					acc[i] += float32(wj * v[i])
				}
			}
		}
	}
	dwn := s.dwn.Slice(0, rows)
	if err := b.Upload(dwn, sum); err != nil {
		return err
	}
	return b.Add(x, x, dwn)
}

// moeHost holds the host-side buffers of moeFFN, grown to the largest
// batch seen and reused (guarded by Model.mu, as the scratch tensors).
type moeHost struct {
	logits, w, outs, tmp []float32
	sel                  []int
	byExpert             [][]int
}

func (h *moeHost) grow(rows, experts, k, d int) {
	if len(h.logits) < rows*experts {
		h.logits = make([]float32, rows*experts)
	}
	if len(h.sel) < rows*k {
		h.sel, h.w = make([]int, rows*k), make([]float32, rows*k)
	}
	if len(h.outs) < rows*k*d {
		h.outs = make([]float32, rows*k*d)
	}
	if len(h.tmp) < rows*d {
		h.tmp = make([]float32, rows*d)
	}
	if len(h.byExpert) != experts {
		h.byExpert = make([][]int, experts)
	}
}
