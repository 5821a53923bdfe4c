package service

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"strings"

	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// Generate is the one inference path, shared by every transport. In
// order: the model check; a slot of the node's gate (Config.Gate), held
// until Generate returns; the policy decision (evaluated in process); the
// pool must isolate the tenant as the decision requires (applies); the
// decision's limits — max_tokens clamps the completion, max_context and
// kv_pages refuse a request they cannot hold, max_concurrent,
// tokens_per_minute and kv_pages in flight go to the Limiter; only then,
// holding the tenant's permit, the request's Constraint is compiled (a
// tenant over its quota costs no compile); the engine's checks
// (Engine.Check: reject before allocate). A request refused by any
// of these is counted (Refuse), not ledgered one row each: RunRefusals
// writes the counts as policy.refusals summaries. Only then is the allowed
// decision written to the ledger, BEFORE the engine gets the request
// (ledger down ⇒ ErrLedgerUnavailable, no unaudited service); the engine
// (a rejection it finds after all is ledgered as admission.rejected and
// returned as its original typed error); the streams of the request's
// choices, handed token by token to sink (runChoices); request.completed
// written to the ledger BEFORE Generate returns success, with its signed
// receipt in Result.Receipt (a receipt the log key cannot sign fails the
// request). A nil error means
// the transport may send its normal finish; any error — before or after
// sink.Started — means it must end the response with that error.
//
// Errors: ErrUnknownModel; the gate's; the policy's (permission denied,
// quota); ErrIsolationPolicy; engine.ErrContextLength (max_context,
// kv_pages); the Limiter's; the Constraint's (grammar.ErrUnsupportedSchema,
// grammar.ErrBadSchema, ErrUnsupported); the engine's rejections and failures (an
// isolation failure fails closed); ErrLedgerUnavailable.
func (s *Requests) Generate(ctx context.Context, p tenancy.Principal, q Request, sink Sink) (_ Result, err error) {
	ctx, span := s.tracer.Start(ctx, "inference", trace.WithAttributes(tracing.AttrRequest.String(string(q.ID)),
		tracing.AttrTenant.String(string(p.Tenant)), tracing.AttrModel.String(s.cfg.ModelName), tracing.AttrPrompt.Int(len(q.Prompt))))
	defer func() {
		tracing.Fail(span, err)
		span.End()
	}()
	return s.generate(ctx, p, q, sink)
}

// generate is Generate within its span.
func (s *Requests) generate(ctx context.Context, p tenancy.Principal, q Request, sink Sink) (Result, error) {
	// A model the tenant may not use gets the answer of one the node does
	// not serve, as does another tenant's adapter: a tenant never learns
	// what others are served.
	adapter, err := s.resolveModel(p, q.Model)
	if err != nil {
		return Result{}, err
	}
	s.obs.OnTokens(ctx, len(q.Prompt), 0)
	if q.MinTokens > 0 && !q.Constraint.IsZero() {
		// A grammar may end the output where only EOS is allowed, which
		// min_tokens forbids: no token left to sample.
		return Result{}, ErrUnsupported.Withf("min_tokens with a constrained output (response_format, structured_outputs, tools)")
	}
	if s.cfg.Gate != nil {
		release, err := s.cfg.Gate(p.Tenant)
		if err != nil {
			return Result{}, s.Refuse(p.Tenant, StageCapacity, err)
		}
		defer release()
	}
	maxNew := q.MaxTokens
	if q.DefaultMax {
		maxNew = s.ContextFor(p) - len(q.Prompt)
		if d := s.cfg.DefaultMaxTokens; d > 0 {
			maxNew = min(maxNew, d)
		}
		if maxNew < 1 {
			return Result{}, s.Refuse(p.Tenant, StageLimits, engine.ErrContextLength.Withf("the prompt (%d tokens) leaves no room for a completion in this tenant's context of %d",
				len(q.Prompt), s.ContextFor(p)))
		}
	}
	// The policy knows no request that generates nothing (max_tokens ≥ 1):
	// a prompt scored alone (echo, max_tokens 0) is decided as one token,
	// the conservative count; the engine is then given 0.
	polMax := maxNew
	if maxNew == 0 && q.ScorePrompt {
		polMax = 1
	}
	pin := policies.Input{Principal: p, Tenant: p.TenantRecord, Attestation: s.cfg.Engine.Attestation(),
		Request: policies.Request{Model: s.cfg.ModelName, PromptTokens: len(q.Prompt), MaxTokens: polMax}, Placement: s.placement()}
	dec, derr := s.decide(ctx, pin)
	if sink.Decided != nil {
		sink.Decided(dec.ID)
	}
	if derr != nil {
		s.obs.OnDenied(ctx, p.Tenant)
		return Result{}, s.Refuse(p.Tenant, StagePolicy, derr)
	}
	part, err := s.applies(p, dec)
	if err != nil {
		return Result{}, s.Refuse(p.Tenant, StageIsolation, err)
	}
	lim := dec.Limits
	maxNew = min(maxNew, lim.MaxTokens)
	n := q.choices()
	if q.DefaultMax {
		// What the limits below leave for n choices (at least 1: a
		// prompt that fills them is refused there, as with any max_tokens).
		pt := part.PageTokens
		maxNew = min(maxNew, lim.MaxContext-len(q.Prompt), lim.KVPages/n*pt-len(q.Prompt), (lim.TokensPerMinute-len(q.Prompt))/n)
		maxNew = max(maxNew, 1)
	}
	// Every choice is a sequence of its own: each must fit the context,
	// and all n together the request's KV pages and the tenant's quota,
	// counted BEFORE any starts (the prompt's pages as if unshared: a
	// choice may find them evicted).
	total := len(q.Prompt) + maxNew
	if total > lim.MaxContext {
		return Result{}, s.Refuse(p.Tenant, StageLimits, engine.ErrContextLength.Withf("this tenant's maximum context is %d tokens, but %d were requested (%d in the prompt, %d for the completion)",
			lim.MaxContext, total, len(q.Prompt), maxNew))
	}
	pt := part.PageTokens
	pages := n * ((total + pt - 1) / pt)
	if pages > lim.KVPages {
		return Result{}, s.Refuse(p.Tenant, StageLimits, engine.ErrContextLength.Withf("a request of this tenant may hold %d KV pages (%d tokens), but %d tokens were requested (%d in the prompt, %d for the completion, %d choices)",
			lim.KVPages, lim.KVPages*pt, n*total, len(q.Prompt), maxNew, n))
	}
	permit, err := s.cfg.Limiter.AdmitLease(p.Tenant, tenancy.Quotas{MaxConcurrent: lim.MaxConcurrent, KVPages: lim.KVPages,
		TokensPerMinute: lim.TokensPerMinute, MaxContext: lim.MaxContext}, len(q.Prompt)+n*maxNew, pages)
	if err != nil {
		return Result{}, s.Refuse(p.Tenant, StageQuota, err)
	}
	used := len(q.Prompt)
	defer func() { permit.Release(used) }()
	// Only now, admitted and holding the tenant's permit, is the
	// constraint compiled: its cost is the caller's to choose.
	g, err := s.compile(p.Tenant, q.Constraint)
	if err != nil {
		return Result{}, s.Refuse(p.Tenant, StageAdmission, err)
	}
	sp := q.Sampling
	if !q.Seeded {
		var b [8]byte
		_, _ = rand.Read(b[:])
		sp.Seed = binary.LittleEndian.Uint64(b[:])
	}
	greqs := make([]engine.GenerateRequest, n)
	for i := range greqs {
		csp := sp
		csp.Seed = choiceSeed(sp.Seed, i)
		// Every choice scores its own prompt: its echo is streamed with
		// the scores before its first token, whatever the others do.
		greqs[i] = engine.GenerateRequest{ID: choiceID(q.ID, i), Tenant: p.Tenant, Prompt: q.Prompt, MaxTokens: maxNew, Sampling: csp, StopStrings: q.Stop, Grammar: g, CacheSalt: q.CacheSalt,
			ScorePrompt: q.ScorePrompt, StopTokens: q.StopTokens, IgnoreEOS: q.IgnoreEOS, MinTokens: min(q.MinTokens, maxNew), IncludeStop: q.IncludeStop, SpecialText: q.SpecialText,
			Adapter: adapter}
		if err := s.cfg.Engine.Check(greqs[i]); err != nil {
			return Result{}, s.Refuse(p.Tenant, StageAdmission, err)
		}
	}
	// No service without a recorded decision: the row is written, and
	// acknowledged by the ledger, BEFORE the engine gets the request.
	if err := s.Stage(ctx, p.Tenant, decisionPayload(dec, pin)); err != nil {
		return Result{}, err
	}
	runs, endErr, err := s.runChoices(ctx, greqs, sink)
	if err != nil {
		return Result{}, s.reject(ctx, part, q.ID, len(q.Prompt), maxNew, err)
	}
	res := Result{Prompt: len(q.Prompt)}
	for _, run := range runs {
		res.Completion += run.n
		res.Finishes = append(res.Finishes, run.st.Finish())
	}
	res.Finish = res.Finishes[0]
	used = len(q.Prompt) + res.Completion
	s.obs.OnTokens(ctx, len(q.Prompt), res.Completion)
	for _, run := range runs {
		s.engineSpans(ctx, run.st, endErr)
	}
	// What was served is in the ledger BEFORE the transport may send its
	// normal finish: a failed write ends the response with an error.
	// Its receipt (the log key's promise, over the entry's leaf hash)
	// goes back with the result: no receipt, no success.
	receipt, lerr := s.completedN(ctx, part, q.ID, runs, endErr, s.servedN(p.Tenant, greqs, runs, q.Seeded), s.placed(q.ID, len(runs)))
	if lerr != nil && endErr == nil {
		endErr = lerr
	}
	res.Receipt = receipt
	if endErr != nil {
		return Result{}, endErr
	}
	return res, nil
}

// reject records an admission rejection (counts only) and returns the
// original error for the client, or ErrLedgerUnavailable when the
// rejection could not be recorded.
func (s *Requests) reject(ctx context.Context, part isolation.Partition, id cloison.RequestID, prompt, maxNew int, err error) error {
	if engine.IsRejection(err) {
		t, maxLease, pt := part.Tenant, part.MaxLeaseTokens, part.PageTokens
		need := (int64(prompt) + int64(maxNew) + int64(pt) - 1) / int64(pt)
		if lerr := s.Stage(ctx, t, audit.AdmissionRejected{Request: id, Model: audit.Name(s.cfg.ModelName), Code: cloison.ErrorCode(err),
			PromptTokens: int64(prompt), MaxTokens: int64(maxNew), PagesNeeded: need, PagesAvailable: int64(maxLease / pt)}); lerr != nil {
			return lerr
		}
	}
	return err
}

// decisionPayload is the ledger row of an allowed decision (refusals are
// counted instead: refusals.go).
func decisionPayload(dec policies.Decision, in policies.Input) audit.PolicyDecision {
	rec := dec.Record(in)
	id := rec.DecisionID
	if id == "" {
		id = "none"
	}
	digest, _ := audit.ParseDigest(strings.TrimPrefix(rec.InputDigest, "sha256:"))
	rev := strings.TrimPrefix(rec.Revision, "sha256:")
	if rev == "" {
		rev = "none"
	}
	return audit.PolicyDecision{Decision: audit.Name(id), Policy: audit.Name(policies.Query), Revision: audit.Name(rev),
		InputDigest: digest, Allowed: rec.Allow, LatencyMicros: rec.LatencyNS / 1000}
}

// placed is the ledger's record of where request id was processed: this
// node with its labels and, on a decode node, the prefill node that
// prefilled it (none for a one-token prompt, computed here). Each of its n
// choices' sequences is asked for (so that none stays in the Placement's
// memory); the first one prefilled remotely is recorded (every one was
// placed under the same residency).
func (s *Requests) placed(id cloison.RequestID, n int) *audit.Placement {
	l := s.cfg.Engine.Attestation().Labels
	pl := &audit.Placement{Node: s.cfg.Node, Region: audit.Name(l.Region), Tier: audit.Name(l.Tier)}
	if pl.Node == "" {
		pl.Node = "node"
	}
	if s.cfg.Placement != nil {
		for i := range max(n, 1) {
			if p, ok := s.cfg.Placement.Served(choiceID(id, i)); ok && pl.Prefill == nil {
				pl.Prefill = &audit.PrefillPlace{Node: audit.Name(SanitizeName(p.Addr)), Region: audit.Name(p.Labels.Region), Tier: audit.Name(p.Labels.Tier)}
			}
		}
	}
	return pl
}
