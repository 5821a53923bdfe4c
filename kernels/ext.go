package kernels

// Optional capabilities that some architectures need (gemma3, granite,
// sliding-window attention). They are separate interfaces, found by type
// assertion as MultiMatMuler is, so that Backend stays small and a backend
// that lacks one is refused by the model that needs it (engine/model's Load
// and Forward return ErrUnsupported) instead of running something else.
// kernels/cpu implements all of them.

// Scaler is an optional Backend capability.
type Scaler interface {
	// Scale sets dst = s·x elementwise (ggml_scale); dst may be x.
	Scale(dst, x Tensor, s float32) error
}

// GeGLUer is an optional Backend capability.
type GeGLUer interface {
	// GeGLU sets dst = gelu(gate) ⊙ up elementwise, gelu in its tanh
	// approximation 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))), as
	// ggml_geglu; dst may alias either input.
	GeGLU(dst, gate, up Tensor) error
}

// AttentionOptions changes what Arena.Attention computes.
type AttentionOptions struct {
	// Scale multiplies the scores q·k; 0 means 1/sqrt(head_dim).
	Scale float32
	// Window, when positive, limits the query at position p to the keys at
	// positions p−Window+1 … p (llama.cpp's LLAMA_SWA_TYPE_STANDARD: a key
	// at distance ≥ Window is masked). KV of older positions is not read;
	// the pages that hold it must still be the sequence's (their tags are
	// checked like every page of the table up to the last position read).
	Window int
}

// WindowAttender is an optional Arena capability.
type WindowAttender interface {
	// AttentionWith is Attention with the given options; the zero options
	// give exactly Attention's result. Errors as Attention; a negative
	// Window or a non-finite or negative Scale is ErrShape.
	AttentionWith(layer int, out, q Tensor, spans []Span, o AttentionOptions) error
}

// LowRankAdder is an optional Backend capability: the expand half of a
// LoRA product (B·mid, B out×k with k the small rank) as a sum of k
// scaled rows instead of a dot product of length k per output, which a
// matrix-product kernel computes poorly for k ≈ 16.
type LowRankAdder interface {
	// AddLowRank sets, for every row i of x (rows×k), dst[rows[i]] +=
	// s·(Σ_j x[i][j]·bt[j]), where bt is k×dst.Cols() (row j is column j
	// of B). The sum runs j = 0…k−1 with a fixed chain per element into a
	// zeroed row, which is then scaled and added, so a row's result
	// depends only on that row. rows nil means rows[i] = i. dst must not
	// overlap x or bt; rows must be distinct and inside dst.
	AddLowRank(dst, x, bt Tensor, rows []int, s float32) error
}
