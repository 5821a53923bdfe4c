package api

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// Errors of the API layer.
var (
	// ErrLedgerUnavailable: the ledger could not record the request; the
	// platform refuses unaudited service (HTTP 503).
	ErrLedgerUnavailable = service.ErrLedgerUnavailable
	ErrUnknownModel      = service.ErrUnknownModel
	ErrNoToken           = cloison.NewError(cloison.CodeUnauthenticated, "missing bearer token")
	ErrIsolationPolicy   = service.ErrIsolationPolicy
	ErrMethod            = cloison.NewError(cloison.CodeInvalid, "method not allowed")
)

// Config wires a Server. Every field is required unless marked optional.
type Config struct {
	Engine    Engine // *engine.Engine
	ModelName string
	// ModelDigest (optional) is the SHA-256 of the model file, recorded
	// in every request.completed. Further models: AddModel.
	ModelDigest audit.Digest
	// Adapters (optional) are the LoRA adapters registered for the
	// model, by tenant (requested as "<model>:<adapter>"); nil: none.
	Adapters  *engine.Adapters
	Tokenizer *tokenizer.Tokenizer
	Chat      *chat.Template
	Verifier  *tenancy.Verifier
	Limiter   *tenancy.Limiter
	Decider   *policies.Decider
	Ledger    Ledger // *postgres.Store
	Tenants   *tenancy.Store
	Keys      *tenancy.KeyRing // optional: JWKS endpoint and key rotation
	Node      audit.Name       // actor of the ledger events this node writes
	// Placement (optional): set on a decode node, whose prompts are
	// prefilled elsewhere; nil on a node that prefills itself.
	Placement Placement
	Logger    *slog.Logger // optional
	MaxBody   int64        // optional: DefaultMaxBody
	// MaxAdapterBytes bounds a tenant's adapter upload (POST /v1/adapters;
	// optional: DefaultMaxAdapterBytes).
	MaxAdapterBytes int64
	// MaxStreams and MaxStreamsPerTenant (optional, 0: unbounded) bound
	// the generations in flight on this node, over HTTP and gRPC together:
	// beyond them a request is refused before its policy decision, with
	// ErrTooManyStreams (503) or ErrTenantStreams (429).
	MaxStreams, MaxStreamsPerTenant int
	// LedgerTimeout bounds one ledger append on the request path (default 5 s).
	LedgerTimeout time.Duration
	// Verify says which checkpoint keys and external directory the
	// ledger-verify route trusts.
	Verify audit.VerifyOptions
	// ExportKey (optional) signs the manifests of compliance exports made
	// through the gRPC Export method; without it Export is refused.
	ExportKey ed25519.PrivateKey
	// Streams (optional) bounds compliance streams: ledger ranges,
	// exports and verifications (streams.go).
	Streams StreamLimits
	// Metrics (optional) bounds the tenant label of the metrics.
	Metrics MetricsConfig
	// Responses (optional) turns on keyed digests of what was served,
	// reports and replay (responses.go).
	Responses Responses
	// Tracer (optional) records the spans of every request (trace.go,
	// internal/tracing); nil: a no-op provider (W3C traceparent is still
	// propagated, nothing is recorded).
	Tracer trace.TracerProvider
	// ServerTiming answers every HTTP request with a Server-Timing
	// trailer: the request's time in each of its spans (auth, admission,
	// policy, ledger.append, queue, prefill, decode, …) and in all
	// (timing.go). For benchmarks (cloisonctl bench serve's breakdown);
	// off by default.
	ServerTiming bool
	// Transparency (optional) reports the ledger's signing refusals and the
	// witnesses' refusals for the metrics (transparency.go).
	Transparency Transparency
	// GrammarBytes is the byte budget of the cache of compiled
	// response_format grammars, shared fairly between tenants (0:
	// grammar.DefaultCacheBytes).
	GrammarBytes int64
	// MaxN bounds the choices of one request (n; default DefaultMaxN):
	// a request asking for more is refused (400) before anything runs.
	MaxN int
	// ModelAdmin (optional) loads and unloads models at run time
	// (models.go); nil: the model routes answer not found.
	ModelAdmin ModelAdmin
	// AdapterAdmin (optional) registers tenants' LoRA adapters at run
	// time (*node.Node); nil: the adapter routes answer not found.
	AdapterAdmin AdapterAdmin
	// DefaultMaxTokens caps the completion of a request that names no
	// max_tokens (service.Config.DefaultMaxTokens); 0: the rest of the
	// context, as vLLM and OpenAI do.
	DefaultMaxTokens int
}

// Server serves the OpenAI-compatible API, the admin and compliance APIs,
// health and readiness over HTTP (Handler), the Prometheus metrics on a
// handler of their own (MetricsHandler, for a dedicated listener), and the same
// operations over gRPC (GRPCServer). Both transports run one inference path
// (service.Requests.Generate, through generate) and the same admin and
// compliance operations; they differ only in how messages are encoded.
type Server struct {
	cfg     Config
	log     *slog.Logger
	tracer  trace.Tracer
	metrics *Metrics
	req     *service.Requests // the request path: decision, admission, ledger, choices, incidents
	gate    *streamGate       // generations in flight (transport.go)
	streams *complianceGate   // compliance streams (streams.go)

	resp *responseState // reports and replays (responses.go)
	ops  *operations    // the service-layer operations (ops.go)

	// modelSet are the further models served (models.go); primary, on a
	// model's view of the server, is the server it was made from.
	modelSet *modelSet
	primary  *Server
}

// NewServer returns a Server.
func NewServer(cfg Config) (*Server, error) {
	if cfg.Responses.ReportWebhook != "" && len(cfg.Responses.WebhookSecret) < 16 {
		return nil, fmt.Errorf("api: a report webhook needs a signing secret of at least 16 bytes")
	}
	if cfg.Engine == nil || cfg.Tokenizer == nil || cfg.Verifier == nil || cfg.Limiter == nil ||
		cfg.Decider == nil || cfg.Ledger == nil || cfg.Tenants == nil || cfg.ModelName == "" || cfg.Node == "" {
		return nil, fmt.Errorf("api: incomplete server config")
	}
	m, err := service.NewModel(cfg.ModelName, cfg.Tokenizer, cfg.Chat)
	if err != nil {
		return nil, err
	}
	cfg.Chat = m.Chat
	if cfg.MaxAdapterBytes <= 0 {
		cfg.MaxAdapterBytes = DefaultMaxAdapterBytes
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxN <= 0 {
		cfg.MaxN = DefaultMaxN
	}
	if cfg.ServerTiming {
		cfg.Tracer = newTimingProvider(cfg.Tracer)
	}
	if cfg.LedgerTimeout <= 0 {
		cfg.LedgerTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, log: log, tracer: tracing.Tracer(cfg.Tracer), gate: &streamGate{total: cfg.MaxStreams, perTenant: cfg.MaxStreamsPerTenant},
		streams: newComplianceGate(cfg.Streams), modelSet: &modelSet{views: map[string]*Server{}}}
	SetErrorLog(log)
	s.metrics = newMetrics(s)
	s.resp = newResponseState(s)
	s.req, err = service.New(service.Config{Engine: cfg.Engine, ModelName: cfg.ModelName, ModelDigest: cfg.ModelDigest, Adapters: cfg.Adapters, Model: m, Verifier: cfg.Verifier, Limiter: cfg.Limiter,
		Decider: cfg.Decider, Ledger: cfg.Ledger, Node: cfg.Node, Placement: cfg.Placement, Logger: log, LedgerTimeout: cfg.LedgerTimeout,
		Tracer: cfg.Tracer, Observer: observer{s, s.metrics.modelMetrics}, Gate: s.gate.acquire, Served: s.served, Embedded: s.embedded,
		GrammarBytes:     cfg.GrammarBytes,
		DefaultMaxTokens: cfg.DefaultMaxTokens})
	if err != nil {
		return nil, err
	}
	s.ops = newOperations(s)
	return s, nil
}

var timeNow = time.Now

// Handler returns the HTTP routes.
//
//	GET  /healthz                      liveness (no auth)
//	GET  /health                       200 when ready, else 503; no body (no auth)
//	GET  /readyz                       readiness: every model's attestation passed and engine runs, ledger reachable (no auth, no data)
//	GET  /.well-known/jwks.json        public signing keys (no auth)
//	GET  /v1/models                    scope infer
//	GET  /v1/models/{id}               scope infer (404 for a model the tenant cannot use)
//	POST /tokenize, /detokenize        scope infer, metered (openai_extras.go)
//	POST /v1/adapters, DELETE /v1/adapters/{name}  scope adapters:write: the tenant's own LoRA adapters (adapters.go)
//	GET  /v1/attestation               any valid token: the capacity attestation (?model=ID: that model's)
//	POST /v1/completions               scope infer
//	POST /v1/chat/completions          scope infer
//	POST /v1/responses                 scope infer (respapi.go)
//	GET, DELETE /v1/responses/{id}     scope infer: the tenant's stored responses
//	/admin/v1/...                      scope admin (admin.go)
//	/compliance/v1/...                 scopes compliance:read / compliance:write (compliance.go)
//	GET  /log/checkpoint, /log/tile/... the served log, C2SP tlog-tiles (no auth; servedlog.go)
//
// An unknown route gets a JSON 404 and a known route with another method a
// JSON 405 with Allow (jsonFallback). The Authorization scheme is
// case-insensitive.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /readyz", s.ready)
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /.well-known/jwks.json", s.jwks)
	mux.Handle("GET /v1/models", s.auth(s.models, tenancy.ScopeInfer))
	mux.Handle("GET /v1/models/{id...}", s.auth(func(w http.ResponseWriter, r *http.Request) { s.view(r.PathValue("id")).model(w, r) }, tenancy.ScopeInfer))
	mux.Handle("POST /tokenize", s.auth(s.byModel((*Server).tokenize), tenancy.ScopeInfer))
	mux.Handle("POST /v1/adapters", s.auth(s.uploadAdapter, tenancy.ScopeAdaptersWrite))
	mux.Handle("DELETE /v1/adapters/{name}", s.auth(s.deleteOwnAdapter, tenancy.ScopeAdaptersWrite))
	mux.Handle("POST /detokenize", s.auth(s.byModel((*Server).detokenize), tenancy.ScopeInfer))
	mux.Handle("GET /v1/attestation", s.auth(s.attestation))
	// A request is served by the model its body names (models.go).
	mux.Handle("POST /v1/completions", s.auth(s.byModel((*Server).completions), tenancy.ScopeInfer))
	mux.Handle("POST /v1/chat/completions", s.auth(s.byModel((*Server).chatCompletions), tenancy.ScopeInfer))
	mux.Handle("POST /v1/embeddings", s.auth(s.byModel((*Server).embeddings), tenancy.ScopeInfer))
	mux.Handle("POST /v1/rerank", s.auth(s.byModel((*Server).rerank), tenancy.ScopeInfer))
	mux.Handle("POST /v1/score", s.auth(s.byModel((*Server).score), tenancy.ScopeInfer))
	s.adminRoutes(mux)
	s.complianceRoutes(mux)
	s.responseRoutes(mux)
	s.respAPIRoutes(mux)
	s.servedLogRoutes(mux)
	return s.serverTiming(s.traceHTTP(s.accessLog(s.recoverer(jsonFallback(mux)))))
}

// recoverer turns a panic in a handler into a 500 without its text.
func (s *Server) recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "path", r.URL.Path, "panic", fmt.Sprint(v))
				WriteHTTPError(w, errors.New("panic"))
			}
		}()
		h.ServeHTTP(w, r)
	})
}

type principalKey struct{}

// auth authenticates the bearer token and requires scopes.
func (s *Server) auth(h http.HandlerFunc, scopes ...tenancy.Scope) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, ok := bearerToken(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="cloison"`)
			WriteHTTPError(w, ErrNoToken)
			return
		}
		p, err := s.req.Authenticate(r.Context(), raw)
		if err == nil {
			accessOf(r.Context()).setTenant(p.Tenant)
			err = p.Require(scopes...)
		}
		if err == nil {
			if err = bindConn(r.Context(), p.Tenant); err != nil {
				w.Header().Set("Connection", "close") // HTTP/2: GOAWAY once idle
				err = s.refuse(p.Tenant, stageCapacity, err)
			}
		}
		if err != nil {
			if cloison.ErrorCode(err) == cloison.CodeUnauthenticated {
				w.Header().Set("WWW-Authenticate", `Bearer realm="cloison", error="invalid_token"`)
			}
			WriteHTTPError(w, err)
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), principalKey{}, p)))
	})
}

func principal(r *http.Request) tenancy.Principal {
	p, _ := r.Context().Value(principalKey{}).(tenancy.Principal)
	return p
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// NewRequestID returns a fresh request id.
func NewRequestID() cloison.RequestID {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return cloison.RequestID("req-" + hex.EncodeToString(b[:]))
}

// append and stage are service.Requests' Append and Stage, for the
// operations that ledger what they do (admin, compliance, responses).
func (s *Server) append(ctx context.Context, tenant cloison.TenantID, p audit.Payload) (audit.Record, error) {
	return s.req.Append(ctx, tenant, p)
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if err := s.readiness(r.Context()); err != nil {
		writeJSON(w, 503, map[string]string{"status": "not ready", "reason": err.Error()})
		return
	}
	writeJSON(w, 200, map[string]string{"status": "ready"})
}

// health answers GET /health, the probe of vLLM, SGLang and llama.cpp:
// 200 when the node serves (readiness: attestation passed, ledger
// answers), 503 otherwise; no token asked, and no body, so that nothing
// about the node is told to whoever asks.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.readiness(r.Context()) != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (s *Server) jwks(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Keys == nil {
		WriteHTTPError(w, cloison.NewError(cloison.CodeNotFound, "no key ring"))
		return
	}
	s.cfg.Keys.ServeHTTP(w, r)
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	data := []map[string]any{}
	for _, v := range s.views() { // only the models the tenant may use
		if p.TenantRecord.Allows(v.cfg.ModelName) {
			data = append(data, v.modelEntry(p))
			for _, id := range v.req.AdapterModels(p) { // the tenant's own adapters only
				data = append(data, v.adapterEntry(p, id))
			}
		}
	}
	writeJSON(w, 200, map[string]any{"object": "list", "data": data})
}

// contextFor is the context a tenant can actually use
// (service.Requests.ContextFor): what the API advertises to the tenant.
func (s *Server) contextFor(p tenancy.Principal) int { return s.req.ContextFor(p) }

// attestation answers GET /v1/attestation: the capacity attestation of the
// node's first model, or with ?model=ID of that model's pool (404
// model_not_found, as everywhere, for one not served or not the tenant's
// to use).
func (s *Server) attestation(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	if id := r.URL.Query().Get("model"); id != "" {
		v := s.view(id)
		if v.cfg.ModelName != id || !p.TenantRecord.Allows(id) {
			WriteHTTPError(w, ErrUnknownModel.Withf("%q", truncate(id, maxFieldName)))
			return
		}
		s = v
	}
	a, tp := s.tenantAttestation(p)
	writeJSON(w, 200, struct {
		attest.Attestation
		Tenant TenantPlacement `json:"tenant"`
	}{a, tp})
}

// TenantPlacement is what GET /v1/attestation (and gRPC GetAttestation)
// tells the calling tenant: service.TenantPlacement.
type TenantPlacement = service.TenantPlacement

// tenantAttestation is the attestation as p may see it and p's placement
// (service.Requests.TenantAttestation).
func (s *Server) tenantAttestation(p tenancy.Principal) (attest.Attestation, TenantPlacement) {
	return s.req.TenantAttestation(p)
}

// inference is what both completion routes hand to serve.
type inference struct {
	common      *Common
	prompt      []int32
	logprobs    bool
	topLogprobs int
	chat        bool
	tools       *service.ToolUse   // nil: no tool calls are parsed
	constraint  service.Constraint // response_format or tool calls, compiled after admission
	// echo is the prompt text that precedes the completion in a
	// completions choice (echo: true); "" otherwise.
	echo string
	// scorePrompt (echo with logprobs, or echo with max_tokens 0): every
	// choice's engine sequence scores the prompt
	// (engine.GenerateRequest.ScorePrompt), and the echo carries the
	// prompt's logprobs.
	scorePrompt bool
	// echoScored: the prompt is scored for its echo (the legacy logprobs
	// then start with the prompt's tokens); scorePrompt without it is
	// prompt_logprobs alone.
	echoScored bool
}

// scoreTop is the alternatives the engine computes per token: the
// request's logprobs', or prompt_logprobs' when more (each answer keeps
// its own count: collector.top, promptLogprobs).
func (in inference) scoreTop() int {
	if k := in.common.PromptLogprobs; k != nil {
		return max(in.topLogprobs, *k)
	}
	return in.topLogprobs
}

// scoreEcho reports whether the legacy logprobs start with the prompt's.
func (in inference) scoreEcho() bool { return in.echoScored }

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	req, err := DecodeCompletion(r.Body, s.cfg.MaxBody)
	if err == nil {
		err = s.checkN(&req.Common)
	}
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	if req.Prompt.Batch != nil {
		s.serveBatch(w, r, req)
		return
	}
	in, err := s.completionInference(r.Context(), principal(r), req, *req.Prompt, decisionHeader(w))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	s.serve(w, r, in)
}

// completionInference is one prompt of a completions request made ready
// for generate: tokenized (after Preadmit: textFor, decided as there),
// truncated, with its echo and scoring.
func (s *Server) completionInference(ctx context.Context, p tenancy.Principal, req *CompletionRequest, pr Prompt, decided func(string)) (inference, error) {
	suffix := ""
	if req.Suffix != nil {
		suffix = *req.Suffix
	}
	prompt, err := s.textFor(ctx, p, &req.Common, decided).CompletionPrompt(pr.Text, pr.Tokens, pr.IsIDs, suffix)
	if err != nil {
		return inference{}, err
	}
	prompt = req.Common.truncated(prompt)
	top := 0
	if req.Logprobs != nil {
		top = *req.Logprobs
	}
	in := inference{common: &req.Common, prompt: prompt, logprobs: req.Logprobs != nil, topLogprobs: top, constraint: req.Constraint}
	if req.Echo {
		// The prompt as sent; token ids are echoed as their text (control
		// tokens included, as they were sent).
		in.echo = pr.Text
		if pr.IsIDs {
			in.echo = s.cfg.Tokenizer.Decode(pr.Tokens, true)
		}
		in.scorePrompt = req.Logprobs != nil || req.Common.MaxNew() == 0
		in.echoScored = in.scorePrompt
	}
	if req.Common.PromptLogprobs != nil {
		in.scorePrompt = true
	}
	return in, nil
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	req, err := DecodeChat(r.Body, s.cfg.MaxBody)
	if err == nil {
		err = s.checkN(&req.Common)
	}
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	in, err := s.chatInference(r.Context(), principal(r), req, decisionHeader(w))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	s.serve(w, r, in)
}

// chatInference is a decoded chat request made ready for generate
// (service.Model.PrepareChat: its tools checked against the model's
// template, its grammar, its prompt rendered). The Responses API goes
// through it too (respapi.go). The prompt is pre-admitted for p before it
// is tokenized (textFor; decided as there). Errors: PrepareChat's;
// Preadmit's.
func (s *Server) chatInference(ctx context.Context, p tenancy.Principal, req *ChatRequest, decided func(string)) (inference, error) {
	use, _ := req.toolUse() // checked by DecodeChat
	o, err := req.templateOptions(s.cfg.Chat)
	if err != nil {
		return inference{}, err
	}
	prompt, c, err := s.textFor(ctx, p, &req.Common, decided).PrepareChatWith(req.Messages, use, service.Constraint{Schema: req.Schema, Choice: req.Choice, Syntax: req.Syntax, Grammar: req.Grammar, Whitespace: req.Whitespace}, o)
	if err != nil {
		return inference{}, err
	}
	prompt = req.Common.truncated(prompt)
	top := 0
	if req.TopLogprobs != nil {
		top = *req.TopLogprobs
	}
	return inference{common: &req.Common, prompt: prompt, logprobs: req.Logprobs, topLogprobs: top, chat: true, tools: use, constraint: c,
		scorePrompt: req.Common.PromptLogprobs != nil}, nil
}

// text is the served model's tokenizer and chat template as the service
// uses them (prompts, tool calls).
func (s *Server) text() service.Model {
	return service.Model{Name: s.cfg.ModelName, Tokenizer: s.cfg.Tokenizer, Chat: s.cfg.Chat}
}

// textFor is text() for a request of p with c's model and choices: its
// prompt, once its length is known, passes Preadmit (the model, the
// policy, the limits and the tenant's quotas on a lower bound of its
// tokens) before it is tokenized, so that a request they refuse costs no
// tokenization.
// decided (optional) receives the id of the decision that refused it.
func (s *Server) textFor(ctx context.Context, p tenancy.Principal, c *Common, decided func(string)) service.Model {
	q := service.Preadmission{Model: c.Model, N: 1, MaxTokens: -1, Decided: decided}
	if c.N != nil {
		q.N = *c.N
	}
	if !c.DefaultMax() {
		q.MaxTokens = c.MaxNew()
	}
	m := s.text()
	m.Admit = func(promptBytes int) error {
		q.PromptBytes = promptBytes
		return s.req.Preadmit(ctx, p, q)
	}
	return m
}

// decisionHeader sets the decision id of an HTTP answer (textFor's
// decided, Sink.Decided).
func decisionHeader(w http.ResponseWriter) func(string) {
	return func(d string) { w.Header().Set("X-Cloison-Decision-Id", d) }
}

// genResult is the end of a successful generation.
type genResult = service.Result

// generate hands one decoded inference to the request path
// (service.Requests.Generate: the decision ledgered BEFORE the engine gets
// the request, request.completed ledgered BEFORE a nil error), shared by
// the HTTP routes and gRPC Generate. A nil error means the transport may
// send its normal finish; any error — before or after sink.Started — means
// it must end the response with that error.
func (s *Server) generate(ctx context.Context, p tenancy.Principal, id cloison.RequestID, in inference, sink service.Sink) (genResult, error) {
	return s.req.Generate(ctx, p, in.request(id), sink)
}

// request is in as the service takes it: the fields that reach the policy,
// the engine and the ledger; what only shapes the answer (echo, tools,
// logprobs' form) stays with the transport.
func (in inference) request(id cloison.RequestID) service.Request {
	q := service.Request{ID: id, Model: in.common.Model, Prompt: in.prompt, MaxTokens: in.common.MaxNew(), N: in.choices(),
		Sampling: in.common.Sampling(in.logprobs, in.scoreTop()), Seeded: in.common.Seed != nil, Stop: in.common.Stop,
		Constraint: in.constraint, ScorePrompt: in.scorePrompt}
	q.StopTokens, q.IgnoreEOS, q.MinTokens, q.IncludeStop = in.common.stopping()
	q.DefaultMax = in.common.DefaultMax()
	q.SpecialText = in.common.SkipSpecial != nil && !*in.common.SkipSpecial
	if in.common.CacheSalt != nil {
		q.CacheSalt = []byte(*in.common.CacheSalt)
	}
	return q
}

// serve answers one HTTP inference request through generate.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, in inference) {
	id := NewRequestID()
	w.Header().Set("X-Request-Id", string(id))
	cs := make([]*collector, in.choices())
	for i := range cs {
		cs[i] = newCollector(s, in)
	}
	sink := service.Sink{Decided: func(d string) { w.Header().Set("X-Cloison-Decision-Id", d) }, Token: func(i int, tok engine.Token) { cs[i].add(tok) }}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var sse *sseWriter
	if in.common.Stream {
		sse = s.newSSE(w, id, in, cs)
		sse.cancel = cancel
		sink.Started, sink.Token = sse.begin, sse.token
	}
	res, err := s.generate(ctx, principal(r), id, in, sink)
	switch {
	case sse != nil && sse.begun:
		sse.end(res, err)
	case err != nil:
		WriteHTTPError(w, err)
	default:
		w.Header().Set(ReceiptHeader, res.Receipt)
		s.fullResponse(w, id, in, cs, res)
	}
}

// ReceiptHeader carries an acknowledged request's receipt
// (audit.Receipt: request.completed's leaf hash, tenant, request, time and
// deadline, signed by the log key; one base64 line): a header of a JSON
// answer, and of a streamed one the trailer of the same name and an SSE
// comment line ": cloison-receipt <receipt>" before "data: [DONE]" (the
// entry is written after the last token, when the headers are long sent;
// SSE parsers, the OpenAI SDKs' included, skip comments).
const ReceiptHeader = "Cloison-Receipt"

// sanitizeName maps a reason to the ledger's Name alphabet.
func sanitizeName(s string) string { return service.SanitizeName(s) }
