package prefill

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/prefillrpc"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

// Config assembles a prefill node: it computes prompt KV for decode
// nodes and pushes it over the verified transfer; it serves no public API
// and writes no ledger.
type Config struct {
	Model Model
	// Models are further models served beside Model, each with its own
	// pool sized by Capacity, arena, sender and attestation (its served
	// context at most its own); a PrefillRequest names one by digest. The
	// caller owns their instances.
	Models   []Model
	Capacity Capacity
	// Tenants: every stored tenant gets its partition at start; a tenant
	// created later gets it on its first prefill.
	Tenants TenantSource
	Keys    *transfer.KeyRing // the cluster key ring (manifest MACs)
	// Listener and ServerOptions (mutual TLS) carry the PrefillService;
	// ClientTLS dials the decode nodes' transfer servers.
	Listener      net.Listener
	ServerOptions []grpc.ServerOption
	ClientTLS     *tls.Config
	// DecodePeers, if set, are the only decode transfer addresses this
	// node pushes to (prefillrpc.Server.TrustDecode).
	DecodePeers []string
	// Chunk is the prefill chunk per forward pass (0: the runner's).
	Chunk int
	// AttestUnsafe lets a node whose own attestation failed start and
	// publish it as failed (faults builds only).
	AttestUnsafe AttestUnsafe
	// Unsafe and SenderUnsafe switch defences off (faults builds only).
	Unsafe       engine.Unsafe
	SenderUnsafe transfer.SenderUnsafe
	Logger       *slog.Logger // optional
	// Tracer (optional) records the PrefillService calls, children of the
	// decode node's transfer span (the traceparent in their metadata), and
	// within them prefill.compute and transfer.send.
	Tracer trace.TracerProvider
}

// Prefill is an assembled prefill node.
type Node struct {
	Pool        *isolation.Pool
	Attestation attest.Attestation // its own, as it publishes it
	svc         *prefillrpc.Server
	gs          *grpc.Server
	ln          net.Listener
	// Model is the model the node serves first (set by Open), Models
	// the further ones.
	Model      Model
	Models     []Model
	closeModel func() // Open's instances, closed by Shutdown
	calls      atomic.Int64
	metrics    *metrics
}

// New assembles a prefill node: its attestation first (reject before
// allocate starts here: a pool that cannot hold a whole request of the
// served context refuses to start), the pool with the tenants' partitions,
// the arena, the sender and the PrefillService. Serve starts it.
//
// Errors: attest.ErrFailed, and those of the parts.
func New(ctx context.Context, cfg Config) (*Node, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	m := cfg.Model
	first, err := newModel(ctx, cfg, m, false)
	if err != nil {
		return nil, err
	}
	att := first.att
	log.Info("capacity attested", "model", m.Name, "served_context", att.ServedContext, "pool_tokens", att.PoolTokens, "k", att.K, "ok", att.OK,
		"region", att.Labels.Region, "tier", att.Labels.Tier)
	further := make([]*prefillModel, 0, len(cfg.Models))
	seen := map[transfer.Digest]bool{m.Digest: true}
	names := map[string]bool{m.Name: true}
	for _, fm := range cfg.Models {
		if seen[fm.Digest] {
			return nil, fmt.Errorf("model %s: %w", fm.Name, ErrModelTwice)
		}
		seen[fm.Digest] = true
		pm, err := newModel(ctx, cfg, fm, true)
		if err != nil {
			return nil, fmt.Errorf("model %s: %w", fm.Name, err)
		}
		if names[pm.name] {
			// Two files of one name (two synthetic bags): told apart by
			// digest in the logs and the metrics' model_name.
			pm.name += "@" + hex.EncodeToString(fm.Digest[:6])
		}
		names[pm.name] = true
		log.Info("capacity attested", "model", pm.name, "served_context", pm.att.ServedContext, "pool_tokens", pm.att.PoolTokens, "ok", pm.att.OK)
		further = append(further, pm)
	}
	p := &Node{Pool: first.pool, Attestation: att, ln: cfg.Listener, metrics: newMetrics(append([]*prefillModel{first}, further...))}
	// One prefill at a time, whatever the model: a model's forward pass
	// and its arena are driven by one caller (the engine loop does the
	// same on a decode node), and the models share the machine.
	sem := make(chan struct{}, 1)
	prefillWith := func(pm *prefillModel) prefillrpc.PrefillFunc {
		return func(ctx context.Context, d transfer.Dialer, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, to transfer.Target) error {
			p.calls.Add(1)
			asked := time.Now()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				err := cloison.NewError(cloison.CodeCanceled, "prefill: "+ctx.Err().Error())
				pm.metrics.observe(len(tokens), time.Since(asked), time.Since(asked), err)
				return err
			}
			defer func() { <-sem }()
			pm.runner.Dialer = d // under sem
			start := time.Now()
			err := pm.runner.Prefill(ctx, tenant, req, tokens, to)
			pm.metrics.observe(len(tokens), start.Sub(asked), time.Since(start), err)
			log.Info("prefill", "model", pm.name, "tenant", tenant, "request", req, "tokens", len(tokens), "elapsed", time.Since(start), "code", cloison.ErrorCode(err), "err", err)
			return err
		}
	}
	pools := []*isolation.Pool{first.pool}
	for _, pm := range further {
		pools = append(pools, pm.pool)
	}
	before := func(ctx context.Context, tenant cloison.TenantID) error {
		for _, pool := range pools {
			if _, err := pool.Partition(tenant); err == nil {
				continue
			}
			// A tenant created since this node started: its partition now.
			t, err := cfg.Tenants.Tenant(ctx, tenant)
			if err != nil {
				return isolation.ErrUnknownTenant
			}
			if _, err := pool.EnsureTenant(PoolTenant(t)); err != nil && !errors.Is(err, isolation.ErrInvalidConfig) {
				return err
			}
		}
		return nil
	}
	p.svc = prefillrpc.NewServer(prefillWith(first), cfg.ClientTLS, before)
	if len(cfg.DecodePeers) > 0 {
		p.svc.TrustDecode(cfg.DecodePeers)
	}
	p.svc.SetAttestation(att, hex.EncodeToString(m.Digest[:]))
	for _, pm := range further {
		if err := p.svc.AddModel(pm.att, hex.EncodeToString(pm.digest[:]), prefillWith(pm)); err != nil {
			return nil, err
		}
	}
	p.gs = grpc.NewServer(append(tracing.ServerOptions(cfg.Tracer), cfg.ServerOptions...)...)
	prefillrpc.Register(p.gs, p.svc)
	return p, nil
}

// prefillModel is one model a prefill node serves: its own pool, arena,
// sender, runner and attestation.
type prefillModel struct {
	name    string
	digest  transfer.Digest
	pool    *isolation.Pool
	att     attest.Attestation
	runner  *engine.PrefillRunner
	metrics *modelMetrics
}

// ErrModelTwice: a prefill node serves a model file once (requests name
// it by its digest).
var ErrModelTwice = cloison.NewError(cloison.CodeInvalid, "prefill: a model file served twice")

// newModel attests m (BEFORE anything is allocated: a pool that cannot
// hold a whole request of its served context refuses the node), then
// builds its pool with every stored tenant's partition, its arena, sender
// and runner. The node's served context bounds every further model's
// (further); one of a shorter context serves its own, as on a decode node.
func newModel(ctx context.Context, cfg Config, m Model, further bool) (*prefillModel, error) {
	c := cfg.Capacity
	if further && c.ServedContext > m.Model.Context {
		c.ServedContext = m.Model.Context
	}
	att, err := selfAttestation(cfg.AttestUnsafe, attest.Config{ModelContext: m.Model.Context, ServedContext: c.ServedContext, PoolPages: c.Pool.Pages,
		PageTokens: c.Pool.PageTokens, K: c.K, Zeroing: c.Pool.DefaultZeroing, Labels: c.Labels, KVType: c.KV.String()})
	if err != nil {
		return nil, err
	}
	att.Model, att.ModelDigest = m.Name, hex.EncodeToString(m.Digest[:])
	pool, err := isolation.NewPool(c.Pool)
	if err != nil {
		return nil, err
	}
	all, err := cfg.Tenants.Tenants(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range all {
		if err := pool.AddTenant(PoolTenant(t)); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", t.ID, err)
		}
	}
	arena, err := m.Backend.NewArena(m.Model.ArenaConfig(c.Pool.Pages, c.Pool.PageTokens, c.KV))
	if err != nil {
		return nil, err
	}
	sender, err := transfer.NewSender(transfer.SenderConfig{Pool: pool, Arena: arena, Keys: cfg.Keys, Model: m.Digest, Unsafe: cfg.SenderUnsafe})
	if err != nil {
		return nil, err
	}
	runner := &engine.PrefillRunner{Model: m.Model, Pool: pool, Arena: arena, Sender: sender, Chunk: cfg.Chunk, Unsafe: cfg.Unsafe,
		Tracer: tracing.Tracer(cfg.Tracer)}
	return &prefillModel{name: m.Name, digest: m.Digest, pool: pool, att: att, runner: runner}, nil
}

// MetricsHandler serves the node's Prometheus metrics (metrics.go);
// like api.Server's, it authenticates no one: a listener of its own.
func (p *Node) MetricsHandler() http.Handler { return p.metrics.handler }

// Calls is the number of prefills the node was asked for.
func (p *Node) Calls() int { return int(p.calls.Load()) }

// Serve serves the PrefillService until Shutdown.
func (p *Node) Serve() error { return p.gs.Serve(p.ln) }

// Shutdown lets in-flight prefills finish until ctx ends, then stops the
// service. Idempotent.
func (p *Node) Shutdown(ctx context.Context) {
	stopped := make(chan struct{})
	go func() { p.gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		p.gs.Stop()
	}
	_ = p.ln.Close()
	p.svc.Close()
	if p.closeModel != nil {
		p.closeModel()
		p.closeModel = nil
	}
}

// Spec is a prefill node to open (Open): values its caller
// read from flags, files or a test's options.
type Spec struct {
	// DB is the runtime role's pool: the cluster key is checked against
	// the recorded one, and the tenants read from it. The caller closes
	// it after Shutdown.
	DB *pgxpool.Pool
	// Tenants, when set, is read instead of DB's tenant store.
	Tenants TenantSource
	// ClusterKey is the cluster key's record (zero: not checked); Rotate
	// lets it differ from the recorded one. A prefill node writes no
	// ledger: it checks its key against the one the decode nodes
	// recorded, and never records one itself.
	ClusterKey audit.DeploymentKey
	Rotate     bool
	Keys       *transfer.KeyRing // the cluster key ring (manifest MACs)
	Model      ModelFile
	// Models are further models (Config.Models), each served as its
	// ModelFile.Name (or the file's general.name, or its file name).
	Models   []ModelFile
	Capacity Capacity
	// Listener carries the PrefillService (the node owns it, closed on an
	// error too); ServerTLS and ClientTLS are the node-to-node mutual TLS,
	// each requiring a decode peer's certificate.
	Listener             net.Listener
	ServerTLS, ClientTLS *tls.Config
	DecodePeers          []string // Config.DecodePeers
	Chunk                int      // Config.Chunk
	// Unsafe, SenderUnsafe and AttestUnsafe switch defences off (faults
	// builds only).
	Unsafe       engine.Unsafe
	SenderUnsafe transfer.SenderUnsafe
	AttestUnsafe AttestUnsafe
	Logger       *slog.Logger // optional
	Tracer       trace.TracerProvider
}

// Open opens a prefill node from s: the cluster key checked against
// the ledger's record, the model loaded, and the node assembled
// (New). Serve starts it; Shutdown stops it and closes the model.
//
// Errors: *KeyError (the cluster key is not the recorded one),
// attest.ErrFailed, and those of the parts; nothing stays open on an error.
func Open(ctx context.Context, s Spec) (_ *Node, err error) {
	defer func() {
		if err != nil {
			_ = s.Listener.Close()
		}
	}()
	if s.ClusterKey.ID != "" {
		if _, err := auditpg.CheckKey(ctx, s.DB, s.ClusterKey, audit.KeyPolicy{Rotate: s.Rotate}); err != nil {
			return nil, &KeyError{Key: s.ClusterKey, Err: err}
		}
	}
	lm, err := s.Model.Load(s.Model.Options)
	if err != nil {
		return nil, err
	}
	insts := []*Instance{lm}
	closeAll := func() {
		for _, in := range insts {
			in.Close()
		}
	}
	var further []Model
	for _, mf := range s.Models {
		in, err := mf.Load(mf.Options)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("model %s: %w", mf.Path, err)
		}
		insts = append(insts, in)
		further = append(further, in.Model)
	}
	tenants := s.Tenants
	if tenants == nil {
		tenants = tenancy.NewStore(s.DB)
	}
	p, err := New(ctx, Config{Model: lm.Model, Models: further, Capacity: s.Capacity, Tenants: tenants, Keys: s.Keys, Listener: s.Listener,
		ServerOptions: transfer.ServerOptions(s.ServerTLS), ClientTLS: s.ClientTLS, DecodePeers: s.DecodePeers, Chunk: s.Chunk,
		Unsafe: s.Unsafe, SenderUnsafe: s.SenderUnsafe, AttestUnsafe: s.AttestUnsafe, Logger: s.Logger, Tracer: s.Tracer})
	if err != nil {
		closeAll()
		return nil, err
	}
	p.Model, p.Models, p.closeModel = lm.Model, further, closeAll
	return p, nil
}

// KeyError is a deployment key the ledger refuses (auditpg.CheckKey,
// Store.EnsureKey): its caller says what the operator should do.
type KeyError struct {
	Key audit.DeploymentKey
	Err error
}

func (e *KeyError) Error() string { return fmt.Sprintf("%s key: %v", e.Key.Purpose, e.Err) }
func (e *KeyError) Unwrap() error { return e.Err }
