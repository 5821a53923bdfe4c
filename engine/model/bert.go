package model

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/kernels"
)

// encoders are the BERT-family architectures: bidirectional encoders that
// serve embeddings (and, with a classification head, rank scores) but
// generate nothing. See the package documentation.
var encoders = map[string]struct {
	rope   bool // nomic-bert: NeoX RoPE on Q and K, no position embeddings
	swiglu bool // nomic-bert: ffn_gate and SwiGLU instead of GELU
	t5     bool // a T5 encoder (t5.go): RMS norms, relative position bias
}{
	"bert":       {},
	"nomic-bert": {rope: true, swiglu: true},
	"t5encoder":  {t5: true},
	"t5":         {t5: true}, // its encoder half
}

// encoderConfig reads the hyperparameters of a BERT-family file as
// llama.cpp's loaders do (src/models/bert.cpp, nomic-bert.cpp).
func encoderConfig(f *gguf.File, arch string) (Config, error) {
	ad := encoders[arch]
	if ad.t5 {
		return t5Config(f, arch)
	}
	c := Config{Arch: arch, Encoder: true}
	p := arch + "."
	var err error
	for _, k := range []struct {
		dst *int
		key string
	}{{&c.Layers, "block_count"}, {&c.DModel, "embedding_length"}, {&c.FFN, "feed_forward_length"},
		{&c.Heads, "attention.head_count"}, {&c.Context, "context_length"}} {
		if *k.dst, err = intKey(f, p+k.key, 0, true); err != nil {
			return c, err
		}
	}
	if c.KVHeads, err = intKey(f, p+"attention.head_count_kv", c.Heads, false); err != nil {
		return c, err
	}
	if c.KVHeads != c.Heads || c.DModel%c.Heads != 0 {
		return c, fmt.Errorf("%w: %s with %d heads, %d kv heads over %d", ErrUnsupported, arch, c.Heads, c.KVHeads, c.DModel)
	}
	c.HeadDim = c.DModel / c.Heads
	if c.HeadDim%2 != 0 {
		return c, fmt.Errorf("%w: head dim %d is odd", ErrModel, c.HeadDim)
	}
	if v, ok := f.Get(p + "attention.causal"); ok {
		if b, ok := v.Bool(); !ok || b {
			return c, fmt.Errorf("%w: a causal %s", ErrUnsupported, arch)
		}
	}
	eps, err := floatKey(f, p+"attention.layer_norm_epsilon", 0, true)
	if err != nil {
		return c, err
	}
	if c.NormEps = float32(eps); eps <= 0 || eps > 1 || c.NormEps == 0 {
		return c, fmt.Errorf("%w: layer norm epsilon %g", ErrModel, eps)
	}
	pool, err := intKey(f, p+"pooling_type", int(PoolCLS), false)
	if err != nil {
		return c, err
	}
	switch c.Pooling = Pooling(pool); c.Pooling {
	case PoolMean, PoolCLS, PoolRank:
	default:
		return c, fmt.Errorf("%w: %s pooling_type %d (mean, cls or rank)", ErrUnsupported, arch, pool)
	}
	if ad.rope {
		base, err := floatKey(f, p+"rope.freq_base", 10000, false)
		if err != nil {
			return c, err
		}
		if base <= 1 {
			return c, fmt.Errorf("%w: rope.freq_base %g", ErrModel, base)
		}
		c.RoPE = kernels.RoPE{HeadDim: c.HeadDim, Dims: c.HeadDim, NeoX: true, Base: float32(base), Scale: 1}
		c.RoPESWA = c.RoPE
	}
	return c, nil
}

// encoder holds what a BERT-family model adds to Model (nil for a
// decoder). Norm weights and the classification head stay on the host:
// the layer norms and the head run there, in float32 per row (float64 sums),
// so they are batch invariant on every backend.
type encoder struct {
	rope, swiglu bool
	typ0         kernels.Tensor // 1×DModel: row 0 of token_types (nil without)
	pos          kernels.Matrix // position_embd (bert; nil for nomic-bert)
	embNorm      hostNorm
	layers       []encLayer
	host         []float32 // rows×max(DModel, FFN) staging buffer
	t5           *t5enc    // a T5 encoder's weights (t5.go); nil for BERT
}

type hostNorm struct{ w, b []float32 }

type encLayer struct {
	wq, wk, wv, wo    kernels.Matrix
	bq, bk, bv, bo    kernels.Tensor // nil when absent
	attnNorm, outNorm hostNorm
	up, gate, down    kernels.Matrix // gate: nomic-bert only
	bup, bdown        kernels.Tensor
}

// loadEncoder builds a BERT-family model (Load's path for c.Encoder).
func loadEncoder(b kernels.Backend, f *gguf.File, c Config) (*Model, error) {
	ad := encoders[c.Arch]
	if ad.t5 {
		return loadT5(b, f, c)
	}
	m := &Model{Config: c, b: b}
	e := &encoder{rope: ad.rope, swiglu: ad.swiglu}
	m.enc = e
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
	if t, found := f.Tensor("token_types.weight"); found {
		// llama.cpp gives every token type 0 ("sentence A"), query and
		// document alike: only row 0 is read.
		if len(t.Dims) != 2 || t.Dims[0] != uint64(c.DModel) || t.Dims[1] == 0 {
			return nil, fmt.Errorf("%w: token_types.weight has shape %v", ErrModel, t.Dims)
		}
		all := make([]float32, t.Elements())
		if err := kernels.Dequantize(all, kernels.DType(t.Type), f.Data(t)); err != nil {
			return nil, fmt.Errorf("%w: token_types.weight: %v", ErrModel, err)
		}
		if e.typ0, err = m.upload(all[:c.DModel]); err != nil {
			return nil, err
		}
	}
	if !e.rope {
		if e.pos, err = m.matrix(f, "position_embd.weight", c.Context, c.DModel, false); err != nil {
			return nil, err
		}
	}
	if e.embNorm, err = m.hostNorm(f, "token_embd_norm", c.DModel); err != nil {
		return nil, err
	}
	d := c.DModel
	e.layers = make([]encLayer, c.Layers)
	for i := range e.layers {
		l := &e.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		var errs []error
		mat := func(name string, rows, cols int) kernels.Matrix {
			w, err := m.matrix(f, p+name, rows, cols, true)
			errs = append(errs, err)
			return w
		}
		bias := func(name string, n int) kernels.Tensor {
			if _, found := f.Tensor(p + name); !found {
				return nil
			}
			t, err := m.vector(f, p+name, n)
			errs = append(errs, err)
			return t
		}
		if _, fused := f.Tensor(p + "attn_qkv.weight"); fused {
			ws, err := m.split(f, p+"attn_qkv.weight", []int{d, d, d}, d)
			if err != nil {
				return nil, err
			}
			l.wq, l.wk, l.wv = ws[0], ws[1], ws[2]
			if t, found := f.Tensor(p + "attn_qkv.bias"); found {
				bs, err := m.splitVector(f, t, []int{d, d, d})
				if err != nil {
					return nil, err
				}
				l.bq, l.bk, l.bv = bs[0], bs[1], bs[2]
			}
		} else {
			l.wq, l.wk, l.wv = mat("attn_q.weight", d, d), mat("attn_k.weight", d, d), mat("attn_v.weight", d, d)
			l.bq, l.bk, l.bv = bias("attn_q.bias", d), bias("attn_k.bias", d), bias("attn_v.bias", d)
		}
		for _, name := range []string{"attn_q_norm.weight", "attn_k_norm.weight", "attn_norm_2.weight", "ffn_gate_inp.weight"} {
			if _, found := f.Tensor(p + name); found {
				return nil, fmt.Errorf("%w: tensor %s%s", ErrUnsupported, p, name)
			}
		}
		l.wo, l.bo = mat("attn_output.weight", d, d), bias("attn_output.bias", d)
		l.up, l.bup = mat("ffn_up.weight", c.FFN, d), bias("ffn_up.bias", c.FFN)
		if e.swiglu {
			l.gate = mat("ffn_gate.weight", c.FFN, d)
		}
		l.down, l.bdown = mat("ffn_down.weight", d, c.FFN), bias("ffn_down.bias", d)
		var err error
		l.attnNorm, err = m.hostNorm(f, p+"attn_output_norm", d)
		errs = append(errs, err)
		l.outNorm, err = m.hostNorm(f, p+"layer_output_norm", d)
		errs = append(errs, err)
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	head, err := loadRankHead(f, c)
	if err != nil {
		return nil, err
	}
	if c.Pooling == PoolRank {
		m.head = head
	}
	ok = true
	return m, nil
}

// hostNorm reads a LayerNorm's weight and bias (name.weight, name.bias).
func (m *Model) hostNorm(f *gguf.File, name string, n int) (hostNorm, error) {
	var h hostNorm
	for _, x := range []struct {
		dst *[]float32
		sfx string
	}{{&h.w, ".weight"}, {&h.b, ".bias"}} {
		t, ok := f.Tensor(name + x.sfx)
		if !ok {
			return h, fmt.Errorf("%w: tensor %s%s missing", ErrModel, name, x.sfx)
		}
		v, err := floats(f, t, n)
		if err != nil {
			return h, err
		}
		*x.dst = v
	}
	return h, nil
}

func (m *Model) upload(x []float32) (kernels.Tensor, error) {
	t, err := m.b.NewTensor(1, len(x))
	if err != nil {
		return nil, err
	}
	m.owned = append(m.owned, t)
	return t, m.b.Upload(t, x)
}

// encForward is Forward for an encoder: every sequence is a whole input
// (Pos 0) that asks for its hidden states (Seq.Hidden); each token attends
// to every token of its sequence, before and after it. K and V are written
// to the sequence's pages and read back through the arena, tag-checked,
// as a decoder's are; the non-causal read is bidirectional AttentionWith
// over each sequence's span (or, on an arena without it, Attention with one
// span per query row placed at the sequence's last position), so every row
// reads all of its sequence's positions and nothing else.
func (m *Model) encForward(a kernels.Arena, batch []Seq) ([][]float32, error) {
	if len(batch) == 0 {
		return nil, fmt.Errorf("%w: empty batch", ErrBatch)
	}
	ac := a.Config()
	if ac.Layers != m.Layers || ac.KVHeads != m.KVHeads || ac.HeadDim != m.HeadDim {
		return nil, fmt.Errorf("%w: arena %+v does not fit the model", ErrBatch, ac)
	}
	rows := 0
	for i, s := range batch {
		n := len(s.Tokens)
		switch {
		case !s.Hidden:
			return nil, fmt.Errorf("%w: %s is an encoder: it computes hidden states, not logits", ErrUnsupported, m.Arch)
		case n == 0:
			return nil, fmt.Errorf("%w: sequence %d has no tokens", ErrBatch, i)
		case s.Pos != 0:
			return nil, fmt.Errorf("%w: sequence %d starts at position %d: an encoder's input runs whole", ErrBatch, i, s.Pos)
		case n > m.Context:
			return nil, fmt.Errorf("%w: sequence %d has %d tokens, the context is %d", ErrBatch, i, n, m.Context)
		case n > s.Table.Tokens():
			return nil, fmt.Errorf("%w: sequence %d positions [0, %d) not covered by its block table (%d tokens)", ErrBatch, i, n, s.Table.Tokens())
		case s.Table.PageTokens() != ac.PageTokens:
			return nil, fmt.Errorf("%w: sequence %d table has %d-token pages, arena %d", ErrBatch, i, s.Table.PageTokens(), ac.PageTokens)
		}
		for _, id := range s.Tokens {
			if id < 0 || int(id) >= m.Vocab {
				return nil, fmt.Errorf("%w: sequence %d token %d outside the vocabulary of %d", ErrBatch, i, id, m.Vocab)
			}
		}
		rows += n
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.ensure(rows, 0); err != nil {
		return nil, err
	}
	e := m.enc
	if need := rows * max(m.DModel, m.FFN); len(e.host) < need {
		e.host = make([]float32, need)
	}
	ids := make([]int32, 0, rows)
	pos := make([]int32, 0, rows)
	spans := make([]kernels.Span, len(batch))
	for i, s := range batch {
		spans[i] = kernels.Span{Table: s.Table, Row: len(ids), Pos: 0, N: len(s.Tokens)}
		for j, id := range s.Tokens {
			ids = append(ids, id)
			pos = append(pos, int32(j))
		}
	}
	if e.t5 != nil {
		x := m.sc.x.Slice(0, rows)
		if err := m.t5Layers(a, x, ids, spans); err != nil {
			return nil, err
		}
		return m.hiddenOf(x, spans)
	}
	// The non-causal read: a WindowAttender's bidirectional attention over
	// each whole span (its query rows share the span's keys and values);
	// without one, Attention with one span per query row placed at its
	// sequence's last position.
	var attend func(li int, att, q kernels.Tensor) error
	if wa, ok := a.(kernels.WindowAttender); ok {
		opt := kernels.AttentionOptions{Bidirectional: true}
		attend = func(li int, att, q kernels.Tensor) error { return wa.AttentionWith(li, att, q, spans, opt) }
	} else {
		full := perRow(spans)
		attend = func(li int, att, q kernels.Tensor) error { return a.Attention(li, att, q, full) }
	}
	sc := &m.sc
	x, h, q, k, v := sc.x.Slice(0, rows), sc.h.Slice(0, rows), sc.q.Slice(0, rows), sc.k.Slice(0, rows), sc.v.Slice(0, rows)
	att, o, gate, up, dwn := sc.att.Slice(0, rows), sc.o.Slice(0, rows), sc.gate.Slice(0, rows), sc.up.Slice(0, rows), sc.dwn.Slice(0, rows)
	b := m.b
	addBias := func(t, bias kernels.Tensor) error {
		if bias == nil {
			return nil
		}
		return b.Add(t, t, bias)
	}
	if err := b.Embed(x, m.embd, ids); err != nil {
		return nil, err
	}
	if err := addBias(x, e.typ0); err != nil {
		return nil, err
	}
	if e.pos != nil {
		if err := errors.Join(b.Embed(h, e.pos, pos), b.Add(x, x, h)); err != nil {
			return nil, err
		}
	}
	if err := m.layerNorm(x, x, e.embNorm); err != nil {
		return nil, err
	}
	for li := range e.layers {
		l := &e.layers[li]
		if err := kernels.MultiMatMul(b, []kernels.Tensor{q, k, v}, x, []kernels.Matrix{l.wq, l.wk, l.wv}); err != nil {
			return nil, err
		}
		if err := errors.Join(addBias(q, l.bq), addBias(k, l.bk), addBias(v, l.bv)); err != nil {
			return nil, err
		}
		if e.rope {
			if err := errors.Join(b.RoPE(q, pos, m.RoPE), b.RoPE(k, pos, m.RoPE)); err != nil {
				return nil, err
			}
		}
		if err := a.WriteKV(li, k, v, spans); err != nil {
			return nil, fmt.Errorf("model: layer %d: writing KV: %w", li, err)
		}
		if err := attend(li, att, q); err != nil {
			return nil, fmt.Errorf("model: layer %d: attention: %w", li, err)
		}
		if err := errors.Join(b.MatMul(o, att, l.wo), addBias(o, l.bo), b.Add(o, o, x)); err != nil {
			return nil, err
		}
		if err := m.layerNorm(x, o, l.attnNorm); err != nil {
			return nil, err
		}
		if err := errors.Join(b.MatMul(up, x, l.up), addBias(up, l.bup)); err != nil {
			return nil, err
		}
		act := up
		if e.swiglu {
			if err := errors.Join(b.MatMul(gate, x, l.gate), b.SwiGLU(gate, gate, up)); err != nil {
				return nil, err
			}
			act = gate
		} else if err := m.gelu(up); err != nil {
			return nil, err
		}
		if err := errors.Join(b.MatMul(dwn, act, l.down), addBias(dwn, l.bdown), b.Add(dwn, dwn, x)); err != nil {
			return nil, err
		}
		if err := m.layerNorm(x, dwn, l.outNorm); err != nil {
			return nil, err
		}
	}
	return m.hiddenOf(x, spans)
}

// perRow is spans cut into one span per row, each placed at its
// sequence's last position, so that causal Attention reads every position
// of the row's sequence.
func perRow(spans []kernels.Span) []kernels.Span {
	var full []kernels.Span
	for _, s := range spans {
		for j := range s.N {
			full = append(full, kernels.Span{Table: s.Table, Row: s.Row + j, Pos: s.Pos + s.N - 1, N: 1})
		}
	}
	return full
}

// hiddenOf downloads x's rows and cuts them into each span's.
func (m *Model) hiddenOf(x kernels.Tensor, spans []kernels.Span) ([][]float32, error) {
	hidden := make([]float32, x.Rows()*m.DModel)
	if err := m.b.Download(hidden, x); err != nil {
		return nil, err
	}
	out := make([][]float32, len(spans))
	for i, s := range spans {
		out[i] = hidden[s.Row*m.DModel : (s.Row+s.N)*m.DModel : (s.Row+s.N)*m.DModel]
	}
	return out, nil
}

// layerNorm sets dst = (src − mean) / sqrt(var + eps) ⊙ w + b per row, as
// ggml_norm then the weight and bias (mean and variance summed in float64),
// on the host.
func (m *Model) layerNorm(dst, src kernels.Tensor, n hostNorm) error {
	rows, d := src.Rows(), src.Cols()
	buf := m.enc.host[:rows*d]
	if err := m.b.Download(buf, src); err != nil {
		return err
	}
	eps := float64(m.NormEps)
	parallelRows(rows, d, func(r0, r1 int) {
		for r := r0; r < r1; r++ {
			row := buf[r*d : (r+1)*d]
			var sum float64
			for _, v := range row {
				sum += float64(v)
			}
			mean := float32(sum / float64(d))
			var ss float64
			for j, v := range row {
				v -= mean
				row[j] = v
				ss += float64(v) * float64(v)
			}
			scale := float32(1 / math.Sqrt(ss/float64(d)+eps))
			for j, v := range row {
				row[j] = v*scale*n.w[j] + n.b[j]
			}
		}
	})
	return m.b.Upload(dst, buf)
}

// gelu applies GELU in its tanh approximation (ggml_gelu) in place, on the
// host.
func (m *Model) gelu(t kernels.Tensor) error {
	cols := t.Cols()
	buf := m.enc.host[:t.Rows()*cols]
	if err := m.b.Download(buf, t); err != nil {
		return err
	}
	const c = 0.7978845608028654 // sqrt(2/π)
	parallelRows(t.Rows(), cols, func(r0, r1 int) {
		for i := r0 * cols; i < r1*cols; i++ {
			x := buf[i]
			buf[i] = 0.5 * x * (1 + float32(math.Tanh(c*float64(x+0.044715*x*x*x))))
		}
	})
	return m.b.Upload(t, buf)
}

// parallelRows runs fn over consecutive ranges of rows on up to GOMAXPROCS
// goroutines (one when the work is small). Each row's result depends on
// that row only, so the split changes no bit.
func parallelRows(rows, cols int, fn func(r0, r1 int)) {
	n := min(runtime.GOMAXPROCS(0), rows, max(1, rows*cols/(1<<14)))
	if n <= 1 {
		fn(0, rows)
		return
	}
	var wg sync.WaitGroup
	per := (rows + n - 1) / n
	for r0 := 0; r0 < rows; r0 += per {
		wg.Add(1)
		go func(r0, r1 int) {
			defer wg.Done()
			fn(r0, r1)
		}(r0, min(rows, r0+per))
	}
	wg.Wait()
}

// encoderEmbeddings reads an encoder's token_embd.weight (its rows are the
// vocabulary) and checks the tokenizer and the block count against the
// file.
func (m *Model) encoderEmbeddings(f *gguf.File) error {
	c := m.Config
	emb, found := f.Tensor("token_embd.weight")
	if !found || len(emb.Dims) != 2 || emb.Dims[1] > math.MaxInt32 {
		return fmt.Errorf("%w: token_embd.weight missing or not 2-D", ErrModel)
	}
	m.Vocab = int(emb.Dims[1])
	var err error
	if m.embd, err = m.matrix(f, "token_embd.weight", m.Vocab, c.DModel, false); err != nil {
		return err
	}
	if v, ok := f.Get("tokenizer.ggml.tokens"); ok && v.Len() != m.Vocab {
		return fmt.Errorf("%w: %d tokenizer tokens but token_embd has %d rows", ErrModel, v.Len(), m.Vocab)
	}
	if c.Layers > len(f.Tensors)/8 {
		return fmt.Errorf("%w: block_count %d but only %d tensors", ErrModel, c.Layers, len(f.Tensors))
	}
	return nil
}
