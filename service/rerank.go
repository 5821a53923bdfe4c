package service

import (
	"context"
	"strings"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/tenancy"
)

// RankRequest asks a rank model (a cross-encoder: an encoder with a
// classification head; or a qwen3 decoder reranker) to score text pairs:
// a query and each document for a rerank, text_1 and text_2 for a score.
// 1 to MaxEmbedInputs pairs, no text empty.
type RankRequest struct {
	ID    cloison.RequestID
	Model string
	Pairs [][2]string
}

// RankResult is one relevance score per pair, in order: a probability in
// 0…1 as Cohere, Jina, vLLM, TEI and node-llama-cpp give it — the sigmoid
// of an encoder head's first output (llama.cpp's rank pooling gives that
// logit), a decoder reranker's softmax "yes" as it is
// (engine.Engine.RankProbability); with the prompt tokens they cost and
// the ledger entry's signed receipt. (The ledger's digest is of the
// head's raw outputs.)
type RankResult struct {
	Scores  []float32
	Prompt  int
	Receipt string
}

// Rank scores each pair as one input (RankPrompt), on Embed's path in
// Embed's order — policy decision, limits, quota charged for the prompt
// tokens, the decision ledgered BEFORE the engine gets the inputs,
// request.completed (counts and keyed digests of the inputs and scores,
// never text) BEFORE the scores are returned — every pair its own engine
// request in the tenant's pages, so a score depends on its pair only.
//
// Errors: Embed's; engine.ErrNoRankHead for a model without a
// classification head; ErrInvalidField for no pair, too many or an empty
// text.
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
	if tk == nil {
		return RankResult{}, engine.ErrNoRankHead
	}
	inputs := make([][]int64, len(q.Pairs))
	for i, pr := range q.Pairs {
		if pr[0] == "" || pr[1] == "" {
			return RankResult{}, ErrInvalidField.Withf("pair %d: empty text", i)
		}
		ids := RankPrompt(tk, pr[0], pr[1])
		in := make([]int64, len(ids))
		for j, id := range ids {
			in[j] = int64(id)
		}
		inputs[i] = in
	}
	res, err := s.embed(ctx, p, EmbedRequest{ID: q.ID, Model: q.Model, Inputs: inputs}, true)
	if err != nil {
		return RankResult{}, err
	}
	out := RankResult{Scores: make([]float32, len(res.Vectors)), Prompt: res.Prompt, Receipt: res.Receipt}
	for i, v := range res.Vectors {
		out.Scores[i] = float32(s.cfg.Engine.RankProbability(v))
	}
	return out, nil
}

// RankPrompt is the input of the pair (a, b), as llama.cpp's server forms
// a rerank prompt (format_prompt_rerank):
//
//   - a vocabulary with a rerank template (tokenizer.chat_template.rerank,
//     Qwen3-Reranker's): the template with {query} replaced by a and
//     {document} by b, tokenized whole without added special tokens. The
//     template's own text is parsed for control tokens, a and b never are
//     (tokenizer.EncodeTemplated): llama.cpp parses the whole text, so a
//     text that spells a control token ("<|im_end|>") gets it there and
//     ordinary text here, and a query that holds "{document}" gets the
//     document put into it there; for every other text the two agree
//     (TestRankPromptMatchesLlamaCpp).
//   - a WordPiece vocabulary (a cross-encoder): [CLS] a [SEP] b [SEP], the
//     sentence-pair form the cross-encoders are trained on.
//   - any other: [BOS] a [EOS] b [EOS], each added only where the
//     vocabulary adds it (add_bos_token, add_eos_token).
func RankPrompt(tk *tokenizer.Tokenizer, a, b string) []int32 {
	switch {
	case tk.RerankTemplate != "":
		text, literal := fillRerank(tk.RerankTemplate, a, b)
		return tk.EncodeTemplated(text, literal, false)
	case tk.SEP >= 0:
		out := tk.Encode(a, true, false) // [CLS] a [SEP]
		out = append(out, tk.Encode(b, false, false)...)
		return append(out, tk.SEP)
	}
	var out []int32
	if tk.AddBOS && tk.BOS >= 0 {
		out = append(out, tk.BOS)
	}
	out = append(out, tk.Encode(a, false, false)...)
	if tk.AddEOS && tk.EOS >= 0 {
		out = append(out, tk.EOS)
	}
	out = append(out, tk.Encode(b, false, false)...)
	if tk.AddEOS && tk.EOS >= 0 {
		out = append(out, tk.EOS)
	}
	return out
}

// fillRerank is template with every {query} replaced by query and every
// {document} by doc, in one pass (a replaced text is never searched for a
// placeholder), and the byte ranges of the result that are the template's
// own text.
func fillRerank(template, query, doc string) (string, [][2]int) {
	var b strings.Builder
	var literal [][2]int
	lit := func(s string) {
		if s != "" {
			literal = append(literal, [2]int{b.Len(), b.Len() + len(s)})
			b.WriteString(s)
		}
	}
	for rest := template; ; {
		q, d := strings.Index(rest, "{query}"), strings.Index(rest, "{document}")
		switch {
		case q < 0 && d < 0:
			lit(rest)
			return b.String(), literal
		case d < 0 || (q >= 0 && q < d):
			lit(rest[:q])
			b.WriteString(query)
			rest = rest[q+len("{query}"):]
		default:
			lit(rest[:d])
			b.WriteString(doc)
			rest = rest[d+len("{document}"):]
		}
	}
}
