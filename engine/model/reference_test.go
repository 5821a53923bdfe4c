package model

import (
	"math"
	"sort"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/kernels"
)

// refModel is a float64, dense-KV llama forward pass written from the
// equations, independent of kernels and of the paged arena.
type refModel struct {
	c       Config
	embd    [][]float64
	layers  []refLayer
	outNorm []float64
	output  [][]float64
}

type refLayer struct {
	attnNorm, ffnNorm, bq, bk, bv  []float64
	qNorm, kNorm                   []float64 // per head; nil without
	attnPost, ffnPost              []float64 // gemma3; nil without
	wq, wk, wv, wo, gate, up, down [][]float64
	// Mixture of experts: the router and every expert's matrices.
	router                   [][]float64
	gateExps, upExps, dnExps [][][]float64
}

// refExperts decodes a 3-D [cols, rows, experts] tensor into experts
// matrices of rows×cols.
func refExperts(t testing.TB, f *gguf.File, name string) [][][]float64 {
	ti, ok := f.Tensor(name)
	if !ok || len(ti.Dims) != 3 {
		t.Fatalf("no 3-D tensor %s", name)
	}
	rows, cols, n := int(ti.Dims[1]), int(ti.Dims[0]), int(ti.Dims[2])
	row := make([]float32, cols)
	rb := int(ti.Size) / (rows * n)
	data := f.Data(ti)
	out := make([][][]float64, n)
	for e := range out {
		out[e] = make([][]float64, rows)
		for r := range out[e] {
			off := (e*rows + r) * rb
			if err := kernels.Dequantize(row, kernels.DType(ti.Type), data[off:off+rb]); err != nil {
				t.Fatal(err)
			}
			out[e][r] = make([]float64, cols)
			for i, v := range row {
				out[e][r][i] = float64(v)
			}
		}
	}
	return out
}

// refMoE is the mixture of experts from its definition: softmax over the
// router's logits, the k most probable experts, their probabilities
// renormalised to sum 1, and the weighted sum of their SwiGLU outputs.
func refMoE(l refLayer, h []float64, k int) []float64 {
	logits := matvec(l.router, h, nil)
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, v)
	}
	probs := make([]float64, len(logits))
	sum := 0.0
	for i, v := range logits {
		probs[i] = math.Exp(v - mx)
		sum += probs[i]
	}
	idx := make([]int, len(probs))
	for i := range idx {
		idx[i] = i
		probs[i] /= sum
	}
	sort.SliceStable(idx, func(a, b int) bool { return probs[idx[a]] > probs[idx[b]] })
	ws := 0.0
	for _, e := range idx[:k] {
		ws += probs[e]
	}
	out := make([]float64, len(h))
	for _, e := range idx[:k] {
		g, u := matvec(l.gateExps[e], h, nil), matvec(l.upExps[e], h, nil)
		for i := range g {
			g[i] = g[i] / (1 + math.Exp(-g[i])) * u[i]
		}
		for i, v := range matvec(l.dnExps[e], g, nil) {
			out[i] += probs[e] / ws * v
		}
	}
	return out
}

func refMatrix(t testing.TB, f *gguf.File, name string) [][]float64 {
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	rows, cols := int(ti.Dims[1]), int(ti.Dims[0])
	row := make([]float32, cols)
	rb := int(ti.Size) / rows
	data := f.Data(ti)
	out := make([][]float64, rows)
	for r := range out {
		if err := kernels.Dequantize(row, kernels.DType(ti.Type), data[r*rb:(r+1)*rb]); err != nil {
			t.Fatal(err)
		}
		out[r] = make([]float64, cols)
		for i, v := range row {
			out[r][i] = float64(v)
		}
	}
	return out
}

func refVector(t testing.TB, f *gguf.File, name string) []float64 {
	ti, ok := f.Tensor(name)
	if !ok {
		return nil
	}
	x := make([]float32, ti.Elements())
	if err := kernels.Dequantize(x, kernels.DType(ti.Type), f.Data(ti)); err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	return out
}

func newRef(t testing.TB, f *gguf.File) *refModel {
	c, err := ConfigFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	r := &refModel{c: c, embd: refMatrix(t, f, "token_embd.weight"), outNorm: refVector(t, f, "output_norm.weight")}
	if fs := refVector(t, f, "rope_freqs.weight"); fs != nil { // llama3 frequency factors, every layer
		c.RoPE.Factors = make([]float32, len(fs))
		for i, v := range fs {
			c.RoPE.Factors[i] = float32(v)
		}
		c.RoPESWA.Factors = c.RoPE.Factors
		r.c = c
	}
	if _, ok := f.Tensor("output.weight"); ok {
		r.output = refMatrix(t, f, "output.weight")
	} else {
		r.output = r.embd
	}
	for i := 0; i < c.Layers; i++ {
		p := "blk." + itoa(i) + "."
		l := refLayer{
			attnNorm: refVector(t, f, p+"attn_norm.weight"), ffnNorm: refVector(t, f, p+"ffn_norm.weight"),
			bq: refVector(t, f, p+"attn_q.bias"), bk: refVector(t, f, p+"attn_k.bias"), bv: refVector(t, f, p+"attn_v.bias"),
			qNorm: refVector(t, f, p+"attn_q_norm.weight"), kNorm: refVector(t, f, p+"attn_k_norm.weight"),
			attnPost: refVector(t, f, p+"post_attention_norm.weight"), ffnPost: refVector(t, f, p+"post_ffw_norm.weight"),
			wo: refMatrix(t, f, p+"attn_output.weight"),
		}
		if _, fused := f.Tensor(p + "attn_qkv.weight"); fused {
			w := refMatrix(t, f, p+"attn_qkv.weight")
			q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
			l.wq, l.wk, l.wv = w[:q], w[q:q+kv], w[q+kv:]
		} else {
			l.wq, l.wk, l.wv = refMatrix(t, f, p+"attn_q.weight"), refMatrix(t, f, p+"attn_k.weight"), refMatrix(t, f, p+"attn_v.weight")
		}
		if c.Experts > 0 {
			l.router = refMatrix(t, f, p+"ffn_gate_inp.weight")
			l.gateExps, l.upExps = refExperts(t, f, p+"ffn_gate_exps.weight"), refExperts(t, f, p+"ffn_up_exps.weight")
			l.dnExps = refExperts(t, f, p+"ffn_down_exps.weight")
		} else if _, gated := f.Tensor(p + "ffn_gate.weight"); gated {
			l.gate, l.up, l.down = refMatrix(t, f, p+"ffn_gate.weight"), refMatrix(t, f, p+"ffn_up.weight"), refMatrix(t, f, p+"ffn_down.weight")
		} else { // phi3: gate rows, then up rows
			w := refMatrix(t, f, p+"ffn_up.weight")
			l.gate, l.up, l.down = w[:c.FFN], w[c.FFN:], refMatrix(t, f, p+"ffn_down.weight")
		}
		r.layers = append(r.layers, l)
	}
	return r
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	s := ""
	for ; i > 0; i /= 10 {
		s = string(rune('0'+i%10)) + s
	}
	return s
}

func matvec(w [][]float64, x, bias []float64) []float64 {
	out := make([]float64, len(w))
	for r, row := range w {
		s := 0.0
		for i, v := range row {
			s += v * x[i]
		}
		if bias != nil {
			s += bias[r]
		}
		out[r] = s
	}
	return out
}

func rmsnorm(x, w []float64, eps float64) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s * w[i]
	}
	return out
}

// headNorm RMS-normalises each hd-wide head of x in place.
func headNorm(x, w []float64, hd int, eps float64) {
	for h := 0; h < len(x); h += hd {
		copy(x[h:h+hd], rmsnorm(x[h:h+hd], w, eps))
	}
}

func (r *refModel) rope(x []float64, pos int, p kernels.RoPE) {
	hd, dims := p.HeadDim, p.Dims
	scale := float64(p.Scale)
	if scale == 0 {
		scale = 1
	}
	for h := 0; h < len(x)/hd; h++ {
		v := x[h*hd : (h+1)*hd]
		for i := 0; i < dims/2; i++ {
			theta := float64(pos) * scale * math.Pow(float64(p.Base), -2*float64(i)/float64(dims))
			if p.Factors != nil {
				theta /= float64(p.Factors[i])
			}
			a, b := 2*i, 2*i+1
			if p.NeoX {
				a, b = i, i+dims/2
			}
			s, c := math.Sincos(theta)
			v[a], v[b] = v[a]*c-v[b]*s, v[a]*s+v[b]*c
		}
	}
}

// forward returns the logits of every position of toks.
func (r *refModel) forward(toks []int32) [][]float64 {
	c := r.c
	eps := float64(c.RMSEps)
	hd := c.HeadDim
	group := c.Heads / c.KVHeads
	xs := make([][]float64, len(toks))
	for i, id := range toks {
		xs[i] = append([]float64(nil), r.embd[id]...)
		if c.EmbedScale != 0 {
			for j := range xs[i] {
				xs[i][j] *= float64(c.EmbedScale)
			}
		}
	}
	// add adds the sublayer output o to x, normalised by post (gemma3) and
	// scaled (granite) first.
	add := func(x, o, post []float64) {
		if post != nil {
			o = rmsnorm(o, post, eps)
		}
		for i := range o {
			if c.ResidualScale != 0 {
				o[i] *= float64(c.ResidualScale)
			}
			x[i] += o[i]
		}
	}
	scale := 1 / math.Sqrt(float64(hd))
	if c.AttnScale != 0 {
		scale = float64(c.AttnScale)
	}
	for li, l := range r.layers {
		rope, window := c.RoPE, 0
		if c.SWA != nil && c.SWA[li] {
			rope, window = c.RoPESWA, c.Window
		}
		ks := make([][]float64, len(toks))
		vs := make([][]float64, len(toks))
		qs := make([][]float64, len(toks))
		for p := range toks {
			h := rmsnorm(xs[p], l.attnNorm, eps)
			qs[p], ks[p], vs[p] = matvec(l.wq, h, l.bq), matvec(l.wk, h, l.bk), matvec(l.wv, h, l.bv)
			if l.qNorm != nil { // qwen3: each head normalised on its own
				headNorm(qs[p], l.qNorm, hd, eps)
				headNorm(ks[p], l.kNorm, hd, eps)
			}
			r.rope(qs[p], p, rope)
			r.rope(ks[p], p, rope)
		}
		for p := range toks {
			att := make([]float64, c.Heads*hd)
			for h := 0; h < c.Heads; h++ {
				kh := h / group
				q := qs[p][h*hd : (h+1)*hd]
				lo := 0 // a sliding window sees positions p−window+1…p
				if window > 0 {
					lo = max(0, p-window+1)
				}
				scores := make([]float64, p+1)
				mx := math.Inf(-1)
				for j := lo; j <= p; j++ {
					s := 0.0
					for i := 0; i < hd; i++ {
						s += q[i] * ks[j][kh*hd+i]
					}
					scores[j] = s * scale
					mx = math.Max(mx, scores[j])
				}
				sum := 0.0
				for j := lo; j <= p; j++ {
					scores[j] = math.Exp(scores[j] - mx)
					sum += scores[j]
				}
				for j := lo; j <= p; j++ {
					for i := 0; i < hd; i++ {
						att[h*hd+i] += scores[j] / sum * vs[j][kh*hd+i]
					}
				}
			}
			add(xs[p], matvec(l.wo, att, nil), l.attnPost)
			h := rmsnorm(xs[p], l.ffnNorm, eps)
			if l.router != nil {
				add(xs[p], refMoE(l, h, c.ExpertsUsed), l.ffnPost)
				continue
			}
			g, u := matvec(l.gate, h, nil), matvec(l.up, h, nil)
			for i, x := range g {
				if c.GeGLU {
					g[i] = 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))) * u[i]
				} else {
					g[i] = x / (1 + math.Exp(-x)) * u[i]
				}
			}
			add(xs[p], matvec(l.down, g, nil), l.ffnPost)
		}
	}
	out := make([][]float64, len(toks))
	for p := range toks {
		out[p] = matvec(r.output, rmsnorm(xs[p], r.outNorm, eps), nil)
		for i, v := range out[p] {
			if c.LogitScale != 0 {
				v /= float64(c.LogitScale)
			}
			if cap := float64(c.FinalSoftcap); cap != 0 {
				v = cap * math.Tanh(v/cap)
			}
			out[p][i] = v
		}
	}
	return out
}
