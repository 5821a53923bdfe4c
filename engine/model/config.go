package model

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/kernels"
)

// Errors of Load (code invalid_request_error).
var (
	// ErrUnsupported: the file describes a model this package cannot run.
	ErrUnsupported = cloison.NewError(cloison.CodeInvalid, "model: unsupported")
	// ErrModel: hyperparameters or tensors missing or inconsistent.
	ErrModel = cloison.NewError(cloison.CodeInvalid, "model: invalid model file")
)

// Config holds a model's hyperparameters as read from GGUF metadata.
type Config struct {
	Arch    string // general.architecture
	Layers  int
	DModel  int
	Heads   int
	KVHeads int
	HeadDim int
	FFN     int
	Vocab   int
	Context int // advertised context length
	RMSEps  float32
	RoPE    kernels.RoPE
	Tied    bool // output projection reuses token_embd
	QKVBias bool
	// QKNorm: each head of Q and K is RMS-normalised (attn_q_norm,
	// attn_k_norm, HeadDim weights each) after the projection and before
	// RoPE, as qwen3 does.
	QKNorm bool

	// Window is the sliding-window width (attention.sliding_window; 0:
	// none); SWA[l] says whether layer l attends only to the last Window
	// positions (all layers unless attention.sliding_window_pattern or the
	// architecture says otherwise; gemma3: five local layers, then a global
	// one). nil without a window.
	Window int
	SWA    []bool
	// RoPESWA is the rotary embedding of the sliding-window layers: gemma3's
	// local layers use rope.freq_base_swa (10000 by default) and no scaling;
	// elsewhere it equals RoPE.
	RoPESWA kernels.RoPE
	// AttnScale multiplies the attention scores; 0 means 1/sqrt(HeadDim)
	// (granite: attention.scale; gemma3 27B: 1/sqrt(d_model/heads)).
	AttnScale float32
	// EmbedScale multiplies the token embeddings (gemma3: sqrt(d_model);
	// granite: embedding_scale); 0 means none.
	EmbedScale float32
	// ResidualScale multiplies the attention and feed-forward outputs before
	// each residual add (granite: residual_scale); 0 means none.
	ResidualScale float32
	// LogitScale divides the logits (granite: logit_scale); 0 means none.
	LogitScale float32
	// FinalSoftcap caps the logits to c·tanh(logit/c) (final_logit_softcapping);
	// 0 means none.
	FinalSoftcap float32
	// PostNorms: attn_post_norm and ffn_post_norm RMS-normalise the
	// attention and feed-forward outputs before the residual adds (gemma3).
	PostNorms bool
	// GeGLU: the feed-forward is gelu(gate)·up (gemma3) instead of SwiGLU.
	GeGLU bool
	// Experts > 0: every layer's feed-forward is a mixture of Experts
	// SwiGLU experts of FFN width each (qwen3moe, or a llama file with
	// expert_count: mixtral), of which a softmax router picks ExpertsUsed
	// per token (see the package documentation).
	Experts, ExpertsUsed int
	// Pooling is how an embedding model pools its tokens' hidden states
	// into one vector ({arch}.pooling_type as llama.cpp reads it); PoolNone
	// for a model that declares none (a generative model).
	Pooling Pooling
	// Encoder: a bidirectional encoder that serves embeddings and no
	// logits: BERT-family (bert, nomic-bert: layer norms of epsilon
	// NormEps; bert.go) or T5 (t5encoder, t5's encoder; t5.go).
	Encoder bool
	NormEps float32
	// RelBuckets: a T5 encoder's relative-position buckets
	// (attention.relative_buckets_count; t5.go); RMSEps its norms' epsilon.
	RelBuckets int
}

// arch describes what an architecture adds to the llama layout.
type arch struct {
	neox   bool // RoPE in the NeoX layout (llama.cpp's LLAMA_ROPE_TYPE_NEOX)
	qkNorm bool // per-head Q/K RMSNorm (attn_q_norm, attn_k_norm)
	moe    bool // a mixture of experts in every layer (required)
	gemma  bool // gemma3: GeGLU, post norms, sqrt(d) embedding scale, local/global layers
	// granite reads the granite.* multipliers (logit_scale required).
	granite bool
}

// archs lists the supported architectures. phi3 is the llama layout with
// NeoX RoPE whose files fuse attn_qkv and ffn_up (gate and up), which Load
// accepts for every architecture.
var archs = map[string]arch{
	"llama":    {},
	"mistral":  {},
	"qwen2":    {neox: true},
	"qwen3":    {neox: true, qkNorm: true},
	"qwen3moe": {neox: true, qkNorm: true, moe: true},
	"gemma3":   {neox: true, qkNorm: true, gemma: true},
	"phi3":     {neox: true},
	"granite":  {granite: true},
}

// Archs returns the supported architectures, sorted.
func Archs() []string {
	out := make([]string, 0, len(archs))
	for a := range archs {
		out = append(out, a)
	}
	for a := range encoders {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

func intKey(f *gguf.File, key string, def int, required bool) (int, error) {
	v, ok := f.Get(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("%w: %s missing", ErrModel, key)
		}
		return def, nil
	}
	x, ok := v.Int()
	if !ok || x <= 0 || x > math.MaxInt32 {
		return 0, fmt.Errorf("%w: %s = %v, want a positive 32-bit integer", ErrModel, key, v.Any())
	}
	return int(x), nil
}

func floatKey(f *gguf.File, key string, def float64, required bool) (float64, error) {
	v, ok := f.Get(key)
	if !ok {
		if required {
			return 0, fmt.Errorf("%w: %s missing", ErrModel, key)
		}
		return def, nil
	}
	x, ok := v.Float()
	if !ok || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0, fmt.Errorf("%w: %s = %v, want a finite number", ErrModel, key, v.Any())
	}
	return x, nil
}

// ConfigFromGGUF reads and checks the hyperparameters of f.
func ConfigFromGGUF(f *gguf.File) (Config, error) {
	var c Config
	arch, ok := f.String("general.architecture")
	if !ok {
		return c, fmt.Errorf("%w: general.architecture missing", ErrModel)
	}
	if _, ok := encoders[arch]; ok {
		return encoderConfig(f, arch)
	}
	ad, ok := archs[arch]
	if !ok {
		return c, fmt.Errorf("%w: architecture %q (supported: %s)", ErrUnsupported, arch, strings.Join(Archs(), ", "))
	}
	c.Arch, c.QKNorm = arch, ad.qkNorm
	p := arch + "."
	var err error
	ints := []struct {
		dst      *int
		key      string
		def      int
		required bool
	}{
		{&c.Layers, "block_count", 0, true},
		{&c.DModel, "embedding_length", 0, true},
		{&c.FFN, "feed_forward_length", 0, true},
		{&c.Heads, "attention.head_count", 0, true},
		{&c.Context, "context_length", 0, true},
	}
	for _, k := range ints {
		if *k.dst, err = intKey(f, p+k.key, k.def, k.required); err != nil {
			return c, err
		}
	}
	pool, err := intKey(f, p+"pooling_type", 0, false)
	if err != nil {
		return c, err
	}
	c.Pooling = poolingOf(pool)
	if c.KVHeads, err = intKey(f, p+"attention.head_count_kv", c.Heads, false); err != nil {
		return c, err
	}
	if err := c.experts(f, p, ad.moe); err != nil {
		return c, err
	}
	def := 0
	if c.DModel%c.Heads == 0 {
		def = c.DModel / c.Heads
	}
	if c.HeadDim, err = intKey(f, p+"attention.key_length", def, def == 0); err != nil {
		return c, err
	}
	if vl, err := intKey(f, p+"attention.value_length", c.HeadDim, false); err != nil || vl != c.HeadDim {
		return c, fmt.Errorf("%w: value_length %d differs from key_length %d", ErrUnsupported, vl, c.HeadDim)
	}
	if c.Heads%c.KVHeads != 0 {
		return c, fmt.Errorf("%w: %d heads is not a multiple of %d kv heads", ErrModel, c.Heads, c.KVHeads)
	}
	if c.HeadDim%2 != 0 {
		return c, fmt.Errorf("%w: head dim %d is odd", ErrModel, c.HeadDim)
	}
	eps, err := floatKey(f, p+"attention.layer_norm_rms_epsilon", 0, true)
	if err != nil {
		return c, err
	}
	if eps <= 0 || eps > 1 {
		return c, fmt.Errorf("%w: rms epsilon %g", ErrModel, eps)
	}
	c.RMSEps = float32(eps)
	base, err := floatKey(f, p+"rope.freq_base", 10000, false)
	if err != nil {
		return c, err
	}
	if base <= 1 {
		return c, fmt.Errorf("%w: rope.freq_base %g", ErrModel, base)
	}
	dims, err := intKey(f, p+"rope.dimension_count", c.HeadDim, false)
	if err != nil {
		return c, err
	}
	if dims > c.HeadDim || dims%2 != 0 {
		return c, fmt.Errorf("%w: rope.dimension_count %d with head dim %d", ErrModel, dims, c.HeadDim)
	}
	scale := 1.0
	if x, err := floatKey(f, p+"rope.scale_linear", 1, false); err != nil {
		return c, err
	} else if x > 0 && x != 1 {
		scale = 1 / x
	}
	typ, _ := f.String(p + "rope.scaling.type")
	factor, err := floatKey(f, p+"rope.scaling.factor", 0, false)
	if err != nil {
		return c, err
	}
	switch typ {
	case "", "none":
	case "linear":
		if factor > 0 && factor != 1 {
			scale = 1 / factor
		}
	case "yarn":
		if factor > 1 {
			return c, fmt.Errorf("%w: YaRN rope scaling (factor %g)", ErrUnsupported, factor)
		}
	default:
		return c, fmt.Errorf("%w: rope scaling type %q", ErrUnsupported, typ)
	}
	c.RoPE = kernels.RoPE{HeadDim: c.HeadDim, Dims: dims, NeoX: ad.neox, Base: float32(base), Scale: float32(scale)}
	if c.RMSEps = float32(eps); c.RMSEps == 0 {
		return c, fmt.Errorf("%w: rms epsilon underflows float32", ErrModel)
	}
	c.RoPESWA = c.RoPE
	if err := c.readExtras(f, p, ad); err != nil {
		return c, err
	}
	if c.Experts > 0 && (c.GeGLU || c.PostNorms || c.ResidualScale != 0) {
		// The expert feed-forward is SwiGLU added to the residual as is.
		return c, fmt.Errorf("%w: experts in a %s file (GeGLU, post norms or a residual scale)", ErrUnsupported, arch)
	}
	return c, nil
}

// readExtras reads the sliding window and the per-architecture multipliers,
// as llama.cpp's loaders read them (src/models/gemma3.cpp, granite.cpp).
func (c *Config) readExtras(f *gguf.File, p string, ad arch) error {
	// A multiplier that must be a finite positive number when present.
	positive := func(key string) (float32, error) {
		x, err := floatKey(f, p+key, 0, false)
		if err != nil {
			return 0, err
		}
		if x < 0 || (x != 0 && float32(x) == 0) || math.IsInf(float64(float32(x)), 0) {
			return 0, fmt.Errorf("%w: %s = %g", ErrModel, key, x)
		}
		return float32(x), nil
	}
	if v, ok := f.Get(p + "attn_logit_softcapping"); ok {
		if x, _ := v.Float(); x != 0 {
			// gemma2's attention soft-cap: the attention kernel has none.
			return fmt.Errorf("%w: attn_logit_softcapping %v", ErrUnsupported, v.Any())
		}
	}
	var err error
	if c.FinalSoftcap, err = positive("final_logit_softcapping"); err != nil {
		return err
	}
	if ad.gemma {
		c.PostNorms, c.GeGLU = true, true
		c.EmbedScale = float32(math.Sqrt(float64(c.DModel)))
		if c.Layers == 62 {
			// llama.cpp's gemma3 27B (gemma_pytorch's query_pre_attn_scalar).
			c.AttnScale = float32(1 / math.Sqrt(float64(c.DModel/c.Heads)))
		}
	}
	if ad.granite {
		if c.LogitScale, err = positive("logit_scale"); err != nil {
			return err
		}
		if c.LogitScale == 0 {
			return fmt.Errorf("%w: %slogit_scale missing", ErrModel, p)
		}
		for _, k := range []struct {
			dst *float32
			key string
		}{{&c.ResidualScale, "residual_scale"}, {&c.EmbedScale, "embedding_scale"}, {&c.AttnScale, "attention.scale"}} {
			if *k.dst, err = positive(k.key); err != nil {
				return err
			}
		}
		if v, ok := f.Get(p + "rope.scaling.finetuned"); ok {
			if b, _ := v.Bool(); !b {
				// granite's switch for models without RoPE.
				return fmt.Errorf("%w: granite without RoPE (rope.scaling.finetuned false)", ErrUnsupported)
			}
		}
	}
	if v, ok := f.Get(p + "attention.sliding_window"); ok {
		// 0 means no window, as in llama.cpp.
		if n, ok := v.Int(); !ok || n < 0 || n > math.MaxInt32 {
			return fmt.Errorf("%w: attention.sliding_window = %v, want a non-negative 32-bit integer", ErrModel, v.Any())
		} else {
			c.Window = int(n)
		}
	}
	if c.Window == 0 {
		if _, ok := f.Get(p + "attention.sliding_window_pattern"); ok {
			return fmt.Errorf("%w: attention.sliding_window_pattern without attention.sliding_window", ErrModel)
		}
		return nil
	}
	// llama.cpp's load_swa_pattern: a per-layer bool array, or a period n
	// (layer l is local unless l%n == n−1; 0: all local). gemma3 defaults
	// to 6, the others to every layer local.
	c.SWA = make([]bool, c.Layers)
	period := 0
	if ad.gemma {
		period = 6
	}
	if v, ok := f.Get(p + "attention.sliding_window_pattern"); ok {
		if bs, isArr := v.Any().([]bool); isArr {
			if len(bs) != c.Layers {
				return fmt.Errorf("%w: sliding_window_pattern of %d layers, block_count %d", ErrModel, len(bs), c.Layers)
			}
			copy(c.SWA, bs)
			period = -1
		} else if n, ok := v.Int(); ok && n >= 0 && n <= math.MaxInt32 {
			period = int(n)
		} else {
			return fmt.Errorf("%w: sliding_window_pattern = %v", ErrModel, v.Any())
		}
	}
	if period >= 0 {
		for l := range c.SWA {
			c.SWA[l] = period == 0 || l%period < period-1
		}
	}
	if ad.gemma {
		base, err := floatKey(f, p+"rope.freq_base_swa", 10000, false)
		if err != nil {
			return err
		}
		if base <= 1 {
			return fmt.Errorf("%w: rope.freq_base_swa %g", ErrModel, base)
		}
		c.RoPESWA.Base, c.RoPESWA.Scale = float32(base), 1
	}
	return nil
}

// maxExperts bounds expert_count (llama.cpp's LLAMA_MAX_EXPERTS).
const maxExperts = 512

// experts reads the mixture-of-experts keys: expert_count and
// expert_used_count (required when moe), and for qwen3moe the expert width
// expert_feed_forward_length (else feed_forward_length / expert_used_count,
// as llama.cpp falls back), which then becomes c.FFN. Router variants this
// package does not run — shared experts, expert groups, a gating function
// other than softmax, a weight scale — are refused, not ignored.
func (c *Config) experts(f *gguf.File, p string, required bool) error {
	var err error
	if c.Experts, err = intKey(f, p+"expert_count", 0, required); err != nil {
		return err
	}
	if c.Experts == 0 {
		if _, ok := f.Get(p + "expert_used_count"); ok {
			return fmt.Errorf("%w: %sexpert_used_count without expert_count", ErrModel, p)
		}
		return nil
	}
	if c.Experts > maxExperts {
		return fmt.Errorf("%w: %d experts (at most %d)", ErrUnsupported, c.Experts, maxExperts)
	}
	if c.ExpertsUsed, err = intKey(f, p+"expert_used_count", 0, true); err != nil {
		return err
	}
	if c.ExpertsUsed > c.Experts {
		return fmt.Errorf("%w: %d experts used of %d", ErrModel, c.ExpertsUsed, c.Experts)
	}
	// Absent, 0 (or one group) is the plain router.
	for _, k := range []struct {
		key  string
		most int64
	}{{"expert_shared_count", 0}, {"expert_shared_feed_forward_length", 0}, {"expert_group_count", 1}, {"expert_group_used_count", 1}} {
		if v, ok := f.Get(p + k.key); ok {
			if n, isInt := v.Int(); !isInt || n < 0 || n > k.most {
				return fmt.Errorf("%w: %s%s = %v (shared experts and expert groups are not implemented)", ErrUnsupported, p, k.key, v.Any())
			}
		}
	}
	if g, err := intKey(f, p+"expert_gating_func", 1, false); err != nil || g != 1 {
		return fmt.Errorf("%w: %sexpert_gating_func (only softmax, 1, is implemented)", ErrUnsupported, p)
	}
	if s, err := floatKey(f, p+"expert_weights_scale", 1, false); err != nil || s != 1 {
		return fmt.Errorf("%w: %sexpert_weights_scale %g (only 1 is implemented)", ErrUnsupported, p, s)
	}
	if v, ok := f.Get(p + "expert_weights_norm"); ok {
		if b, isBool := v.Any().(bool); !isBool || !b {
			return fmt.Errorf("%w: %sexpert_weights_norm %v (the top-k weights are always renormalised)", ErrUnsupported, p, v.Any())
		}
	}
	if strings.HasPrefix(p, "qwen3moe.") {
		if c.FFN, err = intKey(f, p+"expert_feed_forward_length", c.FFN/c.ExpertsUsed, false); err != nil {
			return err
		}
		if c.FFN == 0 {
			return fmt.Errorf("%w: expert width 0", ErrModel)
		}
	}
	return nil
}
