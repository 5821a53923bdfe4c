// Command cloisond is the Cloison server: it migrates the database, loads a
// model, attests that its KV pool can hold the context it serves (refusing to
// start otherwise), and serves the OpenAI-compatible, admin and compliance
// APIs over HTTP and gRPC with every request authenticated, policy-checked and
// audited.
//
// The node itself (pool and partitions, attestation, engine, policies, API
// server, decode and prefill roles) is assembled by internal/node, as the
// tests assemble it; this command opens what it is made of.
//
// Node roles (--role, roles.go): both (the default: one node admits, prefills
// and decodes), decode (serves the APIs and decodes; prompts are prefilled on
// --prefill-peers and arrive by verified transfer on --transfer-addr) and
// prefill (serves PrefillService on --prefill-addr and /healthz on --addr;
// no public API). Node-to-node traffic is mutual TLS (--tls-ca, --tls-cert,
// --tls-key; cloisonctl cert init) and transfer manifests are authenticated
// with the cluster key (--cluster-key).
//
// Keys (keys.go): --kek-file, --log-key-file (one log signing key for the
// cluster, so every node verifies its peers' checkpoints; --trust-log-key
// for earlier ones) and --cluster-key are files or mounted secrets. Only
// --dev (make run, the e2e tests) creates a missing one under --state-dir;
// otherwise a start without them is refused. Each key's id is recorded in
// the ledger (deployment_keys, key.created/rotated/revoked) at start, and a
// node holding another key than the recorded one stops before it signs.
//
// Database (db.go): --database-url logs in as the runtime role itself
// (checked on every connection); --migrate-database-url, an administrator's,
// serves only role setup and migrations at start. --db-max-conns bounds the
// connections, --db-scan-conns of them reserved to compliance scans, so the
// request path never waits on a scan.
//
// Replicas: role setup and migrations run under advisory locks (concurrent
// starts all succeed); tokens-per-minute quotas are leased from PostgreSQL
// (tenancy.Limiter.WithBudget); --prefill-resolve-interval re-resolves
// prefill peer names, attesting each address before use (peers.go);
// --drain-period keeps serving with /readyz 503 after SIGTERM (drain.go).
//
// Operations (metrics.go): logs are JSON lines on stderr at --log-level
// (debug, info, warn, error; info includes one access line per HTTP request
// and gRPC call, probes at debug). Prometheus metrics (api.Server's
// MetricsHandler) are served on their own listener, --metrics-addr (default
// 127.0.0.1:9464, empty: none), never on the public API and not behind an
// admin JWT; a non-loopback address is refused unless --metrics-token-file
// names the bearer token scrapers must send (read once at start, owner-only
// modes). --metrics-tenants (a list) or --metrics-max-tenants (the first N
// seen, default 32) bound the tenant label; the rest are "other". Prefill
// nodes serve no metrics.
//
// --version (as the only or first argument) prints the version, commit and Go
// version (internal/buildinfo) and exits.
//
// Configuration: flags; each flag also reads the environment variable
// CLOISON_<FLAG> (dashes as underscores, e.g. CLOISON_KV_PAGES), and
// --config names a JSON file of {"flag-name": value} read first. Flags beat
// the environment, which beats the file.
package main

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/internal/buildinfo"
	assemble "github.com/cloison/cloison/internal/node"
	"github.com/cloison/cloison/isolation"
	_ "github.com/cloison/cloison/kernels/cpu"
	"github.com/cloison/cloison/tenancy"
)

type config struct {
	addr                                        string
	db                                          dbConfig
	migrate, createDB                           bool
	modelPath, modelName, backend               string
	threads                                     int
	kvPages, pageTokens, servedContext, attestK int
	zeroing                                     string
	stateDir, issuer, audience, node, devTenant string
	origin, orgName, orgNEQ                     string
	registerRegime                              export.Regime
	incidentGroupWindow                         time.Duration
	privacyOfficer                              audit.Contact
	shutdownGrace, refusalFlush                 time.Duration
	drainPeriod                                 time.Duration
	maxBatchTokens, maxRunning, chunkTokens     int
	prefixCache                                 bool
	readyFile, grpcAddr, grpcReadyFile          string
	trustJWKS                                   []string
	keyRefresh, keyRotateAfter                  time.Duration
	keyMinRotate                                time.Duration
	roles                                       roleConfig
	keys                                        keyConfig
	peers                                       peersConfig
	maxRequestBytes                             int64
	net                                         netConfig
	streams                                     api.StreamLimits
	witness                                     witnessConfig
	obs                                         obsConfig // metrics.go: --log-level, --metrics-*
	responses                                   responsesConfig
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	slog.SetDefault(log)
	if buildinfo.Requested(os.Args[1:]) {
		printVersion(os.Stdout)
		return
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		log.Error("configuration", "err", err)
		os.Exit(2)
	}
	log = cfg.obs.logger()
	slog.SetDefault(log)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.Error("cloisond stopped", "err", err, "code", cloison.ErrorCode(err))
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("cloisond", flag.ContinueOnError)
	cfgFile := fs.String("config", "", "JSON file of {\"flag-name\": value}")
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8080", "HTTP listen address")
	c.db.flags(fs)
	fs.BoolVar(&c.migrate, "migrate", true, "set up roles and apply migrations at start through --migrate-database-url (when set)")
	fs.BoolVar(&c.createDB, "create-database", false, "create the database named in --migrate-database-url if missing")
	fs.StringVar(&c.modelPath, "model", "", "GGUF model file; empty: the built-in context-bag model, synthesized under --state-dir")
	fs.StringVar(&c.modelName, "model-name", "", "model id the API serves (default: general.name, or cloison-context-bag)")
	fs.StringVar(&c.backend, "backend", "cpu", "compute backend (cpu; cuda in builds with -tags cuda)")
	fs.IntVar(&c.threads, "threads", 0, "compute threads (0: all cores)")
	fs.IntVar(&c.kvPages, "kv-pages", 4096, "KV pool pages")
	fs.IntVar(&c.pageTokens, "page-tokens", 16, "token slots per KV page (power of two)")
	fs.IntVar(&c.servedContext, "served-context", 0, "context the API advertises (0: the model's); lower it explicitly to run a smaller pool")
	fs.IntVar(&c.attestK, "attest-k", 1, "the pool must hold k requests of the served context")
	fs.StringVar(&c.zeroing, "zeroing", "cross-tenant", "default KV zeroing: never, cross-tenant or always")
	fs.StringVar(&c.stateDir, "state-dir", ".cache/cloison", "directory for the dev keys, checkpoints and the built-in model")
	fs.StringVar(&c.issuer, "issuer", "cloison-dev", "JWT issuer of this deployment's tokens")
	fs.StringVar(&c.audience, "audience", "cloison", "JWT audience tokens must carry")
	fs.Func("trust-jwks", "trust an external issuer: ISSUER=PATH of its JWKS file (repeatable)", func(v string) error {
		c.trustJWKS = append(c.trustJWKS, v)
		return nil
	})
	fs.DurationVar(&c.keyRefresh, "key-refresh", time.Minute, "how often the signing keys are reloaded (other nodes' rotations)")
	fs.DurationVar(&c.keyRotateAfter, "key-rotate-after", 30*24*time.Hour, "rotate the JWT signing key when the current one is this old (0: never)")
	fs.DurationVar(&c.keyMinRotate, "key-min-rotate-interval", tenancy.DefaultMinRotateInterval, "refuse a rotation while the current signing key is younger (at least the longest token lifetime)")
	fs.StringVar(&c.node, "node", "node-1", "node name (ledger actor engine:<node>)")
	fs.StringVar(&c.devTenant, "dev-tenant", "", "create this tenant at start if missing (development)")
	fs.StringVar(&c.origin, "origin", "cloison", "ledger name in checkpoints")
	fs.StringVar(&c.orgName, "org-name", "Cloison (development)", "organization keeping the incident register")
	fs.StringVar(&c.orgNEQ, "org-neq", "", "Québec enterprise number (NEQ)")
	fs.Var(&c.registerRegime, "register-regime", "act the incident register is kept under, cited in exports: private (P-39.1, r. 3.1) or public (A-2.1, r. 3.1)")
	fs.StringVar(&c.privacyOfficer.Name, "privacy-officer-name", "Responsable de la protection des renseignements personnels", "privacy officer copied into every register entry (Règlement s. 3(2))")
	fs.StringVar(&c.privacyOfficer.Title, "privacy-officer-title", "", "privacy officer's title")
	fs.StringVar(&c.privacyOfficer.Phone, "privacy-officer-phone", "", "privacy officer's phone")
	fs.StringVar(&c.privacyOfficer.Email, "privacy-officer-email", "", "privacy officer's e-mail")
	fs.DurationVar(&c.incidentGroupWindow, "incident-group-window", time.Hour, "detections of one cause (source, check, model) within this window of the first are grouped into one register entry (negative: one entry per detection)")
	fs.DurationVar(&c.shutdownGrace, "shutdown-grace", 30*time.Second, "how long shutdown lets streams finish")
	fs.DurationVar(&c.drainPeriod, "drain-period", 0, "on SIGTERM, how long /readyz answers 503 while the listeners keep serving, before shutdown starts (drain.go; a load balancer's deregistration delay)")
	fs.DurationVar(&c.refusalFlush, "refusal-flush", api.DefaultRefusalFlush, "how often refused requests are written to the ledger as per-tenant policy.refusals counts")
	fs.IntVar(&c.maxBatchTokens, "max-batch-tokens", 512, "tokens per engine step")
	fs.IntVar(&c.maxRunning, "max-running", 64, "sequences holding KV leases at once")
	fs.IntVar(&c.chunkTokens, "chunk-tokens", 256, "prefill chunk per sequence per step")
	fs.BoolVar(&c.prefixCache, "prefix-cache", true, "per-tenant prefix cache (tenant-salted namespaces)")
	fs.StringVar(&c.readyFile, "ready-file", "", "write the HTTP listen address to this file once serving (tests)")
	fs.StringVar(&c.grpcAddr, "grpc-addr", "127.0.0.1:9090", "gRPC listen address (empty: no gRPC)")
	fs.StringVar(&c.grpcReadyFile, "grpc-ready-file", "", "write the gRPC listen address to this file once serving (tests; written before --ready-file)")
	fs.Int64Var(&c.maxRequestBytes, "max-request-bytes", api.DefaultMaxBody, "largest request body (HTTP) or message (gRPC) the public API accepts, in bytes (policy bundles: 8×)")
	fs.IntVar(&c.streams.Max, "max-compliance-streams", 8, "compliance streams (ledger ranges, exports, verifications) running at once on this node")
	fs.IntVar(&c.streams.PerTenant, "max-compliance-streams-per-tenant", 2, "compliance streams one tenant may run at once")
	fs.DurationVar(&c.streams.SendTimeout, "stream-send-timeout", 10*time.Second, "a compliance stream or a gRPC generation whose client takes no message for this long is cut off")
	c.roles.flags(fs)
	c.keys.flags(fs)
	c.peers.flags(fs)
	c.net.flags(fs)
	c.witness.flags(fs)
	c.obs.flags(fs)
	c.responses.flags(fs)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	apply := func(name, value string) error {
		if set[name] || name == "config" {
			return nil
		}
		return fs.Set(name, value)
	}
	// The environment beats the file; flags beat both.
	env := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv("CLOISON_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))); ok {
			env[f.Name] = v
		}
	})
	if *cfgFile != "" {
		b, err := os.ReadFile(*cfgFile)
		if err != nil {
			return c, err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return c, fmt.Errorf("%s: %w", *cfgFile, err)
		}
		for k, v := range m {
			if _, inEnv := env[k]; inEnv {
				continue
			}
			if fs.Lookup(k) == nil {
				return c, fmt.Errorf("%s: unknown setting %q", *cfgFile, k)
			}
			if err := apply(k, fmt.Sprint(v)); err != nil {
				return c, fmt.Errorf("%s: %s: %w", *cfgFile, k, err)
			}
		}
	}
	for k, v := range env {
		if err := apply(k, v); err != nil {
			return c, fmt.Errorf("CLOISON_%s: %w", strings.ToUpper(k), err)
		}
	}
	if err := c.db.check(); err != nil {
		return c, err
	}
	if c.createDB && c.db.migrateURL == "" {
		return c, errors.New("--create-database needs --migrate-database-url")
	}
	if err := c.roles.check(); err != nil {
		return c, err
	}
	if err := c.keys.check(c.roles.role, c.roles.clusterKey); err != nil {
		return c, err
	}
	if err := c.net.check(map[string]string{"addr": c.addr, "grpc-addr": c.grpcAddr}); err != nil {
		return c, err
	}
	if err := c.obs.check(); err != nil {
		return c, err
	}
	return c, nil
}

func run(ctx context.Context, c config, log *slog.Logger) error {
	if err := os.MkdirAll(c.stateDir, 0o700); err != nil {
		return err
	}
	if c.createDB {
		if err := ensureDatabase(ctx, c.db.migrateURL); err != nil {
			return fmt.Errorf("create database: %w", err)
		}
	}
	if c.migrate {
		applied, err := c.db.setup(ctx)
		if err != nil {
			return fmt.Errorf("migrations: %w", err)
		}
		if c.db.migrateURL != "" {
			log.Info("database migrated", "applied", applied)
		}
	}
	// The server logs in as the runtime role (db.go): INSERT and SELECT on
	// the ledger, never UPDATE, DELETE or TRUNCATE, and nothing to RESET to.
	db, scanDB, err := c.db.pools(ctx, c.node)
	if err != nil {
		return fmt.Errorf("database: %w", err)
	}
	defer db.Close()
	defer scanDB.Close()
	if c.roles.role == rolePrefill {
		return runPrefill(ctx, c, db, log)
	}

	// Keys (keys.go): from files, or under --state-dir with --dev. One log
	// key for the cluster; a node holding another cluster's log key or KEK
	// stops here, before its ledger writer could sign a checkpoint or its
	// key ring retire the signing keys it cannot open.
	actor := audit.Name("engine:" + c.node)
	cpKey, trustedLogKeys, err := c.keys.logKeys(c.stateDir)
	if err != nil {
		return err
	}
	kek, err := c.keys.kek(c.stateDir)
	if err != nil {
		return fmt.Errorf("key-encryption key: %w", err)
	}
	deployKeys := []auditpg.DeploymentKey{logKeyRecord(cpKey.Public().(ed25519.PublicKey)), kekRecord(kek)}
	for _, k := range deployKeys {
		if _, err := auditpg.CheckKey(ctx, db, k, c.keys.policy(k.Purpose, trustedLogKeys)); err != nil {
			return explain(k, err)
		}
	}

	// Ledger.
	cpDir := filepath.Join(c.stateDir, "checkpoints")
	if err := os.MkdirAll(cpDir, 0o700); err != nil {
		return err
	}
	ledger, err := auditpg.Open(ctx, db, auditpg.Config{Origin: audit.Name(c.origin), SigningKey: cpKey, CheckpointDir: cpDir,
		Organization: audit.Organization{Name: c.orgName, NEQ: c.orgNEQ}, Contact: c.privacyOfficer, Logger: log,
		ScanPool: scanDB, Regime: c.registerRegime, DetectionWindow: c.incidentGroupWindow})
	if err != nil {
		return fmt.Errorf("ledger: %w", err)
	}
	defer ledger.Close()
	if err := c.keys.recordKeys(ctx, ledger, actor, trustedLogKeys, log, deployKeys...); err != nil {
		return err
	}
	stopWitnesses, err := startWitnesses(ctx, c.witness, ledger, log)
	if err != nil {
		return err
	}
	defer stopWitnesses()

	// Tenancy and keys.
	// Every tenancy change ledgers its event in its own transaction.
	tenants := tenancy.NewStore(db).WithLedger(ledger)
	sysCtx := tenancy.WithActor(ctx, audit.Name("engine:"+c.node))
	ring, err := tenancy.OpenKeyRing(sysCtx, tenants, c.issuer, kek, tenancy.WithLogger(log), tenancy.WithMinRotateInterval(c.keyMinRotate))
	if err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	sources := []tenancy.KeySource{ring}
	for _, spec := range c.trustJWKS {
		iss, path, ok := strings.Cut(spec, "=")
		if !ok || iss == "" || path == "" {
			return fmt.Errorf("--trust-jwks %q: want ISSUER=PATH", spec)
		}
		ks, err := tenancy.LoadJWKSFile(iss, path)
		if err != nil {
			return fmt.Errorf("--trust-jwks %s: %w", iss, err)
		}
		sources = append(sources, ks)
		log.Info("trusting an external issuer", "issuer", iss, "jwks", path)
	}
	verifier, err := tenancy.NewVerifier(tenancy.VerifierConfig{Audience: c.audience, Sources: sources, Tenants: tenants, Clients: tenants, Revocations: tenants})
	if err != nil {
		return err
	}
	// Keep the signing keys current: rotate when the current key is older
	// than --key-rotate-after (once across all nodes), and pick up other
	// nodes' rotations and retirements within --key-refresh.
	go ring.Run(sysCtx, c.keyRefresh, c.keyRotateAfter, func(err error) { log.Warn("signing keys", "err", err) })

	// Model.
	lm, err := loadModel(c)
	if err != nil {
		return err
	}
	defer lm.close()
	name := lm.name
	if c.devTenant != "" {
		if err := ensureDevTenant(sysCtx, tenants, cloison.TenantID(c.devTenant), name); err != nil {
			return fmt.Errorf("dev tenant: %w", err)
		}
	}

	// The node (internal/node): pool and partitions, attestation (recorded,
	// refusing to start when a pool cannot hold the context served), arena,
	// engine, policies, API server; for a decode node the transfer server.
	zeroing, err := isolation.ParseZeroing(c.zeroing)
	if err != nil {
		return err
	}
	responses, stopReplay, err := c.responses.responses(c, kek, lm, log)
	if err != nil {
		return err
	}
	defer stopReplay()
	ncfg := assemble.Config{Model: lm.node(), Capacity: c.capacity(zeroing), Ledger: ledger, NodeName: c.node, Actor: actor, Tenants: tenants,
		Scheduler:    engine.SchedulerConfig{MaxBatchTokens: c.maxBatchTokens, MaxRunning: c.maxRunning, ChunkTokens: c.chunkTokens, PrefixCache: c.prefixCache},
		RefusalFlush: refusalFlush(c.refusalFlush), Logger: log,
		API: api.Config{Verifier: verifier, Limiter: tenancy.NewLimiter().WithBudget(tenants), Keys: ring, Logger: log,
			MaxBody: c.maxRequestBytes, MaxStreams: c.net.maxStreams, MaxStreamsPerTenant: c.net.maxPerTenant,
			Verify:    auditpg.VerifyOptions{Keys: trustedLogKeys, ExternalDir: cpDir},
			ExportKey: cpKey, Streams: c.streams, Metrics: c.obs.metricsConfig(), Responses: responses}}
	if c.roles.role == roleDecode {
		d, clusterKey, err := decodeConfig(ctx, c, lm, log)
		if err != nil {
			return err
		}
		if err := c.keys.recordKeys(ctx, ledger, actor, trustedLogKeys, log, clusterKey); err != nil {
			d.Listener.Close()
			d.Client.Close()
			return err
		}
		ncfg.Decode = d
	}
	nd, err := assemble.New(ctx, ncfg)
	if err != nil {
		return err
	}
	srv := nd.Server
	stopMetrics, err := c.obs.serveMetrics(srv.MetricsHandler(), log)
	if err != nil {
		nd.Close(context.Background())
		return err
	}
	defer stopMetrics()
	nd.Start()
	stopEngine := nd.StopEngine
	engDone := nd.EngineDone()
	// Last on every return path (deferred after the ledger's Close, so it
	// runs before it, and after the listeners stopped below): node.Close
	// stops what reports incidents, makes every incident write durable
	// (retried, for up to the shutdown grace), then writes the last
	// refusal counts.
	defer func() {
		ictx, cancel := context.WithTimeout(context.Background(), c.shutdownGrace)
		defer cancel()
		if err := nd.Close(ictx); err != nil {
			log.Error("shutdown", "err", err)
		}
	}()

	tlsCfg, err := c.net.tlsConfig()
	if err != nil {
		stopEngine()
		return err
	}
	ln, err := c.net.transport.Listen(c.addr)
	if err != nil {
		stopEngine()
		return err
	}
	var gln net.Listener
	if c.grpcAddr != "" {
		if gln, err = c.net.transport.Listen(c.grpcAddr); err != nil {
			ln.Close()
			stopEngine()
			return fmt.Errorf("grpc: %w", err)
		}
	}
	var dr drainer
	hs := c.net.transport.HTTPServer(dr.wrap(srv.Handler()), tlsCfg, slog.NewLogLogger(log.Handler(), slog.LevelWarn))
	served := make(chan error, 2)
	go func() { served <- serveHTTP(hs, ln) }()
	healthCtx, stopHealth := context.WithCancel(context.Background())
	defer stopHealth()
	var gs *grpc.Server
	if gln != nil {
		gs = srv.GRPCServer(healthCtx, c.net.transport.GRPCOptions(tlsCfg)...)
		go func() {
			if err := gs.Serve(gln); err != nil {
				served <- fmt.Errorf("grpc: %w", err)
			}
		}()
		log.Info("serving gRPC", "addr", gln.Addr().String())
		if c.grpcReadyFile != "" {
			_ = os.WriteFile(c.grpcReadyFile, []byte(gln.Addr().String()), 0o600)
		}
	}
	log.Info("serving", "addr", ln.Addr().String(), "model", name)
	if c.readyFile != "" {
		_ = os.WriteFile(c.readyFile, []byte(ln.Addr().String()), 0o600)
	}
	select {
	case <-ctx.Done():
	case err := <-served:
		_ = hs.Close()
		if gs != nil {
			gs.Stop()
		}
		stopEngine()
		return err
	case err := <-engDone:
		_ = hs.Close()
		if gs != nil {
			gs.Stop()
		}
		return fmt.Errorf("engine stopped: %w", err)
	}
	// Drain (drain.go): not ready at once, listeners open for the period.
	stopHealth() // health reports NOT_SERVING while draining
	log.Info("draining", "period", c.drainPeriod)
	dr.drain(context.Background(), c.drainPeriod)
	// Graceful shutdown: stop accepting, let streams (HTTP and gRPC) finish,
	// then stop the engine (which ends whatever is left with an error, never
	// a 200 or a normal finish).
	log.Info("shutting down", "grace", c.shutdownGrace)
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownGrace)
	defer cancel()
	stopHealth() // health reports NOT_SERVING while draining
	grpcDone := make(chan struct{})
	go func() {
		defer close(grpcDone)
		if gs != nil {
			stopGRPC(sctx, gs)
		}
	}()
	err = hs.Shutdown(sctx)
	<-grpcDone
	stopEngine()
	<-engDone
	return err
}

// serveHTTP serves hs on ln, with TLS when hs has a TLS configuration.
func serveHTTP(hs *http.Server, ln net.Listener) error {
	if hs.TLSConfig != nil {
		return hs.ServeTLS(ln, "", "")
	}
	return hs.Serve(ln)
}

// stopGRPC lets in-flight calls finish until ctx ends, then stops gs.
func stopGRPC(ctx context.Context, gs *grpc.Server) {
	stopped := make(chan struct{})
	go func() { gs.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-ctx.Done():
		gs.Stop()
	}
}

// refusalFlush is --refusal-flush, whose 0 or less means the default: a
// node always ledgers its refusal counts.
func refusalFlush(d time.Duration) time.Duration {
	if d <= 0 {
		return api.DefaultRefusalFlush
	}
	return d
}
