package model

import (
	"errors"
	"math"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/kernels"
)

// TestRoute: known routes (softmax over all experts, then the top k
// renormalised: llama.cpp's norm_w) and, for any logits, the properties that
// define it: the chosen experts are the k largest logits in descending
// order, lower index first on ties; the weights are positive, descending and
// sum to 1; and they are the softmax over the chosen logits alone.
func TestRoute(t *testing.T) {
	tests := []struct {
		logits []float32
		k      int
		sel    []int
		w      []float64
	}{
		{[]float32{0, float32(math.Log(3)), 0, float32(math.Log(2))}, 2, []int{1, 3}, []float64{0.6, 0.4}},
		{[]float32{5, 1, 2}, 1, []int{0}, []float64{1}},
		{[]float32{1, 1, 1, 1}, 3, []int{0, 1, 2}, []float64{1.0 / 3, 1.0 / 3, 1.0 / 3}},
		{[]float32{-2, 7, 7, 3}, 4, []int{1, 2, 3, 0}, nil},
	}
	for _, tc := range tests {
		sel, w := make([]int, tc.k), make([]float32, tc.k)
		route(tc.logits, tc.k, sel, w)
		if !slices.Equal(sel, tc.sel) {
			t.Errorf("route(%v, %d): experts %v, want %v", tc.logits, tc.k, sel, tc.sel)
		}
		for j := range tc.w {
			if math.Abs(float64(w[j])-tc.w[j]) > 1e-6 {
				t.Errorf("route(%v, %d): weights %v, want %v", tc.logits, tc.k, w, tc.w)
			}
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 64).Draw(rt, "experts")
		k := rapid.IntRange(1, n).Draw(rt, "k")
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(rapid.Float64Range(-30, 30).Draw(rt, "logit"))
		}
		sel, w := make([]int, k), make([]float32, k)
		route(logits, k, sel, w)
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		slices.SortStableFunc(order, func(a, b int) int {
			if logits[a] != logits[b] {
				if logits[a] > logits[b] {
					return -1
				}
				return 1
			}
			return 0
		})
		var sum, z float64
		for _, e := range sel {
			z += math.Exp(float64(logits[e]) - float64(logits[sel[0]]))
		}
		for j, e := range sel {
			// The order is on float32 probabilities: distinct logits may
			// give equal ones (within an ulp of each other, or underflowing).
			p := func(i int) float32 { return float32(math.Exp(float64(logits[i] - logits[order[0]]))) }
			if e != order[j] && p(e) != p(order[j]) {
				rt.Fatalf("slot %d: expert %d, want %d (logits %v)", j, e, order[j], logits)
			}
			if j > 0 && w[j] > w[j-1] {
				rt.Fatalf("weights %v not descending", w)
			}
			if want := math.Exp(float64(logits[e])-float64(logits[sel[0]])) / z; w[j] > 0 && math.Abs(float64(w[j])-want) > 1e-5 {
				rt.Fatalf("slot %d: weight %v, softmax over the chosen %v", j, w[j], want)
			}
			sum += float64(w[j])
		}
		if math.Abs(sum-1) > 1e-5 {
			rt.Fatalf("weights %v sum to %v", w, sum)
		}
	})
}

// TestMoEBatchInvariant: a MoE sequence's logits are bit-identical whatever
// else is in the batch (other tokens route to the same and other experts,
// so the experts' gathered batches differ), the page size and how the
// prompt is split into steps.
func TestMoEBatchInvariant(t *testing.T) {
	for _, c := range []struct {
		name string
		dt   gguf.TensorType
		moe  bool
	}{{"qwen3moe", gguf.Q8_0, true}, {"mixtral", gguf.MXFP4, false}} {
		t.Run(c.name, func(t *testing.T) {
			sc := mixtral(c.dt)
			if c.moe {
				sc = qwen3moe(c.dt)
			}
			m := load(t, backend(t), randomFile(t, sc))
			toks := tokens(29, sc.Vocab, 4)
			base := newKV(t, m, 1, 64, "t")
			want := base.step(t, []*seq{base.start(t, "t", "r", len(toks))}, [][]int32{toks}, true)[0]
			for _, split := range [][]int{{29}, {1, 9, 19}, {13, 16}} {
				k := newKV(t, m, 40, 4, "t", "u")
				a := k.start(t, "t", "a", len(toks))
				others := []*seq{k.start(t, "u", "b", len(toks)), k.start(t, "u", "c", len(toks))}
				var got []float32
				pos := 0
				for i, n := range split {
					o1 := tokens(n+i, sc.Vocab, 10+i)
					in := [][]int32{o1[:n], toks[pos : pos+n], o1[i : i+n]}
					out := k.step(t, []*seq{others[0], a, others[1]}, in, true)
					got = append(got, out[1]...)
					pos += n
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("split %v: logit %d (position %d): got %v, want %v bit-identical", split, i, i/m.Vocab, got[i], want[i])
					}
				}
			}
		})
	}
}

// renamed is the cpu backend under another name: a backend the MoE path
// has not been verified on.
type renamed struct{ kernels.Backend }

func (renamed) Name() string { return "cuda" }

// TestMoERejects: files whose experts this package cannot run as llama.cpp
// does are refused at Load with ErrUnsupported or ErrModel (code
// invalid_request_error), as is a MoE file on a backend other than cpu.
func TestMoERejects(t *testing.T) {
	f := randomFile(t, qwen3moe(gguf.F32))
	if _, err := Load(renamed{backend(t)}, f); !errors.Is(err, ErrUnsupported) {
		t.Errorf("MoE on a cuda-named backend: got %v, want ErrUnsupported", err)
	}
	// The same backend runs a dense file.
	if m, err := Load(renamed{backend(t)}, randomFile(t, qwen3(gguf.F32))); err != nil {
		t.Errorf("dense file on the renamed backend: %v", err)
	} else {
		m.Close()
	}
	with := func(key string, val any) func(string, any) any {
		return func(k string, v any) any {
			if k == key {
				return val
			}
			return v
		}
	}
	add := func(key string, val any) *gguf.File {
		w := gguf.NewWriter()
		for _, e := range f.KV {
			w.Set(e.Key, e.Value.Any())
		}
		w.Set(key, val)
		for _, ti := range f.Tensors {
			w.AddTensor(ti.Name, ti.Type, ti.Dims, f.Data(ti))
		}
		return parse(t, w)
	}
	// qwen3moe's expert width is expert_feed_forward_length, whatever
	// feed_forward_length says (Qwen3-30B-A3B: 768 and 6144); without it,
	// feed_forward_length / expert_used_count, as llama.cpp falls back.
	if m, err := Load(backend(t), rewrite(t, f, with("qwen3moe.feed_forward_length", uint32(999)), nil)); err != nil || m.FFN != 64 {
		t.Errorf("feed_forward_length 999 beside expert_feed_forward_length 64: %v, FFN %v", err, m)
	}
	c, err := ConfigFromGGUF(rewrite(t, rewrite(t, f, with("qwen3moe.expert_feed_forward_length", nil), nil), with("qwen3moe.feed_forward_length", uint32(128)), nil))
	if err != nil || c.FFN != 64 {
		t.Errorf("no expert_feed_forward_length, feed_forward_length 128, 2 used: %v, FFN %d (want 64)", err, c.FFN)
	}
	tests := []struct {
		name string
		f    *gguf.File
		want error
	}{
		{"used above count", rewrite(t, f, with("qwen3moe.expert_used_count", uint32(9)), nil), ErrModel},
		{"no expert count", rewrite(t, f, with("qwen3moe.expert_count", nil), nil), ErrModel},
		{"too many experts", rewrite(t, f, with("qwen3moe.expert_count", uint32(1024)), nil), ErrUnsupported},
		{"shared experts", add("qwen3moe.expert_shared_count", uint32(1)), ErrUnsupported},
		{"expert groups", add("qwen3moe.expert_group_count", uint32(2)), ErrUnsupported},
		{"sigmoid gating", add("qwen3moe.expert_gating_func", uint32(2)), ErrUnsupported},
		{"weight scale", add("qwen3moe.expert_weights_scale", float32(2.5)), ErrUnsupported},
		{"no renormalisation", add("qwen3moe.expert_weights_norm", false), ErrUnsupported},
		{"no router", rewrite(t, f, nil, func(ti *gguf.TensorInfo) bool { return ti.Name != "blk.1.ffn_gate_inp.weight" }), ErrModel},
		{"experts not merged", rewrite(t, f, nil, func(ti *gguf.TensorInfo) bool {
			if ti.Name == "blk.0.ffn_up_exps.weight" {
				ti.Name = "blk.0.ffn_up.0.weight"
			}
			return true
		}), ErrModel},
		{"2-D expert tensor", rewrite(t, f, nil, func(ti *gguf.TensorInfo) bool {
			if ti.Name == "blk.0.ffn_down_exps.weight" {
				ti.Dims = []uint64{ti.Dims[0], ti.Dims[1] * ti.Dims[2]}
			}
			return true
		}), ErrModel},
		{"wrong expert count in tensor", rewrite(t, f, nil, func(ti *gguf.TensorInfo) bool {
			if ti.Name == "blk.1.ffn_gate_exps.weight" {
				ti.Dims = []uint64{ti.Dims[0], ti.Dims[1] * 2, ti.Dims[2] / 2}
			}
			return true
		}), ErrModel},
		{"experts on a llama file without count", rewrite(t, randomFile(t, mixtral(gguf.F32)), with("llama.expert_count", nil), nil), ErrModel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(backend(t), tc.f)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if cloison.ErrorCode(err) != cloison.CodeInvalid {
				t.Errorf("got code %v, want %v", cloison.ErrorCode(err), cloison.CodeInvalid)
			}
		})
	}
}
