package synth

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"

	"github.com/cloison/cloison/engine/gguf"
)

// LoRAConfig describes a synthetic LoRA adapter (LoRA).
type LoRAConfig struct {
	Name  string  // general.name; "synthetic-lora" if empty
	Rank  int     // rank of every pair; 16 if 0
	Alpha float32 // adapter.lora.alpha; 2·Rank if 0
	// Strength is the typical size of an adapted product's delta relative
	// to the base product's (0: 0.25).
	Strength float64
	Seed     uint64
	// DType of the pairs: F32 (default) or F16.
	DType gguf.TensorType
	// Output adapts output.weight too (when the base has one).
	Output bool
	// Targets restricts the adapted per-layer projections to these base
	// tensor suffixes ("attn_q.weight", "ffn_down.weight", …); empty: all
	// of attn_q, attn_k, attn_v, attn_output, ffn_gate, ffn_up, ffn_down
	// the base holds.
	Targets []string
}

var loraTargets = regexp.MustCompile(`^blk\.[0-9]+\.(attn_q|attn_k|attn_v|attn_output|ffn_gate|ffn_up|ffn_down)\.weight$`)

// LoRA returns a Writer holding a random LoRA adapter for the base model f,
// as llama.cpp's convert_lora_to_gguf.py writes one: general.type
// "adapter", general.architecture the base's, adapter.type "lora",
// adapter.lora.alpha, and for each adapted base tensor T (ggml dims
// [in, out]) the pair T.lora_a [in, Rank] and T.lora_b [Rank, out]. A is
// N(0, 1/in); B is scaled so that Alpha/Rank·B·A·x is about Strength times
// W·x. A fused attn_qkv or phi3's fused ffn_up is not adapted; nor are
// expert stacks. The same config and base give the same bytes.
func LoRA(f *gguf.File, c LoRAConfig) (*gguf.Writer, error) {
	if c.Rank == 0 {
		c.Rank = 16
	}
	if c.Alpha == 0 {
		c.Alpha = float32(2 * c.Rank)
	}
	if c.Strength == 0 {
		c.Strength = 0.25
	}
	if c.Name == "" {
		c.Name = "synthetic-lora"
	}
	if c.DType == 0 {
		c.DType = gguf.F32
	}
	if c.DType != gguf.F32 && c.DType != gguf.F16 {
		return nil, fmt.Errorf("synth: LoRA pairs of type %v (F32 or F16)", c.DType)
	}
	if c.Rank < 1 || c.Alpha < 0 || c.Strength < 0 {
		return nil, fmt.Errorf("synth: LoRA rank %d, alpha %g, strength %g", c.Rank, c.Alpha, c.Strength)
	}
	arch, ok := f.String("general.architecture")
	if !ok {
		return nil, errors.New("synth: the base has no general.architecture")
	}
	if t, _ := f.String("general.type"); t == "adapter" {
		return nil, errors.New("synth: the base is itself an adapter")
	}
	targets := map[string]bool{}
	for _, t := range c.Targets {
		targets[t] = true
	}
	w := gguf.NewWriter()
	for _, kv := range [][2]any{{"general.architecture", arch}, {"general.type", "adapter"}, {"general.name", c.Name},
		{"adapter.type", "lora"}, {"adapter.lora.alpha", c.Alpha}} {
		if err := w.Set(kv[0].(string), kv[1]); err != nil {
			return nil, err
		}
	}
	_, phi3Up := f.Tensor("blk.0.ffn_gate.weight")
	phi3Up = !phi3Up && arch == "phi3"
	idx := uint64(0)
	fill := func(rows, cols int, std float64) func([]byte) error {
		idx++
		seed := idx
		return func(b []byte) error {
			r := rand.New(rand.NewPCG(c.Seed, seed))
			x := make([]float32, rows*cols)
			for i := range x {
				x[i] = float32(r.NormFloat64() * std)
			}
			enc, err := encode(c.DType, x)
			if err != nil {
				return err
			}
			copy(b, enc)
			return nil
		}
	}
	n := 0
	for _, t := range f.Tensors {
		m := loraTargets.FindStringSubmatch(t.Name)
		switch {
		case t.Name == "output.weight" && c.Output:
		case m == nil:
			continue
		case len(targets) > 0 && !targets[m[1]+".weight"]:
			continue
		case phi3Up && m[1] == "ffn_up":
			continue
		}
		if len(t.Dims) != 2 {
			continue
		}
		in, out := int(t.Dims[0]), int(t.Dims[1])
		if c.Rank > min(in, out) {
			return nil, fmt.Errorf("synth: rank %d exceeds %s's %d×%d", c.Rank, t.Name, out, in)
		}
		// B·A·x has entries of about std_B·sqrt(Rank) (A·x is about N(0,1)
		// per entry for x of unit RMS); the base's W·x about 1.
		stdB := c.Strength / math.Sqrt(float64(c.Rank)) / (float64(c.Alpha) / float64(c.Rank))
		if err := errors.Join(
			w.AddTensorFunc(t.Name+".lora_a", c.DType, []uint64{uint64(in), uint64(c.Rank)}, fill(c.Rank, in, 1/math.Sqrt(float64(in)))),
			w.AddTensorFunc(t.Name+".lora_b", c.DType, []uint64{uint64(c.Rank), uint64(out)}, fill(out, c.Rank, stdB))); err != nil {
			return nil, err
		}
		n++
	}
	if n == 0 {
		return nil, errors.New("synth: no base tensor to adapt")
	}
	return w, nil
}
