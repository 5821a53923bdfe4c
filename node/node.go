package node

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/prefillrpc"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/node/prefill"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// The parts a node is built from are the prefill role's (package
// node/prefill: a prefill node is the smallest node, and needs no API).
type (
	// Model is the model a node serves (prefill.Model).
	Model = prefill.Model
	// Capacity sizes a node's KV pool and what it attests (prefill.Capacity).
	Capacity = prefill.Capacity
	// TenantSource is where a node reads its tenants (prefill.TenantSource).
	TenantSource = prefill.TenantSource
	// ModelFile is the GGUF a node serves (prefill.ModelFile).
	ModelFile = prefill.ModelFile
	// AttestUnsafe switches the capacity attestation off, in faults
	// builds only (prefill.AttestUnsafe).
	AttestUnsafe = prefill.AttestUnsafe
	// KeyError is a deployment key the ledger refuses (prefill.KeyError).
	KeyError = prefill.KeyError
)

// Config assembles a node that serves the API: role both (it prefills
// itself) or, with Decode set, a decode node.
type Config struct {
	Model Model
	// Models are further models served beside Model (models.go), each
	// with its own pool sized by Capacity, arena and engine; the caller
	// owns their instances.
	Models []Model
	// MemoryBudget bounds the bytes every model served holds, its
	// weights and KV arena (0: unbounded): a model that does not fit is
	// refused with the figures (api.MemoryBudgetError).
	MemoryBudget int64
	// ModelDir is where run-time loads (LoadModel) read from; "": none.
	// ModelFile is what they load with (backend, options).
	ModelDir  string
	ModelFile ModelFile
	// EveryModel are the tenants allowed every model the node serves (a
	// development tenant): a run-time load adds the model to their
	// allowed models (tenant.updated, ledgered).
	EveryModel []cloison.TenantID
	Capacity   Capacity
	// Scheduler and Unsafe are the engine's (engine.Config).
	Scheduler engine.SchedulerConfig
	Unsafe    engine.Unsafe
	// Decode, when set, makes this a decode node: prompts are prefilled on
	// prefill nodes and arrive by verified transfer.
	Decode *Decode
	// Ledger records the attestation, the policy bundle and everything
	// the API server records. NodeName names the node in the attestation
	// record; Actor is the ledger actor of the node's events.
	Ledger   *auditpg.Store
	NodeName string
	Actor    audit.Name
	// EventKeys are the deployment's log keys (by audit.KeyID): an
	// adapter registration read back at start is restored only when its
	// event carries a valid signature by one of them (nil: no signature
	// check, as tenancy.Store.WithEventKeys). Open passes its log keys.
	EventKeys map[string]ed25519.PublicKey
	// Tenants is the tenant store: every stored tenant gets its partition
	// at start (those created later, on their first request).
	Tenants *tenancy.Store
	// API is the API server's configuration without what the node builds
	// (Engine, ModelName, Tokenizer, Decider, Ledger, Tenants, Node).
	API api.Config
	// RefusalFlush is how often refusal counts are ledgered, and once more
	// at Close (api.Server.RunRefusals); 0: never by the node, the caller
	// flushes (api.Server.FlushRefusals), as tests that count them do.
	RefusalFlush time.Duration
	Logger       *slog.Logger // optional
	// Tracer (optional; nil: no spans, traceparent still propagated)
	// records the node's spans: the API server's, the engine's remote
	// transfers and the transfer server's calls (internal/tracing).
	Tracer trace.TracerProvider
}

// Decode is what a decode node adds: the transfer server its prefill nodes
// push KV to, and the client that asks them to prefill.
type Decode struct {
	// Listener and ServerOptions (mutual TLS: transfer.ServerOptions) carry
	// the transfer server; it serves no stream before Start.
	Listener      net.Listener
	ServerOptions []grpc.ServerOption
	Keys          *transfer.KeyRing // the cluster key ring (manifest MACs)
	// Client asks the prefill nodes to prefill; it advertises the
	// transfer server's address. The node closes it.
	Client  *prefillrpc.Client
	Timeout time.Duration // bound of one remote prefill (engine.Remote)
	// Peers fetches the prefill nodes' attestations at start; self is this
	// node's own. nil: Client.Attest once.
	Peers func(ctx context.Context, self attest.Attestation) ([]attest.PrefillPeer, error)
	// AttestUnsafe switches the check of the prefill nodes off (faults
	// builds only; attest.Prefill judges them otherwise).
	AttestUnsafe AttestUnsafe
	// OnAttested, if set, is called once the prefill nodes passed, with the
	// prompt bound every later peer must hold (peer watchers start there).
	OnAttested func(capacity int)
	// ReceiverUnsafe switches receiver defences off (faults builds only).
	ReceiverUnsafe transfer.ReceiverUnsafe

	watcher *peerWatcher // DecodeSpec's DNS watcher, if any: told the further models (New)
}

// Node is an assembled node serving the API. New builds it without starting
// anything; Start runs the engine, the transfer server and the refusal
// flusher; Close stops them in order.
type Node struct {
	Pool        *isolation.Pool
	Engine      *engine.Engine
	Server      *api.Server
	Decider     *policies.Decider
	Attestation attest.Attestation // as published
	// Set by Open: what it opened for the node (New leaves them nil).
	Ledger  *auditpg.Store
	Tenants *tenancy.Store
	Ring    *tenancy.KeyRing
	Model   Model

	opened   opened // Open's, closed after the node (Close)
	cfg      Config
	models   models // the further models (models.go)
	adFiles  adapterFiles
	log      *slog.Logger
	transfer *grpc.Server     // decode nodes only
	router   *transfer.Router // decode nodes only: each model's receiver by digest

	engStop   context.CancelFunc
	engDone   chan error    // the engine's exit, once
	engExited chan struct{} // closed when the engine returned
	refStop   context.CancelFunc
	refDone   chan error
	startOnce sync.Once
	closeOnce sync.Once
	closeErr  error
}

// New assembles a node: the pool with a partition for every stored tenant,
// the capacity attestation (a decode node's with its prefill nodes checked
// in), recorded in the ledger whether it passed or not; then, if it passed,
// the arena, the engine, the policy decider (its bundle recorded) and the
// API server. Nothing runs yet: the engine's and the transfer server's
// reports go to the API server, which exists before either starts (Start).
//
// Errors: attest.ErrFailed (the node must not start: a pool cannot hold
// the context served), and those of the parts.
func New(ctx context.Context, cfg Config) (n *Node, err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	n = &Node{cfg: cfg, log: log, models: models{byID: map[string]*served{}}}
	built := n // n is nil on an error return
	defer func() {
		if err != nil {
			built.closeModels()
			built.closeDecode() // the node owns the decode listener and client
		}
	}()
	m := cfg.Model
	if err := n.reserve(m.Name, modelBytes(m, cfg.Capacity)); err != nil {
		return nil, err
	}
	pool, err := isolation.NewPool(cfg.Capacity.Pool)
	if err != nil {
		return nil, err
	}
	all, err := cfg.Tenants.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	reserved := map[cloison.TenantID]int{}
	for _, t := range all {
		if err := pool.AddTenant(prefill.PoolTenant(t)); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", t.ID, err)
		}
		if t.Tier == isolation.TierDedicated {
			reserved[t.ID] = t.Quotas.KVPages
		}
	}
	att, aerr := cfg.Capacity.Attest(m.Model, reserved)
	att.Model, att.ModelDigest = m.Name, hex.EncodeToString(m.Digest[:])
	n.Pool = pool
	var arena kernels.Arena
	if aerr == nil {
		if arena, err = m.Backend.NewArena(m.Model.ArenaConfig(cfg.Capacity.Pool.Pages, cfg.Capacity.Pool.PageTokens, cfg.Capacity.KV)); err != nil {
			return nil, err
		}
	}
	var remote *engine.Remote
	if aerr == nil && cfg.Decode != nil {
		if remote, err = n.decode(arena); err != nil {
			return nil, err
		}
		// The prefill nodes' pools must hold what this node serves (the
		// 2026 deployment's did not): refuse to start otherwise.
		att, aerr = n.attestPrefill(ctx, att, remote)
	}
	if err := n.recordAttestation(ctx, m, att, aerr == nil); err != nil {
		return nil, err
	}
	if aerr != nil {
		return nil, aerr // refuse to start: a pool cannot hold the context served
	}
	n.Attestation = att
	log.Info("capacity attested", "model", m.Name, "model_context", att.ModelContext, "served_context", att.ServedContext, "pool_tokens", att.PoolTokens, "k", att.K, "prefill_nodes", len(att.Prefill))

	// The engine reports to the server, which exists before Start runs
	// the engine (the only caller of OnIncident).
	if n.Engine, err = engine.New(engine.Config{Model: m.Model, Tokenizer: m.Tokenizer, Pool: pool, Arena: arena, Attestation: att,
		Scheduler: cfg.Scheduler, Unsafe: cfg.Unsafe, Remote: remote,
		OnIncident: func(in engine.Incident) { n.Server.RecordIncident(in) }}); err != nil {
		return nil, err
	}
	if n.Decider, err = policies.New(ctx); err != nil {
		return nil, fmt.Errorf("policies: %w", err)
	}
	// The bundle that serves from the start is on the record, as every
	// reload is (api: policies/reload).
	rev, _ := audit.ParseDigest(strings.TrimPrefix(n.Decider.Revision(), "sha256:"))
	if _, err := cfg.Ledger.Append(ctx, audit.Event{OccurredAt: time.Now(), Actor: cfg.Actor,
		Payload: audit.PolicyReloaded{Revision: rev, Files: int64(len(n.Decider.Files())), Actor: cfg.Actor}}); err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	acfg := cfg.API
	acfg.Engine, acfg.ModelName, acfg.Tokenizer, acfg.Decider, acfg.Ledger, acfg.Tenants, acfg.Node = n.Engine, m.Name, m.Tokenizer, n.Decider, cfg.Ledger, cfg.Tenants, cfg.Actor
	acfg.ModelDigest, acfg.ModelAdmin, acfg.AdapterAdmin = audit.Digest(m.Digest), n, n
	if cfg.Decode == nil && acfg.Adapters == nil {
		acfg.Adapters = engine.NewAdapters()
	}
	if cfg.Decode == nil && acfg.Responses.Replay != nil && acfg.Responses.ReplayAdapter == nil {
		acfg.Responses.ReplayAdapter = n.replayAdapter
	}
	if cfg.Decode != nil {
		// A tenant's prompts go only to prefill nodes its residency
		// allows; the API asks the same before admitting it.
		acfg.Placement = cfg.Decode.Client
		cfg.Decode.Client.SetResidency(func(ctx context.Context, id cloison.TenantID) ([]string, string, error) {
			t, err := cfg.Tenants.Tenant(ctx, id)
			return t.Residency.Regions, t.Residency.Tier, err
		})
	}
	if acfg.Logger == nil {
		acfg.Logger = log
	}
	if acfg.Tracer == nil {
		acfg.Tracer = cfg.Tracer
	}
	if n.Server, err = api.NewServer(acfg); err != nil {
		return nil, err
	}
	for _, fm := range cfg.Models {
		if _, err := n.addModel(ctx, fm, nil, ""); err != nil {
			return nil, fmt.Errorf("model %s: %w", fm.Name, err)
		}
	}
	if err := n.restoreAdapters(ctx); err != nil {
		return nil, err
	}
	return n, nil
}

// decode builds a decode node's receiver and transfer server (not serving
// yet) and the engine's Remote.
func (n *Node) decode(arena kernels.Arena) (*engine.Remote, error) {
	d := n.cfg.Decode
	recv, err := n.receiver(n.Pool, arena, n.cfg.Model)
	if err != nil {
		return nil, err
	}
	n.router = transfer.NewRouter(recv)
	if d.watcher != nil {
		d.watcher.further = n.splitChecks
	}
	n.transfer = grpc.NewServer(append(tracing.ServerOptions(n.cfg.Tracer), d.ServerOptions...)...)
	transfer.Register(n.transfer, n.router)
	return n.remote(recv, n.cfg.Model), nil
}

// receiver is a decode node's receiver of m's transfers into pool and
// arena: a transfer of another model's KV is refused (the Router routes
// by the digest its header names; the receiver checks it again).
func (n *Node) receiver(pool *isolation.Pool, arena kernels.Arena, m Model) (*transfer.Receiver, error) {
	d := n.cfg.Decode
	return transfer.NewReceiver(transfer.ReceiverConfig{Pool: pool, Arena: arena, Keys: d.Keys, Model: m.Digest, Unsafe: d.ReceiverUnsafe,
		// Served from Start on, when the server exists.
		OnVerificationFailed: func(f transfer.Failure) {
			n.log.Warn("transfer refused", "model", m.Name, "tenant", f.Lease.Tenant, "request", f.Lease.Request, "reason", f.Reason, "err", f.Err)
			n.Server.RecordTransferFailure(f)
		},
		OnUnauthenticated: func(peer string, reason transfer.Reason) { n.Server.CountUnauthenticatedTransfer(peer, reason) }})
}

// remote is the engine's Remote for model m: its prompts are prefilled
// with m on the prefill nodes (named by digest), and arrive into recv.
func (n *Node) remote(recv *transfer.Receiver, m Model) *engine.Remote {
	d := n.cfg.Decode
	return &engine.Remote{Receiver: recv, Prefill: d.Client.PrefillModel(hex.EncodeToString(m.Digest[:])), Timeout: d.Timeout, Unsafe: n.cfg.Unsafe,
		Tracer: tracing.Tracer(n.cfg.Tracer)}
}

// attestPrefill checks the prefill nodes in, setting remote's capacity.
func (n *Node) attestPrefill(ctx context.Context, att attest.Attestation, remote *engine.Remote) (attest.Attestation, error) {
	d := n.cfg.Decode
	var peers []attest.PrefillPeer
	var err error
	if d.Peers != nil {
		peers, err = d.Peers(ctx, att)
	} else {
		peers, err = d.Client.Attest(ctx, hex.EncodeToString(n.cfg.Model.Digest[:]))
	}
	if err != nil {
		return att, err
	}
	att, remote.Capacity, err = prefill.CheckPeers(d.AttestUnsafe, att, hex.EncodeToString(n.cfg.Model.Digest[:]), peers)
	if err == nil && d.OnAttested != nil {
		d.OnAttested(remote.Capacity)
	}
	return att, err
}

// Start runs the engine, the transfer server (decode nodes) and the refusal
// flusher (Config.RefusalFlush): everything that reports to the API server, which exists. Call it
// once; Close stops what it started.
func (n *Node) Start() {
	n.startOnce.Do(func() {
		engCtx, stop := context.WithCancel(context.Background())
		n.engStop, n.engDone, n.engExited = stop, make(chan error, 1), make(chan struct{})
		go func() { n.engDone <- n.Engine.Run(engCtx); close(n.engExited) }()
		n.startModels()
		if n.transfer != nil {
			go func() {
				if err := n.transfer.Serve(n.cfg.Decode.Listener); err != nil {
					n.log.Error("transfer server", "err", err)
				}
			}()
		}
		if flush := n.cfg.RefusalFlush; flush > 0 {
			refCtx, stopRef := context.WithCancel(context.Background())
			n.refStop, n.refDone = stopRef, make(chan error, 1)
			go func() { n.refDone <- n.Server.RunRefusals(refCtx, flush) }()
		}
	})
}

// EngineDone delivers the engine's exit (once): an engine that stops
// before shutdown stops the node.
func (n *Node) EngineDone() <-chan error { return n.engDone }

// StopEngine stops the engine and waits for it: whatever is still running
// ends with an error, never a normal finish. Idempotent.
func (n *Node) StopEngine() {
	if n.engStop == nil {
		return
	}
	n.stopModels()
	n.engStop()
	<-n.engExited
}

// Close stops the node in the order that keeps every report: what reports
// incidents (the engine, the transfer server) stops first, then every
// incident write is made durable (api.Server.Close, retried until ctx
// ends), then the last refusal counts are written. Call it after the
// listeners stopped and before the ledger closes (a node from Open closes
// what Open opened last, the ledger included). Idempotent.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		n.StopEngine()
		n.closeModels()
		n.closeDecode()
		var errs []error
		if n.Server != nil {
			if err := n.Server.Close(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if n.refStop != nil {
			n.refStop()
			if err := <-n.refDone; err != nil {
				errs = append(errs, fmt.Errorf("refusal summary lost at shutdown: %w", err))
			}
		}
		n.closeErr = errors.Join(errs...)
		n.opened.close() // the replay engine, model, key ring, witnesses, ledger
	})
	return n.closeErr
}

// closeDecode stops the transfer server and the prefill client.
func (n *Node) closeDecode() {
	d := n.cfg.Decode
	if d == nil {
		return
	}
	if n.transfer != nil {
		n.transfer.Stop()
	}
	_ = d.Listener.Close() // if Serve never ran
	d.Client.Close()
}

// prefillCapacities is the ledger's record of a decode node's prefill nodes.
func prefillCapacities(a attest.Attestation) []audit.PrefillCapacity {
	var out []audit.PrefillCapacity
	for _, p := range a.Prefill {
		out = append(out, audit.PrefillCapacity{Node: audit.Name(p.Addr), PoolTokens: int64(p.Attestation.PoolTokens),
			ServedContext: int64(p.Attestation.ServedContext), Ready: p.OK, Region: labelName(p.Attestation.Labels.Region),
			Tier: labelName(p.Attestation.Labels.Tier)})
	}
	return out
}

// labelName is a label as the ledger records it: a malformed one (which
// failed the attestation) is left out rather than failing the record.
func labelName(v string) audit.Name {
	if !attest.ValidLabel(v) {
		return ""
	}
	return audit.Name(v)
}
