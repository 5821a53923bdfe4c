package main

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/node"
	"github.com/cloison/cloison/tenancy"
)

// spec is the node the flags describe (node.Spec): keys read from their
// files (keys.go), the ledger, witnesses, issuers, model, capacity, API
// limits and, for a decode node, its transfer listener and prefill peers.
func (c config) spec(ctx context.Context, db, scanDB *pgxpool.Pool, log *slog.Logger, tp trace.TracerProvider) (node.Spec, error) {
	// Keys (keys.go): from files, or under --state-dir with --dev. One log
	// key for the cluster; Open checks them against the recorded ones
	// before anything is signed.
	cpKey, trusted, err := c.keys.logKeys(c.stateDir)
	if err != nil {
		return node.Spec{}, err
	}
	kek, err := c.keys.kek(c.stateDir)
	if err != nil {
		return node.Spec{}, fmt.Errorf("key-encryption key: %w", err)
	}
	cpDir := filepath.Join(c.stateDir, "checkpoints")
	if err := os.MkdirAll(cpDir, 0o700); err != nil {
		return node.Spec{}, err
	}
	auth, err := c.auth(ctx, log)
	if err != nil {
		return node.Spec{}, err
	}
	witnesses, err := c.witness.clients()
	if err != nil {
		return node.Spec{}, err
	}
	zeroing, err := isolation.ParseZeroing(c.zeroing)
	if err != nil {
		return node.Spec{}, err
	}
	mf, err := c.modelFile()
	if err != nil {
		return node.Spec{}, err
	}
	resp, err := c.responses.config()
	if err != nil {
		return node.Spec{}, err
	}
	s := node.Spec{Name: c.node, DB: db, ScanDB: scanDB, Model: mf, Models: c.furtherModels(), MemoryBudget: c.modelBudget, ModelDir: c.modelDir, Capacity: c.capacity(zeroing), Auth: auth, ReplayPages: c.responses.replayPages,
		Keys: node.Keys{Log: cpKey, Trusted: trusted, KEK: kek, Rotate: c.keys.rotate,
			Records: []audit.DeploymentKey{logKeyRecord(cpKey.Public().(ed25519.PublicKey)), kekRecord(kek)}},
		Ledger: auditpg.Config{Origin: audit.Name(c.origin), CheckpointDir: cpDir, Organization: audit.Organization{Name: c.orgName, NEQ: c.orgNEQ},
			Contact: c.privacyOfficer, Regime: c.registerRegime, DetectionWindow: c.incidentGroupWindow},
		Witnesses: witnesses, WitnessInterval: c.witness.interval,
		Scheduler:    engine.SchedulerConfig{MaxBatchTokens: c.maxBatchTokens, MaxRunning: c.maxRunning, ChunkTokens: c.chunkTokens, ContendedBatchTokens: c.contendedBatchTokens, PrefixCache: c.prefixCache},
		RefusalFlush: refusalFlush(c.refusalFlush), Logger: log, Tracer: tp,
		API: api.Config{Logger: log, MaxBody: c.maxRequestBytes, MaxAdapterBytes: c.maxAdapterBytes, MaxN: c.maxN, GrammarBytes: c.grammarBytes, DefaultMaxTokens: c.defaultMaxTokens, MaxStreams: c.net.maxStreams, MaxStreamsPerTenant: c.net.maxPerTenant,
			Verify:    audit.VerifyOptions{Keys: trusted, ExternalDir: cpDir},
			ExportKey: cpKey, Streams: c.streams, Metrics: c.obs.metricsConfig(), Responses: resp, ServerTiming: c.serverTiming}}
	if c.devTenant != "" {
		s.Tenants = []tenancy.Tenant{devTenant(cloison.TenantID(c.devTenant))}
	}
	if c.roles.role == roleDecode {
		if s.Decode, err = c.decodeSpec(); err != nil {
			return node.Spec{}, err
		}
	}
	return s, nil
}

// auth is how the node authenticates: its own issuer, --trust-jwks's
// external issuers and --idp's OpenID providers, and the key ring's
// rotation settings.
func (c config) auth(ctx context.Context, log *slog.Logger) (node.Auth, error) {
	a := node.Auth{Issuer: c.issuer, Audience: c.audience, MinRotate: c.keyMinRotate, Refresh: c.keyRefresh, RotateAfter: c.keyRotateAfter}
	for _, spec := range c.trustJWKS {
		iss, path, ok := strings.Cut(spec, "=")
		if !ok || iss == "" || path == "" {
			return a, fmt.Errorf("--trust-jwks %q: want ISSUER=PATH", spec)
		}
		ks, err := tenancy.LoadJWKSFile(iss, path)
		if err != nil {
			return a, fmt.Errorf("--trust-jwks %s: %w", iss, err)
		}
		a.External = append(a.External, ks)
		log.Info("trusting an external issuer", "issuer", iss, "jwks", path)
	}
	var err error
	a.Providers, err = c.idp.providers(ctx, log) // idp.go
	return a, err
}

// modelFile is --model (the built-in context bag, synthesized under
// --state-dir, when unset) on --backend.
func (c config) modelFile() (node.ModelFile, error) {
	path := c.modelPath
	if path == "" {
		var err error
		if path, err = builtinModel(c.stateDir); err != nil {
			return node.ModelFile{}, err
		}
	}
	return node.ModelFile{Path: path, Backend: c.backend, Options: kernels.Options{Threads: c.threads}, Name: c.modelName}, nil
}

// devTenant is --dev-tenant's tenant, created at start when missing and
// allowed the served model (node.Spec.Tenants).
func devTenant(id cloison.TenantID) tenancy.Tenant {
	return tenancy.Tenant{ID: id, Name: "Development tenant", Status: tenancy.StatusActive,
		Tier: isolation.TierShared, Zeroing: isolation.ZeroCrossTenant, Classification: tenancy.ClassInternal,
		Quotas:          tenancy.Quotas{MaxConcurrent: 64, KVPages: 1024, TokensPerMinute: 1_000_000, MaxContext: 1 << 20},
		IncidentContact: "dev@localhost"}
}

// capacity is the KV pool and attestation the flags ask for.
func (c config) capacity(zeroing isolation.Zeroing) node.Capacity {
	return node.Capacity{Pool: isolation.Config{Pages: c.kvPages, PageTokens: c.pageTokens, DefaultZeroing: zeroing},
		ServedContext: c.servedContext, K: c.attestK, Labels: c.labels(), KV: c.kvType}
}

// decodeSpec is a decode node's part (node.DecodeSpec): the node-to-node
// TLS, the cluster key, --prefill-peers (re-resolved with
// --prefill-resolve-interval) and the transfer server's listener on
// --transfer-addr, opened last.
func (c config) decodeSpec() (*node.DecodeSpec, error) {
	serverTLS, clientTLS, err := c.roles.tlsConfigs(rolePrefill, c.labels())
	if err != nil {
		return nil, err
	}
	keys, clusterKey, err := c.roles.keyRing(c.stateDir, c.keys.dev)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", c.roles.transferAddr)
	if err != nil {
		return nil, fmt.Errorf("--transfer-addr: %w", err)
	}
	return &node.DecodeSpec{Listener: ln, Advertise: c.roles.transferAdvertise, Peers: c.roles.peers(), ServerTLS: serverTLS, ClientTLS: clientTLS,
		Keys: keys, ClusterKey: clusterKey, Timeout: c.roles.prefillTimeout, AttestWait: c.roles.attestWait,
		ResolveInterval: c.peers.interval, Lookup: c.peers.lookup()}, nil
}

// explainKey adds to a key the ledger refuses what the operator should do.
func explainKey(err error) error {
	var ke *node.KeyError
	if errors.As(err, &ke) {
		return explain(ke.Key, ke.Err)
	}
	return err
}

// labels are the residency labels the node attests.
func (c config) labels() attest.Labels { return attest.Labels{Region: c.nodeRegion, Tier: c.nodeTier} }

// modelArg is one --model: PATH or PATH,id=ALIAS.
type modelArg struct{ path, id string }

// parseModelArg reads one --model value; any key other than id is refused.
func parseModelArg(v string) (modelArg, error) {
	parts := strings.Split(v, ",")
	m := modelArg{path: parts[0]}
	if m.path == "" {
		return m, fmt.Errorf("want PATH or PATH,id=ALIAS")
	}
	for _, p := range parts[1:] {
		k, val, ok := strings.Cut(p, "=")
		if !ok || k != "id" || val == "" || m.id != "" {
			return m, fmt.Errorf("%q: want id=ALIAS once", p)
		}
		m.id = val
	}
	return m, nil
}

// furtherModels are the --model files after the first (node.Spec.Models).
func (c config) furtherModels() []node.ModelFile {
	var out []node.ModelFile
	for _, m := range c.models {
		out = append(out, node.ModelFile{Path: m.path, Backend: c.backend, Options: kernels.Options{Threads: c.threads}, Name: m.id})
	}
	return out
}
