package engine

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// Errors of the engine.
var (
	ErrDeadline = cloison.NewError(cloison.CodeDeadlineExceeded, "request deadline exceeded")
	ErrStopped  = cloison.NewError(cloison.CodeUnavailable, "engine stopped")
	// ErrWithheld ends a stream whose request an isolation failure touched:
	// its output is withheld, whatever was already computed.
	ErrWithheld = cloison.NewError(cloison.CodeIsolationViolation, "output withheld: the request's isolation could not be proven")
	ErrBadStop  = cloison.NewError(cloison.CodeInvalid, "invalid stop sequences")
)

// Config wires an Engine.
type Config struct {
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	Pool      *isolation.Pool
	Arena     kernels.Arena
	// Attestation must have passed (attest.Capacity returned no error).
	Attestation attest.Attestation
	Scheduler   SchedulerConfig
	// OnFinish is called once per request that entered the scheduler, when
	// it ends (finished, aborted or failed); counts only, never text.
	OnFinish func(Summary)
	// OnIncident is called for every isolation failure (pool violation or
	// kernel tag mismatch), once per affected request.
	OnIncident func(Incident)
	// Unsafe switches test-only faults on (admission's length checks off);
	// empty in the default build, see unsafe.go.
	Unsafe Unsafe
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Remote, when set, makes this a decode node whose prompts are
	// prefilled on prefill nodes (see Remote).
	Remote *Remote
}

// Summary is what the ledger records of a request: counts and identifiers.
type Summary struct {
	ID          cloison.RequestID
	Tenant      cloison.TenantID
	State       State
	Finish      FinishReason
	Code        cloison.Code // error code for Aborted/Failed
	Prompt      int
	Generated   int
	Cached      int
	Pages       int
	Preemptions int
	Started     time.Time
	FirstToken  time.Duration // 0 if none
	Duration    time.Duration
	// Queued is the time from Submit to the first step that scheduled the
	// request (a batch or a remote prefill); 0 if it never ran.
	Queued time.Duration
	// Prefill is the time from that first scheduling to the first token,
	// Decode from the first token to the last; 0 if there was none.
	Prefill, Decode time.Duration
	// Adapter is the digest of the LoRA adapter the request ran under
	// (GenerateRequest.Adapter); zero without one.
	Adapter [32]byte
}

// Incident describes an isolation failure that aborted a request.
type Incident struct {
	Time    time.Time
	Tenant  cloison.TenantID
	Request cloison.RequestID
	Kind    string // "pool-violation" or "kernel-tag-mismatch"
	Page    int32
	Owner   isolation.Lease // owner or last writer of the page, when known
	Reason  string
	Err     error
}

// GenerateRequest is an inference request as the API hands it to the engine.
type GenerateRequest struct {
	ID          cloison.RequestID
	Tenant      cloison.TenantID
	Prompt      []int32
	MaxTokens   int
	Sampling    sample.Params
	StopTokens  []int32  // in addition to the model's end-of-generation tokens
	StopStrings []string // at most 4, each 1–256 bytes
	IgnoreEOS   bool
	// MinTokens: until this many tokens are generated, the end-of-generation
	// tokens and StopTokens are never sampled (their logits are -inf) and
	// stop strings do not end the request (vLLM's min_tokens).
	MinTokens int
	// IncludeStop: the stop string that ends the request is part of the
	// output (vLLM's include_stop_str_in_output); otherwise the text ends
	// before it.
	IncludeStop bool
	// SpecialText: control tokens are part of the text (vLLM's
	// skip_special_tokens false); otherwise they give no text.
	SpecialText bool
	// Grammar, if set, constrains the output (response_format, tool
	// choice; a lazy grammar, for strict tools under tool_choice "auto",
	// only from its trigger on): each token is sampled among those the
	// grammar allows, an
	// end-of-generation token only once it is complete, and the request
	// finishes (FinishStop) as soon as nothing more may follow. MaxTokens
	// reached first gives FinishLength with incomplete output.
	Grammar *grammar.Grammar
	// Deadline, if set, aborts the request when passed.
	Deadline time.Time
	// Adapter, if set, runs the request under this LoRA adapter (loaded
	// for the engine's model by model.LoadAdapter): its sequence's rows
	// get the adapter's low-rank products, its neighbours' do not
	// (model.Seq.Adapter), and its prompt is looked up in and published to
	// the prefix cache under the adapter's digest only, so KV computed
	// under one adapter (or none) never serves another. Who may use which
	// adapter is the caller's business: the engine runs what it is given.
	// Not on a decode node (ErrAdapterRemote).
	Adapter *model.Adapter
	// ScorePrompt asks for every prompt token's log-probability given the
	// tokens before it, with Sampling.TopLogprobs alternatives: the stream
	// then starts with one Token of ID PromptScores carrying them (before
	// any generated token). The prompt is computed in full (never from the
	// prefix cache), its logits one chunk at a time, keeping only the
	// chosen token and the alternatives. MaxTokens may then be 0: the
	// prompt is scored and the request finishes (FinishLength) with no
	// token. Not on a decode node (ErrScoreRemote).
	ScorePrompt bool
	// Embed asks for the prompt's embedding instead of tokens: the prompt
	// is computed in full as for ScorePrompt (never from the prefix cache,
	// in the tenant's pages), each token's hidden state kept, and the
	// stream carries one Token of ID PromptHidden with the model's pooled,
	// L2-normalised vector (model.Pool); MaxTokens must be 0. The vector
	// depends on the prompt only, never on its batch neighbours. Not on a
	// decode node (ErrScoreRemote).
	Embed bool
	// CacheSalt (optional) narrows the tenant's prefix-cache namespace to
	// the requests sending the same salt (vLLM's cache_salt;
	// isolation.Pool.AllocatePrefixSalted): it never widens it.
	CacheSalt []byte
	// Rank, with Embed, asks a rank model (model.PoolRank: an encoder
	// with a classification head, or a qwen3 decoder reranker) for its
	// scores of the prompt (a query and document pair): the PromptHidden
	// token carries the head's outputs (model.Model.Rank), the first the
	// rank score (RankProbability makes it a probability). A rank model
	// serves no embeddings (ErrRankModel); Rank on any other model is
	// ErrNoRankHead. A decoder reranker still generates.
	Rank bool
}

// prefixSalt is a request's prefix-cache salt (Request.CacheSalt) from a
// salt the client chose (nil if none) and its LoRA adapter (nil if none):
// nil when both are absent (the tenant's namespace itself), otherwise a
// tagged encoding of both — the client's salt length-prefixed, then the
// adapter's digest or a marker for none — so that no client salt ever
// equals an adapter's and KV computed under one adapter (or none) is never
// found under another.
func prefixSalt(client []byte, ad *model.Adapter) []byte {
	if len(client) == 0 && ad == nil {
		return nil
	}
	out := append([]byte("cloison/prefix-salt/v1\x00"), binary.AppendUvarint(nil, uint64(len(client)))...)
	out = append(out, client...)
	if ad == nil {
		return append(out, 0)
	}
	return append(append(out, 1), ad.Digest[:]...)
}

// ErrAdapterRemote: a LoRA adapter asked of a decode node, whose prompts
// are computed on prefill nodes that run the base model only.
var ErrAdapterRemote = cloison.NewError(cloison.CodeUnsupported, "LoRA adapters are not served on a disaggregated deployment")

// ErrAdapterModel: a request's adapter was loaded for another model than
// the engine's.
var ErrAdapterModel = cloison.NewError(cloison.CodeInvalid, "the adapter was loaded for another model")

// PromptHidden is the ID of the stream's Token that carries a prompt's
// embedding (GenerateRequest.Embed).
const PromptHidden int32 = -3

// ErrNoPooling: an embedding asked of a model that declares no pooling.
var ErrNoPooling = cloison.NewError(cloison.CodeUnsupported, "this model serves no embeddings: it declares no pooling")

// ErrNoRankHead: a rank score asked of a model without pooling rank.
var ErrNoRankHead = cloison.NewError(cloison.CodeUnsupported, "this model serves no reranking: it has no classification head (pooling rank)")

// ErrRankModel: an embedding asked of a rank model, whose output is a
// relevance score, not a vector.
var ErrRankModel = cloison.NewError(cloison.CodeUnsupported, "this model is a reranker: it serves rerank and score, not embeddings")

// ErrEncoderOnly: text generation or prompt scoring asked of an encoder
// (a BERT-family model), which serves embeddings and rank scores only.
var ErrEncoderOnly = cloison.NewError(cloison.CodeUnsupported, "this model is an encoder: it serves embeddings and ranking, not generation")

// PromptScores is the ID of the stream's Token that carries a prompt's
// scores (GenerateRequest.ScorePrompt).
const PromptScores int32 = -2

// ErrScoreRemote: prompt scoring asked of a decode node, whose prompts are
// computed on prefill nodes that return no logits.
var ErrScoreRemote = cloison.NewError(cloison.CodeUnsupported, "prompt token logprobs are not computed on a disaggregated deployment")

// Scored is one prompt token's score: its log-probability given the tokens
// before it, and the most likely alternatives there, best first.
type Scored struct {
	Token   int32
	Logprob float64
	Top     []sample.TokenProb
}

// Engine runs requests on one model, one pool and one arena. Submit is safe
// for concurrent use; Run drives the loop on one goroutine.
type Engine struct {
	cfg   Config
	adm   *Admission
	sched *Scheduler
	now   func() time.Time

	ctl      chan func() // control messages into the loop
	wake     chan struct{}
	exited   chan struct{} // closed when Run has returned (after shutdown)
	exitOnce sync.Once

	mu      sync.Mutex
	active  map[cloison.RequestID]*active // guarded by mu (the loop and Submit share it)
	stopped bool                          // guarded by mu

	running, waiting atomic.Int64 // sequences holding leases / queued, after the last step

	tickets map[cloison.RequestID]*transfer.Ticket // remote prefills in flight; loop goroutine only

	vocabOnce sync.Once
	vocab     *grammar.Vocab // the tokenizer's trie for grammars, built on first use
}

// Load returns the number of running (leased) and waiting (queued) requests
// as of the last step; safe for concurrent use (metrics).
func (e *Engine) Load() (running, waiting int) {
	return int(e.running.Load()), int(e.waiting.Load())
}

// New returns an Engine. Attestation must have passed.
func New(cfg Config) (*Engine, error) {
	if !cfg.Attestation.OK {
		return nil, fmt.Errorf("%w: %s", attest.ErrFailed, cfg.Attestation.Reason)
	}
	if cfg.Model == nil || cfg.Tokenizer == nil || cfg.Pool == nil || cfg.Arena == nil {
		return nil, fmt.Errorf("%w: engine needs a model, a tokenizer, a pool and an arena", errInternal)
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	if cfg.Remote != nil {
		if cfg.Remote.Receiver == nil || cfg.Remote.Prefill == nil {
			return nil, fmt.Errorf("%w: remote prefill needs a receiver and a prefill function", errInternal)
		}
		cfg.Scheduler.Remote = true
	}
	if cfg.Scheduler.ContextSpan == 0 {
		cfg.Scheduler.ContextSpan = contextSpan(cfg.Model.Config)
	}
	if cfg.Model.Encoder {
		// An encoder's input runs whole in one step, and its K/V depend on
		// every token of the input: never a prefix of another's.
		cfg.Scheduler.WholePrompt, cfg.Scheduler.PrefixCache = true, false
	}
	return &Engine{
		cfg: cfg,
		adm: NewAdmission(AdmissionConfig{ServedContext: cfg.Attestation.ServedContext, Vocab: cfg.Model.Vocab,
			Pool: cfg.Pool, PrefillCapacity: prefillCapacity(cfg.Remote), Unsafe: cfg.Unsafe}),
		sched:   NewScheduler(cfg.Pool, cfg.Scheduler),
		now:     now,
		ctl:     make(chan func(), 1024),
		wake:    make(chan struct{}, 1),
		exited:  make(chan struct{}),
		active:  map[cloison.RequestID]*active{},
		tickets: map[cloison.RequestID]*transfer.Ticket{},
	}, nil
}

// Admission returns the engine's admission (for its counters).
func (e *Engine) Admission() *Admission { return e.adm }

// RankProbability is the relevance probability (0…1) of a Rank request's
// outputs: model.Model.RankProbability (the sigmoid of an encoder head's
// logit; a decoder reranker's softmax "yes" as it is). NaN for a model
// without pooling rank.
func (e *Engine) RankProbability(outputs []float32) float64 {
	return e.cfg.Model.RankProbability(outputs)
}

// PrefixCache reports whether the engine looks prompts up in its
// (tenant-namespaced) prefix cache.
func (e *Engine) PrefixCache() bool { return e.cfg.Scheduler.PrefixCache }

// Attestation returns the capacity attestation the engine serves under.
func (e *Engine) Attestation() attest.Attestation { return e.cfg.Attestation }

// Stopped reports whether the engine has stopped (Run returned or is
// returning: every request since fails with ErrStopped).
func (e *Engine) Stopped() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.stopped
}

// Model returns the model the engine runs (what an adapter of its requests
// must be loaded for: model.LoadAdapter).
func (e *Engine) Model() *model.Model { return e.cfg.Model }

// Check runs what Submit checks before it queues anything — stop strings,
// sampling parameters, admission (reject before allocate) — and queues
// nothing, so that a caller can refuse a request before it records a
// decision to serve it. A rejection is counted as Submit counts it. Submit
// checks again: Check is advice, never a ticket. Errors: those of Submit's
// rejections (ErrBadStop, sampling errors, ErrEmptyPrompt, ErrMaxTokens,
// ErrBadToken, ErrContextLength, isolation.ErrUnknownTenant, ErrScoreRemote).
func (e *Engine) Check(r GenerateRequest) error {
	if err := validateStops(r.StopStrings); err != nil {
		return err
	}
	if (r.ScorePrompt || r.Embed) && e.cfg.Remote != nil {
		return ErrScoreRemote
	}
	if err := e.checkEmbed(r); err != nil {
		return err
	}
	if _, _, err := e.newSampler(r); err != nil {
		return err
	}
	_, err := e.adm.Admit(Request{ID: r.ID, Tenant: r.Tenant, Prompt: r.Prompt, MaxTokens: r.MaxTokens, ScorePrompt: r.ScorePrompt || r.Embed})
	return err
}

// Submit admits a request and queues it. A rejection (ErrContextLength,
// ErrEmptyPrompt, …, or sampling parameter errors) is returned at once with
// its original error: nothing was allocated, queued or computed. ctx
// cancellation aborts the request.
func (e *Engine) Submit(ctx context.Context, r GenerateRequest) (*Stream, error) {
	if err := validateStops(r.StopStrings); err != nil {
		return nil, err
	}
	if (r.ScorePrompt || r.Embed) && e.cfg.Remote != nil {
		return nil, ErrScoreRemote
	}
	if r.Adapter != nil {
		if e.cfg.Remote != nil {
			return nil, ErrAdapterRemote
		}
		if r.Adapter.Base() != e.cfg.Model {
			return nil, ErrAdapterModel
		}
	}
	if err := e.checkEmbed(r); err != nil {
		return nil, err
	}
	samp, gm, err := e.newSampler(r)
	if err != nil {
		return nil, err
	}
	t, err := e.adm.Admit(Request{ID: r.ID, Tenant: r.Tenant, Prompt: r.Prompt, MaxTokens: r.MaxTokens, ScorePrompt: r.ScorePrompt || r.Embed, CacheSalt: prefixSalt(r.CacheSalt, r.Adapter)})
	if err != nil {
		return nil, err
	}
	stops := map[int32]bool{}
	for _, s := range r.StopTokens {
		stops[s] = true
	}
	a := &active{req: r, sampler: samp, grammar: gm, stops: stops, stream: newStream(r.ID), started: e.now(), trace: context.WithoutCancel(ctx)}
	if r.Embed {
		a.hidden = make([]float32, len(r.Prompt)*e.cfg.Model.DModel)
	}
	if r.ScorePrompt {
		a.scores = make([]Scored, len(r.Prompt)-1)
		a.scored = make([]bool, len(r.Prompt)-1)
	}
	// The cancel hooks are set BEFORE a is published in e.active: from then
	// on the loop (finish, shutdown) may end it at any moment and calls
	// a.stopCtx. A cancellation that fires before publication posts a
	// cancel of an unknown request: a no-op.
	a.stream.cancel = func(reason error) { e.post(func() { e.cancel(r.ID, reason) }) }
	a.stopCtx = context.AfterFunc(ctx, func() { a.stream.cancel(fmt.Errorf("%w: %v", ErrCanceled, context.Cause(ctx))) })
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		a.stopCtx()
		return nil, ErrStopped
	}
	if _, dup := e.active[r.ID]; dup {
		e.mu.Unlock()
		a.stopCtx()
		return nil, fmt.Errorf("%w: %s", ErrDuplicateRequest, r.ID)
	}
	e.active[r.ID] = a
	e.mu.Unlock()
	// If Run returned meanwhile, shutdown already ended the stream (it saw
	// a in e.active) and the enqueue is dropped.
	e.post(func() {
		if err := e.sched.Enqueue(t); err != nil {
			e.finish(a, Event{ID: r.ID, Tenant: r.Tenant, State: Failed, Err: err})
		}
	})
	return a.stream, nil
}

// newSampler checks a request's sampling parameters (logit_bias ids inside
// the model's vocabulary) and returns its sampler, constrained by its
// grammar's matcher if it has one. Errors: sample.ErrInvalidParams.
func (e *Engine) newSampler(r GenerateRequest) (*sample.Sampler, *grammar.Matcher, error) {
	for tok := range r.Sampling.LogitBias {
		if int(tok) >= e.cfg.Model.Vocab {
			return nil, nil, sample.ErrInvalidParams.Withf("logit_bias token %d is outside the vocabulary of %d", tok, e.cfg.Model.Vocab)
		}
	}
	s, err := sample.New(r.Sampling, r.Prompt)
	if err != nil || r.Grammar == nil {
		return s, nil, err
	}
	e.vocabOnce.Do(func() { e.vocab = grammar.VocabFrom(e.cfg.Tokenizer) })
	m := grammar.NewMatcher(r.Grammar, e.vocab)
	s.Constrain(m)
	return s, m, nil
}

func validateStops(stops []string) error {
	if len(stops) > 4 {
		return ErrBadStop.Withf("%d given, at most 4", len(stops))
	}
	for _, s := range stops {
		if len(s) == 0 || len(s) > 256 || !utf8.ValidString(s) {
			return ErrBadStop.Withf("each must be 1–256 bytes of UTF-8")
		}
	}
	return nil
}

// post hands f to the loop. It never blocks once Run has returned (f is
// dropped: shutdown already ended every request f could concern) and
// reports whether the loop took f in.
func (e *Engine) post(f func()) bool {
	select {
	case e.ctl <- f:
	case <-e.exited:
		return false
	}
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return true
}

// cancel runs on the loop goroutine.
func (e *Engine) cancel(id cloison.RequestID, reason error) {
	if tk := e.tickets[id]; tk != nil {
		tk.Cancel() // the transfer stops; its pages drain when acknowledged
	}
	if ev, ok := e.sched.Cancel(id, reason); ok {
		e.handle([]Event{ev})
	}
}

// active is a request the engine is serving. Only the loop goroutine touches
// its fields after Submit returns (the stream has its own lock).
type active struct {
	req       GenerateRequest
	sampler   *sample.Sampler
	grammar   *grammar.Matcher // nil: unconstrained
	stops     map[int32]bool
	stream    *Stream
	stopCtx   func() bool
	trace     context.Context // Submit's context values, not its cancellation: the request's span (remote prefills are its children)
	started   time.Time
	firstTok  time.Duration
	scheduled time.Time // first step that scheduled it (zero: not yet)
	lastTok   time.Time // when the last token was sampled (zero: none yet)
	bytes     []byte    // generated text so far (UTF-8, maybe incomplete at the end)
	emitted   int       // bytes of text already streamed
	stopped   bool      // a stop string matched; text is final
	generated int
	// Prompt scoring (req.ScorePrompt): scores[i] is prompt token i+1's,
	// scored[i] whether it is computed (a recomputation after preemption
	// finds it done), nscored how many are, sent whether the
	// PromptScores token was pushed.
	scores  []Scored
	scored  []bool
	nscored int
	sent    bool
	// Embedding (req.Embed): every prompt token's hidden state, by
	// position (a recomputation after preemption writes the same rows).
	hidden []float32
}

// Run drives the engine until ctx ends; then every live request ends with
// ErrStopped. It returns the error that stopped the loop, if any other.
// Call it once. After it returned nothing that posts to the loop (a
// stream's Cancel, a remote prefill's completion) blocks, and Submit
// returns ErrStopped.
func (e *Engine) Run(ctx context.Context) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: engine loop: %v", errInternal, r)
		}
		e.shutdown(err)
		e.exitOnce.Do(func() { close(e.exited) })
	}()
	for {
		e.drain()
		e.publishLoad()
		if e.sched.Idle() {
			select {
			case <-ctx.Done():
				return nil
			case <-e.wake:
				continue
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		e.expire()
		if err := e.step(); err != nil {
			return err
		}
		if err := e.sched.Err(); err != nil {
			return err // the scheduler's books are broken: stop, failing every request closed
		}
	}
}

func (e *Engine) drain() {
	for {
		select {
		case f := <-e.ctl:
			f()
		default:
			return
		}
	}
}

// expire aborts requests past their deadline.
func (e *Engine) expire() {
	now := e.now()
	e.mu.Lock()
	var late []cloison.RequestID
	for id, a := range e.active {
		if !a.req.Deadline.IsZero() && now.After(a.req.Deadline) {
			late = append(late, id)
		}
	}
	e.mu.Unlock()
	for _, id := range late {
		e.cancel(id, ErrDeadline)
	}
}

// step runs one scheduler step. An error stops the engine (fail closed).
// publishLoad updates the gauges Load reads; the loop calls it after every
// step and every batch of control messages (cancellations included).
func (e *Engine) publishLoad() {
	q, r := e.sched.Len()
	e.running.Store(int64(r))
	e.waiting.Store(int64(q))
}

func (e *Engine) step() error {
	defer e.publishLoad()
	rd := e.sched.Ready()
	e.markScheduled(rd)
	e.handle(e.sched.Events())
	for _, it := range rd.Remote {
		e.startRemote(it)
	}
	if len(rd.Scrub) > 0 {
		if err := e.cfg.Arena.ZeroPages(rd.Scrub); err != nil {
			return fmt.Errorf("engine: zeroing pages: %w", err)
		}
	}
	if len(rd.Batch) == 0 {
		e.handle(e.sched.Advance(rd, nil))
		return nil
	}
	batch := make([]model.Seq, len(rd.Batch))
	e.mu.Lock()
	for i, it := range rd.Batch {
		a := e.active[it.ID]
		// An encoder computes hidden states only (a request cancelled
		// meanwhile too: its rows are dropped below).
		batch[i] = model.Seq{Table: it.Table, Pos: it.Pos, Tokens: it.Tokens, All: it.All, Hidden: (a != nil && a.hidden != nil && it.All) || e.cfg.Model.Encoder}
	}

	for i, it := range rd.Batch {
		if a := e.active[it.ID]; a != nil {
			batch[i].Adapter = a.req.Adapter // its LoRA adapter's rows, none else's
		}
	}
	e.mu.Unlock()
	logits, err := e.cfg.Model.Forward(e.cfg.Arena, batch, false)
	if err != nil {
		e.failStep(rd, err)
		return nil
	}
	results := make([]Result, 0, len(rd.Batch))
	emits := make([]emit, 0, len(rd.Batch))
	now := e.now()
	e.mu.Lock()
	var scoredNow []*active
	var unscored []cloison.RequestID
	var embedded []struct {
		a   *active
		vec []float32
	}
	for i, it := range rd.Batch {
		a := e.active[it.ID]
		if a == nil {
			continue
		}
		row := logits[i]
		if batch[i].Hidden {
			copy(a.hidden[it.Pos*e.cfg.Model.DModel:], row)
			if it.Pos+len(it.Tokens) >= len(a.req.Prompt) && !a.sent {
				a.sent = true
				vec, err := e.cfg.Model.PoolHidden(a.hidden, len(a.req.Prompt))
				if err != nil {
					// A vector without a finite norm: fail closed.
					a.stream.failNext = err
					unscored = append(unscored, it.ID)
				} else {
					embedded = append(embedded, struct {
						a   *active
						vec []float32
					}{a, vec})
				}
				a.hidden = nil
			}
			continue
		}
		if it.All {
			done, err := e.score(a, it, row)
			if err != nil {
				// Non-finite logits: fail this request, closed (a prefill
				// chunk has no result to stop it: cancelled below).
				results = append(results, Result{ID: it.ID, Stop: true})
				a.stream.failNext = err
				unscored = append(unscored, it.ID)
				continue
			}
			if done {
				scoredNow = append(scoredNow, a)
			}
			row = row[len(row)-e.cfg.Model.Vocab:] // the last token's, for sampling
		}
		if !it.Logits {
			continue
		}
		if a.scores != nil && !a.sent {
			// A prompt asked scored reaches its first token unscored (a
			// position skipped): fail closed, never a token without them.
			results = append(results, Result{ID: it.ID, Stop: true})
			a.stream.failNext = fmt.Errorf("%w: prompt of %s not scored in full", errInternal, it.ID)
			continue
		}
		if a.generated < a.req.MinTokens {
			e.suppressStops(a, row)
		}
		c, err := a.sampler.Sample(row)
		if err != nil {
			// Non-finite logits: fail this request, closed.
			results = append(results, Result{ID: it.ID, Stop: true})
			a.stream.failNext = err
			continue
		}
		stop := e.stopToken(a, c.Token)
		em := emit{a: a, tok: c}
		if !stop {
			em.text, stop = a.appendText(e.cfg.Tokenizer.Piece(c.Token, a.req.SpecialText))
		}
		if a.grammar != nil && a.grammar.Closed() {
			stop = true // the grammar is complete and nothing may follow
		}
		if a.firstTok == 0 {
			a.firstTok = now.Sub(a.started)
		} else {
			em.gap = now.Sub(a.lastTok)
		}
		a.lastTok = now
		a.generated++
		results = append(results, Result{ID: it.ID, Token: c.Token, Stop: stop})
		emits = append(emits, em)
	}
	e.mu.Unlock()
	events := e.sched.Advance(rd, results)
	for _, id := range unscored {
		if ev, ok := e.sched.Cancel(id, errInternal); ok {
			events = append(events, ev)
		}
	}
	// The prompt's scores before its first token; tokens first, then ends:
	// a finished request's last token is streamed.
	for _, a := range scoredNow {
		if a.stream.failNext == nil {
			a.stream.push(Token{ID: PromptScores, Prompt: a.scores})
		}
	}
	for _, em := range embedded {
		if em.a.stream.failNext == nil {
			em.a.stream.push(Token{ID: PromptHidden, Embedding: em.vec})
		}
	}
	for _, em := range emits {
		if em.a.stream.failNext == nil {
			em.a.stream.push(Token{ID: em.tok.Token, Text: em.text, Logprob: em.tok.Logprob, Top: em.tok.Top, Gap: em.gap})
		}
	}
	e.handle(events)
	return nil
}

// score records the prompt scores item it's logits (one row per token)
// give: row j predicts the prompt token at it.Pos+j+1. A position already
// scored (recomputed after a preemption) is kept as it was. It reports
// whether the prompt is now scored in full, for the first time. Errors:
// sample.ErrInvalidParams (a non-finite logit: the request fails closed).
func (e *Engine) score(a *active, it Item, rows []float32) (bool, error) {
	if a.scores == nil || a.sent {
		return false, nil
	}
	v := e.cfg.Model.Vocab
	prompt := a.req.Prompt
	for j := range it.Tokens {
		p := it.Pos + j + 1 // the token row j predicts
		if p >= len(prompt) {
			break
		}
		if a.scored[p-1] {
			continue
		}
		lp, top, err := sample.Score(rows[j*v:(j+1)*v], prompt[p], a.req.Sampling.TopLogprobs)
		if err != nil {
			return false, err
		}
		a.scores[p-1] = Scored{Token: prompt[p], Logprob: lp, Top: top}
		a.scored[p-1] = true
		a.nscored++
	}
	if a.nscored < len(a.scores) || it.Pos+len(it.Tokens) < len(prompt) {
		return false, nil
	}
	a.sent = true
	return true, nil
}

type emit struct {
	a    *active
	tok  sample.Choice
	text string
	gap  time.Duration
}

// markScheduled stamps the requests a step schedules for the first time
// (Summary.Queued).
func (e *Engine) markScheduled(rd Ready) {
	if len(rd.Batch) == 0 && len(rd.Remote) == 0 {
		return
	}
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	mark := func(id cloison.RequestID) {
		if a := e.active[id]; a != nil && a.scheduled.IsZero() {
			a.scheduled = now
		}
	}
	for _, it := range rd.Batch {
		mark(it.ID)
	}
	for _, it := range rd.Remote {
		mark(it.ID)
	}
}

// suppressStops sets to -inf, in a's logits row, every token that would
// end a's generation: the model's end-of-generation tokens and a's stop
// tokens (GenerateRequest.MinTokens).
func (e *Engine) suppressStops(a *active, row []float32) {
	ban := func(tok int32) {
		if tok >= 0 && int(tok) < len(row) {
			row[tok] = float32(math.Inf(-1))
		}
	}
	tk := e.cfg.Tokenizer
	for _, tok := range []int32{tk.EOS, tk.EOT, tk.EOM} {
		ban(tok)
	}
	for tok := range a.stops {
		ban(tok)
	}
}

func (e *Engine) stopToken(a *active, tok int32) bool {
	if a.stops[tok] {
		return true
	}
	return !a.req.IgnoreEOS && e.cfg.Tokenizer.IsEOG(tok)
}

// appendText adds a token's bytes and returns the text that may be streamed
// now: complete UTF-8 that cannot be the start of a stop string. It reports
// whether a stop string matched (the text is then cut before it).
func (a *active) appendText(piece []byte) (string, bool) {
	before := len(a.bytes)
	a.bytes = append(a.bytes, piece...)
	text := a.bytes
	// Hold back an incomplete UTF-8 sequence at the end.
	safe := len(text)
	for i := max(0, len(text)-3); i < len(text); i++ {
		if !utf8.FullRune(text[i:]) {
			safe = i
			break
		}
	}
	stops := a.req.StopStrings
	if a.generated+1 < a.req.MinTokens {
		stops = nil // this token is not yet the min_tokens-th
	}
	for _, s := range stops {
		// A match ends in the new piece (text before it, even streamed
		// under min_tokens, was searched already).
		from := max(0, before-len(s)+1)
		if i := bytes.Index(text[from:], []byte(s)); i >= 0 {
			cut := from + i
			if a.req.IncludeStop {
				cut += len(s)
			}
			out := string(text[a.emitted:max(a.emitted, cut)])
			a.emitted = max(a.emitted, cut)
			a.stopped = true
			return out, true
		}
	}
	// Hold back a suffix that could begin a stop string.
	for _, s := range stops {
		for k := min(len(s)-1, safe-a.emitted); k > 0; k-- {
			if strings.HasPrefix(s, string(text[safe-k:safe])) {
				safe -= k
				break
			}
		}
	}
	if safe <= a.emitted {
		return "", false
	}
	out := string(text[a.emitted:safe])
	a.emitted = safe
	return out, false
}

// failStep handles a model error: a kernel tag mismatch fails (and withholds)
// every request whose table names the page; any other error fails the whole
// batch. Untouched requests recompute.
func (e *Engine) failStep(rd Ready, err error) {
	touched := map[cloison.RequestID]bool{}
	page := int32(-1)
	var tm *kernels.TagMismatchError
	var uw *kernels.UnwrittenError
	switch {
	case errors.As(err, &tm):
		page = tm.Page
	case errors.As(err, &uw):
		page = uw.Page
	}
	if page >= 0 {
		for _, it := range rd.Batch {
			for i := range it.Table.Len() {
				if it.Table.Page(i) == page {
					touched[it.ID] = true
				}
			}
		}
	}
	if len(touched) == 0 {
		for _, it := range rd.Batch {
			touched[it.ID] = true
		}
	}
	e.handle(e.sched.FailStep(rd, touched, err))
}

// handle delivers scheduler events to streams and hooks.
func (e *Engine) handle(events []Event) {
	for _, ev := range events {
		if ev.State == Queued {
			continue // preempted; will recompute
		}
		e.mu.Lock()
		a := e.active[ev.ID]
		e.mu.Unlock()
		if a == nil {
			continue
		}
		if a.stream.failNext != nil && ev.State != Failed {
			ev.State, ev.Err = Failed, a.stream.failNext
		}
		e.finish(a, ev)
	}
}

func (e *Engine) finish(a *active, ev Event) {
	e.mu.Lock()
	delete(e.active, ev.ID)
	e.mu.Unlock()
	a.stopCtx()
	now := e.now()
	sum := Summary{ID: ev.ID, Tenant: ev.Tenant, State: ev.State, Finish: ev.Finish, Code: cloison.ErrorCode(ev.Err),
		Prompt: ev.Prompt, Generated: a.generated, Cached: ev.Cached, Pages: ev.Pages, Preemptions: ev.Preemptions,
		Started: a.started, FirstToken: a.firstTok, Duration: now.Sub(a.started)}
	if a.req.Adapter != nil {
		sum.Adapter = a.req.Adapter.Digest
	}
	if !a.scheduled.IsZero() {
		sum.Queued = a.scheduled.Sub(a.started)
		if a.firstTok > 0 {
			sum.Prefill = a.started.Add(a.firstTok).Sub(a.scheduled)
			sum.Decode = a.lastTok.Sub(a.started.Add(a.firstTok))
		}
	}
	if sum.Prompt == 0 {
		sum.Prompt = len(a.req.Prompt)
	}
	a.stream.setSummary(sum)
	if ev.State == Failed && isIsolationFailure(ev.Err) {
		e.incident(a, ev, now)
		a.stream.end(fmt.Errorf("%w: %w", ErrWithheld, ev.Err), "")
	} else if ev.State == Finished {
		// Flush text held back for a possible stop string that never came.
		if !a.stopped && a.emitted < len(a.bytes) {
			a.stream.push(Token{ID: -1, Text: strings.ToValidUTF8(string(a.bytes[a.emitted:]), "\uFFFD")})
		}
		a.stream.end(nil, ev.Finish)
	} else {
		a.stream.end(ev.Err, "")
	}
	if e.cfg.OnFinish != nil {
		e.cfg.OnFinish(sum)
	}
}

// isIsolationFailure: any error coded isolation_violation, from the pool
// (ViolationError, stale lease) or the arena (tag mismatch, unwritten slots).
func isIsolationFailure(err error) bool {
	return cloison.ErrorCode(err) == cloison.CodeIsolationViolation
}

func (e *Engine) incident(a *active, ev Event, now time.Time) {
	if e.cfg.OnIncident == nil {
		return
	}
	in := Incident{Time: now, Tenant: ev.Tenant, Request: ev.ID, Err: ev.Err, Reason: ev.Err.Error()}
	var v *isolation.ViolationError
	var tm *kernels.TagMismatchError
	var uw *kernels.UnwrittenError
	switch {
	case errors.As(ev.Err, &v):
		in.Kind, in.Page, in.Owner, in.Reason = "pool-violation", v.Page, v.Owner, string(v.Reason)
	case errors.As(ev.Err, &tm):
		in.Kind, in.Page, in.Reason = "kernel-tag-mismatch", tm.Page, "tag-mismatch"
	case errors.As(ev.Err, &uw):
		in.Kind, in.Page, in.Reason = "kernel-unwritten", uw.Page, "unwritten-slot"
	case errors.Is(ev.Err, isolation.ErrStaleLease):
		in.Kind = "stale-lease"
	case errors.Is(ev.Err, ErrTransferIncomplete):
		in.Kind, in.Reason = "transfer-count", "transferred-not-reserved"
	default:
		in.Kind = "isolation"
	}
	e.cfg.OnIncident(in)
}

// shutdown ends every live request.
func (e *Engine) shutdown(cause error) {
	for _, tk := range e.tickets {
		tk.Cancel()
	}
	e.mu.Lock()
	e.stopped = true
	live := make([]*active, 0, len(e.active))
	for _, a := range e.active {
		live = append(live, a)
	}
	e.mu.Unlock()
	err := error(ErrStopped)
	if cause != nil {
		err = fmt.Errorf("%w: %w", ErrStopped, cause)
	}
	for _, a := range live {
		if ev, ok := e.sched.Cancel(a.req.ID, err); ok {
			ev.State = Aborted
			e.finish(a, ev)
		} else {
			e.finish(a, Event{ID: a.req.ID, Tenant: a.req.Tenant, State: Aborted, Err: err})
		}
	}
}

// Token is one streamed token. ID is -1 for a final flush of held-back text,
// PromptScores for the prompt's scores (Prompt; GenerateRequest.ScorePrompt).
type Token struct {
	ID      int32
	Text    string
	Logprob float64
	Top     []sample.TokenProb
	// Prompt holds, in the PromptScores token, the scores of prompt tokens
	// 1…len−1 (the first token has none).
	Prompt []Scored
	// Embedding holds, in the PromptHidden token, the prompt's pooled,
	// L2-normalised vector (GenerateRequest.Embed).
	Embedding []float32
	// Gap is the time since the request's previous token was sampled (the
	// inter-token latency); 0 for the first token and the flush.
	Gap time.Duration
}

// Stream delivers a request's tokens. Next never blocks the engine: tokens
// queue in the stream until read.
type Stream struct {
	ID       cloison.RequestID
	cancel   func(error)
	failNext error // set by the loop goroutine only

	mu      sync.Mutex
	summary *Summary     // guarded by mu; set before the stream ends
	queue   []Token      // guarded by mu
	done    bool         // guarded by mu
	err     error        // guarded by mu
	finish  FinishReason // guarded by mu
	notify  chan struct{}
}

func newStream(id cloison.RequestID) *Stream {
	return &Stream{ID: id, notify: make(chan struct{}, 1)}
}

func (s *Stream) setSummary(sum Summary) {
	s.mu.Lock()
	s.summary = &sum
	s.mu.Unlock()
}

// Summary returns the request's counts once the stream has ended (after Next
// returned io.EOF or an error).
func (s *Stream) Summary() (Summary, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.summary == nil || !s.done {
		return Summary{}, false
	}
	return *s.summary, true
}

func (s *Stream) push(t Token) {
	s.mu.Lock()
	s.queue = append(s.queue, t)
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) end(err error, finish FinishReason) {
	s.mu.Lock()
	if !s.done {
		s.done, s.err, s.finish = true, err, finish
		if err != nil && errors.Is(err, ErrWithheld) {
			s.queue = nil // withhold what was not yet read
		}
	}
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Next returns the next token; io.EOF after the last token of a normal
// finish; the request's error if it was aborted or failed. A failed request
// whose isolation could not be proven returns ErrWithheld at once, dropping
// tokens not yet read.
func (s *Stream) Next(ctx context.Context) (Token, error) {
	for {
		s.mu.Lock()
		if s.done && s.err != nil {
			err := s.err
			s.mu.Unlock()
			return Token{}, err
		}
		if len(s.queue) > 0 {
			t := s.queue[0]
			s.queue = s.queue[1:]
			s.mu.Unlock()
			return t, nil
		}
		if s.done {
			s.mu.Unlock()
			return Token{}, io.EOF
		}
		s.mu.Unlock()
		select {
		case <-s.notify:
		case <-ctx.Done():
			return Token{}, context.Cause(ctx)
		}
	}
}

// Finish returns the finish reason once the stream ended normally.
func (s *Stream) Finish() FinishReason {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.finish
}

// Cancel aborts the request (client gone).
func (s *Stream) Cancel() {
	if s.cancel != nil {
		s.cancel(ErrCanceled)
	}
}

// checkEmbed refuses an embedding request the model cannot serve
// (ErrNoPooling) or that asks for tokens too (ErrInvalidRequest's kind:
// sample.ErrInvalidParams), and anything but an embedding of an encoder
// (ErrEncoderOnly).
func (e *Engine) checkEmbed(r GenerateRequest) error {
	if !r.Embed {
		if r.Rank {
			return sample.ErrInvalidParams.Withf("a rank request is an embedding request")
		}
		if e.cfg.Model.Encoder {
			return ErrEncoderOnly
		}
		return nil
	}
	if rank := e.cfg.Model.Pooling == model.PoolRank; r.Rank && !rank {
		return ErrNoRankHead
	} else if rank && !r.Rank {
		return ErrRankModel
	}
	if e.cfg.Model.Pooling == model.PoolNone {
		return ErrNoPooling
	}
	if r.MaxTokens != 0 || r.ScorePrompt || r.Grammar != nil {
		return sample.ErrInvalidParams.Withf("an embedding request generates no tokens")
	}
	return nil
}
