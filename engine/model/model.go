package model

import (
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

type layer struct {
	attnNorm, ffnNorm kernels.Tensor
	wq, wk, wv, wo    kernels.Matrix
	bq, bk, bv        kernels.Tensor // nil without QKV biases
	qNorm, kNorm      kernels.Tensor // 1×HeadDim; nil without QKNorm
	attnPost, ffnPost kernels.Tensor // nil without PostNorms
	gate, up, down    kernels.Matrix // nil in a mixture-of-experts layer
	moe               *moeLayer      // nil in a dense layer
	rope              kernels.RoPE
	attn              kernels.AttentionOptions
	fusedQKV, fusedUp bool // attn_qkv, phi3's gate+up ffn_up (what an adapter may name)
}

// Model is a loaded llama-family model. Forward calls are serialised; the
// weights may alias the GGUF file, which must stay open until Close.
type Model struct {
	Config
	b       kernels.Backend
	embd    kernels.Matrix
	layers  []layer
	outNorm kernels.Tensor
	output  kernels.Matrix
	owned   []kernels.Tensor // freed by Close
	wbytes  int64

	// Optional backend capabilities the architecture needs (nil when it
	// needs none; Load refuses a backend without them).
	scaler kernels.Scaler
	geglu  kernels.GeGLUer
	// windowed: attention needs kernels.WindowAttender (a sliding window or
	// a score scale other than 1/sqrt(HeadDim)).
	windowed bool

	enc  *encoder  // a BERT-family encoder's weights (bert.go); nil for a decoder
	head *rankHead // the rank head of a model with pooling rank (rank.go); nil otherwise

	mu sync.Mutex // guards scratch and serialises Forward
	sc scratch
}

// Load builds the model that f describes on backend b.
func Load(b kernels.Backend, f *gguf.File) (*Model, error) {
	c, err := ConfigFromGGUF(f)
	if err != nil {
		return nil, err
	}
	if c.Encoder {
		return loadEncoder(b, f, c)
	}
	m := &Model{Config: c, b: b}
	if c.EmbedScale != 0 || c.ResidualScale != 0 {
		if m.scaler, _ = b.(kernels.Scaler); m.scaler == nil {
			return nil, fmt.Errorf("%w: %s needs scaled activations, which backend %s lacks", ErrUnsupported, c.Arch, b.Name())
		}
	}
	if c.GeGLU {
		if m.geglu, _ = b.(kernels.GeGLUer); m.geglu == nil {
			return nil, fmt.Errorf("%w: %s needs GeGLU, which backend %s lacks", ErrUnsupported, c.Arch, b.Name())
		}
	}
	m.windowed = c.Window > 0 || c.AttnScale != 0
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	emb, found := f.Tensor("token_embd.weight")
	if !found || len(emb.Dims) != 2 {
		return nil, fmt.Errorf("%w: token_embd.weight missing or not 2-D", ErrModel)
	}
	if emb.Dims[1] > math.MaxInt32 {
		return nil, fmt.Errorf("%w: vocabulary of %d", ErrModel, emb.Dims[1])
	}
	m.Vocab = int(emb.Dims[1])
	if m.embd, err = m.matrix(f, "token_embd.weight", m.Vocab, c.DModel, false); err != nil {
		return nil, err
	}
	if v, ok := f.Get("tokenizer.ggml.tokens"); ok && v.Len() != m.Vocab {
		return nil, fmt.Errorf("%w: %d tokenizer tokens but token_embd has %d rows", ErrModel, v.Len(), m.Vocab)
	}
	// Phi-3's long-rope factors (chosen by context size) are not implemented.
	for _, name := range []string{"rope_factors_long.weight", "rope_factors_short.weight"} {
		if _, found := f.Tensor(name); found {
			return nil, fmt.Errorf("%w: tensor %s (long-rope scaling)", ErrUnsupported, name)
		}
	}
	if t, found := f.Tensor("rope_freqs.weight"); found {
		if c.GeGLU {
			// llama.cpp's gemma3 graph passes no frequency factors.
			return nil, fmt.Errorf("%w: rope_freqs.weight in a %s file", ErrUnsupported, c.Arch)
		}
		if m.RoPE.Factors, err = floats(f, t, m.RoPE.Dims/2); err != nil {
			return nil, fmt.Errorf("rope_freqs.weight: %w", err)
		}
		m.RoPESWA.Factors = m.RoPE.Factors
	}
	// Every layer has six tensors at least (phi3's fused layout; a
	// mixture-of-experts layer has ten): a block_count the file cannot back
	// is refused before anything is sized by it.
	if c.Experts > 0 && !moeBackends[b.Name()] {
		return nil, fmt.Errorf("%w: mixture-of-experts models on backend %q (verified on: cpu)", ErrUnsupported, b.Name())
	}
	if c.Layers > len(f.Tensors)/6 {
		return nil, fmt.Errorf("%w: block_count %d but only %d tensors", ErrModel, c.Layers, len(f.Tensors))
	}
	q, kv := c.Heads*c.HeadDim, c.KVHeads*c.HeadDim
	_, m.QKVBias = f.Tensor("blk.0.attn_q.bias")
	m.layers = make([]layer, c.Layers)
	for i := range m.layers {
		l := &m.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		var errs []error
		vec := func(name string, n int) kernels.Tensor {
			t, err := m.vector(f, p+name, n)
			errs = append(errs, err)
			return t
		}
		mat := func(name string, rows, cols int) kernels.Matrix {
			w, err := m.matrix(f, p+name, rows, cols, true)
			errs = append(errs, err)
			return w
		}
		for _, name := range []string{"attn_output.bias", "ffn_gate.bias", "ffn_up.bias", "ffn_down.bias", "attn_norm.bias", "ffn_norm.bias"} {
			if _, found := f.Tensor(p + name); found {
				return nil, fmt.Errorf("%w: tensor %s%s", ErrUnsupported, p, name)
			}
		}
		l.attnNorm = vec("attn_norm.weight", c.DModel)
		if _, fused := f.Tensor(p + "attn_qkv.weight"); fused {
			// phi3 (and any llama.cpp file): Q, K and V rows one after the
			// other in one matrix, as create_tensor_qkv reads it.
			ws, err := m.split(f, p+"attn_qkv.weight", []int{q, kv, kv}, c.DModel)
			if err != nil {
				return nil, err
			}
			l.wq, l.wk, l.wv = ws[0], ws[1], ws[2]
			l.fusedQKV = true
			if t, found := f.Tensor(p + "attn_qkv.bias"); found {
				bs, err := m.splitVector(f, t, []int{q, kv, kv})
				if err != nil {
					return nil, err
				}
				l.bq, l.bk, l.bv = bs[0], bs[1], bs[2]
			}
		} else {
			l.wq = mat("attn_q.weight", q, c.DModel)
			l.wk = mat("attn_k.weight", kv, c.DModel)
			l.wv = mat("attn_v.weight", kv, c.DModel)
		}
		l.wo = mat("attn_output.weight", c.DModel, q)
		if m.QKVBias {
			l.bq, l.bk, l.bv = vec("attn_q.bias", q), vec("attn_k.bias", kv), vec("attn_v.bias", kv)
		}
		if c.QKNorm {
			l.qNorm, l.kNorm = vec("attn_q_norm.weight", c.HeadDim), vec("attn_k_norm.weight", c.HeadDim)
		}
		if c.PostNorms {
			l.attnPost, l.ffnPost = vec("post_attention_norm.weight", c.DModel), vec("post_ffw_norm.weight", c.DModel)
		}
		l.ffnNorm = vec("ffn_norm.weight", c.DModel)
		if c.Experts > 0 {
			var err error
			l.moe, err = m.loadMoE(f, p)
			errs = append(errs, err)
		} else if _, gated := f.Tensor(p + "ffn_gate.weight"); gated || c.Arch != "phi3" {
			l.gate = mat("ffn_gate.weight", c.FFN, c.DModel)
			l.up = mat("ffn_up.weight", c.FFN, c.DModel)
			l.down = mat("ffn_down.weight", c.DModel, c.FFN)
		} else {
			// phi3's ffn_up holds the gate rows, then the up rows (ggml_swiglu
			// of the 2·FFN product).
			ws, err := m.split(f, p+"ffn_up.weight", []int{c.FFN, c.FFN}, c.DModel)
			if err != nil {
				return nil, err
			}
			l.gate, l.up = ws[0], ws[1]
			l.fusedUp = true
			l.down = mat("ffn_down.weight", c.DModel, c.FFN)
		}
		l.rope = m.RoPE // with the rope_freqs factors read above
		if c.SWA != nil && c.SWA[i] {
			l.rope, l.attn.Window = m.RoPESWA, c.Window
		}
		l.attn.Scale = c.AttnScale
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
	}
	if m.outNorm, err = m.vector(f, "output_norm.weight", c.DModel); err != nil {
		return nil, err
	}
	if _, found := f.Tensor("output.weight"); found {
		if m.output, err = m.matrix(f, "output.weight", m.Vocab, c.DModel, true); err != nil {
			return nil, err
		}
	} else {
		m.Tied = true
		m.output = m.embd
		m.wbytes += int64(emb.Size)
	}
	if c.Pooling == PoolRank {
		if m.head, err = loadRankHead(f, c); err != nil {
			return nil, err
		}
	}
	ok = true
	return m, nil
}

// matrix wraps a 2-D GGUF tensor of shape [cols, rows] (ggml order).
func (m *Model) matrix(f *gguf.File, name string, rows, cols int, count bool) (kernels.Matrix, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%w: tensor %s missing", ErrModel, name)
	}
	if len(t.Dims) != 2 || t.Dims[0] != uint64(cols) || t.Dims[1] != uint64(rows) {
		return nil, fmt.Errorf("%w: tensor %s has shape %v, want [%d %d]", ErrModel, name, t.Dims, cols, rows)
	}
	dt := kernels.DType(t.Type)
	if !dt.Valid() {
		return nil, fmt.Errorf("%w: tensor %s has type %v", ErrUnsupported, name, t.Type)
	}
	w, err := m.b.NewMatrix(dt, rows, cols, f.Data(t))
	if err != nil {
		return nil, fmt.Errorf("model: tensor %s: %w", name, err)
	}
	if count {
		m.wbytes += int64(t.Size)
	}
	return w, nil
}

// split wraps consecutive row ranges of a fused 2-D tensor (ggml shape
// [cols, Σrows]) as one Matrix each, without copying: rows are contiguous in
// GGUF.
func (m *Model) split(f *gguf.File, name string, rows []int, cols int) ([]kernels.Matrix, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%w: tensor %s missing", ErrModel, name)
	}
	total := 0
	for _, r := range rows {
		total += r
	}
	if len(t.Dims) != 2 || t.Dims[0] != uint64(cols) || t.Dims[1] != uint64(total) {
		return nil, fmt.Errorf("%w: tensor %s has shape %v, want [%d %d]", ErrModel, name, t.Dims, cols, total)
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
	if len(data) != rb*total {
		return nil, fmt.Errorf("%w: tensor %s holds %d bytes, want %d", ErrModel, name, len(data), rb*total)
	}
	out := make([]kernels.Matrix, len(rows))
	off := 0
	for i, r := range rows {
		if out[i], err = m.b.NewMatrix(dt, r, cols, data[off*rb:(off+r)*rb:(off+r)*rb]); err != nil {
			return nil, fmt.Errorf("model: tensor %s: %w", name, err)
		}
		off += r
	}
	m.wbytes += int64(t.Size)
	return out, nil
}

// splitVector uploads consecutive ranges of a fused 1-D tensor as 1×n
// tensors.
func (m *Model) splitVector(f *gguf.File, t gguf.TensorInfo, ns []int) ([]kernels.Tensor, error) {
	total := 0
	for _, n := range ns {
		total += n
	}
	x, err := floats(f, t, total)
	if err != nil {
		return nil, err
	}
	out := make([]kernels.Tensor, len(ns))
	for i, n := range ns {
		bt, err := m.b.NewTensor(1, n)
		if err != nil {
			return nil, err
		}
		m.owned = append(m.owned, bt)
		if err := m.b.Upload(bt, x[:n]); err != nil {
			return nil, err
		}
		out[i], x = bt, x[n:]
	}
	return out, nil
}

// floats decodes a 1-D tensor of n elements to float32.
func floats(f *gguf.File, t gguf.TensorInfo, n int) ([]float32, error) {
	if t.Elements() != uint64(n) || (len(t.Dims) == 2 && t.Dims[1] != 1) || len(t.Dims) > 2 {
		return nil, fmt.Errorf("%w: tensor %s has shape %v, want [%d]", ErrModel, t.Name, t.Dims, n)
	}
	dt := kernels.DType(t.Type)
	if !dt.Valid() {
		return nil, fmt.Errorf("%w: tensor %s has type %v", ErrUnsupported, t.Name, t.Type)
	}
	out := make([]float32, n)
	if err := kernels.Dequantize(out, dt, f.Data(t)); err != nil {
		return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
	}
	return out, nil
}

// vector uploads a 1-D tensor as a 1×n backend tensor.
func (m *Model) vector(f *gguf.File, name string, n int) (kernels.Tensor, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("%w: tensor %s missing", ErrModel, name)
	}
	x, err := floats(f, t, n)
	if err != nil {
		return nil, err
	}
	bt, err := m.b.NewTensor(1, n)
	if err != nil {
		return nil, err
	}
	m.owned = append(m.owned, bt)
	if err := m.b.Upload(bt, x); err != nil {
		return nil, err
	}
	return bt, nil
}

// WeightBytes returns the bytes of weight matrices one decode step reads:
// every layer's matrices and the output projection (the embedding lookup
// reads one row and is not counted).
func (m *Model) WeightBytes() int64 { return m.wbytes }

// ArenaConfig returns the arena shape this model needs for the given pool,
// storing K and V as kv. The KV type is part of the transfer layout: a prefill
// node and its decode nodes must use the same one (engine/transfer refuses
// pages of another type).
func (m *Model) ArenaConfig(pages, pageTokens int, kv kernels.KVType) kernels.ArenaConfig {
	return kernels.ArenaConfig{Pages: pages, PageTokens: pageTokens, Layers: m.Layers, KVHeads: m.KVHeads, HeadDim: m.HeadDim, KV: kv}
}

// Backend returns the backend the model runs on.
func (m *Model) Backend() kernels.Backend { return m.b }

// Close frees the model's backend tensors. Matrices are owned by the backend
// and released with it.
func (m *Model) Close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range m.owned {
		m.b.Free(t)
	}
	m.owned = nil
	m.sc.free(m.b)
}

// Seq is one sequence of a batch: its block table (approved by the pool for
// at least Pos+len(Tokens) positions, after Pool.Write recorded the new
// tokens), the position of its first new token, and the new tokens.
type Seq struct {
	Table  isolation.BlockTable
	Pos    int
	Tokens []int32
	// All asks for the logits of every new token of this sequence, as
	// Forward's all does for the whole batch (prompt scoring): the cost,
	// len(Tokens)×Vocab logits, falls on this sequence only.
	All bool
	// Hidden asks, instead of logits, for the hidden state of every new
	// token after the output norm (len(Tokens)×DModel, row-major): what
	// an embedding model pools (Pool). It implies All's rows.
	Hidden bool
	// Adapter, if set, adds its low-rank products to this sequence's rows
	// (a LoRA adapter loaded for this model by LoadAdapter); the other
	// sequences of the batch are computed as if it were absent.
	Adapter *Adapter
}

type scratch struct {
	rows, outRows                        int
	x, h, q, k, v, att, o, gate, up, dwn kernels.Tensor
	last, logits                         kernels.Tensor
	router                               kernels.Tensor // rows×Experts; nil without experts
	moe                                  moeHost        // host buffers of the expert layers
	lora                                 loraScratch    // LoRA intermediates, by width
}

func (s *scratch) free(b kernels.Backend) {
	for _, t := range []kernels.Tensor{s.x, s.h, s.q, s.k, s.v, s.att, s.o, s.gate, s.up, s.dwn, s.last, s.logits, s.router} {
		if t != nil {
			b.Free(t)
		}
	}
	s.lora.free(b)
	*s = scratch{}
}

func (m *Model) ensure(rows, outRows int) error {
	s := &m.sc
	if rows > s.rows {
		for _, t := range []kernels.Tensor{s.x, s.h, s.q, s.k, s.v, s.att, s.o, s.gate, s.up, s.dwn, s.router} {
			if t != nil {
				m.b.Free(t)
			}
		}
		s.rows = 0
		q, kv := m.Heads*m.HeadDim, m.KVHeads*m.HeadDim
		var err error
		alloc := func(cols int) kernels.Tensor {
			if err != nil {
				return nil
			}
			var t kernels.Tensor
			t, err = m.b.NewTensor(rows, cols)
			return t
		}
		s.x, s.h, s.o, s.dwn = alloc(m.DModel), alloc(m.DModel), alloc(m.DModel), alloc(m.DModel)
		s.q, s.att, s.k, s.v = alloc(q), alloc(q), alloc(kv), alloc(kv)
		s.gate, s.up = alloc(m.FFN), alloc(m.FFN)
		s.router = nil
		if m.Experts > 0 {
			s.router = alloc(m.Experts)
		}
		if err != nil {
			return err
		}
		s.rows = rows
	}
	if outRows > s.outRows {
		for _, t := range []kernels.Tensor{s.last, s.logits} {
			if t != nil {
				m.b.Free(t)
			}
		}
		s.outRows = 0
		var err error
		if s.last, err = m.b.NewTensor(outRows, m.DModel); err != nil {
			return err
		}
		if s.logits, err = m.b.NewTensor(outRows, m.Vocab); err != nil {
			return err
		}
		s.outRows = outRows
	}
	return nil
}

// Forward runs one step over a batch. It writes the K/V of every new token
// into its sequence's pages and returns, per sequence, the logits of its last
// token (len Vocab) or, with all set (or the sequence's Seq.All), of every
// new token (len(Tokens)×Vocab, row-major). Rows are batch invariant: a
// sequence's logits are the same whichever rows the others ask for.
//
// Errors: ErrBatch for a malformed batch (nothing is computed); errors of
// the backend, among them *kernels.TagMismatchError (errors.Is
// kernels.ErrTagMismatch) when a table names a page whose KV another lease
// wrote — no logits are returned then.
func (m *Model) Forward(a kernels.Arena, batch []Seq, all bool) ([][]float32, error) {
	if m.enc != nil {
		return m.encForward(a, batch)
	}
	rows, outRows := 0, 0
	if len(batch) == 0 {
		return nil, fmt.Errorf("%w: empty batch", ErrBatch)
	}
	ac := a.Config()
	if ac.Layers != m.Layers || ac.KVHeads != m.KVHeads || ac.HeadDim != m.HeadDim {
		return nil, fmt.Errorf("%w: arena %+v does not fit the model", ErrBatch, ac)
	}
	for i, s := range batch {
		n := len(s.Tokens)
		switch {
		case n == 0:
			return nil, fmt.Errorf("%w: sequence %d has no tokens", ErrBatch, i)
		case s.Pos < 0 || s.Pos+n > m.Context:
			return nil, fmt.Errorf("%w: sequence %d positions [%d, %d) outside the context of %d", ErrBatch, i, s.Pos, s.Pos+n, m.Context)
		case s.Pos+n > s.Table.Tokens():
			return nil, fmt.Errorf("%w: sequence %d positions [%d, %d) not covered by its block table (%d tokens)", ErrBatch, i, s.Pos, s.Pos+n, s.Table.Tokens())
		case s.Table.PageTokens() != ac.PageTokens:
			return nil, fmt.Errorf("%w: sequence %d table has %d-token pages, arena %d", ErrBatch, i, s.Table.PageTokens(), ac.PageTokens)
		}
		if s.Adapter != nil && s.Adapter.base != m {
			return nil, fmt.Errorf("%w: sequence %d carries an adapter of another model", ErrBatch, i)
		}
		for _, id := range s.Tokens {
			if id < 0 || int(id) >= m.Vocab {
				return nil, fmt.Errorf("%w: sequence %d token %d outside the vocabulary of %d", ErrBatch, i, id, m.Vocab)
			}
		}
		rows += n
		if all || s.All || s.Hidden {
			outRows += n
		} else {
			outRows++
		}
	}
	wa, _ := a.(kernels.WindowAttender)
	if m.windowed && wa == nil {
		return nil, fmt.Errorf("%w: %s needs windowed or rescaled attention, which this arena lacks", ErrUnsupported, m.Arch)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.ensure(rows, outRows); err != nil {
		return nil, err
	}
	ids := make([]int32, 0, rows)
	pos := make([]int32, 0, rows)
	spans := make([]kernels.Span, len(batch))
	var rowAd, outAd []*Adapter // per row and per output row; nil without adapters
	for i, s := range batch {
		spans[i] = kernels.Span{Table: s.Table, Row: len(ids), Pos: s.Pos, N: len(s.Tokens)}
		for j, id := range s.Tokens {
			ids = append(ids, id)
			pos = append(pos, int32(s.Pos+j))
		}
		if s.Adapter != nil && rowAd == nil {
			rowAd, outAd = make([]*Adapter, rows), make([]*Adapter, 0, outRows)
		}
	}
	if rowAd != nil {
		for i, s := range batch {
			for j := range s.Tokens {
				rowAd[spans[i].Row+j] = s.Adapter
			}
			n := 1
			if all || s.All || s.Hidden {
				n = len(s.Tokens)
			}
			for range n {
				outAd = append(outAd, s.Adapter)
			}
		}
	}
	groups, outGroups := loraGroups(rowAd), loraGroups(outAd)
	// adapt adds the adapters' low-rank products to a projection's output
	// (nothing without adapters).
	adapt := func(layer, which int, dst, x kernels.Tensor) error {
		if layer < 0 {
			return m.applyLoRA(outGroups, layer, which, dst, x)
		}
		return m.applyLoRA(groups, layer, which, dst, x)
	}
	// The last layer past its KV writes computes only the output rows
	// (compact: fewer of them than rows), as llama.cpp's graphs do from
	// its attention on: no later layer reads the other rows, and every
	// kernel after the KV writes is row-wise (attention's rows too: a
	// span's rows attend to its keys whatever rows the batch holds), so
	// the output rows keep their bits.
	compact := !all && outRows < rows
	outSpans := spans
	if compact {
		outSpans = make([]kernels.Span, len(batch))
		o := 0
		for i, s := range spans {
			n := 1
			if batch[i].All || batch[i].Hidden {
				n = s.N
			}
			outSpans[i] = kernels.Span{Table: s.Table, Row: o, Pos: s.Pos + s.N - n, N: n}
			o += n
		}
	}
	sc := &m.sc
	x, h, q, k, v := sc.x.Slice(0, rows), sc.h.Slice(0, rows), sc.q.Slice(0, rows), sc.k.Slice(0, rows), sc.v.Slice(0, rows)
	att, o, gate, up, dwn := sc.att.Slice(0, rows), sc.o.Slice(0, rows), sc.gate.Slice(0, rows), sc.up.Slice(0, rows), sc.dwn.Slice(0, rows)
	b := m.b
	if err := b.Embed(x, m.embd, ids); err != nil {
		return nil, err
	}
	if m.EmbedScale != 0 {
		if err := m.scaler.Scale(x, x, m.EmbedScale); err != nil {
			return nil, err
		}
	}
	// residual adds the sublayer output o to x: scaled (granite) and
	// normalised (gemma3's post norms) first.
	residual := func(x, o kernels.Tensor, post kernels.Tensor) error {
		if post != nil {
			if err := b.RMSNorm(o, o, post, m.RMSEps); err != nil {
				return err
			}
		}
		if m.ResidualScale != 0 {
			if err := m.scaler.Scale(o, o, m.ResidualScale); err != nil {
				return err
			}
		}
		return b.Add(x, x, o)
	}
	for li := range m.layers {
		l := &m.layers[li]
		if err := b.RMSNorm(h, x, l.attnNorm, m.RMSEps); err != nil {
			return nil, err
		}
		if err := kernels.MultiMatMul(b, []kernels.Tensor{q, k, v}, h, []kernels.Matrix{l.wq, l.wk, l.wv}); err != nil {
			return nil, err
		}
		if err := errors.Join(adapt(li, loraQ, q, h), adapt(li, loraK, k, h), adapt(li, loraV, v, h)); err != nil {
			return nil, err
		}
		if l.bq != nil {
			if err := errors.Join(b.Add(q, q, l.bq), b.Add(k, k, l.bk), b.Add(v, v, l.bv)); err != nil {
				return nil, err
			}
		}
		if l.qNorm != nil {
			// Per head: the weights are HeadDim long (kernels.Backend.RMSNorm).
			if err := errors.Join(b.RMSNorm(q, q, l.qNorm, m.RMSEps), b.RMSNorm(k, k, l.kNorm, m.RMSEps)); err != nil {
				return nil, err
			}
		}
		if err := errors.Join(b.RoPE(q, pos, l.rope), b.RoPE(k, pos, l.rope)); err != nil {
			return nil, err
		}
		if err := a.WriteKV(li, k, v, spans); err != nil {
			return nil, fmt.Errorf("model: layer %d: writing KV: %w", li, err)
		}
		// From here on the layer's rows: all of them, or in the last
		// layer of a compact batch the output rows (x's and q's copied
		// into sc.last and sc.att; attention then writes into sc.q).
		x, h, q, att, o, gate, up, dwn, sp, n, adapt := x, h, q, att, o, gate, up, dwn, spans, rows, adapt
		if compact && li == len(m.layers)-1 {
			x, q, att = sc.last.Slice(0, outRows), sc.att.Slice(0, outRows), sc.q.Slice(0, outRows)
			for i, s := range spans {
				d := outSpans[i]
				r := s.Row + d.Pos - s.Pos
				if err := errors.Join(b.Copy(x.Slice(d.Row, d.Row+d.N), sc.x.Slice(r, r+d.N)),
					b.Copy(q.Slice(d.Row, d.Row+d.N), sc.q.Slice(r, r+d.N))); err != nil {
					return nil, err
				}
			}
			h, o, gate, up, dwn = h.Slice(0, outRows), o.Slice(0, outRows), gate.Slice(0, outRows), up.Slice(0, outRows), dwn.Slice(0, outRows)
			sp, n = outSpans, outRows
			adapt = func(layer, which int, dst, x kernels.Tensor) error {
				return m.applyLoRA(outGroups, layer, which, dst, x)
			}
		}
		var err error
		if m.windowed {
			err = wa.AttentionWith(li, att, q, sp, l.attn)
		} else {
			err = a.Attention(li, att, q, sp)
		}
		if err != nil {
			return nil, fmt.Errorf("model: layer %d: attention: %w", li, err)
		}
		if err := b.MatMul(o, att, l.wo); err != nil {
			return nil, err
		}
		if err := adapt(li, loraO, o, att); err != nil {
			return nil, err
		}
		if err := residual(x, o, l.attnPost); err != nil {
			return nil, err
		}
		if err := b.RMSNorm(h, x, l.ffnNorm, m.RMSEps); err != nil {
			return nil, err
		}
		if l.moe != nil {
			if err := m.moeFFN(l.moe, x, h, n); err != nil {
				return nil, fmt.Errorf("model: layer %d: experts: %w", li, err)
			}
			continue
		}
		if err := kernels.MultiMatMul(b, []kernels.Tensor{gate, up}, h, []kernels.Matrix{l.gate, l.up}); err != nil {
			return nil, err
		}
		if err := errors.Join(adapt(li, loraGate, gate, h), adapt(li, loraUp, up, h)); err != nil {
			return nil, err
		}
		if m.GeGLU {
			err = m.geglu.GeGLU(gate, gate, up)
		} else {
			err = b.SwiGLU(gate, gate, up)
		}
		if err != nil {
			return nil, err
		}
		if err := b.MatMul(dwn, gate, l.down); err != nil {
			return nil, err
		}
		if err := adapt(li, loraDown, dwn, gate); err != nil {
			return nil, err
		}
		if err := residual(x, dwn, l.ffnPost); err != nil {
			return nil, err
		}
	}
	// The output rows: the last layer's compact rows, else every row (a
	// batch that needs as many rows as it holds needs all of them, in
	// order).
	last := x
	if compact {
		last = sc.last.Slice(0, outRows)
	}
	if err := b.RMSNorm(last, last, m.outNorm, m.RMSEps); err != nil {
		return nil, err
	}
	// Hidden rows are read after the output norm, before the projection
	// (row-wise kernels: batch invariant as the logits are).
	var hidden []float32
	for _, s := range batch {
		if s.Hidden {
			hidden = make([]float32, outRows*m.DModel)
			if err := b.Download(hidden, last); err != nil {
				return nil, err
			}
			break
		}
	}
	logits := sc.logits.Slice(0, outRows)
	if err := b.MatMul(logits, last, m.output); err != nil {
		return nil, err
	}
	if err := adapt(-1, 0, logits, last); err != nil {
		return nil, err
	}
	host := make([]float32, outRows*m.Vocab)
	if err := b.Download(host, logits); err != nil {
		return nil, err
	}
	m.finishLogits(host)
	out := make([][]float32, len(batch))
	r := 0
	for i, s := range batch {
		n := 1
		if all || s.All || s.Hidden {
			n = len(s.Tokens)
		}
		if s.Hidden {
			out[i] = hidden[r*m.DModel : (r+n)*m.DModel : (r+n)*m.DModel]
		} else {
			out[i] = host[r*m.Vocab : (r+n)*m.Vocab : (r+n)*m.Vocab]
		}
		r += n
	}
	return out, nil
}

// finishLogits applies granite's logit scale and the final soft-cap on the
// host, as llama.cpp's graphs do after the output projection (ggml_scale by
// 1/logit_scale; scale by 1/c, tanh, scale by c). Per element: batch
// invariant on every backend.
func (m *Model) finishLogits(x []float32) {
	if m.LogitScale != 0 {
		inv := 1 / m.LogitScale
		for i := range x {
			x[i] *= inv
		}
	}
	if c := m.FinalSoftcap; c != 0 {
		inv := 1 / c
		for i, v := range x {
			x[i] = float32(math.Tanh(float64(v*inv))) * c
		}
	}
}

// ErrBatch: a malformed Forward batch (code invalid_request_error).
var ErrBatch = cloison.NewError(cloison.CodeInvalid, "model: invalid batch")
