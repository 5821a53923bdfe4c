package synth

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/kernels"
)

// Config describes a random-weight llama-family model.
type Config struct {
	Name string // general.name; "synthetic" if empty
	// Arch is general.architecture: "llama" (default); "qwen3", which
	// adds per-head Q/K norm weights (blk.N.attn_q_norm.weight and
	// attn_k_norm.weight, HeadDim each) and uses NeoX RoPE, as llama.cpp
	// reads qwen3 files; "qwen3moe" (qwen3 attention, every feed-forward a
	// mixture of experts) or "mixtral" (a llama file with experts:
	// general.architecture is "llama" and llama.expert_count is set);
	// "gemma3" (qwen3's Q/K norms plus post_attention_norm and
	// post_ffw_norm, GeGLU; llama.cpp's converter stores norm weights with
	// gemma's +1 added, so they are written as for the others, around 1);
	// "phi3" (fused attn_qkv and a 2·FFN ffn_up holding gate then up, no
	// ffn_gate); "granite" (the llama layout with granite.logit_scale and
	// the multipliers below).
	Arch string
	// Experts and ExpertsUsed are expert_count and expert_used_count of the
	// mixture-of-experts architectures (required there, 0 otherwise). Each
	// layer then has ffn_gate_inp.weight (the F32 router, Experts×DModel)
	// and the merged 3-D ffn_gate_exps/ffn_up_exps (FFN×DModel per expert)
	// and ffn_down_exps (DModel×FFN per expert) instead of ffn_gate, ffn_up
	// and ffn_down; FFN is each expert's width (qwen3moe also writes it as
	// expert_feed_forward_length). ExpertsUsed 0 means 2 (at most Experts).
	Experts     int
	ExpertsUsed int
	Layers      int
	DModel      int
	Heads       int
	KVHeads     int // 0 means Heads
	// HeadDim is attention.key_length (= value_length); 0 means
	// DModel/Heads. Qwen3 files have Heads·HeadDim ≠ DModel.
	HeadDim  int
	FFN      int
	Vocab    int // ≥ 259 (256 bytes + Specials)
	Context  int // advertised llama.context_length
	DType    gguf.TensorType
	Seed     uint64
	RopeBase float32 // 0 means 10000
	RMSEps   float32 // 0 means 1e-5
	// Tied omits output.weight: the output projection reuses token_embd.
	Tied bool
	// KQuantMix, with DType Q4_K or Q5_K, mixes types as llama.cpp's
	// Q4_K_M and Q5_K_M files do: output.weight, and attn_v and ffn_down of
	// the layers llama.cpp gives more bits (use_more_bits), are Q6_K.
	KQuantMix bool
	// Pre is tokenizer.ggml.pre, the pre-tokenizer llama.cpp applies:
	// "gpt-2" (default), "smollm", "llama-bpe", "qwen2", …
	Pre string

	// Window, when positive, writes attention.sliding_window; SWAPattern,
	// when set (one entry per layer), attention.sliding_window_pattern.
	Window     int    `json:",omitempty"`
	SWAPattern []bool `json:",omitempty"`
	// RopeDims, when positive, is rope.dimension_count (partial rotary);
	// 0 means HeadDim.
	RopeDims int `json:",omitempty"`
	// RopeBaseSWA, when positive, writes rope.freq_base_swa (gemma3).
	RopeBaseSWA float32 `json:",omitempty"`
	// FinalSoftcap, when positive, writes final_logit_softcapping.
	FinalSoftcap float32 `json:",omitempty"`
	// Granite's multipliers: LogitScale (0 means 1; granite files always
	// carry it), and, when positive, residual_scale, embedding_scale and
	// attention.scale.
	LogitScale, ResidualScale, EmbedScale, AttnScale float32 `json:",omitempty"`
}

func (c *Config) fill() error {
	if c.Name == "" {
		c.Name = "synthetic"
	}
	if c.Pre == "" {
		c.Pre = "gpt-2"
	}
	if c.Arch == "" {
		c.Arch = "llama"
	}
	switch c.Arch {
	case "llama", "qwen3", "gemma3", "phi3", "granite":
		if c.Experts != 0 || c.ExpertsUsed != 0 {
			return fmt.Errorf("synth: experts need --arch qwen3moe or mixtral, not %s", c.Arch)
		}
	case "qwen3moe", "mixtral":
		if c.ExpertsUsed == 0 {
			c.ExpertsUsed = min(2, c.Experts)
		}
		if c.Experts < 1 || c.ExpertsUsed < 1 || c.ExpertsUsed > c.Experts {
			return fmt.Errorf("synth: %s needs 1 ≤ experts used (%d) ≤ experts (%d)", c.Arch, c.ExpertsUsed, c.Experts)
		}
	default:
		return fmt.Errorf("synth: architecture %q not supported (llama, qwen3, qwen3moe, mixtral, gemma3, phi3, granite)", c.Arch)
	}
	if c.Arch == "granite" && c.LogitScale == 0 {
		c.LogitScale = 1
	}
	if c.SWAPattern != nil && (len(c.SWAPattern) != c.Layers || c.Window <= 0) {
		return fmt.Errorf("synth: a sliding-window pattern needs a window and one entry per layer")
	}
	if c.HeadDim == 0 && c.Heads > 0 && c.DModel%c.Heads == 0 {
		c.HeadDim = c.DModel / c.Heads
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.RopeBase == 0 {
		c.RopeBase = 10000
	}
	if c.RMSEps == 0 {
		c.RMSEps = 1e-5
	}
	switch {
	case c.Layers < 1 || c.DModel < 1 || c.Heads < 1 || c.FFN < 1 || c.Context < 1:
		return fmt.Errorf("synth: layers, d_model, heads, ffn and context must be positive: %+v", *c)
	case c.Vocab < 256+len(Specials):
		return fmt.Errorf("synth: vocab %d is smaller than %d", c.Vocab, 256+len(Specials))
	case c.HeadDim < 1 || c.HeadDim%2 != 0:
		return fmt.Errorf("synth: d_model %d with %d heads needs an even head dim (got %d)", c.DModel, c.Heads, c.HeadDim)
	case c.KVHeads < 1 || c.Heads%c.KVHeads != 0:
		return fmt.Errorf("synth: heads %d must be a multiple of kv_heads %d", c.Heads, c.KVHeads)
	case c.Context > math.MaxUint32:
		return fmt.Errorf("synth: context %d does not fit llama.context_length (uint32)", c.Context)
	}
	if c.RopeDims < 0 || c.RopeDims > c.HeadDim || c.RopeDims%2 != 0 {
		return fmt.Errorf("synth: rope dims %d with head dim %d", c.RopeDims, c.HeadDim)
	}
	switch c.DType {
	case gguf.F32, gguf.F16, gguf.BF16:
	case gguf.Q8_0, gguf.Q4_1, gguf.Q5_0, gguf.Q5_1, gguf.MXFP4:
		if c.DModel%32 != 0 || c.FFN%32 != 0 || (c.Heads*c.HeadDim)%32 != 0 {
			return fmt.Errorf("synth: %v needs d_model, ffn and heads×head_dim to be multiples of 32", c.DType)
		}
	case gguf.Q2_K, gguf.Q3_K, gguf.Q4_K, gguf.Q5_K, gguf.Q6_K:
		if c.DModel%256 != 0 || c.FFN%256 != 0 || (c.Heads*c.HeadDim)%256 != 0 {
			return fmt.Errorf("synth: %v needs d_model, ffn and heads×head_dim to be multiples of 256", c.DType)
		}
	default:
		return fmt.Errorf("synth: dtype %v not supported (F32, F16, BF16, Q4_1, Q5_0, Q5_1, Q8_0, MXFP4, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)", c.DType)
	}
	if c.KQuantMix && c.DType != gguf.Q4_K && c.DType != gguf.Q5_K {
		return fmt.Errorf("synth: the k-quant mix needs dtype Q4_K or Q5_K, not %v", c.DType)
	}
	return nil
}

// TensorType returns the type of weight matrix name ("blk.3.ffn_down.weight",
// "output.weight", …) in the file c describes.
func (c Config) TensorType(name string) gguf.TensorType {
	if strings.HasSuffix(name, ".ffn_gate_inp.weight") {
		return gguf.F32 // routers stay F32, as llama.cpp's quantizer leaves them
	}
	if !c.KQuantMix {
		return c.DType
	}
	if name == "output.weight" {
		return gguf.Q6_K
	}
	var l int
	var rest string
	if n, _ := fmt.Sscanf(name, "blk.%d.%s", &l, &rest); n == 2 && (rest == "attn_v.weight" || rest == "ffn_down.weight" || rest == "ffn_down_exps.weight") && useMoreBits(l, c.Layers) {
		return gguf.Q6_K
	}
	return c.DType
}

// useMoreBits is llama.cpp's choice of the layers that get Q6_K attn_v and
// ffn_down in a *_K_M file: the first and last eighth, and every third
// layer between.
func useMoreBits(l, n int) bool { return l < n/8 || l >= 7*n/8 || (l-n/8)%3 == 2 }

// Params returns the number of weights of the model c describes.
func (c Config) Params() int64 {
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	hd := c.HeadDim
	if hd == 0 {
		hd = c.DModel / c.Heads
	}
	d, f, v := int64(c.DModel), int64(c.FFN), int64(c.Vocab)
	kv, q := int64(c.KVHeads*hd), int64(c.Heads*hd)
	layer := 2*d + d*q + 2*d*kv + q*d + 3*d*f
	if c.Experts > 0 {
		layer += (int64(c.Experts)-1)*3*d*f + int64(c.Experts)*d
	}
	switch c.Arch {
	case "qwen3", "qwen3moe":
		layer += 2 * int64(hd)
	case "gemma3":
		layer += 2*int64(hd) + 2*d
	}
	out := d * v
	if c.Tied {
		out = 0
	}
	return v*d + int64(c.Layers)*layer + d + out
}

func fileType(t gguf.TensorType) uint32 {
	switch t {
	case gguf.F16:
		return 1
	case gguf.Q4_1:
		return 3 // LLAMA_FTYPE_MOSTLY_Q4_1
	case gguf.Q8_0:
		return 7
	case gguf.Q5_0:
		return 8
	case gguf.Q5_1:
		return 9
	case gguf.Q2_K:
		return 10 // LLAMA_FTYPE_MOSTLY_Q2_K
	case gguf.Q3_K:
		return 12 // LLAMA_FTYPE_MOSTLY_Q3_K_M (the nearest named; every weight Q3_K here)
	case gguf.MXFP4:
		return 38 // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
	case gguf.Q4_K:
		return 14 // LLAMA_FTYPE_MOSTLY_Q4_K_S
	case gguf.Q5_K:
		return 16 // Q5_K_S
	case gguf.Q6_K:
		return 18
	case gguf.BF16:
		return 32 // LLAMA_FTYPE_MOSTLY_BF16
	}
	return 0
}

// header sets the architecture's and the tokenizer metadata shared by both
// kinds.
func header(w *gguf.Writer, arch, name, pre string, layers, d, heads, kvHeads, hd, ffn, vocab, context int, base, eps float32, ftype uint32, fim bool) error {
	var tokens []string
	var types []int32
	var merges []string
	if fim {
		// The last len(FIMTokens) ids are the fill-in-the-middle control
		// tokens, named in the metadata as llama.cpp's converter names them.
		tokens, types, merges = Vocab(vocab - len(FIMTokens))
		for i, s := range FIMTokens {
			tokens, types = append(tokens, s), append(types, 3)
			if err := w.Set("tokenizer.ggml."+[]string{"fim_pre", "fim_suf", "fim_mid"}[i]+"_token_id", uint32(vocab-len(FIMTokens)+i)); err != nil {
				return err
			}
		}
	} else {
		tokens, types, merges = Vocab(vocab)
	}
	p := arch + "."
	kvs := []struct {
		k string
		v any
	}{
		{"general.architecture", arch},
		{"general.name", name},
		{"general.file_type", ftype},
		{"general.quantization_version", uint32(2)},
		{p + "context_length", uint32(context)},
		{p + "embedding_length", uint32(d)},
		{p + "block_count", uint32(layers)},
		{p + "feed_forward_length", uint32(ffn)},
		{p + "attention.head_count", uint32(heads)},
		{p + "attention.head_count_kv", uint32(kvHeads)},
		{p + "attention.layer_norm_rms_epsilon", eps},
		{p + "rope.freq_base", base},
		{p + "rope.dimension_count", uint32(hd)},
		{p + "vocab_size", uint32(vocab)},
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", pre},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(EndOfText)},
		{"tokenizer.ggml.eos_token_id", uint32(EndOfText)},
		{"tokenizer.ggml.eot_token_id", uint32(IMEnd)},
		{"tokenizer.ggml.padding_token_id", uint32(EndOfText)},
		{"tokenizer.ggml.add_bos_token", false},
		{"tokenizer.chat_template", ChatTemplate},
	}
	if arch != "llama" || hd*heads != d {
		// Written as convert_hf_to_gguf.py does for a head_dim; llama files
		// whose heads split d_model keep their bytes.
		kvs = append(kvs, []struct {
			k string
			v any
		}{{p + "attention.key_length", uint32(hd)}, {p + "attention.value_length", uint32(hd)}}...)
	}
	for _, kv := range kvs {
		if err := w.Set(kv.k, kv.v); err != nil {
			return err
		}
	}
	return nil
}

// extras writes the sliding window and the per-architecture multipliers.
func (c Config) extras(w *gguf.Writer, arch string) error {
	p := arch + "."
	var kvs []struct {
		k string
		v any
	}
	add := func(k string, v any) {
		kvs = append(kvs, struct {
			k string
			v any
		}{p + k, v})
	}
	if c.RopeDims > 0 {
		add("rope.dimension_count", uint32(c.RopeDims))
	}
	if c.Window > 0 {
		add("attention.sliding_window", uint32(c.Window))
	}
	if c.SWAPattern != nil {
		add("attention.sliding_window_pattern", c.SWAPattern)
	}
	for _, f := range []struct {
		k string
		v float32
	}{{"rope.freq_base_swa", c.RopeBaseSWA}, {"final_logit_softcapping", c.FinalSoftcap}, {"logit_scale", c.LogitScale},
		{"residual_scale", c.ResidualScale}, {"embedding_scale", c.EmbedScale}, {"attention.scale", c.AttnScale}} {
		if f.v > 0 {
			add(f.k, f.v)
		}
	}
	for _, kv := range kvs {
		if err := w.Set(kv.k, kv.v); err != nil {
			return err
		}
	}
	return nil
}

// encode converts rows×cols float32 weights (row-major) into dt.
func encode(dt gguf.TensorType, x []float32) ([]byte, error) {
	return kernels.Quantize(kernels.DType(dt), x)
}

func f32bytes(b []byte, x []float32) {
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
}

// Random returns a Writer holding a random-weight model. Tensors are generated
// while the file is written, each from its own seed (Seed and the tensor's
// index), so a model of any size streams to disk without being held in memory
// and the same Config always gives the same bytes.
func Random(c Config) (*gguf.Writer, error) {
	if err := c.fill(); err != nil {
		return nil, err
	}
	w := gguf.NewWriter()
	ft := fileType(c.DType)
	if c.KQuantMix {
		ft++ // Q4_K_M = 15, Q5_K_M = 17
	}
	arch := c.Arch
	if arch == "mixtral" {
		arch = "llama"
	}
	if err := header(w, arch, c.Name, c.Pre, c.Layers, c.DModel, c.Heads, c.KVHeads, c.HeadDim, c.FFN, c.Vocab, c.Context, c.RopeBase, c.RMSEps, ft, false); err != nil {
		return nil, err
	}
	if err := c.extras(w, arch); err != nil {
		return nil, err
	}
	if c.Experts > 0 {
		kvs := [][2]any{{arch + ".expert_count", uint32(c.Experts)}, {arch + ".expert_used_count", uint32(c.ExpertsUsed)}}
		if arch == "qwen3moe" {
			kvs = append(kvs, [2]any{arch + ".expert_feed_forward_length", uint32(c.FFN)})
		}
		for _, kv := range kvs {
			if err := w.Set(kv[0].(string), kv[1]); err != nil {
				return nil, err
			}
		}
	}
	hd := c.HeadDim
	idx := uint64(0)
	// experts stacks n matrices of rows×cols (ggml dims [cols, rows, n]);
	// n = 0 writes one 2-D matrix.
	experts := func(name string, dt gguf.TensorType, rows, cols, n int) error {
		idx++
		seed := idx
		scale := float32(1 / math.Sqrt(float64(cols)))
		dims := []uint64{uint64(cols), uint64(rows)}
		total := rows
		if n > 0 {
			dims, total = append(dims, uint64(n)), rows*n
		}
		return w.AddTensorFunc(name, dt, dims, func(b []byte) error {
			r := rand.New(rand.NewPCG(c.Seed, seed))
			row := make([]float32, cols)
			rb := len(b) / total
			for i := 0; i < total; i++ {
				for j := range row {
					row[j] = float32(r.NormFloat64()) * scale
				}
				enc, err := encode(dt, row)
				if err != nil {
					return err
				}
				copy(b[i*rb:], enc)
			}
			return nil
		})
	}
	matrix := func(name string, rows, cols int) error { return experts(name, c.TensorType(name), rows, cols, 0) }
	normN := func(name string, n int) error {
		idx++
		seed := idx
		return w.AddTensorFunc(name, gguf.F32, []uint64{uint64(n)}, func(b []byte) error {
			r := rand.New(rand.NewPCG(c.Seed, seed))
			x := make([]float32, n)
			for j := range x {
				x[j] = 1 + 0.1*float32(r.NormFloat64())
			}
			f32bytes(b, x)
			return nil
		})
	}
	norm := func(name string) error { return normN(name, c.DModel) }
	errs := []error{matrix("token_embd.weight", c.Vocab, c.DModel)}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		errs = append(errs, norm(p+"attn_norm.weight"))
		if c.Arch == "phi3" {
			errs = append(errs, matrix(p+"attn_qkv.weight", (c.Heads+2*c.KVHeads)*hd, c.DModel))
		} else {
			errs = append(errs,
				matrix(p+"attn_q.weight", c.Heads*hd, c.DModel),
				matrix(p+"attn_k.weight", c.KVHeads*hd, c.DModel),
				matrix(p+"attn_v.weight", c.KVHeads*hd, c.DModel))
		}
		errs = append(errs, matrix(p+"attn_output.weight", c.DModel, c.Heads*hd))
		if c.Arch == "qwen3" || c.Arch == "qwen3moe" || c.Arch == "gemma3" {
			errs = append(errs, normN(p+"attn_q_norm.weight", hd), normN(p+"attn_k_norm.weight", hd))
		}
		if c.Arch == "gemma3" {
			errs = append(errs, norm(p+"post_attention_norm.weight"), norm(p+"post_ffw_norm.weight"))
		}
		errs = append(errs, norm(p+"ffn_norm.weight"))
		switch {
		case c.Experts > 0:
			errs = append(errs,
				matrix(p+"ffn_gate_inp.weight", c.Experts, c.DModel),
				experts(p+"ffn_gate_exps.weight", c.TensorType(p+"ffn_gate_exps.weight"), c.FFN, c.DModel, c.Experts),
				experts(p+"ffn_up_exps.weight", c.TensorType(p+"ffn_up_exps.weight"), c.FFN, c.DModel, c.Experts),
				experts(p+"ffn_down_exps.weight", c.TensorType(p+"ffn_down_exps.weight"), c.DModel, c.FFN, c.Experts),
			)
		case c.Arch == "phi3":
			errs = append(errs,
				matrix(p+"ffn_up.weight", 2*c.FFN, c.DModel),
				matrix(p+"ffn_down.weight", c.DModel, c.FFN))
		default:
			errs = append(errs,
				matrix(p+"ffn_gate.weight", c.FFN, c.DModel),
				matrix(p+"ffn_up.weight", c.FFN, c.DModel),
				matrix(p+"ffn_down.weight", c.DModel, c.FFN))
		}
	}
	errs = append(errs, norm("output_norm.weight"))
	if !c.Tied {
		errs = append(errs, matrix("output.weight", c.Vocab, c.DModel))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}

// BagConfig describes a context-bag model (see the package documentation).
type BagConfig struct {
	// Vocab is the vocabulary size, ≥ 259; 0 means 259 (bytes and Specials).
	Vocab int
	// Context is the advertised context length; 0 means 4096.
	Context int
	// GapTokens is the context length up to which every absent token's
	// logit is ≥ 32 below every present token's; 0 means 4096.
	GapTokens int
	// FIM ends the vocabulary with FIMTokens (control tokens) and names
	// them in tokenizer.ggml.fim_{pre,suf,mid}_token_id: a model that
	// allows fill-in-the-middle (completions' suffix). Vocab 0 then means
	// 262.
	FIM bool
	// Pooling, when not 0, declares llama.pooling_type (1 mean, 2 CLS,
	// 3 last): an embedding model.
	Pooling int
}

// Bag constants (see the package documentation).
const (
	bagBias    = 8.0 // c: the bias dimension's value in every embedding
	bagMinGap  = 32.0
	bagHeadDim = 64
)

// BagDims returns d_model and the bias dimension of a context-bag model with
// the given vocabulary size.
func BagDims(vocab int) (d, bias int) {
	d = (vocab + 1 + bagHeadDim - 1) / bagHeadDim * bagHeadDim
	return d, vocab
}

// ContextBag returns a Writer holding a context-bag model.
func ContextBag(c BagConfig) (*gguf.Writer, error) {
	fim := 0
	if c.FIM {
		fim = len(FIMTokens)
	}
	if c.Vocab == 0 {
		c.Vocab = 256 + len(Specials) + fim
	}
	if c.Context == 0 {
		c.Context = 4096
	}
	if c.GapTokens == 0 {
		c.GapTokens = 4096
	}
	if c.Vocab < 256+len(Specials)+fim || c.Context < 1 || c.Context > math.MaxUint32 || c.GapTokens < 1 {
		return nil, fmt.Errorf("synth: bad context-bag config %+v", c)
	}
	v := c.Vocab
	d, b := BagDims(v)
	heads := d / bagHeadDim
	w := gguf.NewWriter()
	if err := header(w, "llama", "context-bag", "gpt-2", 1, d, heads, heads, bagHeadDim, bagHeadDim, v, c.Context, 10000, 1e-5, 0, c.FIM); err != nil {
		return nil, err
	}
	if c.Pooling != 0 {
		if err := w.Set("llama.pooling_type", uint32(c.Pooling)); err != nil {
			return nil, err
		}
	}
	r0 := float32(math.Sqrt((1 + bagBias*bagBias) / float64(d)))
	// beta scales attention's frequencies to counts (at GapTokens
	// positions): the most frequent token of the attended KV then outweighs
	// the current token's own +1 in the residual, so the model emits what it
	// read, not an echo of its input.
	beta := float64(c.GapTokens)
	alpha := float32(bagMinGap * math.Sqrt(bagBias*bagBias+(1+beta)*(1+beta)) / math.Sqrt(float64(d)))
	// dense builds a rows×cols F32 matrix from a function of (row, col)
	// that is non-zero only where set says.
	dense := func(name string, rows, cols int, set func(m []float32)) error {
		return w.AddTensorFunc(name, gguf.F32, []uint64{uint64(cols), uint64(rows)}, func(buf []byte) error {
			m := make([]float32, rows*cols)
			set(m)
			f32bytes(buf, m)
			return nil
		})
	}
	ones := func(name string) error {
		return w.AddTensorFunc(name, gguf.F32, []uint64{uint64(d)}, func(buf []byte) error {
			m := make([]float32, d)
			for i := range m {
				m[i] = 1
			}
			f32bytes(buf, m)
			return nil
		})
	}
	none := func([]float32) {}
	errs := []error{
		dense("token_embd.weight", v, d, func(m []float32) {
			for t := 0; t < v; t++ {
				m[t*d+t] = 1
				m[t*d+b] = bagBias
			}
		}),
		ones("blk.0.attn_norm.weight"),
		dense("blk.0.attn_q.weight", d, d, none),
		dense("blk.0.attn_k.weight", d, d, none),
		dense("blk.0.attn_v.weight", d, d, func(m []float32) {
			for i := 0; i < d; i++ {
				m[i*d+i] = 1
			}
		}),
		dense("blk.0.attn_output.weight", d, d, func(m []float32) {
			for i := 0; i < d; i++ {
				if i != b {
					m[i*d+i] = r0 * float32(beta)
				}
			}
		}),
		ones("blk.0.ffn_norm.weight"),
		dense("blk.0.ffn_gate.weight", bagHeadDim, d, none),
		dense("blk.0.ffn_up.weight", bagHeadDim, d, none),
		dense("blk.0.ffn_down.weight", d, bagHeadDim, none),
		ones("output_norm.weight"),
		dense("output.weight", v, d, func(m []float32) {
			for t := 0; t < v; t++ {
				m[t*d+t] = alpha
			}
		}),
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return w, nil
}
