package model

import (
	"fmt"
	"math"
)

// Pooling is how an embedding model makes one vector of its tokens'
// hidden states, numbered as llama.cpp's {arch}.pooling_type.
type Pooling int

// The poolings. PoolNone: the model declares none and serves no
// embeddings (llama.cpp's "unspecified", and "rank" in a decoder file
// other than a qwen3 with cls.output: see rankArchs). PoolRank: a
// classification head scores the input (Model.Rank): an encoder's on its
// [CLS] row, a qwen3 reranker's on its last row.
const (
	PoolNone Pooling = 0
	PoolMean Pooling = 1
	PoolCLS  Pooling = 2
	PoolLast Pooling = 3
	PoolRank Pooling = 4
)

func poolingOf(v int) Pooling {
	switch p := Pooling(v); p {
	case PoolMean, PoolCLS, PoolLast:
		return p
	}
	return PoolNone
}

// String is the pooling's name as the API documents it.
func (p Pooling) String() string {
	switch p {
	case PoolMean:
		return "mean"
	case PoolCLS:
		return "cls"
	case PoolLast:
		return "last"
	case PoolRank:
		return "rank"
	}
	return "none"
}

// Pool is the L2-normalised vector that pooling p makes of hidden, n
// tokens' hidden states of d values each (Seq.Hidden's rows), as
// llama.cpp computes an embedding: mean of the rows, the first row (CLS)
// or the last, then divided by its Euclidean norm (in float64, so that
// the vector depends on these rows only). Errors: ErrUnsupported for
// PoolNone, ErrBatch for rows that do not fit n×d or a vector that is
// not finite or is zero.
func Pool(p Pooling, hidden []float32, n, d int) ([]float32, error) {
	if n <= 0 || d <= 0 || len(hidden) != n*d {
		return nil, fmt.Errorf("%w: %d hidden values for %d tokens of %d", ErrBatch, len(hidden), n, d)
	}
	acc := make([]float64, d)
	switch p {
	case PoolMean:
		for r := range n {
			for j, v := range hidden[r*d : (r+1)*d] {
				acc[j] += float64(v)
			}
		}
		for j := range acc {
			acc[j] /= float64(n)
		}
	case PoolCLS, PoolLast:
		r := 0
		if p == PoolLast {
			r = n - 1
		}
		for j, v := range hidden[r*d : (r+1)*d] {
			acc[j] = float64(v)
		}
	default:
		return nil, fmt.Errorf("%w: the model declares no pooling", ErrUnsupported)
	}
	return Normalize(acc)
}

// Normalize is v divided by its Euclidean norm, as float32. Errors:
// ErrBatch for a vector that is zero or not finite.
func Normalize(v []float64) ([]float32, error) {
	var ss float64
	for _, x := range v {
		ss += x * x
	}
	norm := math.Sqrt(ss)
	if norm == 0 || math.IsNaN(norm) || math.IsInf(norm, 0) {
		return nil, fmt.Errorf("%w: the pooled vector has no finite non-zero norm", ErrBatch)
	}
	out := make([]float32, len(v))
	for j, x := range v {
		out[j] = float32(x / norm)
	}
	return out, nil
}
