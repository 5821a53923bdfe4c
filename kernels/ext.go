package kernels

import "math"

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
	// Bidirectional: every query row of a span reads all of the span's
	// positions 0 … s.Pos+s.N−1, those after its own as well as those
	// before (an encoder's attention), instead of 0 … its own position.
	// Window must be 0 with it.
	Bidirectional bool
	// Bias, when not nil, adds a relative-position bias to every score
	// before the scale and the softmax (T5's attention; see PosBias).
	Bias *PosBias
}

// PosBias is T5's learned relative-position attention bias: the score of
// query head h at position qp for the key at position kp gains
//
//	Table[RelativeBucket(kp−qp, Buckets, MaxDistance, Bidirectional)·Heads + h]
//
// (llama.cpp's attn_rel_b as stored: Heads values per bucket), added to
// q·k before the options' scale multiplies it (ggml_soft_max_ext of
// kq + kq_b).
type PosBias struct {
	Heads         int // the query heads
	Buckets       int // relative_attention_num_buckets
	MaxDistance   int // relative_attention_max_distance (128 in llama.cpp)
	Bidirectional bool
	Table         []float32 // Buckets × Heads
}

// Check validates b for qHeads query heads: a table of Buckets×Heads,
// Heads = qHeads, enough buckets for one exact bucket per side and a
// MaxDistance beyond the exact ones. Errors: ErrShape.
func (b *PosBias) Check(qHeads int) error {
	half := b.Buckets
	if b.Bidirectional {
		half >>= 1
	}
	if b.Heads != qHeads || half < 2 || b.MaxDistance <= half>>1 || len(b.Table) != b.Buckets*b.Heads {
		return shapeErr("position bias of %d heads, %d buckets, max distance %d, %d values for %d query heads",
			b.Heads, b.Buckets, b.MaxDistance, len(b.Table), qHeads)
	}
	return nil
}

// RelativeBucket is the bucket of a key rel = kp − qp positions from its
// query, as llama.cpp's llama_relative_position_bucket (float32 logf
// included, so the bucket edges fall where its do): with Bidirectional,
// half the buckets for keys after the query; within a half, the first
// half of its buckets exact distances, the rest logarithmic up to
// maxDistance, beyond which the last bucket. buckets and maxDistance as
// PosBias.Check accepts them.
func RelativeBucket(rel, buckets, maxDistance int, bidirectional bool) int {
	n := buckets
	if bidirectional {
		n >>= 1
	}
	maxExact := n >> 1
	b := 0
	if bidirectional {
		if rel > 0 {
			b = n
		}
		if rel < 0 {
			rel = -rel
		}
	} else {
		rel = -min(rel, 0)
	}
	if rel < maxExact {
		return b + rel
	}
	lf := float32(math.Log(float64(float32(float64(rel) / float64(maxExact)))))
	s := float64(maxExact) + float64(lf*float32(n-maxExact))/math.Log(float64(maxDistance)/float64(maxExact))
	large := int(float32(math.Floor(float64(float32(s)))))
	return b + min(large, n-1)
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
