package service

import (
	"errors"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// Errors of the request path (with ErrInvalidField and
// ErrLedgerUnavailable, ops.go). Transports map them through their one
// error table by code; compare with errors.Is.
var (
	// ErrUnknownModel: the request names a model this node does not serve.
	ErrUnknownModel = cloison.NewError(cloison.CodeModelNotFound, "model not found")
	// ErrIsolationPolicy: the KV pool cannot isolate the tenant as the
	// policy decision requires.
	ErrIsolationPolicy = cloison.NewError(cloison.CodeUnavailable, "the KV pool cannot apply the isolation the policy requires for this tenant")
)

// Config wires Requests. Every field is required unless marked optional.
type Config struct {
	Engine    Engine // *engine.Engine
	ModelName string
	// ModelDigest (optional) is the SHA-256 of the model file served,
	// recorded in every request.completed (zero: not recorded).
	ModelDigest audit.Digest
	// Adapters (optional) are the LoRA adapters registered for this
	// model, by tenant: a request names one as "<ModelName>:<name>"
	// (resolveModel). nil: none.
	Adapters *engine.Adapters
	// Model (optional) is the model's tokenizer and chat template, for
	// Tokenize and Detokenize.
	Model    Model
	Verifier *tenancy.Verifier
	Limiter  *tenancy.Limiter
	Decider  *policies.Decider
	Ledger   Recorder   // *postgres.Store
	Node     audit.Name // actor of the ledger events this node writes
	// Placement (optional): set on a decode node, whose prompts are
	// prefilled elsewhere; nil on a node that prefills itself.
	Placement Placement
	Logger    *slog.Logger // optional
	// LedgerTimeout bounds one ledger append on the request path (default 5 s).
	LedgerTimeout time.Duration
	// Tracer (optional) records the spans of every request; nil: a no-op
	// provider.
	Tracer trace.TracerProvider
	// Observer (optional) receives what the request path reports for
	// metrics and the access log; nil: NopObserver.
	Observer Observer
	// Gate (optional) takes one of the node's generation slots for tenant
	// t, held until Generate returns (the transport's stream caps, over
	// every transport together); its error refuses the request before its
	// policy decision, counted at StageCapacity.
	Gate func(t cloison.TenantID) (release func(), err error)
	// Served (optional) is what request.completed records of what one
	// sequence served — keyed digests of prompt and completion, sampling
	// — or nil when digests are off; nil: none recorded.
	Served func(t cloison.TenantID, greq engine.GenerateRequest, completion []int32, text string, clientSeed bool) *audit.Served
	// Embedded (optional) is Served for an embeddings request
	// (Responses.Embedded); nil: none recorded.
	Embedded func(t cloison.TenantID, inputs [][]int32, vecs [][]float32) *audit.Embedded
	// GrammarBytes is the byte budget of the cache of compiled
	// response_format grammars, shared fairly between tenants
	// (grammar.Cache); 0: grammar.DefaultCacheBytes.
	GrammarBytes int64
	// DefaultMaxTokens caps the completion of a request that names no
	// max_tokens (Request.DefaultMax); 0: no cap beyond the rest of the
	// tenant's context.
	DefaultMaxTokens int
}

// Requests is the request path: authentication, the policy decision and
// its limits, admission, the ledger rows that must precede and follow
// service, the engine's sequences of a request's choices, the refusal
// counts, and the durable incidents the engine and the transfer receiver
// report. It knows no transport: a transport decodes a request into
// Request, hands its tokens' destination as a Sink, and encodes the Result
// or the error. Safe for concurrent use.
type Requests struct {
	cfg    Config
	log    *slog.Logger
	tracer trace.Tracer
	obs    Observer
	*shared
}

// shared is what the request paths of every model a node serves share
// (Requests.For): one count of refusals, one set of incident writes, one
// grammar cache.
type shared struct {
	mu      sync.Mutex
	incOpen map[cloison.RequestID]bool // incidents already opened, guarded by mu

	grammars *grammar.Cache // compiled response_format grammars, per tenant

	refused refusals       // requests refused before service, until the next FlushRefusals
	writes  incidentWrites // incident writes in flight, drained by Close
}

// ServedModel is one further model a node serves beside Config's: its engine
// (its own KV pool, arena and attestation), name, digest, tokenizer and
// chat template.
type ServedModel struct {
	Engine Engine
	Name   string
	Digest audit.Digest
	Model  Model
	// Adapters (optional): the model's LoRA adapters (Config.Adapters).
	Adapters *engine.Adapters
}

// For returns the request path of model m, served beside s's own: the
// same verifier, limiter, policy, ledger, gate and observer (its
// ForModel(m.Name) where it has one: m's own series), the same
// refusal counts and incident writes, but m's engine, name, digest and
// tokenizer. What request.completed records of what was served
// (Config.Served, Config.Embedded) names m's digest.
func (s *Requests) For(m ServedModel) *Requests {
	cfg := s.cfg
	cfg.Engine, cfg.ModelName, cfg.ModelDigest, cfg.Model, cfg.Adapters = m.Engine, m.Name, m.Digest, m.Model, m.Adapters
	if f := cfg.Served; f != nil {
		cfg.Served = func(t cloison.TenantID, greq engine.GenerateRequest, completion []int32, text string, clientSeed bool) *audit.Served {
			sv := f(t, greq, completion, text, clientSeed)
			if sv != nil {
				sv.ModelDigest = m.Digest
			}
			return sv
		}
	}
	if f := cfg.Embedded; f != nil {
		cfg.Embedded = func(t cloison.TenantID, inputs [][]int32, vecs [][]float32) *audit.Embedded {
			e := f(t, inputs, vecs)
			if e != nil {
				e.ModelDigest = m.Digest
			}
			return e
		}
	}
	obs := s.obs
	if f, ok := obs.(interface{ ForModel(string) Observer }); ok {
		obs = f.ForModel(m.Name) // its requests counted under its own model
	}
	return &Requests{cfg: cfg, log: s.log, tracer: s.tracer, obs: obs, shared: s.shared}
}

// modelDigest is request.completed's model_digest (nil: none configured).
func (s *Requests) modelDigest() *audit.Digest {
	if s.cfg.ModelDigest.IsZero() {
		return nil
	}
	d := s.cfg.ModelDigest
	return &d
}

// New returns Requests. Errors: a config missing a required field.
func New(cfg Config) (*Requests, error) {
	if cfg.Engine == nil || cfg.Verifier == nil || cfg.Limiter == nil || cfg.Decider == nil || cfg.Ledger == nil ||
		cfg.ModelName == "" || cfg.Node == "" {
		return nil, errors.New("service: incomplete config")
	}
	if cfg.LedgerTimeout <= 0 {
		cfg.LedgerTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	obs := cfg.Observer
	if obs == nil {
		obs = NopObserver{}
	}
	return &Requests{cfg: cfg, log: log, tracer: tracing.Tracer(cfg.Tracer), obs: obs, shared: &shared{incOpen: map[cloison.RequestID]bool{},
		grammars: grammar.NewCache(cfg.GrammarBytes)}}, nil
}

// Request is one generation as the service sees it, whatever the
// transport: the prompt already tokenized (a chat rendered with the model's
// template), the sampling already read.
type Request struct {
	// ID is the request's id, the one the ledger records (the transport
	// answers it to the client before anything runs).
	ID    cloison.RequestID
	Model string
	// Prompt is the prompt's token ids.
	Prompt []int32
	// MaxTokens is the completion's maximum as asked; the policy's
	// max_tokens clamps it. 0 only with ScorePrompt: the prompt is scored
	// alone.
	MaxTokens int
	// DefaultMax: the request named no max_tokens (MaxTokens is then
	// ignored). It gets the rest of the context (ContextFor less the
	// prompt), capped by Config.DefaultMaxTokens, and after the policy's
	// decision by its max_tokens, and by what the tenant's context, KV
	// pages and token rate leave for n choices: a default never makes a
	// request refused that a smaller max_tokens would let through.
	DefaultMax bool
	// N is the number of choices (0 counts as 1).
	N int
	// Sampling is the request's sampling; Seeded says the client chose its
	// Seed (otherwise the service draws one).
	Sampling sample.Params
	Seeded   bool
	// Stop are the request's stop strings.
	Stop []string
	// StopTokens end the completion like the model's end-of-generation
	// tokens; IgnoreEOS lets the model's own ones through; MinTokens
	// suppresses all of them and the stop strings until that many tokens
	// are generated; IncludeStop keeps the matched stop string in the text
	// (engine.GenerateRequest).
	StopTokens  []int32
	IgnoreEOS   bool
	MinTokens   int
	IncludeStop bool
	// SpecialText: control tokens appear in the text (skip_special_tokens
	// false).
	SpecialText bool
	// Constraint (optional) constrains the output (response_format, tool
	// calls); Generate compiles it after admission.
	Constraint Constraint
	// ScorePrompt: every choice's sequence scores the prompt
	// (engine.GenerateRequest.ScorePrompt).
	ScorePrompt bool
	// CacheSalt (optional) narrows the tenant's prefix cache to requests
	// with the same salt (engine.GenerateRequest.CacheSalt).
	CacheSalt []byte
}

func (q Request) choices() int { return max(q.N, 1) }

// Sink is how a transport receives one generation from Generate. Every
// field is optional.
type Sink struct {
	// Decided is called once with the policy decision's id, before the
	// decision is ledgered (so that even a refusal carries it).
	Decided func(decisionID string)
	// Started is called once the engine accepted the request: from here
	// on the transport has begun its response, and a failure must end it
	// with an error, never a normal finish.
	Started func()
	// Token is called for every token (and held-back text flush, ID < 0)
	// of choice (0 ≤ choice < n) in order, from one goroutine; it must not
	// block for long (the streams buffer meanwhile).
	Token func(choice int, tok engine.Token)
}

// Result is the end of a successful generation.
type Result struct {
	Finish     engine.FinishReason   // choice 0's
	Finishes   []engine.FinishReason // every choice's, in index order
	Prompt     int                   // prompt tokens (once, whatever n)
	Completion int                   // generated tokens, all choices together
	// Receipt is request.completed's signed receipt (audit.Receipt,
	// encoded: one base64 line), which the transports hand the client.
	Receipt string
}
