package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/kernels"
)

func bertFile(t testing.TB, c synth.BertConfig) *gguf.File {
	t.Helper()
	w, err := synth.Bert(c)
	if err != nil {
		t.Fatal(err)
	}
	return parse(t, w)
}

// refTensor is a GGUF tensor as float64, row-major (rows = dims[1]).
func refTensor(t testing.TB, f *gguf.File, name string) []float64 {
	t.Helper()
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

// refBert is a plain float64 BERT / nomic-bert forward over one input, read
// straight from the file's tensors, as llama.cpp's bert graph computes it:
// the hidden states of every token (n×d).
func refBert(t testing.TB, f *gguf.File, arch string, ids []int32) [][]float64 {
	t.Helper()
	c, err := ConfigFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	d, n, hd := c.DModel, len(ids), c.HeadDim
	eps := float64(c.NormEps)
	ten := func(name string) []float64 { return refTensor(t, f, name) }
	mat := func(x [][]float64, w, b []float64, outs int) [][]float64 {
		y := make([][]float64, len(x))
		for r, row := range x {
			y[r] = make([]float64, outs)
			for o := range outs {
				s := 0.0
				for j, v := range row {
					s += w[o*len(row)+j] * v
				}
				if b != nil {
					s += b[o]
				}
				y[r][o] = s
			}
		}
		return y
	}
	ln := func(x [][]float64, name string) [][]float64 {
		w, b := ten(name+".weight"), ten(name+".bias")
		for _, row := range x {
			mean, vr := 0.0, 0.0
			for _, v := range row {
				mean += v
			}
			mean /= float64(d)
			for _, v := range row {
				vr += (v - mean) * (v - mean)
			}
			s := 1 / math.Sqrt(vr/float64(d)+eps)
			for j := range row {
				row[j] = (row[j]-mean)*s*w[j] + b[j]
			}
		}
		return x
	}
	emb, typ, pe := ten("token_embd.weight"), ten("token_types.weight"), ten("position_embd.weight")
	x := make([][]float64, n)
	for i, id := range ids {
		x[i] = make([]float64, d)
		for j := range d {
			x[i][j] = emb[int(id)*d+j] + typ[j]
			if pe != nil {
				x[i][j] += pe[i*d+j]
			}
		}
	}
	x = ln(x, "token_embd_norm")
	rope := func(m [][]float64) {
		for p, row := range m {
			for h := 0; h < d/hd; h++ {
				for i := 0; i < hd/2; i++ {
					theta := float64(p) * math.Pow(float64(c.RoPE.Base), -2*float64(i)/float64(hd))
					a, b := row[h*hd+i], row[h*hd+i+hd/2]
					row[h*hd+i] = a*math.Cos(theta) - b*math.Sin(theta)
					row[h*hd+i+hd/2] = a*math.Sin(theta) + b*math.Cos(theta)
				}
			}
		}
	}
	for l := range c.Layers {
		p := fmt.Sprintf("blk.%d.", l)
		var q, k, v [][]float64
		if qkv := ten(p + "attn_qkv.weight"); qkv != nil {
			q, k, v = mat(x, qkv[:d*d], nil, d), mat(x, qkv[d*d:2*d*d], nil, d), mat(x, qkv[2*d*d:], nil, d)
		} else {
			q, k, v = mat(x, ten(p+"attn_q.weight"), ten(p+"attn_q.bias"), d), mat(x, ten(p+"attn_k.weight"), ten(p+"attn_k.bias"), d),
				mat(x, ten(p+"attn_v.weight"), ten(p+"attn_v.bias"), d)
		}
		if arch == "nomic-bert" {
			rope(q)
			rope(k)
		}
		att := make([][]float64, n)
		for i := range n {
			att[i] = make([]float64, d)
			for h := 0; h < d/hd; h++ {
				s := make([]float64, n)
				mx := math.Inf(-1)
				for j := range n {
					for e := range hd {
						s[j] += q[i][h*hd+e] * k[j][h*hd+e]
					}
					s[j] /= math.Sqrt(float64(hd))
					mx = max(mx, s[j])
				}
				sum := 0.0
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for j := range n {
					for e := range hd {
						att[i][h*hd+e] += s[j] / sum * v[j][h*hd+e]
					}
				}
			}
		}
		o := mat(att, ten(p+"attn_output.weight"), ten(p+"attn_output.bias"), d)
		for i := range o {
			for j := range o[i] {
				o[i][j] += x[i][j]
			}
		}
		x = ln(o, p+"attn_output_norm")
		up := mat(x, ten(p+"ffn_up.weight"), ten(p+"ffn_up.bias"), c.FFN)
		if g := ten(p + "ffn_gate.weight"); g != nil {
			gate := mat(x, g, nil, c.FFN)
			for i := range up {
				for j, gv := range gate[i] {
					up[i][j] *= gv / (1 + math.Exp(-gv))
				}
			}
		} else {
			for i := range up {
				for j, u := range up[i] {
					up[i][j] = 0.5 * u * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(u+0.044715*u*u*u)))
				}
			}
		}
		dn := mat(up, ten(p+"ffn_down.weight"), ten(p+"ffn_down.bias"), d)
		for i := range dn {
			for j := range dn[i] {
				dn[i][j] += x[i][j]
			}
		}
		x = ln(dn, p+"layer_output_norm")
	}
	return x
}

func cosine(a []float32, b []float64) float64 {
	var ab, aa, bb float64
	for i := range a {
		ab += float64(a[i]) * b[i]
		aa += float64(a[i]) * float64(a[i])
		bb += b[i] * b[i]
	}
	return ab / math.Sqrt(aa*bb)
}

// encode runs one Forward over inputs (each a whole sequence of its own
// lease) and returns their hidden states.
func (k *kv) encode(t testing.TB, tenant cloison.TenantID, inputs [][]int32) [][]float32 {
	t.Helper()
	batch := make([]Seq, len(inputs))
	leases := make([]*seq, len(inputs))
	for i, in := range inputs {
		leases[i] = k.start(t, tenant, fmt.Sprintf("r%d-%d", i, len(in)), len(in))
		if err := k.pool.Write(leases[i].lease, len(in)); err != nil {
			t.Fatal(err)
		}
		bt, err := k.pool.BlockTable(leases[i].lease, len(in))
		if err != nil {
			t.Fatal(err)
		}
		batch[i] = Seq{Table: bt, Tokens: in, Hidden: true}
	}
	out, err := k.m.Forward(k.arena, batch, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range leases {
		if err := k.pool.Release(s.lease); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestEncoderMatchesReference: every token's hidden state of bert and
// nomic-bert (F32 and Q8_0 weights) within cosine 0.9999 of a float64
// reference read from the file, and the pooled vectors likewise.
func TestEncoderMatchesReference(t *testing.T) {
	for _, c := range []synth.BertConfig{
		{Arch: "bert", Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 64, DType: gguf.F32, Pooling: 1},
		{Arch: "bert", Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 64, DType: gguf.Q8_0, Pooling: 2},
		{Arch: "nomic-bert", Layers: 2, DModel: 64, Heads: 4, FFN: 96, Context: 64, DType: gguf.F32, Pooling: 1},
	} {
		t.Run(fmt.Sprintf("%s-%v-pool%d", c.Arch, c.DType, c.Pooling), func(t *testing.T) {
			f := bertFile(t, c)
			m := load(t, backend(t), f)
			k := newKV(t, m, 16, 8, "t")
			inputs := [][]int32{{synth.BertCLS, 150, 151, 152, 153, 160, 170, synth.BertSep},
				append(append([]int32{synth.BertCLS}, tokens(21, m.Vocab, 3)...), synth.BertSep), {synth.BertCLS, synth.BertSep}}
			got := k.encode(t, "t", inputs)
			for i, in := range inputs {
				ref := refBert(t, f, c.Arch, in)
				refFlat := make([]float32, 0, len(in)*m.DModel)
				for r, row := range ref {
					if cs := cosine(got[i][r*m.DModel:(r+1)*m.DModel], row); cs < 0.9999 {
						t.Errorf("input %d token %d: cosine %.6f to the reference", i, r, cs)
					}
					for _, v := range row {
						refFlat = append(refFlat, float32(v))
					}
				}
				a, err := m.PoolHidden(got[i], len(in))
				if err != nil {
					t.Fatal(err)
				}
				b, _ := Pool(m.Pooling, refFlat, len(in), m.DModel)
				b64 := make([]float64, len(b))
				for j, v := range b {
					b64[j] = float64(v)
				}
				if cs := cosine(a, b64); cs < 0.9999 {
					t.Errorf("input %d: pooled cosine %.6f", i, cs)
				}
			}
		})
	}
}

// TestEncoderBatchInvariant: an input's hidden states are bit-identical
// alone and batched with other inputs of other lengths, in any order
// (bert, nomic-bert, t5encoder).
func TestEncoderBatchInvariant(t *testing.T) {
	for _, arch := range []string{"bert", "nomic-bert", "t5encoder"} {
		t.Run(arch, func(t *testing.T) {
			m := load(t, backend(t), bertFile(t, synth.BertConfig{Arch: arch, Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 64, DType: gguf.Q8_0}))
			k := newKV(t, m, 32, 8, "t")
			a := tokens(19, m.Vocab, 1)
			alone := k.encode(t, "t", [][]int32{a})[0]
			batched := k.encode(t, "t", [][]int32{tokens(33, m.Vocab, 2), a, tokens(5, m.Vocab, 4)})[1]
			if !slices.Equal(alone, batched) {
				t.Error("hidden states depend on the batch")
			}
		})
	}
}

// TestEncoderAttentionPathsAgree: a bert encoder's hidden states are the
// same bits whether the arena reads each input by bidirectional
// AttentionWith over its span or (an arena without it) by causal Attention
// with one span per query row.
func TestEncoderAttentionPathsAgree(t *testing.T) {
	for _, arch := range []string{"bert", "nomic-bert"} {
		t.Run(arch, func(t *testing.T) {
			m := load(t, backend(t), bertFile(t, synth.BertConfig{Arch: arch, Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 64, DType: gguf.Q8_0}))
			k := newKV(t, m, 32, 8, "t")
			if _, ok := k.arena.(kernels.WindowAttender); !ok {
				t.Fatal("the test backend's arena is not a WindowAttender")
			}
			inputs := [][]int32{tokens(33, m.Vocab, 2), tokens(19, m.Vocab, 1), tokens(5, m.Vocab, 4)}
			spans := k.encode(t, "t", inputs)
			k.arena = struct{ kernels.Arena }{k.arena}
			rows := k.encode(t, "t", inputs)
			for i := range inputs {
				if !slices.Equal(spans[i], rows[i]) {
					t.Errorf("input %d: the two attention paths differ", i)
				}
			}
		})
	}
}

// TestEncoderRank: the rank head's score equals tanh(cls·h+b) then
// cls.output, computed from the file, on the first row.
func TestEncoderRank(t *testing.T) {
	f := bertFile(t, synth.BertConfig{Layers: 1, DModel: 32, Heads: 2, FFN: 64, Context: 32, DType: gguf.F32, Pooling: 4})
	m := load(t, backend(t), f)
	if m.Pooling != PoolRank || m.RankOutputs() != 1 {
		t.Fatalf("pooling %v, %d outputs", m.Pooling, m.RankOutputs())
	}
	k := newKV(t, m, 8, 8, "t")
	in := []int32{synth.BertCLS, 150, 160, synth.BertSep, 170, synth.BertSep}
	h := k.encode(t, "t", [][]int32{in})[0]
	got, err := m.Rank(h, len(in))
	if err != nil {
		t.Fatal(err)
	}
	cw, cb, ow, ob := refTensor(t, f, "cls.weight"), refTensor(t, f, "cls.bias"), refTensor(t, f, "cls.output.weight"), refTensor(t, f, "cls.output.bias")
	d := m.DModel
	mid := make([]float64, d)
	for o := range d {
		s := cb[o]
		for j := range d {
			s += cw[o*d+j] * float64(h[j])
		}
		mid[o] = math.Tanh(s)
	}
	want := ob[0]
	for j := range d {
		want += ow[j] * mid[j]
	}
	if len(got) != 1 || math.Abs(float64(got[0])-want) > 1e-5 {
		t.Errorf("score %v, want %v", got, want)
	}
	// An embedding model has no rank head.
	e := load(t, backend(t), bertFile(t, synth.BertConfig{Layers: 1, DModel: 32, Heads: 2, FFN: 64, Context: 32, DType: gguf.F32}))
	if _, err := e.Rank(h, len(in)); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Rank on a CLS model: %v", err)
	}
}

// TestEncoderRefuses: an encoder computes whole inputs' hidden states only;
// a chunk that does not start at 0, or a request for logits, is refused
// before anything is computed, and so is a rank file without its head.
func TestEncoderRefuses(t *testing.T) {
	m := load(t, backend(t), bertFile(t, synth.BertConfig{Layers: 1, DModel: 32, Heads: 2, FFN: 64, Context: 32, DType: gguf.F32}))
	k := newKV(t, m, 8, 8, "t")
	s := k.start(t, "t", "r", 8)
	if err := k.pool.Write(s.lease, 8); err != nil {
		t.Fatal(err)
	}
	bt, err := k.pool.BlockTable(s.lease, 8)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		seq  Seq
		want error
	}{
		{Seq{Table: bt, Tokens: []int32{101, 150}}, ErrUnsupported},
		{Seq{Table: bt, Pos: 4, Tokens: []int32{101, 150}, Hidden: true}, ErrBatch},
		{Seq{Table: bt, Tokens: make([]int32, 9), Hidden: true}, ErrBatch},
	} {
		if _, err := m.Forward(k.arena, []Seq{tc.seq}, false); !errors.Is(err, tc.want) {
			t.Errorf("%+v: %v, want %v", tc.seq, err, tc.want)
		}
	}
	w, err := synth.Bert(synth.BertConfig{Layers: 1, DModel: 32, Heads: 2, FFN: 64, Context: 32, DType: gguf.F32})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Set("bert.pooling_type", uint32(4)); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(backend(t), parse(t, w)); !errors.Is(err, ErrModel) {
		t.Errorf("rank pooling without a head: %v", err)
	}
}

// TestEncoderStaleTableCannotRead: an encoder's K/V go through the tenant's
// pages like a decoder's; a block table kept after its lease ended, whose
// pages another tenant now holds, computes nothing (isolation_violation):
// bert, and t5encoder through its biased bidirectional attention.
func TestEncoderStaleTableCannotRead(t *testing.T) {
	for _, arch := range []string{"bert", "t5encoder"} {
		t.Run(arch, func(t *testing.T) { testEncoderStaleTable(t, arch) })
	}
}

func testEncoderStaleTable(t *testing.T, arch string) {
	m := load(t, backend(t), bertFile(t, synth.BertConfig{Arch: arch, Layers: 1, DModel: 32, Heads: 2, FFN: 64, Context: 32, DType: gguf.F32}))
	k := newKV(t, m, 2, 4, "a", "b")
	in := tokens(8, m.Vocab, 4)
	a := k.start(t, "a", "r1", 8)
	if err := k.pool.Write(a.lease, 8); err != nil {
		t.Fatal(err)
	}
	stale, err := k.pool.BlockTable(a.lease, 8)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Forward(k.arena, []Seq{{Table: stale, Tokens: in, Hidden: true}}, false); err != nil {
		t.Fatal(err)
	}
	if err := k.pool.Release(a.lease); err != nil {
		t.Fatal(err)
	}
	k.encode(t, "b", [][]int32{tokens(8, m.Vocab, 5)})
	out, err := m.Forward(k.arena, []Seq{{Table: stale, Tokens: in, Hidden: true}}, false)
	if !errors.Is(err, kernels.ErrTagMismatch) || out != nil || cloison.ErrorCode(err) != cloison.CodeIsolationViolation {
		t.Fatalf("stale table: hidden %v, error %v; want none and a tag mismatch", out != nil, err)
	}
}
