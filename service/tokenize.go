package service

import (
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/tenancy"
)

// Tokenizing is metered as inference is: without it a tenant could burn
// the node's CPU without bound outside its quota, since a tokenizer
// request reaches no policy decision and no engine admission.

// CheckModel refuses (ErrUnknownModel) a model that is not this node's or
// that the tenant may not use; an empty model names this node's. The same
// answer for both, so that a tenant cannot learn which models the node
// serves for others.
func (q *Requests) CheckModel(p tenancy.Principal, model string) error {
	if model == "" {
		model = q.cfg.ModelName
	}
	_, err := q.resolveModel(p, model)
	return err
}

// clip is s cut to n bytes (marked), so that an error never echoes an
// unbounded client string.
func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// TokenizeInput is what Tokenize tokenizes: Text (with BOS when BOS is
// set), or, when Chat, Messages rendered with the model's template and its
// generation prompt (the template writes the special tokens).
type TokenizeInput struct {
	Text     string
	BOS      bool
	Chat     bool
	Messages []chat.Message
}

// Tokenize is in's token ids under the model's tokenizer, metered for
// tenant p: it holds one of the tenant's concurrent-request slots and is
// charged against its tokens-per-minute quota, first for an upper bound
// (one token per byte, plus BOS and EOS, capped at the quota) and, once
// done, refunded down to the tokens it produced. The transport checks the
// model first (CheckModel). Errors: the chat template's (RenderChat), the
// Limiter's (*tenancy.LimitError).
func (q *Requests) Tokenize(p tenancy.Principal, in TokenizeInput) ([]int32, error) {
	m := q.cfg.Model
	text, bos := in.Text, in.BOS
	var literal [][2]int // a rendered template's own text: the only place special tokens are parsed
	if in.Chat {
		pr, b, err := m.RenderChat(in.Messages, nil)
		if err != nil {
			return nil, err
		}
		text, literal, bos = pr.Text, pr.Literal, b
	}
	var ids []int32
	err := q.meter(p, len(text)+2, func() int {
		if in.Chat {
			ids = m.Tokenizer.EncodeTemplated(text, literal, bos)
		} else {
			ids = m.Tokenizer.Encode(text, bos, false)
		}
		return len(ids)
	})
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// Detokenize is the text of token ids (special tokens as text), metered
// like Tokenize for the number of ids. The transport checks the model
// first (CheckModel). Errors: ErrInvalidField (an id outside the
// vocabulary), the Limiter's.
func (q *Requests) Detokenize(p tenancy.Principal, tokens []int64) (string, error) {
	m := q.cfg.Model
	ids := make([]int32, len(tokens))
	for i, id := range tokens {
		if id < 0 || id >= int64(m.Tokenizer.Len()) {
			return "", ErrInvalidField.Withf("tokens[%d]: %d is not a token of this model", i, id)
		}
		ids[i] = int32(id)
	}
	var text string
	if err := q.meter(p, len(ids), func() int { text = m.Tokenizer.Decode(ids, true); return len(ids) }); err != nil {
		return "", err
	}
	return text, nil
}

// meter runs work, which produces n tokens, as one metered tokenizer
// request of tenant p: it holds one of the tenant's concurrent-request
// slots and is charged against its tokens-per-minute quota, first for
// bound (capped at the quota) and, once done, refunded down to n. Errors:
// the Limiter's (*tenancy.LimitError, 429 with retry-after).
func (q *Requests) meter(p tenancy.Principal, bound int, work func() int) error {
	bound = min(bound, max(p.TenantRecord.Quotas.TokensPerMinute, 0))
	permit, err := q.cfg.Limiter.Admit(p.Tenant, p.TenantRecord.Quotas, bound)
	if err != nil {
		return err
	}
	permit.Release(work())
	return nil
}
