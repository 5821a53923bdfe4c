package service

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// EmbedRequest is an embeddings request as the transports hand it over:
// its inputs already tokenized (one prompt each, 1 to MaxEmbedInputs of
// them) and Dimensions, when not 0, the length each vector is cut to
// (Matryoshka truncation, renormalised).
type EmbedRequest struct {
	ID    cloison.RequestID
	Model string
	// Texts are tokenized here (with BOS, as llama.cpp's embedding does);
	// Inputs are token ids as sent. One of the two.
	Texts      []string
	Inputs     [][]int64
	Dimensions int
}

// MaxEmbedInputs bounds the inputs of one embeddings request (OpenAI's
// limit is 2048).
const MaxEmbedInputs = 2048

// EmbedResult is one vector per input, in order, L2-normalised, with the
// prompt tokens they cost and the ledger entry's signed receipt.
type EmbedResult struct {
	Vectors [][]float32
	Prompt  int
	Receipt string
}

// Embed is the embeddings path, in Generate's order: the model check, the
// node's gate, the policy decision (the request decided as its longest
// input and one generated token: each input is a sequence of its own, and
// the policy's prompt_tokens bounds one sequence's context), the pool's
// isolation (applies), the decision's limits (each input within
// max_context and kv_pages), the Limiter (tokens_per_minute charged for
// the prompt tokens, max_concurrent, the pages of the inputs held at
// once), the engine's checks for every input (a model that declares no
// pooling: engine.ErrNoPooling), the decision in the ledger BEFORE the
// engine gets the inputs, and request.completed (prompt tokens, no
// completion, the pages, the zeroing tier; never text) BEFORE the vectors
// are returned. Every input is its own engine request, computed in the
// tenant's pages, as many at once as the tenant's kv_pages hold (the
// Limiter's lease): a vector depends on its input only, never on the
// other inputs or other tenants' requests batched with it.
//
// Errors: ErrUnknownModel; ErrInvalidField (no input, too many,
// dimensions outside 1…the model's width); the gate's; the policy's;
// ErrIsolationPolicy; engine.ErrContextLength; the Limiter's;
// engine.ErrNoPooling and the engine's other rejections and failures;
// ErrLedgerUnavailable.
func (s *Requests) Embed(ctx context.Context, p tenancy.Principal, q EmbedRequest) (EmbedResult, error) {
	return s.embed(ctx, p, q, false)
}

// embed is Embed; with rank, each input is a query and document pair
// that a rank model scores (engine.GenerateRequest.Rank; rerank.go).
func (s *Requests) embed(ctx context.Context, p tenancy.Principal, q EmbedRequest, rank bool) (EmbedResult, error) {
	if q.Model != s.cfg.ModelName || !p.TenantRecord.Allows(q.Model) {
		return EmbedResult{}, fmt.Errorf("%w: %q", ErrUnknownModel, clip(q.Model, 64))
	}
	// Texts are tokenized only once their length passed Preadmit.
	if len(q.Texts) > 0 {
		n := 0
		for _, t := range q.Texts {
			n += len(t)
		}
		if err := s.Preadmit(ctx, p, Preadmission{Model: q.Model, PromptBytes: n}); err != nil {
			return EmbedResult{}, err
		}
	}
	inputs, err := s.embedInputs(q)
	if err != nil {
		return EmbedResult{}, err
	}
	if q.Dimensions < 0 {
		return EmbedResult{}, ErrInvalidField.Withf("dimensions: must be at least 1")
	}
	total, longest := 0, 0
	for _, in := range inputs {
		total += len(in)
		longest = max(longest, len(in))
	}
	s.obs.OnTokens(ctx, total, 0)
	if s.cfg.Gate != nil {
		release, err := s.cfg.Gate(p.Tenant)
		if err != nil {
			return EmbedResult{}, s.Refuse(p.Tenant, StageCapacity, err)
		}
		defer release()
	}
	pin := policies.Input{Principal: p, Tenant: p.TenantRecord, Attestation: s.cfg.Engine.Attestation(),
		Request: policies.Request{Model: q.Model, PromptTokens: longest, MaxTokens: 1}, Placement: s.placement()}
	dec, derr := s.decide(ctx, pin)
	if derr != nil {
		s.obs.OnDenied(ctx, p.Tenant)
		return EmbedResult{}, s.Refuse(p.Tenant, StagePolicy, derr)
	}
	part, err := s.applies(p, dec)
	if err != nil {
		return EmbedResult{}, s.Refuse(p.Tenant, StageIsolation, err)
	}
	lim := dec.Limits
	if longest > lim.MaxContext {
		return EmbedResult{}, s.Refuse(p.Tenant, StageLimits, engine.ErrContextLength.Withf("this tenant's maximum context is %d tokens, but an input has %d",
			lim.MaxContext, longest))
	}
	pt := part.PageTokens
	pages := (longest + pt - 1) / pt
	if pages > lim.KVPages {
		return EmbedResult{}, s.Refuse(p.Tenant, StageLimits, engine.ErrContextLength.Withf("a request of this tenant may hold %d KV pages (%d tokens), but an input has %d tokens",
			lim.KVPages, lim.KVPages*pt, longest))
	}
	// The inputs run in waves, each as many as the tenant's kv_pages hold
	// at once (every input fits alone: checked above).
	need := 0
	for _, in := range inputs {
		need += (len(in) + pt - 1) / pt
	}
	budget := min(need, lim.KVPages)
	permit, err := s.cfg.Limiter.AdmitLease(p.Tenant, tenancy.Quotas{MaxConcurrent: lim.MaxConcurrent, KVPages: lim.KVPages,
		TokensPerMinute: lim.TokensPerMinute, MaxContext: lim.MaxContext}, total, budget)
	if err != nil {
		return EmbedResult{}, s.Refuse(p.Tenant, StageQuota, err)
	}
	defer permit.Release(total)
	greqs := make([]engine.GenerateRequest, len(inputs))
	for i, in := range inputs {
		greqs[i] = engine.GenerateRequest{ID: choiceID(q.ID, i), Tenant: p.Tenant, Prompt: in, Embed: true, Rank: rank}
		if err := s.cfg.Engine.Check(greqs[i]); err != nil {
			return EmbedResult{}, s.Refuse(p.Tenant, StageAdmission, err)
		}
	}
	if err := s.Stage(ctx, p.Tenant, decisionPayload(dec, pin)); err != nil {
		return EmbedResult{}, err
	}
	res := EmbedResult{Vectors: make([][]float32, len(greqs)), Prompt: total}
	var sum engine.Summary
	var endErr error
	start := time.Now()
	for lo := 0; lo < len(greqs) && endErr == nil; {
		hi, used := lo, 0
		for hi < len(greqs) {
			pg := (len(greqs[hi].Prompt) + pt - 1) / pt
			if hi > lo && used+pg > budget {
				break
			}
			used += pg
			hi++
		}
		ran, err := s.embedWave(ctx, greqs[lo:hi], res.Vectors[lo:hi], &sum)
		if err != nil && lo == 0 && ran == 0 {
			// Refused by the engine before anything ran: ledgered as a
			// rejection, as a generation's.
			return EmbedResult{}, s.reject(ctx, part, q.ID, len(greqs[0].Prompt), 0, err)
		}
		endErr = err
		lo = hi
	}
	for i, vec := range res.Vectors {
		if endErr != nil || q.Dimensions == 0 {
			break
		}
		res.Vectors[i], endErr = Truncate(vec, q.Dimensions)
	}
	var emb *audit.Embedded
	if endErr == nil && s.cfg.Embedded != nil {
		emb = s.cfg.Embedded(p.Tenant, inputs, res.Vectors)
		if emb != nil && rank {
			emb.Operation = audit.OperationRank
		}
	}
	receipt, lerr := s.stageReceipted(ctx, p.Tenant, q.ID, audit.RequestCompleted{Request: q.ID, Model: audit.Name(s.cfg.ModelName), ModelDigest: s.modelDigest(),
		Status: cloison.ErrorCode(endErr), PromptTokens: int64(total), Pages: int64(sum.Pages), Tier: audit.Name(part.Zeroing.String()),
		DurationMicros: time.Since(start).Microseconds(), Placement: s.placed(q.ID, 1), Embedding: emb})
	if endErr == nil {
		endErr = lerr
	}
	if endErr != nil {
		return EmbedResult{}, endErr
	}
	res.Receipt = receipt
	return res, nil
}

// embedInputs is q's inputs as token ids: its texts tokenized, or its ids
// checked against the vocabulary. Errors: ErrInvalidField (no input, too
// many, an empty one, an id outside the vocabulary).
func (s *Requests) embedInputs(q EmbedRequest) ([][]int32, error) {
	n := len(q.Texts) + len(q.Inputs)
	if n == 0 || n > MaxEmbedInputs || (len(q.Texts) > 0 && len(q.Inputs) > 0) {
		return nil, ErrInvalidField.Withf("input: 1 to %d inputs, got %d", MaxEmbedInputs, n)
	}
	tk := s.cfg.Model.Tokenizer
	out := make([][]int32, 0, n)
	for i, t := range q.Texts {
		if t == "" {
			return nil, ErrInvalidField.Withf("input[%d]: empty", i)
		}
		out = append(out, tk.Encode(t, true, false))
	}
	for i, in := range q.Inputs {
		if len(in) == 0 {
			return nil, ErrInvalidField.Withf("input[%d]: no tokens", i)
		}
		ids := make([]int32, len(in))
		for j, id := range in {
			if id < 0 || id >= int64(tk.Len()) {
				return nil, ErrInvalidField.Withf("input[%d][%d]: %d is not a token of this model", i, j, id)
			}
			ids[j] = int32(id)
		}
		out = append(out, ids)
	}
	return out, nil
}

// embedWave runs greqs on the engine at once (the scheduler batches
// them; a vector depends on its input only) and writes their vectors into
// out, adding their pages to sum; it returns how many the engine took. On
// the first error the wave's other requests are cancelled and drained
// (their summaries exist for the ledger) and that error is returned.
func (s *Requests) embedWave(ctx context.Context, greqs []engine.GenerateRequest, out [][]float32, sum *engine.Summary) (int, error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	streams := make([]*engine.Stream, 0, len(greqs))
	var first error
	for _, g := range greqs {
		st, err := s.cfg.Engine.Submit(wctx, g)
		if err != nil {
			first = err
			cancel()
			break
		}
		streams = append(streams, st)
	}
	for i, st := range streams {
		vec, err := collectVector(wctx, st)
		if sm, ok := st.Summary(); ok {
			sum.Pages += sm.Pages
		}
		if err != nil && first == nil {
			first = err
			cancel()
		}
		out[i] = vec
	}
	return len(streams), first
}

// collectVector reads st to its end and returns the vector it carried.
// Errors: the stream's (drained after a cancellation, so that its summary
// exists), errNoVector when it ended without one.
func collectVector(ctx context.Context, st *engine.Stream) ([]float32, error) {
	var vec []float32
	for {
		tok, err := st.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, drainErr(st, err)
		}
		if tok.ID == engine.PromptHidden {
			vec = tok.Embedding
		}
	}
	if vec == nil {
		return nil, fmt.Errorf("%w: no embedding computed for %s", errNoVector, st.ID)
	}
	return vec, nil
}

var errNoVector = cloison.NewError(cloison.CodeInternal, "internal error")

// Truncate is v's first d values renormalised to unit length (Matryoshka
// truncation, as OpenAI's dimensions and vLLM's). Errors: ErrInvalidField
// for d outside 1…len(v) or a prefix of zero norm.
func Truncate(v []float32, d int) ([]float32, error) {
	if d < 1 || d > len(v) {
		return nil, ErrInvalidField.Withf("dimensions: must be 1 to %d for this model, got %d", len(v), d)
	}
	var ss float64
	for _, x := range v[:d] {
		ss += float64(x) * float64(x)
	}
	norm := math.Sqrt(ss)
	if norm == 0 {
		return nil, ErrInvalidField.Withf("dimensions: the first %d values of this vector are zero", d)
	}
	out := make([]float32, d)
	for j, x := range v[:d] {
		out[j] = float32(float64(x) / norm)
	}
	return out, nil
}

// Embedded is what request.completed records of an embeddings request
// (audit.Embedded): the keyed digests of its inputs and vectors under the
// tenant's digest key, the model's digest and the kernels; nil when
// digests are off (no key-encryption key).
func (r *Responses) Embedded(t cloison.TenantID, inputs [][]int32, vecs [][]float32) *audit.Embedded {
	rc := r.cfg
	if rc.KEK == nil {
		return nil
	}
	key, err := audit.DigestKey(rc.KEK, t, rc.DigestKey)
	if err != nil {
		r.d.Log.Error("embedding digest key", "err", err)
		return nil
	}
	dims := 0
	if len(vecs) > 0 {
		dims = len(vecs[0])
	}
	return &audit.Embedded{Key: rc.DigestKey, Inputs: int64(len(inputs)), Dimensions: int64(dims),
		InputsDigest: audit.EmbedInputsDigest(key, inputs), Vectors: audit.EmbedVectorsDigest(key, vecs), ModelDigest: rc.ModelDigest,
		Backend: audit.Name(SanitizeName(rc.Backend)), KernelPath: audit.Name(SanitizeName(rc.KernelPath))}
}
