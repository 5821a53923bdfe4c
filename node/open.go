package node

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/prefill"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/audit/witness"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/prefillrpc"
	"github.com/cloison/cloison/tenancy"
)

// Spec is a node to open: values its caller read from flags, files or a
// test's options. Open opens everything else — deployment keys checked and
// recorded, the ledger, its witnesses, the tenant store, the signing key
// ring and the token verifier, the model, the replay engine, a decode
// node's prefill client — and assembles the node (New).
type Spec struct {
	// Name names the node: in its attestation record, and as the ledger
	// and tenancy actor engine:<Name>.
	Name string
	// DB is the runtime role's pool, ScanDB the one reserved to compliance
	// scans (nil: DB). The caller opened them (and migrated the database)
	// and closes them after Close.
	DB, ScanDB *pgxpool.Pool
	Keys       Keys
	// Ledger configures the ledger (Origin, CheckpointDir, the register's
	// organization and contact, regime and detection window); Open sets
	// its pool, signing key (Keys.Log) and logger.
	Ledger auditpg.Config
	// Witnesses receive every newly signed tree checkpoint, offered every
	// WitnessInterval (package audit/witness). Before the ledger opens,
	// each is asked for the latest checkpoint of this log it cosigned: the
	// ledger never signs a tree that does not extend it
	// (auditpg.Config.TrustedTrees).
	Witnesses       []*witness.Client
	WitnessInterval time.Duration
	Auth            Auth
	Model           ModelFile
	// Models are further models served beside Model (models.go), each
	// under its ModelID (ModelFile.Name, else general.name, else the file
	// name without .gguf); MemoryBudget and ModelDir are Config's.
	Models       []ModelFile
	MemoryBudget int64
	ModelDir     string
	// Tenants are created at start unless they exist (a development
	// tenant, a test's tenants), before the pool takes every stored
	// tenant's partition; one without AllowedModels is allowed every
	// model served at start.
	Tenants  []tenancy.Tenant
	Capacity Capacity
	// Scheduler and Unsafe are the engine's (engine.Config).
	Scheduler engine.SchedulerConfig
	Unsafe    engine.Unsafe
	// ReplayPages, when > 0, gives the node a replay engine: a second
	// model instance with its own pool of that many pages and arena, every
	// defence on, that runs replays alone.
	ReplayPages int
	// Decode, when set, makes this a decode node (DecodeSpec).
	Decode *DecodeSpec
	// API is the API server's configuration without what the node builds.
	// Open sets Verifier, Keys (the key ring) and, where unset, Limiter
	// (quotas leased from PostgreSQL) and Responses' KEK, model digest,
	// backend and kernel paths and replay engine.
	API          api.Config
	RefusalFlush time.Duration // Config.RefusalFlush
	Logger       *slog.Logger  // optional
	Tracer       trace.TracerProvider
}

// Keys are a node's deployment keys, read by its caller.
type Keys struct {
	// Log signs the ledger's checkpoints (one for the cluster); Trusted
	// are the public keys whose checkpoints verify here, its own included.
	Log     ed25519.PrivateKey
	Trusted map[string]ed25519.PublicKey
	// KEK seals the token signing keys.
	KEK []byte
	// Records are the keys checked against the ledger's current ones
	// before the ledger opens, and recorded (deployment_keys, with their
	// ledger events) once it is open; none: nothing is checked (tests).
	Records []audit.DeploymentKey
	// Rotate lets a record replace the recorded current key of its
	// purpose (KeyPolicy).
	Rotate bool
}

// Auth is how a node authenticates requests.
type Auth struct {
	// Issuer names the node's own token issuer (its signing key ring),
	// Audience the audience every token must name.
	Issuer, Audience string
	// External are further key sources (trusted JWKS), Providers the
	// OpenID providers whose logins the node accepts.
	External  []tenancy.KeySource
	Providers []*tenancy.Provider
	// MinRotate is the ring's minimum rotation interval (0: the default).
	// Refresh > 0 keeps the ring current: rotated when older than
	// RotateAfter, other nodes' rotations seen within Refresh.
	MinRotate, Refresh, RotateAfter time.Duration
}

// DecodeSpec is what a decode node adds: the transfer server its prefill
// nodes push KV to and the client that asks them to prefill.
type DecodeSpec struct {
	// Listener carries the transfer server (the node owns it, closed on
	// an error too); Advertise is the address prefill nodes dial ("": the
	// listener's).
	Listener  net.Listener
	Advertise string
	// Peers are the prefill nodes' PrefillService addresses (round-robin).
	Peers []string
	// ServerTLS and ClientTLS are the node-to-node mutual TLS, each
	// requiring a prefill peer's certificate.
	ServerTLS, ClientTLS *tls.Config
	Keys                 *transfer.KeyRing // the cluster key ring (manifest MACs)
	// ClusterKey is the cluster key's record, recorded with Keys.Records
	// (zero: none).
	ClusterKey audit.DeploymentKey
	Timeout    time.Duration // bound of one remote prefill
	// AttestWait is how long to wait at start for every prefill node's
	// attestation (0: one try).
	AttestWait time.Duration
	// ResolveInterval, when > 0, re-resolves Peers' names with Lookup (nil:
	// the system resolver), attesting each address before use (peers.go).
	ResolveInterval time.Duration
	Lookup          func(ctx context.Context, host string) ([]string, error)
	// ReceiverUnsafe and AttestUnsafe switch defences off (faults builds
	// only).
	ReceiverUnsafe transfer.ReceiverUnsafe
	AttestUnsafe   AttestUnsafe
}

// policy is what a start may do about key's purpose when the ledger
// records another current key: the KEK is never rotated by a restart (the
// sealed signing keys would not open), the log key only while the old one
// is still trusted (so its checkpoints keep verifying), the cluster key when
// rotation is asked for.
func (k Keys) policy(purpose audit.Name) audit.KeyPolicy {
	p := audit.KeyPolicy{Rotate: k.Rotate}
	switch purpose {
	case audit.PurposeKEK:
		p.Rotate = false
	case audit.PurposeCheckpoint:
		p.MayReplace = func(cur string) bool { _, ok := k.Trusted[cur]; return ok }
	}
	return p
}

// record records keys as current (EnsureKey, each with its ledger event).
func (k Keys) record(ctx context.Context, ledger *auditpg.Store, actor audit.Name, log *slog.Logger, keys ...audit.DeploymentKey) error {
	for _, key := range keys {
		op, err := ledger.EnsureKey(ctx, actor, key, k.policy(key.Purpose))
		if err != nil {
			return &prefill.KeyError{Key: key, Err: err}
		}
		if op != "" {
			log.Info("deployment key recorded", "purpose", key.Purpose, "key", key.ID, "op", op)
		}
	}
	return nil
}

// opened is what Open opened, closed in reverse order.
type opened []func()

func (o *opened) add(f func()) { *o = append(*o, f) }

func (o opened) close() {
	for i := len(o) - 1; i >= 0; i-- {
		o[i]()
	}
}

// Open opens a node from s and assembles it (New). Order: the deployment
// keys are checked BEFORE the ledger opens (a node holding another
// cluster's log key or KEK stops before its ledger writer could sign), and
// recorded once it is; the witnesses start with the ledger; the tenant
// store ledgers every change; the key ring and the verifier; the model;
// s.Tenants; the replay engine; a decode node's prefill client. Nothing
// serves before Start; Close closes everything Open opened, the ledger
// last.
//
// Errors: *KeyError (a key the ledger refuses), attest.ErrFailed (New),
// and those of the parts; nothing stays open on an error.
func Open(ctx context.Context, s Spec) (n *Node, err error) {
	log := s.Logger
	if log == nil {
		log = slog.Default()
	}
	var o opened
	defer func() {
		if err != nil {
			o.close()
		}
	}()
	if s.Decode != nil {
		o.add(func() { _ = s.Decode.Listener.Close() })
	}
	actor := audit.Name("engine:" + s.Name)
	for _, k := range s.Keys.Records {
		if _, err := auditpg.CheckKey(ctx, s.DB, k, s.Keys.policy(k.Purpose)); err != nil {
			return nil, &KeyError{Key: k, Err: err}
		}
	}
	lc := s.Ledger
	lc.SigningKey, lc.ScanPool = s.Keys.Log, s.ScanDB
	if lc.Logger == nil {
		lc.Logger = s.Logger
	}
	if lc.SigningKey != nil {
		lc.TrustedTrees = append(lc.TrustedTrees, witnessedTrees(ctx, s.Witnesses, lc, log)...)
	}
	if lc.OnSigningRefused == nil {
		lc.OnSigningRefused = signingAlarm(actor, log)
	}
	ledger, err := auditpg.Open(ctx, s.DB, lc)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	o.add(func() { ledger.Close() })
	if err := s.Keys.record(ctx, ledger, actor, log, s.Keys.Records...); err != nil {
		return nil, err
	}
	// From here on the ledger requires event signatures (a no-op once
	// marked): an unsigned admin or register event appended by whoever
	// holds only the database's credentials is a verification break.
	if s.Keys.Log != nil {
		if _, err := ledger.BeginSigning(ctx, actor); err != nil {
			return nil, fmt.Errorf("ledger: %w", err)
		}
	}
	stopWitnesses, sub, err := startWitnesses(ctx, s.Witnesses, s.WitnessInterval, ledger, log)
	if err != nil {
		return nil, err
	}
	o.add(stopWitnesses)

	// Every tenancy change ledgers its event in its own transaction, and
	// writes its row from that event (row_apply); a row that is not what
	// its last event (signed by a log key) states is refused, with an
	// incident. Rows older than the binding are bound before anything
	// serves.
	tenants := tenancy.NewStore(s.DB).WithLedger(ledger).WithEventKeys(rowKeys(s.Keys)).WithRowAlarm(rowAlarm(ledger, actor, log))
	sysCtx := tenancy.WithActor(ctx, actor)
	if n, err := tenants.BindUnbound(sysCtx); err != nil {
		return nil, fmt.Errorf("tenancy: binding rows to events: %w", err)
	} else if n > 0 {
		log.Info("tenancy: rows bound to their ledger events", "rows", n)
	}
	verifier, ring, err := s.Auth.open(sysCtx, tenants, s.Keys.KEK, log, &o)
	if err != nil {
		return nil, err
	}
	lm, err := s.Model.Load(s.Model.Options)
	if err != nil {
		return nil, err
	}
	o.add(lm.Close)
	ids := []string{lm.Name}
	var further []Model
	for _, mf := range s.Models {
		inst, err := mf.Load(mf.Options)
		if err != nil {
			return nil, err
		}
		o.add(inst.Close)
		inst.Name = ModelID(inst, mf.Path, mf.Name)
		ids = append(ids, inst.Name)
		further = append(further, inst.Model)
	}
	var everyModel []cloison.TenantID
	for _, t := range s.Tenants {
		if t.AllowedModels == nil {
			t.AllowedModels = ids
			everyModel = append(everyModel, t.ID)
		}
		if err := ensureTenant(sysCtx, tenants, t); err != nil {
			return nil, fmt.Errorf("tenant %s: %w", t.ID, err)
		}
		if t.AllowedModels != nil && slices.Contains(everyModel, t.ID) {
			// It existed already: it is allowed the models served now.
			if err := allowModels(sysCtx, tenants, t.ID, ids...); err != nil {
				return nil, fmt.Errorf("tenant %s: %w", t.ID, err)
			}
		}
	}
	acfg := s.API
	acfg.Verifier, acfg.Keys = verifier, ring
	if acfg.Transparency == nil {
		acfg.Transparency = transparency{ledger: ledger, sub: sub, clients: s.Witnesses}
	}
	if acfg.Limiter == nil {
		acfg.Limiter = tenancy.NewLimiter().WithBudget(tenants)
	}
	if err := s.responses(&acfg.Responses, lm, log, &o); err != nil {
		return nil, err
	}
	cfg := Config{Model: lm.Model, Models: further, EveryModel: everyModel, MemoryBudget: s.MemoryBudget, ModelDir: s.ModelDir, ModelFile: s.Model, Capacity: s.Capacity, Scheduler: s.Scheduler, Unsafe: s.Unsafe, Ledger: ledger, NodeName: s.Name, Actor: actor, EventKeys: rowKeys(s.Keys),
		Tenants: tenants, API: acfg, RefusalFlush: s.RefusalFlush, Logger: s.Logger, Tracer: s.Tracer}
	if s.Decode != nil {
		if cfg.Decode, err = s.Decode.open(ctx, lm.Model, log); err != nil {
			return nil, err
		}
		o = o[1:] // the listener is the node's now (closeDecode)
		if s.Decode.ClusterKey.ID != "" {
			if err := s.Keys.record(ctx, ledger, actor, log, s.Decode.ClusterKey); err != nil {
				cfg.Decode.Listener.Close()
				cfg.Decode.Client.Close()
				return nil, err
			}
		}
	}
	if n, err = New(ctx, cfg); err != nil {
		return nil, err
	}
	n.Ledger, n.Tenants, n.Ring, n.Model = ledger, tenants, ring, lm.Model
	n.opened = o
	return n, nil
}

// open builds the key ring and the verifier, and keeps the ring current
// until the node closes.
func (a Auth) open(ctx context.Context, tenants *tenancy.Store, kek []byte, log *slog.Logger, o *opened) (*tenancy.Verifier, *tenancy.KeyRing, error) {
	opts := []tenancy.KeyRingOption{tenancy.WithLogger(log)}
	if a.MinRotate > 0 {
		opts = append(opts, tenancy.WithMinRotateInterval(a.MinRotate))
	}
	ring, err := tenancy.OpenKeyRing(ctx, tenants, a.Issuer, kek, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("signing keys: %w", err)
	}
	verifier, err := tenancy.NewVerifier(tenancy.VerifierConfig{Audience: a.Audience, Sources: append([]tenancy.KeySource{ring}, a.External...),
		Providers: a.Providers, Tenants: tenants, Clients: tenants, Revocations: tenants})
	if err != nil {
		return nil, nil, err
	}
	if a.Refresh > 0 {
		// Rotate when the current key is older than RotateAfter (once
		// across all nodes); pick up other nodes' rotations and
		// retirements within Refresh.
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			ring.Run(rctx, a.Refresh, a.RotateAfter, func(err error) { log.Warn("signing keys", "err", err) })
		}()
		o.add(func() { cancel(); <-done })
	}
	return verifier, ring, nil
}

// allowModels adds models to tenant id's allowed models (a tenant.updated
// event when any was missing, none otherwise).
func allowModels(ctx context.Context, s *tenancy.Store, id cloison.TenantID, models ...string) error {
	t, err := s.Tenant(ctx, id)
	if err != nil {
		return err
	}
	missing := false
	for _, m := range models {
		missing = missing || !t.Allows(m)
	}
	if !missing {
		return nil
	}
	_, err = s.UpdateTenant(ctx, id, func(t *tenancy.Tenant) error {
		for _, m := range models {
			if !t.Allows(m) {
				t.AllowedModels = append(t.AllowedModels, m)
			}
		}
		return nil
	})
	return err
}

// ensureTenant creates t when it does not exist; a node started beside it
// that created it first (ErrConflict) is success.
func ensureTenant(ctx context.Context, s *tenancy.Store, t tenancy.Tenant) error {
	if _, err := s.Tenant(ctx, t.ID); err == nil {
		return nil
	} else if !errors.Is(err, tenancy.ErrNotFound) {
		return err
	}
	_, err := s.CreateTenant(ctx, t)
	if errors.Is(err, tenancy.ErrConflict) {
		_, err = s.Tenant(ctx, t.ID)
	}
	return err
}

// witnessedTrees asks each witness for the latest checkpoint of the log it
// cosigned. A witness that does not answer is logged and skipped (the
// state directory's checkpoints still hold the node to what it signed); an
// answer is only used once its cosignature and the log's signature verify.
func witnessedTrees(ctx context.Context, clients []*witness.Client, lc auditpg.Config, log *slog.Logger) []auditpg.TrustedTree {
	if len(clients) == 0 {
		return nil
	}
	origin := lc.Origin
	if origin == "" {
		origin = "cloison"
	}
	vkey, err := audit.TreeVerifierKey(origin, lc.SigningKey.Public().(ed25519.PublicKey))
	if err != nil {
		return nil // Open refuses the origin
	}
	var out []auditpg.TrustedTree
	for _, c := range clients {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		h, _, err := c.Latest(wctx, vkey)
		cancel()
		switch {
		case errors.Is(err, witness.ErrNothingCosigned):
		case err != nil:
			log.Warn("witness: latest cosigned checkpoint not read at start", "witness", c.Name(), "err", err)
		default:
			out = append(out, auditpg.TrustedTree{TreeHead: h, Source: "witness " + c.Name()})
		}
	}
	return out
}

// startWitnesses logs the ledger's tree verifier key (what witnesses and
// verifiers are configured with) and starts the submitter; the returned
// function stops it (before the ledger closes). A witness that is down or
// refuses is logged and counted, and never holds up an append.
func startWitnesses(ctx context.Context, clients []*witness.Client, interval time.Duration, ledger *auditpg.Store, log *slog.Logger) (func(), *witness.Submitter, error) {
	vkey, err := ledger.TreeVerifierKey()
	if err != nil {
		return nil, nil, err
	}
	log.Info("ledger tree checkpoints", "tree_vkey", vkey, "witnesses", len(clients))
	if len(clients) == 0 {
		return func() {}, nil, nil
	}
	sub, err := witness.NewSubmitter(ctx, ledger, vkey, clients, log)
	if err != nil {
		return nil, nil, fmt.Errorf("witnesses: %w", err)
	}
	wctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); sub.Run(wctx, interval) }()
	return func() { cancel(); <-done }, sub, nil
}

// transparency is the ledger and its witnesses as the API sees them
// (api.Transparency): the metrics' refusal counts, and cosigned
// checkpoints asked of the witnesses.
type transparency struct {
	ledger  *auditpg.Store
	sub     *witness.Submitter // nil: no witness
	clients []*witness.Client
}

// WitnessedCheckpoint asks each witness for the latest checkpoint of the
// log it cosigned, requires the ledger's latest tree to be consistent with
// every answer (a witness the ledger contradicts fails the request with
// audit.ErrFork or audit.ErrSmallerTree) and returns the checkpoint k of
// them cosigned, with their fresh cosignatures. Without witnesses: the
// stored cosignatures.
func (t transparency) WitnessedCheckpoint(ctx context.Context, k int) ([]byte, error) {
	if len(t.clients) == 0 {
		return t.ledger.CosignedCheckpoint(ctx, k)
	}
	vkey, err := t.ledger.TreeVerifierKey()
	if err != nil {
		return nil, err
	}
	latest, err := t.ledger.TreeCheckpoint(ctx) // the refusal, once the ledger refuses to sign
	if err != nil {
		return nil, err
	}
	h, err := audit.OpenTreeHead(latest, vkey)
	if err != nil {
		return nil, err
	}
	obs, err := witness.VerifyWitnessed(ctx, t.clients, vkey, h, t.ledger.ConsistencyProof, k)
	if err != nil {
		return nil, err
	}
	return witness.Combine(obs, k)
}

func (t transparency) SigningRefusals() (uint64, bool) {
	st := t.ledger.Stats()
	return st.SignRefusals, st.SigningRefused
}

func (t transparency) WitnessStats() []api.WitnessStat {
	if t.sub == nil {
		return nil
	}
	var out []api.WitnessStat
	for _, w := range t.sub.Stats() {
		out = append(out, api.WitnessStat{Witness: w.Witness, Size: w.Size, Cosigned: w.Cosigned, Refused: w.Refused, Failures: w.Failures})
	}
	return out
}

// open builds a decode node's part of the assembly: the prefill client
// (advertising the transfer server) and how the prefill nodes are attested
// at start.
func (d *DecodeSpec) open(ctx context.Context, m Model, log *slog.Logger) (*Decode, error) {
	advertise := d.Listener.Addr().String()
	if d.Advertise != "" {
		advertise = d.Advertise
	}
	client, err := prefillrpc.NewClient(d.Peers, advertise, d.ClientTLS)
	if err != nil {
		return nil, err
	}
	log.Info("decode node", "transfer_addr", advertise, "prefill_peers", d.Peers, "cluster_key", d.Keys.Current())
	out := &Decode{Listener: d.Listener, ServerOptions: transfer.ServerOptions(d.ServerTLS), Keys: d.Keys, Client: client, Timeout: d.Timeout,
		ReceiverUnsafe: d.ReceiverUnsafe, AttestUnsafe: d.AttestUnsafe,
		Peers: func(ctx context.Context, _ attest.Attestation) ([]attest.PrefillPeer, error) {
			return attestPeers(ctx, client, hex.EncodeToString(m.Digest[:]), d.AttestWait)
		}}
	if d.ResolveInterval > 0 { // names re-resolved, each address attested before use
		lookup := d.Lookup
		if lookup == nil {
			lookup = net.DefaultResolver.LookupHost
		}
		w := &peerWatcher{entries: d.Peers, lookup: lookup, client: client, digest: hex.EncodeToString(m.Digest[:]), log: log}
		out.Peers = func(ctx context.Context, self attest.Attestation) ([]attest.PrefillPeer, error) {
			w.self = self
			return w.initial(ctx, d.AttestWait)
		}
		out.watcher = w
		out.OnAttested = func(capacity int) {
			w.capacity = capacity
			go w.run(ctx, d.ResolveInterval)
		}
	}
	return out, nil
}

// attestPeers fetches every prefill node's attestation of the model of
// digest (hex), retrying for up to wait while nodes start.
func attestPeers(ctx context.Context, client *prefillrpc.Client, digest string, wait time.Duration) ([]attest.PrefillPeer, error) {
	deadline := time.Now().Add(wait)
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		peers, err := client.Attest(actx, digest)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return peers, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}
