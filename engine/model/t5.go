package model

import (
	"errors"
	"fmt"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/kernels"
)

// t5MaxDistance is T5's relative_attention_max_distance, which llama.cpp
// fixes at 128 (llama_relative_position_bucket).
const t5MaxDistance = 128

// t5Config reads the hyperparameters of a T5 encoder as llama.cpp's t5 and
// t5encoder loaders do (src/models/t5.cpp, t5encoder.cpp): the encoder's
// block_count, embedding_length, feed_forward_length, head_count (and
// head_count_kv, equal), key_length and value_length (equal; default
// embedding_length/head_count), layer_norm_rms_epsilon and
// relative_buckets_count. A t5 file's decoder keys are not read.
func t5Config(f *gguf.File, arch string) (Config, error) {
	c := Config{Arch: arch, Encoder: true}
	p := arch + "."
	var err error
	for _, k := range []struct {
		dst *int
		key string
	}{{&c.Layers, "block_count"}, {&c.DModel, "embedding_length"}, {&c.FFN, "feed_forward_length"},
		{&c.Heads, "attention.head_count"}, {&c.Context, "context_length"}, {&c.RelBuckets, "attention.relative_buckets_count"}} {
		if *k.dst, err = intKey(f, p+k.key, 0, true); err != nil {
			return c, err
		}
	}
	if c.KVHeads, err = intKey(f, p+"attention.head_count_kv", c.Heads, false); err != nil {
		return c, err
	}
	if c.KVHeads != c.Heads {
		return c, fmt.Errorf("%w: %s with %d heads, %d kv heads", ErrUnsupported, arch, c.Heads, c.KVHeads)
	}
	def := 0
	if c.DModel%c.Heads == 0 {
		def = c.DModel / c.Heads
	}
	if c.HeadDim, err = intKey(f, p+"attention.key_length", def, def == 0); err != nil {
		return c, err
	}
	vd, err := intKey(f, p+"attention.value_length", c.HeadDim, false)
	if err != nil {
		return c, err
	}
	if vd != c.HeadDim || c.HeadDim == 0 {
		return c, fmt.Errorf("%w: %s key length %d, value length %d", ErrUnsupported, arch, c.HeadDim, vd)
	}
	if c.Heads > 1<<16 || c.HeadDim > 1<<16 {
		return c, fmt.Errorf("%w: %d heads of %d", ErrModel, c.Heads, c.HeadDim)
	}
	// Bidirectional buckets: one exact bucket per side at least, and a
	// maximum distance beyond the exact ones (kernels.PosBias.Check).
	if half := c.RelBuckets / 2; half < 2 || half/2 >= t5MaxDistance || c.RelBuckets > 1<<16 {
		return c, fmt.Errorf("%w: relative_buckets_count %d", ErrModel, c.RelBuckets)
	}
	// T5's encoder is bidirectional (llama_encode forces it so). A file
	// without attention.causal runs bidirectionally here, although
	// llama.cpp's llama_decode, which its embedding paths call, then masks
	// it causally (its hparams default); a file that asks for causal
	// attention is refused.
	if v, ok := f.Get(p + "attention.causal"); ok {
		if b, ok := v.Bool(); !ok || b {
			return c, fmt.Errorf("%w: a causal %s", ErrUnsupported, arch)
		}
	}
	eps, err := floatKey(f, p+"attention.layer_norm_rms_epsilon", 0, true)
	if err != nil {
		return c, err
	}
	if c.RMSEps = float32(eps); eps <= 0 || eps > 1 || c.RMSEps == 0 {
		return c, fmt.Errorf("%w: rms norm epsilon %g", ErrModel, eps)
	}
	// llama.cpp reads pooling_type for every architecture; without one a
	// T5 encoder serves no embeddings (PoolNone), as llama-server's
	// OpenAI-compatible endpoint refuses pooling none. A t5encoder has no
	// classification head: rank is refused.
	pool, err := intKey(f, p+"pooling_type", 0, false)
	if err != nil {
		return c, err
	}
	switch c.Pooling = Pooling(pool); c.Pooling {
	case PoolNone, PoolMean, PoolCLS, PoolLast:
	default:
		return c, fmt.Errorf("%w: %s pooling_type %d (mean, cls or last)", ErrUnsupported, arch, pool)
	}
	return c, nil
}

// t5enc holds a T5 encoder's weights (encoder.t5; nil for BERT). The RMS
// norm weights live on the backend (RMSNorm, batch invariant); the
// relative-position bias tables on the host, as kernels.PosBias reads them.
type t5enc struct {
	layers  []t5Layer
	outNorm kernels.Tensor // enc.output_norm
	geglu   kernels.GeGLUer
}

type t5Layer struct {
	attnNorm, ffnNorm kernels.Tensor
	wq, wk, wv, wo    kernels.Matrix
	up, gate, down    kernels.Matrix // gate nil: ReLU feed-forward (T5); else gelu(gate)·up (flan-T5)
	bias              *kernels.PosBias
}

// loadT5 builds a T5 encoder (t5encoder, or a t5 file's encoder half; the
// decoder's dec.* tensors are not read) as llama.cpp's loaders read it:
// token_embd; per layer enc.blk.N.attn_norm, attn_q/k/v/o (no biases),
// attn_rel_b (optional: a layer without uses layer 0's), ffn_norm, ffn_up,
// ffn_gate (optional), ffn_down; enc.output_norm.
func loadT5(b kernels.Backend, f *gguf.File, c Config) (*Model, error) {
	m := &Model{Config: c, b: b}
	t := &t5enc{}
	m.enc = &encoder{t5: t}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	if err := m.encoderEmbeddings(f); err != nil {
		return nil, err
	}
	var err error
	if t.outNorm, err = m.vector(f, "enc.output_norm.weight", c.DModel); err != nil {
		return nil, err
	}
	d, q := c.DModel, c.Heads*c.HeadDim
	t.layers = make([]t5Layer, c.Layers)
	for i := range t.layers {
		l := &t.layers[i]
		p := fmt.Sprintf("enc.blk.%d.", i)
		var errs []error
		mat := func(name string, rows, cols int) kernels.Matrix {
			w, err := m.matrix(f, p+name, rows, cols, true)
			errs = append(errs, err)
			return w
		}
		vec := func(name string) kernels.Tensor {
			v, err := m.vector(f, p+name, d)
			errs = append(errs, err)
			return v
		}
		for _, name := range []string{"attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_o.bias", "ffn_up.bias", "ffn_down.bias"} {
			if _, found := f.Tensor(p + name); found {
				return nil, fmt.Errorf("%w: tensor %s%s", ErrUnsupported, p, name)
			}
		}
		l.attnNorm, l.ffnNorm = vec("attn_norm.weight"), vec("ffn_norm.weight")
		l.wq, l.wk, l.wv = mat("attn_q.weight", q, d), mat("attn_k.weight", q, d), mat("attn_v.weight", q, d)
		l.wo = mat("attn_o.weight", d, q)
		l.up, l.down = mat("ffn_up.weight", c.FFN, d), mat("ffn_down.weight", d, c.FFN)
		if _, found := f.Tensor(p + "ffn_gate.weight"); found {
			l.gate = mat("ffn_gate.weight", c.FFN, d)
			if t.geglu == nil {
				if t.geglu, _ = b.(kernels.GeGLUer); t.geglu == nil {
					return nil, fmt.Errorf("%w: a gated-GELU T5 needs GeGLU, which backend %s lacks", ErrUnsupported, b.Name())
				}
			}
		}
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		rb, found := f.Tensor(p + "attn_rel_b.weight")
		switch {
		case found:
			if len(rb.Dims) != 2 || rb.Dims[0] != uint64(c.Heads) || rb.Dims[1] != uint64(c.RelBuckets) {
				return nil, fmt.Errorf("%w: tensor %sattn_rel_b.weight has shape %v, want [%d %d]", ErrModel, p, rb.Dims, c.Heads, c.RelBuckets)
			}
			tab := make([]float32, c.Heads*c.RelBuckets)
			if err := kernels.Dequantize(tab, kernels.DType(rb.Type), f.Data(rb)); err != nil {
				return nil, fmt.Errorf("%w: tensor %sattn_rel_b.weight: %v", ErrModel, p, err)
			}
			l.bias = &kernels.PosBias{Heads: c.Heads, Buckets: c.RelBuckets, MaxDistance: t5MaxDistance, Bidirectional: true, Table: tab}
			if err := l.bias.Check(c.Heads); err != nil {
				return nil, fmt.Errorf("%w: %v", ErrModel, err)
			}
		case i == 0:
			return nil, fmt.Errorf("%w: tensor enc.blk.0.attn_rel_b.weight missing", ErrModel)
		default:
			l.bias = t.layers[0].bias
		}
	}
	ok = true
	return m, nil
}

// t5Layers runs a T5 encoder over the rows of a validated batch (encForward
// checked it, holds m.mu and sized the scratch): token embedding; per layer
// RMSNorm (attn_norm), Q/K/V, K and V written to the sequences' pages,
// bidirectional attention through the arena with the layer's relative
// position bias and no 1/sqrt(d) scale, output projection, residual; RMSNorm
// (ffn_norm), gelu(gate)·up (flan-T5) or relu(up) (T5), down, residual;
// RMSNorm (enc.output_norm). x holds the result.
func (m *Model) t5Layers(a kernels.Arena, x kernels.Tensor, ids []int32, spans []kernels.Span) error {
	wa, ok := a.(kernels.WindowAttender)
	if !ok {
		return fmt.Errorf("%w: %s needs bidirectional attention with a position bias, which this arena lacks", ErrUnsupported, m.Arch)
	}
	t, b, rows := m.enc.t5, m.b, len(ids)
	sc := &m.sc
	h, q, k, v := sc.h.Slice(0, rows), sc.q.Slice(0, rows), sc.k.Slice(0, rows), sc.v.Slice(0, rows)
	att, o, gate, up, dwn := sc.att.Slice(0, rows), sc.o.Slice(0, rows), sc.gate.Slice(0, rows), sc.up.Slice(0, rows), sc.dwn.Slice(0, rows)
	if err := b.Embed(x, m.embd, ids); err != nil {
		return err
	}
	for li := range t.layers {
		l := &t.layers[li]
		if err := b.RMSNorm(h, x, l.attnNorm, m.RMSEps); err != nil {
			return err
		}
		if err := kernels.MultiMatMul(b, []kernels.Tensor{q, k, v}, h, []kernels.Matrix{l.wq, l.wk, l.wv}); err != nil {
			return err
		}
		if err := a.WriteKV(li, k, v, spans); err != nil {
			return fmt.Errorf("model: layer %d: writing KV: %w", li, err)
		}
		opt := kernels.AttentionOptions{Bidirectional: true, Scale: 1, Bias: l.bias}
		if err := wa.AttentionWith(li, att, q, spans, opt); err != nil {
			return fmt.Errorf("model: layer %d: attention: %w", li, err)
		}
		if err := errors.Join(b.MatMul(o, att, l.wo), b.Add(x, x, o)); err != nil {
			return err
		}
		if err := b.RMSNorm(h, x, l.ffnNorm, m.RMSEps); err != nil {
			return err
		}
		if err := b.MatMul(up, h, l.up); err != nil {
			return err
		}
		act := up
		if l.gate != nil {
			if err := errors.Join(b.MatMul(gate, h, l.gate), t.geglu.GeGLU(gate, gate, up)); err != nil {
				return err
			}
			act = gate
		} else if err := m.relu(up); err != nil {
			return err
		}
		if err := errors.Join(b.MatMul(dwn, act, l.down), b.Add(x, x, dwn)); err != nil {
			return err
		}
	}
	return b.RMSNorm(x, x, t.outNorm, m.RMSEps)
}

// relu sets t = max(t, 0) in place, on the host.
func (m *Model) relu(t kernels.Tensor) error {
	buf := m.enc.host[:t.Rows()*t.Cols()]
	if err := m.b.Download(buf, t); err != nil {
		return err
	}
	for i, v := range buf {
		if !(v > 0) {
			buf[i] = 0
		}
	}
	return m.b.Upload(t, buf)
}
