package service

import (
	"context"

	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// Preadmission is what Preadmit knows of a request before its prompt is
// tokenized.
type Preadmission struct {
	Model       string // as the request names it
	PromptBytes int    // the prompt's text (a chat once rendered), in bytes
	// N is the number of choices (sequences generated); 0 for embeddings,
	// which generate nothing.
	N int
	// MaxTokens is each choice's maximum as asked; negative when the
	// request names none (counted as 1, the least a default gives), 0 when
	// it asks none (a prompt scored alone).
	MaxTokens int
	// Decided (optional) is called with the decision's id when Preadmit
	// refuses the request after a policy decision, so that the refusal
	// carries it as Generate's do (Sink.Decided); not called otherwise.
	Decided func(decisionID string)
}

// Preadmit is the admission a request passes before its prompt is
// tokenized, the work whose cost its caller controls (a chat's messages
// are rendered first: linear in the request's bytes, which the transport
// bounds). It knows only the prompt's length: q.PromptBytes bytes are at
// least the tokenizer's MinTokens of them. With that lower bound and the
// completion as asked it runs, in Generate's order and taking nothing, the
// model check, the policy decision (a policy that denies the lower bound
// denies the prompt: its rules grow stricter with the prompt, never
// looser), the decision's max_context and max_tokens, and the Limiter's
// concurrency, size and rate checks (Limiter.Check). A request refused
// here is counted as Generate counts it (Refuse) and its prompt is never
// tokenized; a request it lets through is decided and admitted again,
// exactly, by Generate or Embed once tokenized. A Retry-After it gives is
// a lower bound of the wait, as its count is of the request's tokens.
//
// Errors: ErrUnknownModel (as Generate); the policy's;
// engine.ErrContextLength; the Limiter's (*tenancy.LimitError).
func (s *Requests) Preadmit(ctx context.Context, p tenancy.Principal, q Preadmission) (err error) {
	// One admission span (the decision's attributes on it): the
	// inference span and its policy span start once the prompt is
	// tokenized.
	ctx, span := s.tracer.Start(ctx, "admission")
	defer func() { tracing.Fail(span, err); span.End() }()
	// As Generate: a model the tenant may not use is one the node does not
	// serve (not the policy's refusal, which would tell it exists).
	if _, err := s.resolveModel(p, q.Model); err != nil {
		return err
	}
	tk := s.cfg.Model.Tokenizer
	if tk == nil {
		return nil
	}
	// Every prompt is at least one token (a vocabulary whose normalizer
	// drops bytes has no better bound: MinTokens 0).
	prompt := max(tk.MinTokens(q.PromptBytes), 1)
	completion := q.MaxTokens
	if completion < 0 {
		completion = 1
	}
	pin := policies.Input{Principal: p, Tenant: p.TenantRecord, Attestation: s.cfg.Engine.Attestation(),
		Request: policies.Request{Model: s.cfg.ModelName, PromptTokens: prompt, MaxTokens: max(completion, 1)}, Placement: s.placement()}
	dec, err := s.cfg.Decider.Decide(ctx, pin)
	span.SetAttributes(attrDecision.String(dec.ID), attrAllowed.Bool(err == nil && dec.Allow))
	decided := func(err error) error {
		if q.Decided != nil && dec.ID != "" {
			q.Decided(dec.ID)
		}
		return err
	}
	if err != nil {
		s.obs.OnDenied(ctx, p.Tenant)
		return decided(s.Refuse(p.Tenant, StagePolicy, err))
	}
	lim := dec.Limits
	completion = min(completion, lim.MaxTokens)
	if prompt+completion > lim.MaxContext {
		return decided(s.Refuse(p.Tenant, StageLimits, engine.ErrContextLength.Withf("this tenant's maximum context is %d tokens, but the prompt has at least %d and %d are asked for the completion",
			lim.MaxContext, prompt, completion)))
	}
	if err := s.cfg.Limiter.Check(p.Tenant, tenancy.Quotas{MaxConcurrent: lim.MaxConcurrent, KVPages: lim.KVPages,
		TokensPerMinute: lim.TokensPerMinute, MaxContext: lim.MaxContext}, prompt+q.N*completion); err != nil {
		return decided(s.Refuse(p.Tenant, StageQuota, err))
	}
	return nil
}
