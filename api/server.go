package api

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// Errors of the API layer.
var (
	// ErrLedgerUnavailable: the ledger could not record the request; the
	// platform refuses unaudited service (HTTP 503).
	ErrLedgerUnavailable = cloison.NewError(cloison.CodeUnavailable, "the audit ledger is unavailable; no unaudited service")
	ErrUnknownModel      = cloison.NewError(cloison.CodeNotFound, "model not found")
	ErrNoToken           = cloison.NewError(cloison.CodeUnauthenticated, "missing bearer token")
	ErrIsolationPolicy   = cloison.NewError(cloison.CodeUnavailable, "the KV pool cannot apply the isolation the policy requires for this tenant")
	ErrMethod            = cloison.NewError(cloison.CodeInvalid, "method not allowed")
)

// Config wires a Server. Every field is required unless marked optional.
type Config struct {
	Engine    Engine // *engine.Engine
	ModelName string
	Tokenizer *tokenizer.Tokenizer
	Chat      *chat.Template
	Verifier  *tenancy.Verifier
	Limiter   *tenancy.Limiter
	Decider   *policies.Decider
	Ledger    Ledger // *auditpg.Store
	Tenants   *tenancy.Store
	Keys      *tenancy.KeyRing // optional: JWKS endpoint and key rotation
	Node      audit.Name       // actor of the ledger events this node writes
	// Placement (optional): set on a decode node, whose prompts are
	// prefilled elsewhere; nil on a node that prefills itself.
	Placement Placement
	Logger    *slog.Logger // optional
	MaxBody   int64        // optional: DefaultMaxBody
	// MaxStreams and MaxStreamsPerTenant (optional, 0: unbounded) bound
	// the generations in flight on this node, over HTTP and gRPC together:
	// beyond them a request is refused before its policy decision, with
	// ErrTooManyStreams (503) or ErrTenantStreams (429).
	MaxStreams, MaxStreamsPerTenant int
	// LedgerTimeout bounds one ledger append on the request path (default 5 s).
	LedgerTimeout time.Duration
	// Verify says which checkpoint keys and external directory the
	// ledger-verify route trusts.
	Verify auditpg.VerifyOptions
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
	// MaxN bounds the choices of one request (n; default DefaultMaxN):
	// a request asking for more is refused (400) before anything runs.
	MaxN int
}

// Server serves the OpenAI-compatible API, the admin and compliance APIs,
// health and readiness over HTTP (Handler), the Prometheus metrics on a
// handler of their own (MetricsHandler, for a dedicated listener), and the same
// operations over gRPC (GRPCServer). Both transports run one inference path
// (generate) and the same admin and compliance operations; they differ only
// in how messages are encoded.
type Server struct {
	cfg     Config
	log     *slog.Logger
	tracer  trace.Tracer
	metrics *Metrics
	gate    *streamGate     // generations in flight (transport.go)
	streams *complianceGate // compliance streams (streams.go)

	mu       sync.Mutex
	incOpen  map[cloison.RequestID]bool // incidents already opened, guarded by mu
	ledgerOK time.Time                  // last successful ledger round trip, guarded by mu

	refused refusals       // requests refused before service, until the next FlushRefusals
	writes  incidentWrites // incident writes in flight, drained by Close
	resp    *responseState // reports and replays (responses.go)
	ops     *operations    // the service-layer operations (ops.go)
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
	if cfg.Chat == nil {
		var err error
		if cfg.Chat, err = chat.New(cfg.Tokenizer.ChatTemplate, tokenString(cfg.Tokenizer, cfg.Tokenizer.BOS), tokenString(cfg.Tokenizer, cfg.Tokenizer.EOS)); err != nil {
			return nil, err
		}
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = DefaultMaxBody
	}
	if cfg.MaxN <= 0 {
		cfg.MaxN = DefaultMaxN
	}
	if cfg.LedgerTimeout <= 0 {
		cfg.LedgerTimeout = 5 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{cfg: cfg, log: log, tracer: tracing.Tracer(cfg.Tracer), incOpen: map[cloison.RequestID]bool{}, gate: &streamGate{total: cfg.MaxStreams, perTenant: cfg.MaxStreamsPerTenant},
		streams: newComplianceGate(cfg.Streams)}
	SetErrorLog(log)
	s.metrics = newMetrics(s)
	s.resp = newResponseState(s)
	s.ops = newOperations(s)
	return s, nil
}

var timeNow = time.Now

func tokenString(t *tokenizer.Tokenizer, id int32) string {
	if id < 0 {
		return ""
	}
	return t.Token(id)
}

// Handler returns the HTTP routes.
//
//	GET  /healthz                      liveness (no auth)
//	GET  /readyz                       readiness: attestation passed and ledger reachable (no auth, no data)
//	GET  /.well-known/jwks.json        public signing keys (no auth)
//	GET  /v1/models                    scope infer
//	GET  /v1/models/{id}               scope infer (404 for a model the tenant cannot use)
//	POST /tokenize, /detokenize        scope infer, metered (openai_extras.go)
//	GET  /v1/attestation               any valid token: the capacity attestation
//	POST /v1/completions               scope infer
//	POST /v1/chat/completions          scope infer
//	POST /v1/responses                 scope infer (respapi.go)
//	GET, DELETE /v1/responses/{id}     scope infer: the tenant's stored responses
//	/admin/v1/...                      scope admin (admin.go)
//	/compliance/v1/...                 scopes compliance:read / compliance:write (compliance.go)
//
// An unknown route gets a JSON 404 and a known route with another method a
// JSON 405 with Allow (jsonFallback). The Authorization scheme is
// case-insensitive.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { writeJSON(w, 200, map[string]string{"status": "ok"}) })
	mux.HandleFunc("GET /readyz", s.ready)
	mux.HandleFunc("GET /.well-known/jwks.json", s.jwks)
	mux.Handle("GET /v1/models", s.auth(s.models, tenancy.ScopeInfer))
	mux.Handle("GET /v1/models/{id...}", s.auth(s.model, tenancy.ScopeInfer))
	mux.Handle("POST /tokenize", s.auth(s.tokenize, tenancy.ScopeInfer))
	mux.Handle("POST /detokenize", s.auth(s.detokenize, tenancy.ScopeInfer))
	mux.Handle("GET /v1/attestation", s.auth(s.attestation))
	mux.Handle("POST /v1/completions", s.auth(s.completions, tenancy.ScopeInfer))
	mux.Handle("POST /v1/chat/completions", s.auth(s.chatCompletions, tenancy.ScopeInfer))
	s.adminRoutes(mux)
	s.complianceRoutes(mux)
	s.responseRoutes(mux)
	s.respAPIRoutes(mux)
	return s.traceHTTP(s.accessLog(s.recoverer(jsonFallback(mux))))
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
		p, err := s.authenticate(r.Context(), raw)
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

// append writes an event to the ledger within LedgerTimeout and returns
// it with its seq; a failure is ErrLedgerUnavailable (503): the platform
// does not serve unaudited.
func (s *Server) append(ctx context.Context, tenant cloison.TenantID, p audit.Payload) (audit.Record, error) {
	return s.record(ctx, tenant, p, s.cfg.Ledger.Append)
}

// stage is append for an event whose seq nobody records (the request
// path's decision, rejection and completion): it returns once the event
// is durable, staged, without waiting for the integrator to sequence it
// (within audit.IntegrationBound).
func (s *Server) stage(ctx context.Context, tenant cloison.TenantID, p audit.Payload) error {
	_, err := s.record(ctx, tenant, p, s.cfg.Ledger.Stage)
	return err
}

func (s *Server) record(ctx context.Context, tenant cloison.TenantID, p audit.Payload,
	write func(context.Context, audit.Event) (audit.Record, error)) (audit.Record, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.LedgerTimeout)
	defer cancel()
	ctx, span := s.tracer.Start(ctx, "ledger.append", trace.WithAttributes(attrKind.String(string(p.Kind()))))
	defer span.End()
	rec, err := write(ctx, audit.Event{OccurredAt: time.Now(), Tenant: tenant, Actor: s.cfg.Node, Payload: p})
	if err != nil {
		tracing.Fail(span, ErrLedgerUnavailable)
		s.log.Error("ledger append failed", "kind", p.Kind(), "err", err)
		s.metrics.ledgerErrors.Inc()
		return rec, fmt.Errorf("%w: %v", ErrLedgerUnavailable, err)
	}
	s.mu.Lock()
	s.ledgerOK = time.Now()
	s.mu.Unlock()
	return rec, nil
}

func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	if err := s.readiness(r.Context()); err != nil {
		writeJSON(w, 503, map[string]string{"status": "not ready", "reason": err.Error()})
		return
	}
	writeJSON(w, 200, map[string]string{"status": "ready"})
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
	if p.TenantRecord.Allows(s.cfg.ModelName) {
		data = append(data, map[string]any{"id": s.cfg.ModelName, "object": "model", "owned_by": "cloison",
			"context_length": s.contextFor(p)})
	}
	writeJSON(w, 200, map[string]any{"object": "list", "data": data})
}

// contextFor is the context a tenant can actually use: the served context,
// lowered by the tenant's max-context quota and by the KV pages its
// partition can ever give one request. It is what the API advertises to the
// tenant, so that no request within it is refused for length.
func (s *Server) contextFor(p tenancy.Principal) int {
	n := s.cfg.Engine.Attestation().ServedContext
	if q := p.TenantRecord.Quotas.MaxContext; q > 0 {
		n = min(n, q)
	}
	if part, err := s.cfg.Engine.EnsureTenant(PoolTenant(p.TenantRecord)); err == nil {
		n = min(n, part.MaxLeaseTokens)
	}
	return n
}

func (s *Server) attestation(w http.ResponseWriter, r *http.Request) {
	a, tp := s.tenantAttestation(principal(r))
	writeJSON(w, 200, struct {
		attest.Attestation
		Tenant TenantPlacement `json:"tenant"`
	}{a, tp})
}

// TenantPlacement is what GET /v1/attestation (and gRPC GetAttestation)
// tells the calling tenant, and nothing about any other (issue 17 §5):
// how its KV pages are isolated on this node (isolation tier, zeroing
// mode), the residency its record requires, the labels of this node and of
// the prefill nodes its prompts may be sent to now, and whether the
// residency is met (Compliant: false means its requests are refused with
// permission_denied).
type TenantPlacement struct {
	Tenant        cloison.TenantID  `json:"tenant"`
	IsolationTier string            `json:"isolation_tier"`
	Zeroing       string            `json:"zeroing"`
	Residency     tenancy.Residency `json:"residency"`
	Decode        attest.Labels     `json:"node"`
	Prefill       []attest.Labels   `json:"prefill_nodes"`
	Compliant     bool              `json:"compliant"`
}

// tenantAttestation is the attestation as p may see it — its own
// reservation only — and p's placement. The isolation is the partition's
// where the tenant has one on this node, else its record's.
func (s *Server) tenantAttestation(p tenancy.Principal) (attest.Attestation, TenantPlacement) {
	a := s.cfg.Engine.Attestation()
	own := a.Reserved[:0:0]
	for _, r := range a.Reserved {
		if r.Tenant == p.Tenant {
			own = append(own, r)
		}
	}
	a.Reserved = own
	t := p.TenantRecord
	tp := TenantPlacement{Tenant: p.Tenant, IsolationTier: t.Tier.String(), Zeroing: t.Zeroing.String(), Residency: t.Residency,
		Decode: a.Labels, Prefill: []attest.Labels{}}
	if tp.Residency.Regions == nil {
		tp.Residency.Regions = []string{}
	}
	if part, err := s.cfg.Engine.TenantIsolation(p.Tenant); err == nil {
		tp.IsolationTier, tp.Zeroing = part.Tier.String(), part.Zeroing.String()
	}
	pl := s.placement()
	for _, l := range pl.Prefill {
		if l.Serves(t.Residency.Regions, t.Residency.Tier) {
			tp.Prefill = append(tp.Prefill, l) // the nodes its prompts may go to, no other
		}
	}
	tp.Compliant, _ = policies.Input{Tenant: t, Attestation: a, Placement: pl}.Complies()
	return a, tp
}

// inference is what both completion routes hand to serve.
type inference struct {
	common      *Common
	prompt      []int32
	logprobs    bool
	topLogprobs int
	chat        bool
	tools       *toolUse         // nil: no tool calls are parsed
	grammar     *grammar.Grammar // response_format; nil: unconstrained
	// echo is the prompt text that precedes the completion in a
	// completions choice (echo: true); "" otherwise.
	echo string
	// scorePrompt (echo with logprobs, or echo with max_tokens 0): every
	// choice's engine sequence scores the prompt
	// (engine.GenerateRequest.ScorePrompt), and the echo carries the
	// prompt's logprobs.
	scorePrompt bool
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	req, err := DecodeCompletion(r.Body, s.cfg.MaxBody)
	if err == nil {
		err = s.checkN(&req.Common)
	}
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	var prompt []int32
	switch {
	case req.Suffix != nil && *req.Suffix != "":
		// Fill-in-the-middle, as llama.cpp's infill: [BOS] FIM_PRE prefix
		// FIM_SUF suffix FIM_MID, the user's text never parsed for control
		// tokens (EncodeInfill).
		var ok bool
		if prompt, ok = s.cfg.Tokenizer.EncodeInfill(req.Prompt.Text, *req.Suffix); !ok {
			WriteHTTPError(w, ErrUnsupported.Withf(`"suffix" (model %s has no fill-in-the-middle tokens)`, s.cfg.ModelName))
			return
		}
	case req.Prompt.IsIDs:
		prompt = req.Prompt.Tokens
	default:
		prompt = s.cfg.Tokenizer.Encode(req.Prompt.Text, true, false)
	}
	top := 0
	if req.Logprobs != nil {
		top = *req.Logprobs
	}
	in := inference{common: &req.Common, prompt: prompt, logprobs: req.Logprobs != nil, topLogprobs: top}
	if req.Echo {
		// The prompt as sent; token ids are echoed as their text (control
		// tokens included, as they were sent).
		in.echo = req.Prompt.Text
		if req.Prompt.IsIDs {
			in.echo = s.cfg.Tokenizer.Decode(req.Prompt.Tokens, true)
		}
		in.scorePrompt = req.Logprobs != nil || req.Common.MaxNew() == 0
	}
	s.serve(w, r, in)
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
	in, err := s.chatInference(req)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	s.serve(w, r, in)
}

// chatInference is a decoded chat request made ready for generate: its
// tools checked against the model's template, its grammar (response_format
// or the forced call), its prompt rendered. The Responses API goes through
// it too (respapi.go). Errors: those of toolFormat, requestGrammar and
// chatPrompt.
func (s *Server) chatInference(req *ChatRequest) (inference, error) {
	use, _ := req.toolUse() // checked by DecodeChat
	if err := s.toolFormat(use); err != nil {
		return inference{}, err
	}
	g, err := requestGrammar(req.Grammar, use)
	if err != nil {
		return inference{}, err
	}
	prompt, err := s.chatPrompt(req.Messages, use.templateTools())
	if err != nil {
		return inference{}, err
	}
	top := 0
	if req.TopLogprobs != nil {
		top = *req.TopLogprobs
	}
	return inference{common: &req.Common, prompt: prompt, logprobs: req.Logprobs, topLogprobs: top, chat: true, tools: use, grammar: g}, nil
}

// genSink is how a transport receives one generation from generate.
type genSink struct {
	// decided is called once with the policy decision's id, before the
	// decision is ledgered (so that even a refusal carries it).
	decided func(decisionID string)
	// started is called once the engine accepted the request: from here
	// on the transport has begun its response, and a failure must end it
	// with an error, never a normal finish.
	started func()
	// token is called for every token (and held-back text flush, ID < 0)
	// of choice (0 ≤ choice < n) in order, from one goroutine; it must not
	// block for long (the streams buffer meanwhile).
	token func(choice int, tok engine.Token)
}

// genResult is the end of a successful generation.
type genResult struct {
	Finish     engine.FinishReason   // choice 0's
	Finishes   []engine.FinishReason // every choice's, in index order
	Prompt     int                   // prompt tokens (once, whatever n)
	Completion int                   // generated tokens, all choices together
}

// generate is the one inference path, shared by the HTTP routes and gRPC
// Generate. In order: the model check; a slot of the node's stream gate
// (MaxStreams, MaxStreamsPerTenant), held until generate returns; the
// policy decision (evaluated in process); the pool must isolate the tenant
// as the decision requires (applies); the decision's limits — max_tokens
// clamps the completion, max_context and kv_pages refuse a request they
// cannot hold, max_concurrent, tokens_per_minute and kv_pages in flight go
// to the Limiter; the engine's checks (Engine.Check: reject before
// allocate). A request refused by any of these is counted (refuse), not
// ledgered one row each: RunRefusals writes the counts as policy.refusals
// summaries. Only then is the allowed decision written to the ledger,
// BEFORE the engine gets the request (ledger down ⇒ ErrLedgerUnavailable,
// no unaudited service); the engine (a rejection it finds after all is
// ledgered as
// admission.rejected and returned as its original typed error); the
// stream, handed token by token to sink; request.completed written to the
// ledger BEFORE generate returns success. A nil error means the transport
// may send its normal finish; any error — before or after sink.started —
// means it must end the response with that error.
func (s *Server) generate(ctx context.Context, p tenancy.Principal, id cloison.RequestID, in inference, sink genSink) (_ genResult, err error) {
	ctx, span := s.tracer.Start(ctx, "inference", trace.WithAttributes(tracing.AttrRequest.String(string(id)),
		tracing.AttrTenant.String(string(p.Tenant)), tracing.AttrModel.String(s.cfg.ModelName), tracing.AttrPrompt.Int(len(in.prompt))))
	defer func() {
		tracing.Fail(span, err)
		span.End()
	}()
	return s.generateTraced(ctx, p, id, in, sink)
}

// generateTraced is generate within its span.
func (s *Server) generateTraced(ctx context.Context, p tenancy.Principal, id cloison.RequestID, in inference, sink genSink) (genResult, error) {
	if in.common.Model != s.cfg.ModelName {
		return genResult{}, fmt.Errorf("%w: %q", ErrUnknownModel, in.common.Model)
	}
	accessOf(ctx).setTokens(len(in.prompt), 0)
	release, err := s.gate.acquire(p.Tenant)
	if err != nil {
		return genResult{}, s.refuse(p.Tenant, stageCapacity, err)
	}
	defer release()
	maxNew := in.common.MaxNew()
	// The policy knows no request that generates nothing (max_tokens ≥ 1):
	// a prompt scored alone (echo, max_tokens 0) is decided as one token,
	// the conservative count; the engine is then given 0.
	polMax := maxNew
	if maxNew == 0 && in.scorePrompt {
		polMax = 1
	}
	pin := policies.Input{Principal: p, Tenant: p.TenantRecord, Attestation: s.cfg.Engine.Attestation(),
		Request: policies.Request{Model: in.common.Model, PromptTokens: len(in.prompt), MaxTokens: polMax}, Placement: s.placement()}
	dec, derr := s.decide(ctx, pin)
	if sink.decided != nil {
		sink.decided(dec.ID)
	}
	if derr != nil {
		s.metrics.policyDenied.WithLabelValues(s.metrics.tenant(p.Tenant)).Inc()
		return genResult{}, s.refuse(p.Tenant, stagePolicy, derr)
	}
	part, err := s.applies(p, dec)
	if err != nil {
		return genResult{}, s.refuse(p.Tenant, stageIsolation, err)
	}
	lim := dec.Limits
	maxNew = min(maxNew, lim.MaxTokens)
	n := in.choices()
	// Every choice is a sequence of its own: each must fit the context,
	// and all n together the request's KV pages and the tenant's quota,
	// counted BEFORE any starts (the prompt's pages as if unshared: a
	// choice may find them evicted).
	total := len(in.prompt) + maxNew
	if total > lim.MaxContext {
		return genResult{}, s.refuse(p.Tenant, stageLimits, engine.ErrContextLength.Withf("this tenant's maximum context is %d tokens, but %d were requested (%d in the prompt, %d for the completion)",
			lim.MaxContext, total, len(in.prompt), maxNew))
	}
	pt := part.PageTokens
	pages := n * ((total + pt - 1) / pt)
	if pages > lim.KVPages {
		return genResult{}, s.refuse(p.Tenant, stageLimits, engine.ErrContextLength.Withf("a request of this tenant may hold %d KV pages (%d tokens), but %d tokens were requested (%d in the prompt, %d for the completion, %d choices)",
			lim.KVPages, lim.KVPages*pt, n*total, len(in.prompt), maxNew, n))
	}
	permit, err := s.cfg.Limiter.AdmitLease(p.Tenant, tenancy.Quotas{MaxConcurrent: lim.MaxConcurrent, KVPages: lim.KVPages,
		TokensPerMinute: lim.TokensPerMinute, MaxContext: lim.MaxContext}, len(in.prompt)+n*maxNew, pages)
	if err != nil {
		return genResult{}, s.refuse(p.Tenant, stageQuota, err)
	}
	used := len(in.prompt)
	defer func() { permit.Release(used) }()
	sp := in.common.Sampling(in.logprobs, in.topLogprobs)
	if in.common.Seed == nil {
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
		greqs[i] = engine.GenerateRequest{ID: choiceID(id, i), Tenant: p.Tenant, Prompt: in.prompt, MaxTokens: maxNew, Sampling: csp, StopStrings: in.common.Stop, Grammar: in.grammar,
			ScorePrompt: in.scorePrompt}
		if err := s.cfg.Engine.Check(greqs[i]); err != nil {
			return genResult{}, s.refuse(p.Tenant, stageAdmission, err)
		}
	}
	// No service without a recorded decision: the row is written, and
	// acknowledged by the ledger, BEFORE the engine gets the request.
	if err := s.stage(ctx, p.Tenant, decisionPayload(dec, pin)); err != nil {
		return genResult{}, err
	}
	runs, endErr, err := s.runChoices(ctx, greqs, sink)
	if err != nil {
		return genResult{}, s.reject(ctx, part, id, len(in.prompt), maxNew, err)
	}
	res := genResult{Prompt: len(in.prompt)}
	for _, r := range runs {
		res.Completion += r.n
		res.Finishes = append(res.Finishes, r.st.Finish())
	}
	res.Finish = res.Finishes[0]
	used = len(in.prompt) + res.Completion
	accessOf(ctx).setTokens(len(in.prompt), res.Completion)
	for _, r := range runs {
		s.engineSpans(ctx, r.st, endErr)
	}
	if lerr := s.completedN(ctx, part, id, runs, endErr, s.servedN(p.Tenant, greqs, runs, in.common.Seed != nil), s.placed(id, len(runs))); lerr != nil && endErr == nil {
		endErr = lerr
	}
	if endErr != nil {
		return genResult{}, endErr
	}
	return res, nil
}

// chatPrompt renders chat messages with the model's template and tokenizes
// the result. The template writes the control tokens itself: they are parsed
// in the template's own text only, never in message content, so content
// cannot open a turn of another role (chat.Prompt, EncodeTemplated).
// Errors: chat.ErrMessages, chat.ErrTemplate, chat.ErrContent.
func (s *Server) chatPrompt(msgs []chat.Message, tools []chat.Tool) ([]int32, error) {
	p, bos, err := s.renderChat(msgs, tools)
	if err != nil {
		return nil, err
	}
	return s.cfg.Tokenizer.EncodeTemplated(p.Text, p.Literal, bos), nil
}

// renderChat renders chat messages with the model's template, marking the
// template's own text (chat.Prompt.Literal: the only place control tokens
// are parsed); bos says whether the tokenizer must add BOS (the template
// does not write it).
func (s *Server) renderChat(msgs []chat.Message, tools []chat.Tool) (p chat.Prompt, bos bool, err error) {
	p, err = s.cfg.Chat.PromptTools(msgs, tools, true)
	if err != nil {
		return chat.Prompt{}, false, err
	}
	return p, !strings.Contains(s.cfg.Chat.Source(), "bos_token"), nil
}

// serve answers one HTTP inference request through generate.
func (s *Server) serve(w http.ResponseWriter, r *http.Request, in inference) {
	id := NewRequestID()
	w.Header().Set("X-Request-Id", string(id))
	cs := make([]*collector, in.choices())
	for i := range cs {
		cs[i] = newCollector(s, in)
	}
	sink := genSink{decided: func(d string) { w.Header().Set("X-Cloison-Decision-Id", d) }, token: func(i int, tok engine.Token) { cs[i].add(tok) }}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var sse *sseWriter
	if in.common.Stream {
		sse = s.newSSE(w, id, in, cs)
		sse.cancel = cancel
		sink.started, sink.token = sse.begin, sse.token
	}
	res, err := s.generate(ctx, principal(r), id, in, sink)
	switch {
	case sse != nil && sse.begun:
		sse.end(res, err)
	case err != nil:
		WriteHTTPError(w, err)
	default:
		s.fullResponse(w, id, in, cs, res)
	}
}

// applies checks that the pool isolates the tenant at least as the decision
// requires, and returns the tenant's partition (a tenant created since this
// node started gets it now: Engine.EnsureTenant); otherwise the request
// cannot be proven isolated and is refused.
func (s *Server) applies(p tenancy.Principal, dec policies.Decision) (isolation.Partition, error) {
	part, err := s.cfg.Engine.EnsureTenant(PoolTenant(p.TenantRecord))
	if err != nil {
		return isolation.Partition{}, fmt.Errorf("%w: tenant %s has no KV partition on this node: %v", ErrIsolationPolicy, p.Tenant, err)
	}
	if part.Zeroing < dec.Zeroing || (dec.Tier == isolation.TierDedicated && part.Tier != isolation.TierDedicated) {
		return isolation.Partition{}, fmt.Errorf("%w: pool has %s/%s, policy requires %s/%s", ErrIsolationPolicy, part.Tier, part.Zeroing, dec.Tier, dec.Zeroing)
	}
	return part, nil
}

// reject records an admission rejection (counts only) and returns the
// original error for the client, or ErrLedgerUnavailable when the
// rejection could not be recorded.
func (s *Server) reject(ctx context.Context, part isolation.Partition, id cloison.RequestID, prompt, maxNew int, err error) error {
	if engine.IsRejection(err) {
		t, maxLease, pt := part.Tenant, part.MaxLeaseTokens, part.PageTokens
		need := (int64(prompt) + int64(maxNew) + int64(pt) - 1) / int64(pt)
		if lerr := s.stage(ctx, t, audit.AdmissionRejected{Request: id, Model: audit.Name(s.cfg.ModelName), Code: cloison.ErrorCode(err),
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

// sanitizeName maps a reason to the ledger's Name alphabet.
func sanitizeName(s string) string {
	b := []byte(s)
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._:/@+-", c) >= 0
		if !ok {
			b[i] = '_'
		}
	}
	if len(b) > audit.MaxNameLen {
		b = b[:audit.MaxNameLen]
	}
	return string(b)
}

// placement is the policy input's view of where a request would go: on a
// decode node, the prefill nodes it may ask now.
func (s *Server) placement() policies.Placement {
	if s.cfg.Placement == nil {
		return policies.Placement{}
	}
	return policies.Placement{Split: true, Prefill: s.cfg.Placement.PrefillLabels()}
}

// placed is the ledger's record of where request id was processed: this
// node with its labels and, on a decode node, the prefill node that
// prefilled it (none for a one-token prompt, computed here). Each of its n
// choices' sequences is asked for (so that none stays in the Placement's
// memory); the first one prefilled remotely is recorded (every one was
// placed under the same residency).
func (s *Server) placed(id cloison.RequestID, n int) *audit.Placement {
	l := s.cfg.Engine.Attestation().Labels
	pl := &audit.Placement{Node: s.cfg.Node, Region: audit.Name(l.Region), Tier: audit.Name(l.Tier)}
	if pl.Node == "" {
		pl.Node = "node"
	}
	if s.cfg.Placement != nil {
		for i := range max(n, 1) {
			if p, ok := s.cfg.Placement.Served(choiceID(id, i)); ok && pl.Prefill == nil {
				pl.Prefill = &audit.PrefillPlace{Node: audit.Name(sanitizeName(p.Addr)), Region: audit.Name(p.Labels.Region), Tier: audit.Name(p.Labels.Tier)}
			}
		}
	}
	return pl
}
