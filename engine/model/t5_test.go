package model

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
)

// t5Bucket is Hugging Face's _relative_position_bucket (bidirectional,
// max distance 128) in float64, written independently of
// kernels.RelativeBucket.
func t5Bucket(rel, buckets int) int {
	n := buckets / 2
	b := 0
	if rel > 0 {
		b = n
	}
	rel = max(rel, -rel)
	exact := n / 2
	if rel < exact {
		return b + rel
	}
	large := exact + int(math.Log(float64(rel)/float64(exact))/math.Log(128/float64(exact))*float64(n-exact))
	return b + min(large, n-1)
}

// refT5 is a plain float64 T5 encoder over one input, read straight from
// the file's tensors, as llama.cpp's t5 encoder graph computes it: the
// hidden states of every token after enc.output_norm (n×d).
func refT5(t testing.TB, f *gguf.File, ids []int32) [][]float64 {
	t.Helper()
	c, err := ConfigFromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	d, n, hd, heads := c.DModel, len(ids), c.HeadDim, c.Heads
	qd := heads * hd
	ten := func(name string) []float64 { return refTensor(t, f, name) }
	mat := func(x [][]float64, w []float64, outs int) [][]float64 {
		y := make([][]float64, len(x))
		for r, row := range x {
			y[r] = make([]float64, outs)
			for o := range outs {
				for j, v := range row {
					y[r][o] += w[o*len(row)+j] * v
				}
			}
		}
		return y
	}
	rms := func(x [][]float64, name string) [][]float64 {
		w := ten(name)
		y := make([][]float64, len(x))
		for i, row := range x {
			ss := 0.0
			for _, v := range row {
				ss += v * v
			}
			s := 1 / math.Sqrt(ss/float64(d)+float64(c.RMSEps))
			y[i] = make([]float64, d)
			for j, v := range row {
				y[i][j] = v * s * w[j]
			}
		}
		return y
	}
	add := func(x, y [][]float64) {
		for i := range x {
			for j := range x[i] {
				x[i][j] += y[i][j]
			}
		}
	}
	emb := ten("token_embd.weight")
	x := make([][]float64, n)
	for i, id := range ids {
		x[i] = slices.Clone(emb[int(id)*d : (int(id)+1)*d])
	}
	relb := ten("enc.blk.0.attn_rel_b.weight")
	for l := range c.Layers {
		p := fmt.Sprintf("enc.blk.%d.", l)
		if b := ten(p + "attn_rel_b.weight"); b != nil {
			relb = b
		}
		h := rms(x, p+"attn_norm.weight")
		q, k, v := mat(h, ten(p+"attn_q.weight"), qd), mat(h, ten(p+"attn_k.weight"), qd), mat(h, ten(p+"attn_v.weight"), qd)
		att := make([][]float64, n)
		for i := range n {
			att[i] = make([]float64, qd)
			for hh := range heads {
				s := make([]float64, n)
				mx := math.Inf(-1)
				for j := range n {
					for e := range hd {
						s[j] += q[i][hh*hd+e] * k[j][hh*hd+e]
					}
					s[j] += relb[t5Bucket(j-i, c.RelBuckets)*heads+hh] // no 1/sqrt(d)
					mx = max(mx, s[j])
				}
				sum := 0.0
				for j := range s {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for j := range n {
					for e := range hd {
						att[i][hh*hd+e] += s[j] / sum * v[j][hh*hd+e]
					}
				}
			}
		}
		add(x, mat(att, ten(p+"attn_o.weight"), d))
		h = rms(x, p+"ffn_norm.weight")
		up := mat(h, ten(p+"ffn_up.weight"), c.FFN)
		if g := ten(p + "ffn_gate.weight"); g != nil {
			gate := mat(h, g, c.FFN)
			for i := range up {
				for j, gv := range gate[i] {
					up[i][j] *= 0.5 * gv * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(gv+0.044715*gv*gv*gv)))
				}
			}
		} else {
			for i := range up {
				for j, u := range up[i] {
					up[i][j] = max(u, 0)
				}
			}
		}
		add(x, mat(up, ten(p+"ffn_down.weight"), d))
	}
	return rms(x, "enc.output_norm.weight")
}

// t5Inputs are token lists of a T5Vocab model, each ending in </s>: a
// short one, one past the exact buckets (8 positions) and the logarithmic
// ones, and </s> alone.
func t5Inputs(vocab int) [][]int32 {
	return [][]int32{
		{40, 41, 42, 200, synth.T5EOS},
		append(tokens(40, vocab, 3), synth.T5EOS),
		{synth.T5EOS},
	}
}

// TestT5EncoderMatchesReference: every token's hidden state of a t5encoder
// (flan-T5's gated GELU with F32 and F16 weights, T5's ReLU with a key
// length other than d_model/heads, mean, CLS and last pooling) within
// cosine 0.9999 of a float64 reference read from the file — relative
// position buckets, no 1/sqrt(d) scale, layer 0's bias table shared — and
// the pooled vectors likewise.
func TestT5EncoderMatchesReference(t *testing.T) {
	for _, c := range []synth.BertConfig{
		{Arch: "t5encoder", Layers: 2, DModel: 64, Heads: 4, FFN: 96, Context: 64, DType: gguf.F32, Pooling: 1},
		{Arch: "t5encoder", Layers: 2, DModel: 64, Heads: 4, FFN: 128, Context: 64, DType: gguf.F16, Pooling: 2},
		{Arch: "t5encoder", Layers: 3, DModel: 48, Heads: 3, KeyLength: 24, FFN: 80, Context: 64, DType: gguf.F32, Pooling: 3, ReLU: true},
	} {
		t.Run(fmt.Sprintf("%v-pool%d-relu%v", c.DType, c.Pooling, c.ReLU), func(t *testing.T) {
			f := bertFile(t, c)
			m := load(t, backend(t), f)
			if m.HeadDim != max(c.KeyLength, c.DModel/c.Heads) || m.RelBuckets != synth.T5RelBuckets {
				t.Fatalf("head dim %d, %d buckets", m.HeadDim, m.RelBuckets)
			}
			k := newKV(t, m, 24, 8, "t")
			inputs := t5Inputs(m.Vocab)
			got := k.encode(t, "t", inputs)
			for i, in := range inputs {
				ref := refT5(t, f, in)
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

// TestT5ArchIsItsEncoder: a "t5" file (encoder-decoder) serves its encoder
// half: the same tensors under t5.* keys give bit-identical hidden states
// to the t5encoder file.
func TestT5ArchIsItsEncoder(t *testing.T) {
	c := synth.BertConfig{Arch: "t5encoder", Layers: 2, DModel: 32, Heads: 2, FFN: 64, Context: 32, DType: gguf.F32}
	enc := bertFile(t, c)
	full := copyGGUF(t, enc, func(k string) string {
		if k == "general.architecture" {
			return ""
		}
		if r, ok := strings.CutPrefix(k, "t5encoder."); ok {
			return "t5." + r
		}
		return k
	}, "")
	var hs [][]float32
	for _, f := range []*gguf.File{enc, full} {
		m := load(t, backend(t), f)
		hs = append(hs, newKV(t, m, 8, 8, "t").encode(t, "t", [][]int32{{40, 50, 60, synth.T5EOS}})[0])
	}
	if !slices.Equal(hs[0], hs[1]) {
		t.Error("a t5 file's encoder differs from the t5encoder file's")
	}
}

// TestT5EncoderRefuses: files llama.cpp's t5encoder loader would not read
// as we run them are refused at Load: rank pooling (no classification
// head), no relative-position bias in layer 0, biases on the projections,
// a bucket count without exact buckets, and a zero rms epsilon.
func TestT5EncoderRefuses(t *testing.T) {
	base := synth.BertConfig{Arch: "t5encoder", Layers: 1, DModel: 32, Heads: 2, FFN: 64, Context: 32, DType: gguf.F32}
	for _, tc := range []struct {
		name string
		edit func(*gguf.Writer) error
		want error
	}{
		{"rank pooling", func(w *gguf.Writer) error { return w.Set("t5encoder.pooling_type", uint32(4)) }, ErrUnsupported},
		{"two buckets", func(w *gguf.Writer) error { return w.Set("t5encoder.attention.relative_buckets_count", uint32(2)) }, ErrModel},
		{"zero epsilon", func(w *gguf.Writer) error { return w.Set("t5encoder.attention.layer_norm_rms_epsilon", float32(0)) }, ErrModel},
		{"projection bias", func(w *gguf.Writer) error {
			return w.AddTensorFunc("enc.blk.0.attn_q.bias", gguf.F32, []uint64{32}, func([]byte) error { return nil })
		}, ErrUnsupported},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := synth.Bert(base)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.edit(w); err != nil {
				t.Fatal(err)
			}
			if _, err := Load(backend(t), parse(t, w)); !errors.Is(err, tc.want) {
				t.Errorf("Load: %v, want %v", err, tc.want)
			}
		})
	}
	noBias := copyGGUF(t, bertFile(t, base), func(k string) string { return k }, "enc.blk.0.attn_rel_b.weight")
	if _, err := Load(backend(t), noBias); !errors.Is(err, ErrModel) {
		t.Errorf("Load without a bias table: %v, want %v", err, ErrModel)
	}
}

// copyGGUF copies f, renaming each key by key (dropping those it maps to
// ""; general.architecture is then set to "t5") and leaving out the tensor
// skip.
func copyGGUF(t testing.TB, f *gguf.File, key func(string) string, skip string) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		k := key(kv.Key)
		if k == "" {
			if err := w.Set(kv.Key, "t5"); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := w.Set(k, kv.Value.Any()); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range f.Tensors {
		if ti.Name == skip {
			continue
		}
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	return parse(t, w)
}
