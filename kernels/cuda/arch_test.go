package cuda

import (
	"errors"
	"math"
	"path/filepath"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

func TestEmulatedArchs(t *testing.T) {
	b, _ := newEmulated(t, kernels.Options{})
	testArchs(t, b)
}

func synthFile(t *testing.T, c synth.Config) *gguf.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "m.gguf")
	w, err := synth.Random(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// testArchs: this backend has none of kernels' optional capabilities
// (Scaler, GeGLUer, WindowAttender), so gemma3, sliding windows and
// granite's activation and score scales are refused with
// model.ErrUnsupported and no logits; phi3 (fused tensors, wrapped as
// matrices over sub-ranges of one tensor's bytes) and granite with only its
// logit scale (applied on the host) run and match the CPU backend.
func testArchs(t *testing.T, b kernels.Backend) {
	base := synth.Config{Layers: 2, DModel: 64, Heads: 4, KVHeads: 2, FFN: 128, Vocab: 300, Context: 64, DType: gguf.F16, Seed: 8}
	with := func(f func(*synth.Config)) synth.Config { c := base; f(&c); return c }
	refused := map[string]synth.Config{
		"gemma3":          with(func(c *synth.Config) { c.Arch, c.HeadDim = "gemma3", 32 }),
		"granite scales":  with(func(c *synth.Config) { c.Arch, c.EmbedScale, c.ResidualScale = "granite", 4, 0.5 }),
		"granite scores":  with(func(c *synth.Config) { c.Arch, c.AttnScale = "granite", 0.1 }),
		"llama window":    with(func(c *synth.Config) { c.Window = 4 }),
		"phi3 window":     with(func(c *synth.Config) { c.Arch, c.Window = "phi3", 4 }),
		"gemma3 no swa":   with(func(c *synth.Config) { c.Arch, c.HeadDim, c.Window = "gemma3", 32, 0 }),
		"granite softcap": with(func(c *synth.Config) { c.Arch, c.EmbedScale, c.FinalSoftcap = "granite", 2, 3 }),
	}
	for name, c := range refused {
		t.Run("refuses "+name, func(t *testing.T) {
			f := synthFile(t, c)
			m, err := model.Load(b, f)
			if err == nil {
				defer m.Close()
				err = forwardOnce(t, b, m)
			}
			if !errors.Is(err, model.ErrUnsupported) {
				t.Fatalf("got %v, want model.ErrUnsupported", err)
			}
		})
	}
	for name, c := range map[string]synth.Config{
		"phi3":    with(func(c *synth.Config) { c.Arch, c.RopeDims = "phi3", 8 }),
		"granite": with(func(c *synth.Config) { c.Arch, c.LogitScale, c.FinalSoftcap = "granite", 4, 2 }),
	} {
		t.Run(name+" matches the CPU", func(t *testing.T) {
			f := synthFile(t, c)
			oracle, err := openOracle()
			if err != nil {
				t.Fatal(err)
			}
			defer oracle.Close()
			got, want := runModel(t, b, f), runModel(t, oracle, f)
			for s := range want {
				for i := range want[s] {
					for j, w := range want[s][i] {
						if d := math.Abs(float64(got[s][i][j] - w)); d > 1e-3*math.Abs(float64(w))+1e-4 {
							t.Fatalf("step %d sequence %d logit %d: got %v, want %v (cpu)", s, i, j, got[s][i][j], w)
						}
					}
				}
			}
		})
	}
}

// forwardOnce runs one prefill step of three tokens and returns its error.
func forwardOnce(t *testing.T, b kernels.Backend, m *model.Model) error {
	t.Helper()
	pool, err := isolation.NewPool(isolation.Config{Pages: 4, PageTokens: 4})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.AddTenant(isolation.TenantConfig{ID: "t"}); err != nil {
		t.Fatal(err)
	}
	a, err := b.NewArena(m.ArenaConfig(4, 4, kernels.KVF32))
	if err != nil {
		t.Fatal(err)
	}
	l, err := pool.Allocate("t", "r", 4)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Write(l, 3); err != nil {
		t.Fatal(err)
	}
	bt, err := pool.BlockTable(l, 3)
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Forward(a, []model.Seq{{Table: bt, Tokens: []int32{1, 2, 3}}}, false)
	if err == nil && out == nil {
		t.Fatal("no logits and no error")
	}
	if err != nil && out != nil {
		t.Fatal("logits with an error")
	}
	return err
}
