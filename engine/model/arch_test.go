package model

import (
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/kernels"
)

// augment copies f with the keys of set added (or replaced; a nil value
// drops the key) and extra F32 tensors of the given lengths appended.
func augment(t testing.TB, f *gguf.File, set map[string]any, extra map[string]int) *gguf.File {
	t.Helper()
	g := rewrite(t, f, func(k string, v any) any {
		if nv, ok := set[k]; ok {
			return nv
		}
		return v
	}, nil)
	if len(extra) == 0 && !hasNew(f, set) {
		return g
	}
	w := gguf.NewWriter()
	for _, e := range g.KV {
		w.Set(e.Key, e.Value.Any())
	}
	for k, v := range set {
		if _, ok := f.Get(k); !ok && v != nil {
			if err := w.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	for _, ti := range g.Tensors {
		data := g.Data(ti)
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data[:must(ti.Type.RowSize(ti.Elements()))]); err != nil {
			t.Fatal(err)
		}
	}
	for name, n := range extra {
		if err := w.AddTensor(name, gguf.F32, []uint64{uint64(n)}, make([]byte, 4*n)); err != nil {
			t.Fatal(err)
		}
	}
	return parse(t, w)
}

func hasNew(f *gguf.File, set map[string]any) bool {
	for k := range set {
		if _, ok := f.Get(k); !ok {
			return true
		}
	}
	return false
}

// TestArchConfig: the hyperparameters each architecture reads, as
// llama.cpp's loaders read them (src/models/gemma3.cpp, granite.cpp,
// llama-hparams.cpp set_swa_pattern).
func TestArchConfig(t *testing.T) {
	g := randomFile(t, gemma3(gguf.F32, 5, nil, 0))
	T, F := true, false
	tests := []struct {
		name    string
		f       *gguf.File
		swa     []bool
		window  int
		check   func(c Config) bool
		explain string
	}{
		{"gemma3 default pattern: every 6th layer global", g, []bool{T, T, T, T, T, F}, 5, func(c Config) bool {
			return c.RoPE.Base == 1e6 && c.RoPESWA.Base == 10000 && c.RoPESWA.Scale == 1 && c.PostNorms && c.GeGLU &&
				c.EmbedScale == float32(math.Sqrt(64)) && c.AttnScale == 0 && c.QKNorm && c.RoPE.NeoX
		}, "local base 10000, global 1e6, sqrt(d) embedding scale"},
		{"gemma3 period 2", augment(t, g, map[string]any{"gemma3.attention.sliding_window_pattern": uint32(2)}, nil), []bool{T, F, T, F, T, F}, 5, nil, ""},
		{"gemma3 period 0: all local", augment(t, g, map[string]any{"gemma3.attention.sliding_window_pattern": uint32(0)}, nil), []bool{T, T, T, T, T, T}, 5, nil, ""},
		{"gemma3 pattern array", augment(t, g, map[string]any{"gemma3.attention.sliding_window_pattern": []bool{F, T, F, T, F, T}}, nil), []bool{F, T, F, T, F, T}, 5, nil, ""},
		{"gemma3 local rope base", augment(t, g, map[string]any{"gemma3.rope.freq_base_swa": float32(5e4)}, nil), []bool{T, T, T, T, T, F}, 5, func(c Config) bool { return c.RoPESWA.Base == 5e4 }, ""},
		{"gemma3 window 0: none", augment(t, g, map[string]any{"gemma3.attention.sliding_window": uint32(0)}, nil), nil, 0, nil, ""},
		{"gemma3 27B attention scale", augment(t, g, map[string]any{"gemma3.block_count": uint32(62)}, nil), nil, 5, func(c Config) bool {
			return c.AttnScale == float32(1/math.Sqrt(64/4))
		}, "1/sqrt(d_model/heads) for 62 layers"},
		{"llama window: every layer", randomFile(t, withWindow(small(gguf.F32, false), 6)), []bool{T, T}, 6, func(c Config) bool { return c.RoPESWA.Base == c.RoPE.Base && c.RoPESWA.Scale == c.RoPE.Scale }, ""},
		{"granite multipliers", randomFile(t, synth.Config{Arch: "granite", Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 300, Context: 64,
			DType: gguf.F32, LogitScale: 8, ResidualScale: 0.5, EmbedScale: 12, AttnScale: 0.1}), nil, 0, func(c Config) bool {
			return c.LogitScale == 8 && c.ResidualScale == 0.5 && c.EmbedScale == 12 && c.AttnScale == 0.1 && !c.RoPE.NeoX
		}, ""},
		{"phi3 partial rotary", randomFile(t, synth.Config{Arch: "phi3", Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 300, Context: 64,
			DType: gguf.F32, RopeDims: 6}), nil, 0, func(c Config) bool { return c.RoPE.Dims == 6 && c.RoPE.NeoX }, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := ConfigFromGGUF(tc.f)
			if err != nil {
				t.Fatal(err)
			}
			if c.Window != tc.window {
				t.Errorf("got window %d, want %d", c.Window, tc.window)
			}
			if tc.swa != nil && !slices.Equal(c.SWA[:len(tc.swa)], tc.swa) {
				t.Errorf("got local layers %v, want %v", c.SWA[:len(tc.swa)], tc.swa)
			}
			if tc.swa == nil && tc.window == 0 && c.SWA != nil {
				t.Errorf("got local layers %v without a window", c.SWA)
			}
			if tc.check != nil && !tc.check(c) {
				t.Errorf("got %+v; want %s", c, tc.explain)
			}
		})
	}
}

// TestArchRejects: what the new architectures cannot run is refused, never
// run as something else.
func TestArchRejects(t *testing.T) {
	g := randomFile(t, gemma3(gguf.F32, 5, nil, 0))
	gr := randomFile(t, synth.Config{Arch: "granite", Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 300, Context: 64, DType: gguf.F32, LogitScale: 8})
	ph := randomFile(t, synth.Config{Arch: "phi3", Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 300, Context: 64, DType: gguf.F32})
	tests := []struct {
		name string
		f    *gguf.File
		want error
	}{
		{"gemma2-style attention soft-cap", augment(t, g, map[string]any{"gemma3.attn_logit_softcapping": float32(50)}, nil), ErrUnsupported},
		{"negative final soft-cap", augment(t, g, map[string]any{"gemma3.final_logit_softcapping": float32(-1)}, nil), ErrModel},
		{"pattern of the wrong length", augment(t, g, map[string]any{"gemma3.attention.sliding_window_pattern": []bool{true}}, nil), ErrModel},
		{"pattern without a window", augment(t, g, map[string]any{"gemma3.attention.sliding_window": nil, "gemma3.attention.sliding_window_pattern": uint32(2)}, nil), ErrModel},
		{"negative window", augment(t, g, map[string]any{"gemma3.attention.sliding_window": int32(-4)}, nil), ErrModel},
		{"gemma3 without post norms", rewrite(t, g, nil, func(ti *gguf.TensorInfo) bool { return ti.Name != "blk.2.post_ffw_norm.weight" }), ErrModel},
		{"granite without logit_scale", augment(t, gr, map[string]any{"granite.logit_scale": nil}, nil), ErrModel},
		{"granite without rope", augment(t, gr, map[string]any{"granite.rope.scaling.finetuned": false}, nil), ErrUnsupported},
		{"granite attention output bias", augment(t, gr, nil, map[string]int{"blk.0.attn_output.bias": 64}), ErrUnsupported},
		// The expert feed-forward is SwiGLU added as is: experts beside
		// gemma3's GeGLU and post norms or granite's residual scale are
		// refused as unsupported, not run without them.
		{"gemma3 with experts", augment(t, g, map[string]any{"gemma3.expert_count": uint32(4), "gemma3.expert_used_count": uint32(2)}, nil), ErrUnsupported},
		{"granite with experts and a residual scale", augment(t, gr, map[string]any{"granite.expert_count": uint32(4),
			"granite.expert_used_count": uint32(2), "granite.residual_scale": float32(0.2)}, nil), ErrUnsupported},
		{"phi3 long-rope factors", augment(t, ph, nil, map[string]int{"rope_factors_long.weight": 8}), ErrUnsupported},
		{"phi3 short-rope factors", augment(t, ph, nil, map[string]int{"rope_factors_short.weight": 8}), ErrUnsupported},
		{"phi3 fused qkv of the wrong height", rewrite(t, ph, nil, func(ti *gguf.TensorInfo) bool {
			if ti.Name == "blk.0.attn_qkv.weight" {
				ti.Dims = []uint64{64, 128}
			}
			return true
		}), ErrModel},
		{"phi3 ffn_up not 2·FFN", rewrite(t, ph, nil, func(ti *gguf.TensorInfo) bool {
			if ti.Name == "blk.0.ffn_up.weight" {
				ti.Dims = []uint64{64, 96}
			}
			return true
		}), ErrModel},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Load(backend(t), tc.f)
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

// plainBackend and plainArena hide the optional capabilities of the CPU
// backend, as a backend that lacks them (kernels/cuda today) would.
type plainBackend struct{ kernels.Backend }

func (b plainBackend) NewArena(c kernels.ArenaConfig) (kernels.Arena, error) {
	a, err := b.Backend.NewArena(c)
	return plainArena{a}, err
}

type plainArena struct{ kernels.Arena }

// TestNeedsCapabilities: a backend without Scale or GeGLU cannot load the
// architectures that need them, and an arena without AttentionWith cannot
// run a sliding window or a rescaled attention (ErrUnsupported, no logits);
// architectures that need none of them still run there, bit-identical.
func TestNeedsCapabilities(t *testing.T) {
	for _, c := range []synth.Config{gemma3(gguf.F32, 0, nil, 0),
		{Arch: "granite", Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 300, Context: 64, DType: gguf.F32, EmbedScale: 2}} {
		if _, err := Load(plainBackend{backend(t)}, randomFile(t, c)); !errors.Is(err, ErrUnsupported) {
			t.Errorf("%s on a backend without its ops: got %v, want ErrUnsupported", c.Arch, err)
		}
	}
	toks := tokens(6, 300, 3)
	for _, tc := range []struct {
		c    synth.Config
		want error
	}{
		{withWindow(small(gguf.F32, false), 4), ErrUnsupported},
		{synth.Config{Arch: "granite", Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 300, Context: 64, DType: gguf.F32, AttnScale: 0.2}, ErrUnsupported},
		{synth.Config{Arch: "phi3", Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 300, Context: 64, DType: gguf.F32}, nil},
		{synth.Config{Arch: "granite", Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 300, Context: 64, DType: gguf.F32, LogitScale: 3}, nil},
	} {
		f := randomFile(t, tc.c)
		m := load(t, plainBackend{backend(t)}, f)
		k := newKV(t, m, 8, 4, "t")
		s := k.start(t, "t", "r", len(toks))
		if err := k.pool.Write(s.lease, len(toks)); err != nil {
			t.Fatal(err)
		}
		bt, err := k.pool.BlockTable(s.lease, len(toks))
		if err != nil {
			t.Fatal(err)
		}
		got, err := m.Forward(k.arena, []Seq{{Table: bt, Tokens: toks}}, false)
		if !errors.Is(err, tc.want) || (err != nil) != (got == nil) {
			t.Errorf("%s %+v: got %v, want %v", tc.c.Arch, tc.c, err, tc.want)
			continue
		}
		if err == nil {
			ref := load(t, backend(t), f)
			k2 := newKV(t, ref, 8, 4, "t")
			want := k2.step(t, []*seq{k2.start(t, "t", "r", len(toks))}, [][]int32{toks}, false)
			checkSame(t, tc.c.Arch, got[0], want[0])
		}
	}
}

func checkSame(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: logit %d: got %v, want %v", what, i, got[i], want[i])
		}
	}
}

// withTensor copies f with one more F32 tensor.
func withTensor(t testing.TB, f *gguf.File, name string, x []float32) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, e := range f.KV {
		w.Set(e.Key, e.Value.Any())
	}
	for _, ti := range f.Tensors {
		data := f.Data(ti)
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims, data[:must(ti.Type.RowSize(ti.Elements()))]); err != nil {
			t.Fatal(err)
		}
	}
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	if err := w.AddTensor(name, gguf.F32, []uint64{uint64(len(x))}, b); err != nil {
		t.Fatal(err)
	}
	return parse(t, w)
}

// TestRopeFreqs: llama3's rope_freqs.weight factors reach every layer, the
// sliding-window ones included (the reference applies them to all), and
// change the logits; gemma3 files with them are refused (llama.cpp's gemma3
// graph passes none).
func TestRopeFreqs(t *testing.T) {
	factors := []float32{1, 1, 2, 4, 8, 8, 16, 32} // head dim 16: 8 pairs
	for _, cfg := range []synth.Config{small(gguf.F32, false), withWindow(small(gguf.F32, false), 5)} {
		t.Run(name(cfg), func(t *testing.T) {
			plain := randomFile(t, cfg)
			f := withTensor(t, plain, "rope_freqs.weight", factors)
			m := load(t, backend(t), f)
			if len(m.RoPE.Factors) != len(factors) {
				t.Fatalf("got %d factors, want %d", len(m.RoPE.Factors), len(factors))
			}
			toks := tokens(12, cfg.Vocab, 4)
			run := func(m *Model) []float32 {
				k := newKV(t, m, 8, 4, "t")
				return k.step(t, []*seq{k.start(t, "t", "r", len(toks))}, [][]int32{toks}, true)[0]
			}
			got := run(m)
			want := newRef(t, f).forward(toks)
			for p := range toks {
				for i, w := range want[p] {
					if d := math.Abs(float64(got[p*m.Vocab+i]) - w); d > 1e-4 {
						t.Fatalf("position %d logit %d: got %v, want %v", p, i, got[p*m.Vocab+i], w)
					}
				}
			}
			without := run(load(t, backend(t), plain))
			same := true
			for i := range got {
				same = same && got[i] == without[i]
			}
			if same {
				t.Fatal("the factors do not change the logits")
			}
		})
	}
	g := withTensor(t, randomFile(t, gemma3(gguf.F32, 5, nil, 0)), "rope_freqs.weight", make([]float32, 16))
	if _, err := Load(backend(t), g); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("gemma3 with rope_freqs: got %v, want ErrUnsupported", err)
	}
}
