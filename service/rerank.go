package service

import (
	"context"
	"math"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/tenancy"
)

// RankRequest asks a rank model (a cross-encoder: an encoder with a
// classification head) to score text pairs: a query and each document for
// a rerank, text_1 and text_2 for a score. 1 to MaxEmbedInputs pairs, no
// text empty.
type RankRequest struct {
	ID    cloison.RequestID
	Model string
	Pairs [][2]string
}

// RankResult is one relevance score per pair, in order: the sigmoid of
// the head's first output (llama.cpp's rank pooling gives that logit), a
// probability in 0…1 as Cohere, Jina, vLLM, TEI and node-llama-cpp give
// it; with the prompt tokens they cost and the ledger entry's signed
// receipt. (The ledger's digest is of the head's raw outputs.)
type RankResult struct {
	Scores  []float32
	Prompt  int
	Receipt string
}

// Rank scores each pair as one input, [CLS] a [SEP] b [SEP] (the
// sentence-pair form the cross-encoders are trained on), on Embed's path
// in Embed's order — policy decision, limits, quota charged for the
// prompt tokens, the decision ledgered BEFORE the engine gets the inputs,
// request.completed (counts and keyed digests of the inputs and scores,
// never text) BEFORE the scores are returned — every pair its own engine
// request in the tenant's pages, so a score depends on its pair only.
//
// Errors: Embed's; engine.ErrNoRankHead for a model without a
// classification head (a WordPiece vocabulary is needed for the pair
// form); ErrInvalidField for no pair, too many or an empty text.
func (s *Requests) Rank(ctx context.Context, p tenancy.Principal, q RankRequest) (RankResult, error) {
	if q.Model != s.cfg.ModelName || !p.TenantRecord.Allows(q.Model) {
		return RankResult{}, ErrUnknownModel.Withf("%q", clip(q.Model, 64))
	}
	if len(q.Pairs) == 0 || len(q.Pairs) > MaxEmbedInputs {
		return RankResult{}, ErrInvalidField.Withf("documents: 1 to %d, got %d", MaxEmbedInputs, len(q.Pairs))
	}
	// The pairs are tokenized only once their length passed Preadmit.
	n := 0
	for _, pr := range q.Pairs {
		n += len(pr[0]) + len(pr[1])
	}
	if err := s.Preadmit(ctx, p, Preadmission{Model: q.Model, PromptBytes: n}); err != nil {
		return RankResult{}, err
	}
	tk := s.cfg.Model.Tokenizer
	if tk == nil || tk.SEP < 0 {
		return RankResult{}, engine.ErrNoRankHead
	}
	inputs := make([][]int64, len(q.Pairs))
	for i, pr := range q.Pairs {
		if pr[0] == "" || pr[1] == "" {
			return RankResult{}, ErrInvalidField.Withf("pair %d: empty text", i)
		}
		a := tk.Encode(pr[0], true, false) // [CLS] a [SEP]
		b := tk.Encode(pr[1], false, false)
		in := make([]int64, 0, len(a)+len(b)+1)
		for _, id := range a {
			in = append(in, int64(id))
		}
		for _, id := range b {
			in = append(in, int64(id))
		}
		inputs[i] = append(in, int64(tk.SEP))
	}
	res, err := s.embed(ctx, p, EmbedRequest{ID: q.ID, Model: q.Model, Inputs: inputs}, true)
	if err != nil {
		return RankResult{}, err
	}
	out := RankResult{Scores: make([]float32, len(res.Vectors)), Prompt: res.Prompt, Receipt: res.Receipt}
	for i, v := range res.Vectors {
		out.Scores[i] = float32(1 / (1 + math.Exp(-float64(v[0]))))
	}
	return out, nil
}
