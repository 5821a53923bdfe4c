package model

import (
	"errors"
	"fmt"
	"math"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/kernels"
)

// rankArchs are the decoder architectures whose pooling_type rank llama.cpp
// computes on the last token (src/llama-graph.cpp: "qwen3 reranking &
// embedding models use last token") and then turns into a softmax over the
// head's outputs: Qwen3-Reranker, converted with cls.output holding the
// lm_head rows of "yes" and "no". Every other decoder's rank pooling reads
// the first token's state, which under causal attention depends on that
// token alone, so llama.cpp scores every pair alike: such a file serves no
// ranking (PoolNone).
var rankArchs = map[string]bool{"qwen3": true}

// decoderPooling is a decoder file's Pooling: pooling_type 4 (rank) is
// PoolRank for an architecture of rankArchs whose file has the head
// (cls.output.weight), else PoolNone, as any other unknown type.
func decoderPooling(f *gguf.File, arch string, v int) Pooling {
	if Pooling(v) == PoolRank {
		if _, found := f.Tensor("cls.output.weight"); found && rankArchs[arch] {
			return PoolRank
		}
		return PoolNone
	}
	return poolingOf(v)
}

// rankHead is the classification head of a model with pooling rank, kept
// on the host and run there in float64 per input, so a score depends on
// its own input's hidden states only (batch invariant on every backend).
type rankHead struct {
	// cls (DModel×DModel, then tanh) and cls.output (out×DModel), each
	// optional, with their biases; row-major. nil when absent.
	clsW, clsB, outW, outB []float32
	out                    int  // outputs; the first is the rank score
	last                   bool // read the last row (a decoder), not the first ([CLS])
	softmax                bool // a softmax over the outputs (qwen3)
}

// loadRankHead reads the classification head: cls.weight and cls.bias
// (DModel×DModel, then tanh) and cls.output.weight and .bias
// (labels×DModel), each optional as llama.cpp has them, at least one
// present for pooling rank. An encoder's tensors are checked even when its
// pooling is not rank (and then unused). A decoder reranker (c.Encoder
// false, pooling rank) has cls.output.weight alone, one row per
// {arch}.classifier.output_labels entry (one without labels), as
// llama.cpp's qwen3 loader reads it: cls, cls.bias or cls.output.bias
// beside it are refused (llama.cpp would not read them).
func loadRankHead(f *gguf.File, c Config) (*rankHead, error) {
	d := c.DModel
	read := func(name string, rows, cols int) ([]float32, error) {
		t, found := f.Tensor(name)
		if !found {
			return nil, nil
		}
		n := rows * cols
		if rows == 0 {
			if len(t.Dims) == 0 || t.Dims[0] != uint64(cols) || t.Elements()/uint64(cols) > 1<<16 {
				return nil, fmt.Errorf("%w: tensor %s has shape %v", ErrModel, name, t.Dims)
			}
			n = int(t.Elements())
		} else if t.Elements() != uint64(n) || t.Dims[0] != uint64(cols) {
			return nil, fmt.Errorf("%w: tensor %s has shape %v, want [%d %d]", ErrModel, name, t.Dims, cols, rows)
		}
		x := make([]float32, n)
		if err := kernels.Dequantize(x, kernels.DType(t.Type), f.Data(t)); err != nil {
			return nil, fmt.Errorf("%w: tensor %s: %v", ErrModel, name, err)
		}
		return x, nil
	}
	h := &rankHead{out: d, last: !c.Encoder, softmax: !c.Encoder}
	if !c.Encoder {
		for _, name := range []string{"cls.weight", "cls.bias", "cls.output.bias"} {
			if _, found := f.Tensor(name); found {
				return nil, fmt.Errorf("%w: tensor %s in a %s reranker (its head is cls.output alone)", ErrUnsupported, name, c.Arch)
			}
		}
	}
	var err error
	var errs []error
	h.clsW, err = read("cls.weight", d, d)
	errs = append(errs, err)
	h.clsB, err = read("cls.bias", 1, d)
	errs = append(errs, err)
	h.outW, err = read("cls.output.weight", 0, d)
	errs = append(errs, err)
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if h.outW != nil {
		h.out = len(h.outW) / d
		if h.outB, err = read("cls.output.bias", 1, h.out); err != nil {
			return nil, err
		}
	}
	if c.Pooling == PoolRank && h.clsW == nil && h.outW == nil {
		return nil, fmt.Errorf("%w: pooling_type rank without a classification head (cls, cls.output)", ErrModel)
	}
	if !c.Encoder && c.Pooling == PoolRank {
		labels := 1
		if v, ok := f.Get(c.Arch + ".classifier.output_labels"); ok {
			labels = v.Len()
		}
		if h.out != labels {
			return nil, fmt.Errorf("%w: cls.output.weight has %d rows for %d classifier labels", ErrModel, h.out, labels)
		}
	}
	return h, nil
}

// RankOutputs is the number of scores a rank model's head gives (its first
// is the rank score); 0 for a model without pooling rank.
func (m *Model) RankOutputs() int {
	if m.head == nil {
		return 0
	}
	return m.head.out
}

// Rank is the classification head of a rank model over one input's hidden
// states (n rows of DModel, from Forward's Seq.Hidden), as llama.cpp's rank
// pooling computes it, in float64 on the host. An encoder's head reads the
// first ([CLS]) row: tanh(cls·h + cls.bias) when the model has cls, then
// cls.output·… + cls.output.bias when it has cls.output; its first value
// is a logit. A decoder reranker's (qwen3) reads the last row after the
// output norm: cls.output·h, then a softmax over the outputs; its first
// value is the probability of the first label ("yes"). Errors:
// ErrUnsupported for a model without pooling rank; ErrBatch for hidden
// that is not n×DModel or a result that is not finite.
func (m *Model) Rank(hidden []float32, n int) ([]float32, error) {
	h := m.head
	if h == nil || m.Pooling != PoolRank {
		return nil, fmt.Errorf("%w: the model has no rank head", ErrUnsupported)
	}
	d := m.DModel
	if n <= 0 || len(hidden) != n*d {
		return nil, fmt.Errorf("%w: %d hidden values for %d tokens of %d", ErrBatch, len(hidden), n, d)
	}
	row := hidden[:d]
	if h.last {
		row = hidden[(n-1)*d:]
	}
	cur := make([]float64, d)
	for j, v := range row {
		cur[j] = float64(v)
	}
	affine := func(w, b []float32, x []float64, outs int) []float64 {
		y := make([]float64, outs)
		for r := range outs {
			var s float64
			for j, wv := range w[r*len(x) : (r+1)*len(x)] {
				s += float64(wv) * x[j]
			}
			if b != nil {
				s += float64(b[r])
			}
			y[r] = s
		}
		return y
	}
	if h.clsW != nil {
		cur = affine(h.clsW, h.clsB, cur, d)
		for j, v := range cur {
			cur[j] = math.Tanh(v)
		}
	}
	if h.outW != nil {
		cur = affine(h.outW, h.outB, cur, h.out)
	}
	if h.softmax {
		top := math.Inf(-1)
		for _, v := range cur {
			top = max(top, v)
		}
		var sum float64
		for j, v := range cur {
			cur[j] = math.Exp(v - top)
			sum += cur[j]
		}
		for j := range cur {
			cur[j] /= sum
		}
	}
	out := make([]float32, len(cur))
	for j, v := range cur {
		if out[j] = float32(v); math.IsNaN(v) || math.IsInf(float64(out[j]), 0) {
			return nil, fmt.Errorf("%w: the rank head's output is not finite", ErrBatch)
		}
	}
	return out, nil
}

// RankProbability is the relevance score of a pair from its Rank outputs,
// a probability in 0…1: the sigmoid of the first output for an encoder's
// head (a logit), the first output itself for a decoder reranker's (a
// softmax already), as node-llama-cpp's ranking context gives it. NaN for
// a model without pooling rank or no outputs.
func (m *Model) RankProbability(outputs []float32) float64 {
	if m.head == nil || len(outputs) == 0 {
		return math.NaN()
	}
	if m.head.softmax {
		return float64(outputs[0])
	}
	return 1 / (1 + math.Exp(-float64(outputs[0])))
}

// PoolHidden is the vector the engine returns for an input's hidden
// states: the rank head's outputs for a rank model (Rank), else the
// pooled, L2-normalised embedding (Pool).
func (m *Model) PoolHidden(hidden []float32, n int) ([]float32, error) {
	if m.Pooling == PoolRank {
		return m.Rank(hidden, n)
	}
	return Pool(m.Pooling, hidden, n, m.DModel)
}
