// Package platformtest builds the whole request path in process for tests:
// its Options become a node.Spec, opened by node.Open as cloisond opens its
// node (and a split platform's prefill node by prefill.Open), on
// real PostgreSQL (internal/pgtest), the ledger, tenancy, OPA policies, the
// engine on the CPU backend with the context-bag model, and the HTTP API on
// an httptest server. Options switch single defences off — only tests can.
//
// # The 2026 incident as a regression suite (TestIncident2026)
//
// Options.Split runs the whole platform split in process: the API node
// decodes, a prefill node with its own model instance, pool and arena serves
// PrefillService, and the KV comes back over the verified transfer, both over
// gRPC with mutual TLS on loopback, with the real ledger in PostgreSQL. The
// suite configures the incident: a context-bag model advertising 1,048,576
// tokens, a decode pool sized to it, a prefill pool of 681,280 tokens (65%), a
// victim tenant whose canary KV is left in the decode pool, and an attacker's
// prompt of 700,000 tokens (over the prefill pool, under the advertised
// context).
//
// Nine defences can be switched off through test hooks: capacity attestation,
// admission, the prefill node's reject-before-allocate (off: the 2026 node,
// which swaps the prompt for a one-token placeholder and announces its one
// page as the whole reservation), the receiver's count check, page digests
// (and the manifest MAC over them), the decode engine's own transferred ==
// reserved check, the pool's fill counts, the arena's tag and fill checks, and
// scrubbing. Cases: all on, each one off, each one alone, all off, and the
// aligned deployment (served context lowered to the prefill pool).
//
// With any one layer on, the attacker gets no canary — checked with the
// context-bag oracle (every output character must come from the attacker's own
// prompt) and with the canary strings — and the outcome is the first layer's
// typed error: the deployment refusing to start (attest.ErrFailed), 400
// context_length_exceeded before any prefill call,
// transfer_verification_failed or isolation_violation with an incident in the
// register, or (scrubbing alone) a 200 read from zeroed pages; the ledger never
// holds prompt text. With every layer off the oracle sees the victim's canary
// characters, so the suite can fail.
//
// The switches that turn a defence off (Unsafe in isolation, engine, transfer
// and kernels; the attestation's prefill.AttestUnsafe) exist only in a
// build with -tags faults; in the default build they are empty structs
// (TestDefaultBuildCannotSwitchADefenceOff). make test
// runs it at full size without the race detector (33 s, 294 MiB peak RSS:
// arenas are touched only where written) and at 1/256 scale under -race.
package platformtest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
	"go.opentelemetry.io/otel/trace"
)

// Model is the id the platform serves.
const Model = "cloison-context-bag"

// Options configure a Platform. The zero value has every defence on.
type Options struct {
	Tenants []cloison.TenantID // created active, shared tier, cross-tenant zeroing (default: victim, attacker)
	// Quotas, when set, are every tenant's quotas (default: 64 concurrent
	// requests, every page, 10,000,000 tokens per minute, no max context).
	Quotas *tenancy.Quotas
	Pages  int // KV pages of 16 tokens (default 256)
	// Faults (PlaceholderOver and the Skip* fields here and in Split)
	// switch defences off; they take effect only in a build with the faults
	// tag, and Start fails in the default build if one is set.
	//
	// The 2026 bug: prompts longer than this are replaced by a one-token
	// placeholder while decoding runs over the full reservation (0: off).
	PlaceholderOver int
	SkipFillCheck   bool // the pool's fill-count check
	SkipScrub       bool // zeroing before pages change tenant
	SkipKernelCheck bool // the arena's tag and fill checks
	SkipAdmission   bool // admission's length checks (served context, pool and prefill capacity)
	// Context is the context the model advertises (default 4096). The
	// served context is the smaller of it and the pool.
	Context int
	// Split, when set, runs the disaggregated topology: the platform's
	// engine is a decode node whose prompts a separate prefill node (own
	// model instance, pool and arena) computes, called over PrefillService
	// and sending the KV back over the verified transfer, both on gRPC with
	// mutual TLS on loopback.
	Split *Split
	// API, when set, adjusts the API server's configuration before it is
	// built (limits such as MaxBody or MaxStreams).
	API func(*api.Config)
	// ReplayPages, when set, gives the server a replay engine (replays of
	// stored responses, verdicts on reports): its own model instance, pool of that many pages and arena, with
	// every defence on whatever the Skip* fields say.
	ReplayPages int
	// Labels are the (decode) node's residency labels.
	Labels attest.Labels
	// Tracer, when set, records the (decode) node's spans; Split.Tracer
	// the prefill node's (nil: no spans).
	Tracer trace.TracerProvider
	// FIM serves a context bag whose vocabulary ends with fill-in-the-middle
	// tokens (synth.BagConfig.FIM): completions' suffix is allowed.
	FIM bool
	// PrefixCache turns on the engine's per-tenant prefix cache (as
	// cloisond's --prefix-cache does).
	PrefixCache bool
	// Pooling, when not 0, serves the context bag as an embedding model
	// with that llama.pooling_type (synth.BagConfig.Pooling).
	Pooling int
	// Models are further models served beside the context bag
	// (node.Spec.Models); MemoryBudget and ModelDir are node.Spec's.
	// The tenants are allowed Model only, unless EveryModel: then they
	// are allowed every model served, those loaded later included, as
	// cloisond's development tenant is.
	Models       []node.ModelFile
	MemoryBudget int64
	ModelDir     string
	EveryModel   bool
	// Encoder, when set, serves that synthetic BERT-family encoder
	// (synth.Bert) instead of the context bag; its Context is the model's.
	Encoder *synth.BertConfig
	// Decoder, when set, serves that synthetic decoder (synth.Random; a
	// qwen3 reranker with Rerank) instead of the context bag; its Context
	// is the model's.
	Decoder *synth.Config
}

// Split configures the prefill node of a split platform and the defences of
// the path between the nodes; the zero value has every defence on.
type Split struct {
	PrefillPages int // the prefill node's pool, pages of 16 tokens (default: Pages)
	// ServedContext is the prefill node's served context (0: the decode
	// node's, itself the smaller of the model's context and its pool).
	ServedContext int
	// SkipAttestation starts the nodes even though a pool cannot hold the
	// served context (the prefill node's own attestation and the decode
	// node's check of it); without it New fails with attest.ErrFailed.
	// Like the other Skip* fields, faults builds only.
	SkipAttestation bool
	// Placeholder is the 2026 prefill node: a prompt its pool cannot hold
	// is not rejected but replaced by a one-token placeholder, whose one
	// page is announced as the whole reservation.
	Placeholder     bool
	SkipCountCheck  bool                 // the receiver's transferred == reserved (header and pages received)
	SkipDecodeCount bool                 // the decode engine's own check that the pool holds every reserved token
	SkipDigestCheck bool                 // page digests, the trailer's digest list and the manifest MAC
	Labels          attest.Labels        // the prefill node's residency labels
	Tracer          trace.TracerProvider // the prefill node's spans (nil: none)
}

// Platform is a running in-process deployment.
type Platform struct {
	URL    string
	Server *api.Server
	Ledger *auditpg.Store
	Issuer *tenancy.Issuer
	Pool   *isolation.Pool  // the (decode) node's KV pool
	Ring   *tenancy.KeyRing // production defaults (minimum rotation interval included)
	// Decider serves the policy decisions; tests may Reload it.
	Decider *policies.Decider
	// Limiter is the server's; tests may hold permits in it.
	Limiter *tenancy.Limiter
	// Tenants is the tenant store (to change quotas in a test).
	Tenants *tenancy.Store
	DB      *pgtest.DB // the platform's database (RuntimePool: what the server's role may do; tests may take it away)
	// Prefill is the prefill node of a split platform; nil otherwise.
	Prefill *PrefillNode
	// KEK is the key-encryption key (digest and report keys derive from it).
	KEK []byte
	// Tokenizer is the served model's.
	Tokenizer *tokenizer.Tokenizer
	// ModelFile is the served model's GGUF (for reference computations).
	ModelFile []byte
	// Node is the platform's node (its models: LoadModel, UnloadModel).
	Node *node.Node
}

// Token issues a token for tenant with scopes.
// GRPC serves the platform's gRPC server on a loopback listener for the
// test's lifetime and returns a client connection to it and a context that
// ends with the test.
func (p *Platform) GRPC(t testing.TB) (*grpc.ClientConn, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gs := p.Server.GRPCServer(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, ctx
}

func (p *Platform) Token(t testing.TB, tenant cloison.TenantID, scopes ...tenancy.Scope) string {
	tok, err := p.Issuer.Issue(tenancy.TokenRequest{Subject: "test-" + string(tenant), Tenant: tenant, Scopes: scopes, Audience: "cloison"})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// New starts a Platform; everything stops at the end of the test.
func New(t testing.TB, o Options) *Platform {
	t.Helper()
	p, err := Start(t, o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Start is New returning the error that stops a platform from starting
// (attest.ErrFailed: a pool cannot hold the served context;
// *api.MemoryBudgetError: the model does not fit MemoryBudget). The platform
// is the options as a node.Spec, opened as cloisond opens its node
// (node.Open), its prefill node as cloisond opens one (prefill.Open).
func Start(t testing.TB, o Options) (*Platform, error) {
	t.Helper()
	if len(o.Tenants) == 0 {
		o.Tenants = []cloison.TenantID{"victim", "attacker"}
	}
	if o.Pages == 0 {
		o.Pages = 256
	}
	ctx := context.Background()
	db := pgtest.New(t)
	pool := db.RuntimePool(t)
	_, key, _ := ed25519.GenerateKey(nil)
	kek := make([]byte, tenancy.KEKSize)
	_, _ = rand.Read(kek)
	quotas := tenancy.Quotas{MaxConcurrent: 64, KVPages: o.Pages, TokensPerMinute: 10_000_000, MaxContext: 1 << 20}
	if o.Quotas != nil {
		quotas = *o.Quotas
	}
	var tenants []tenancy.Tenant
	for _, id := range o.Tenants {
		tenants = append(tenants, tenancy.Tenant{ID: id, Name: string(id), Status: tenancy.StatusActive, Tier: isolation.TierShared,
			Zeroing: isolation.ZeroCrossTenant, Classification: tenancy.ClassInternal, AllowedModels: []string{Model}, IncidentContact: "x@example.test",
			Quotas: quotas})
		if o.EveryModel {
			tenants[len(tenants)-1].AllowedModels = nil
		}
	}
	file, err := contextBag(o)
	if err != nil {
		t.Fatal(err)
	}
	flt, err := faultsOf(o)
	if err != nil {
		return nil, err
	}
	limiter := tenancy.NewLimiter()
	// The verify route trusts the platform's own log key, as cloisond's
	// trusts its keys.
	acfg := api.Config{Limiter: limiter, Verify: audit.VerifyOptions{Keys: audit.KeySet(key.Public().(ed25519.PublicKey))}}
	if o.API != nil {
		o.API(&acfg)
	}
	// The served context is the smaller of the model's (synth.ContextBag's
	// default when unset) and the pool.
	modelContext := o.Context
	if o.Encoder != nil {
		modelContext = o.Encoder.Context
	}
	if o.Decoder != nil {
		modelContext = o.Decoder.Context
	}
	if modelContext == 0 {
		modelContext = 4096
	}
	served := min(modelContext, o.Pages*16)
	spec := node.Spec{Name: "platformtest", DB: pool, Keys: node.Keys{Log: key, KEK: kek}, Tenants: tenants,
		// A refusal to sign is logged and counted, without the register
		// entry a node opens (node.Open's default): tests cut and rewrite
		// the ledger under a live platform, and an entry appended then
		// would race their cut. cmd/cloisond's rewrite test covers the
		// entry on a real node.
		Ledger: auditpg.Config{Origin: "platformtest", CheckpointDir: t.TempDir(), Organization: audit.Organization{Name: "Cloison test"},
			Contact: audit.Contact{Name: "DPO", Email: "dpo@example.test"}, OnSigningRefused: func(*auditpg.Store, *auditpg.SignRefusedError) {}},
		Auth:      node.Auth{Issuer: "platformtest", Audience: "cloison"},
		Model:     node.ModelFile{Bytes: file, Options: kernels.Options{Unsafe: flt.kernels}, Name: Model},
		Capacity:  node.Capacity{Pool: isolation.Config{Pages: o.Pages, PageTokens: 16, Unsafe: flt.pool}, ServedContext: served, Labels: o.Labels},
		Scheduler: engine.SchedulerConfig{Unsafe: flt.engine, PrefixCache: o.PrefixCache}, Unsafe: flt.engine, ReplayPages: o.ReplayPages,
		API: acfg, Tracer: o.Tracer, Models: o.Models, MemoryBudget: o.MemoryBudget, ModelDir: o.ModelDir}
	var pn *PrefillNode
	if o.Split != nil {
		if pn, spec.Decode, err = startSplit(t, o, flt, file, served, pool); err != nil {
			return nil, err
		}
	}
	n, err := node.Open(ctx, spec)
	if err != nil {
		var budget *api.MemoryBudgetError
		if errors.Is(err, attest.ErrFailed) || errors.As(err, &budget) {
			return nil, err
		}
		t.Fatal(err)
	}
	srv := n.Server
	n.Start()
	// The engine stops, then every incident it reported is written, then
	// what Open opened closes, the ledger last (node.Close).
	t.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := n.Close(cctx); err != nil {
			t.Errorf("platformtest: %v", err)
		}
	})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &Platform{KEK: kek, Tokenizer: n.Model.Tokenizer, ModelFile: file, URL: hs.URL, Server: srv, Ledger: n.Ledger, Issuer: tenancy.NewIssuer(n.Ring),
		Ring: n.Ring, Pool: n.Pool, Decider: n.Decider, Limiter: limiter, DB: db, Prefill: pn, Tenants: n.Tenants, Node: n}, nil
}

// contextBag is the served model's GGUF: the context bag of o.Context
// tokens (synth.ContextBag's default when 0).
func contextBag(o Options) ([]byte, error) {
	w, err := synth.ContextBag(synth.BagConfig{Context: o.Context, GapTokens: o.Context, FIM: o.FIM, Pooling: o.Pooling})
	if o.Encoder != nil {
		w, err = synth.Bert(*o.Encoder)
	}
	if o.Decoder != nil {
		w, err = synth.Random(*o.Decoder)
	}
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
