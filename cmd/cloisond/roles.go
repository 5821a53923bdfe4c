package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/api/prefillrpc"
	"github.com/cloison/cloison/attest"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/tenancy"
)

// Node roles (ARCHITECTURE.md layer 4): both (one node does everything, the
// default), decode (serves the API, admits, reserves KV and decodes; prompts
// are prefilled on prefill nodes and arrive by verified transfer) and prefill
// (computes prompt KV for decode nodes; serves no public API).
const (
	roleBoth    = "both"
	roleDecode  = "decode"
	rolePrefill = "prefill"
)

type roleConfig struct {
	role                   string
	clusterKey             string
	tlsCA, tlsCert, tlsKey string
	transferAddr           string
	transferAdvertise      string
	prefillAddr            string
	prefillPeers           string
	decodePeers            string
	prefillTimeout         time.Duration
	attestWait             time.Duration
}

func (r *roleConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&r.role, "role", roleBoth, "node role: both (prefill and decode here), decode (API and decode; prompts prefilled on --prefill-peers) or prefill (computes prompt KV for decode nodes)")
	fs.StringVar(&r.clusterKey, "cluster-key", "", "file holding the cluster key that authenticates transfer manifests (hex, 32+ bytes; the same on every node); empty: <state-dir>/cluster.key, created if missing (development)")
	fs.StringVar(&r.tlsCA, "tls-ca", "", "PEM CA certificate node-to-node mutual TLS trusts (prefill and decode roles)")
	fs.StringVar(&r.tlsCert, "tls-cert", "", "PEM certificate of this node (prefill and decode roles; cloisonctl cert init)")
	fs.StringVar(&r.tlsKey, "tls-key", "", "PEM private key of this node (prefill and decode roles)")
	fs.StringVar(&r.transferAddr, "transfer-addr", "127.0.0.1:9190", "decode: listen address of the transfer server, advertised to prefill nodes (its host must be in the node certificate)")
	fs.StringVar(&r.transferAdvertise, "transfer-advertise", "", "decode: the address prefill nodes dial to reach --transfer-addr (default: its listen address; set it when listening on 0.0.0.0)")
	fs.StringVar(&r.prefillAddr, "prefill-addr", "127.0.0.1:9290", "prefill: listen address of the PrefillService")
	fs.StringVar(&r.prefillPeers, "prefill-peers", "", "decode: prefill nodes' PrefillService addresses, comma-separated (round-robin)")
	fs.StringVar(&r.decodePeers, "decode-peers", "", "prefill: the decode nodes' transfer addresses (as they advertise them) this node may push to, comma-separated; empty: a decode address whose host the calling decode node's certificate names")
	fs.DurationVar(&r.prefillTimeout, "prefill-timeout", 2*time.Minute, "decode: bound of one remote prefill, transfer included")
	fs.DurationVar(&r.attestWait, "prefill-attest-wait", 30*time.Second, "decode: how long to wait at startup for every prefill node's capacity attestation")
}

func (r *roleConfig) check() error {
	switch r.role {
	case roleBoth:
		return nil
	case roleDecode, rolePrefill:
	default:
		return fmt.Errorf("--role %q: want both, decode or prefill", r.role)
	}
	if r.tlsCA == "" || r.tlsCert == "" || r.tlsKey == "" {
		return fmt.Errorf("--role %s needs --tls-ca, --tls-cert and --tls-key (node-to-node traffic is mutual TLS; cloisonctl cert init makes development certificates)", r.role)
	}
	if r.role == roleDecode && len(r.peers()) == 0 {
		return errors.New("--role decode needs --prefill-peers")
	}
	return nil
}

func (r *roleConfig) peers() []string { return splitAddrs(r.prefillPeers) }

func splitAddrs(list string) []string {
	var out []string
	for _, p := range strings.Split(list, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// tlsConfigs loads the node's certificate and the CA: the server config
// (client certificates required) and the client config, both refusing a peer
// whose certificate does not name peerRole. The node's own certificate must
// name its --role: a certificate of the other role does not start.
func (r *roleConfig) tlsConfigs(peerRole string) (server, client *tls.Config, err error) {
	caPEM, err := os.ReadFile(r.tlsCA)
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-ca: %w", err)
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(caPEM) {
		return nil, nil, fmt.Errorf("--tls-ca %s: no PEM certificate", r.tlsCA)
	}
	certPEM, err := os.ReadFile(r.tlsCert)
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-cert: %w", err)
	}
	keyPEM, err := keyfile.ReadSecret(r.tlsKey)
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-key: %w", err)
	}
	cert, err := pki.LoadPEM(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-cert/--tls-key: %w", err)
	}
	if cert.Leaf == nil {
		if cert.Leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return nil, nil, fmt.Errorf("--tls-cert: %w", err)
		}
	}
	if own, err := pki.RoleOf(cert.Leaf); err != nil || own != r.role {
		return nil, nil, fmt.Errorf("--tls-cert %s: the certificate must name role %s (cloisonctl cert init --nodes NAME:%s): %v", r.tlsCert, r.role, r.role, err)
	}
	return pki.RequirePeerRole(pki.ServerConfig(cert, ca), peerRole), pki.RequirePeerRole(pki.ClientConfig(cert, ca, ""), peerRole), nil
}

// keyRing loads the cluster key (or, with dev, creates the development one
// under stateDir; keyConfig.check refused a production start without
// --cluster-key). Its id is a fingerprint of the secret, so nodes holding
// another key are refused as unknown-key; the record names it in
// deployment_keys.
func (r *roleConfig) keyRing(stateDir string, dev bool) (*transfer.KeyRing, auditpg.DeploymentKey, error) {
	path := r.clusterKey
	if path == "" {
		if !dev {
			return nil, auditpg.DeploymentKey{}, fmt.Errorf("%w: --cluster-key", ErrMissingSecret)
		}
		path = filepath.Join(stateDir, "cluster.key")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			k, err := transfer.NewKey("dev")
			if err != nil {
				return nil, auditpg.DeploymentKey{}, err
			}
			if err := os.WriteFile(path, []byte(hex.EncodeToString(k.Secret)+"\n"), 0o600); err != nil {
				return nil, auditpg.DeploymentKey{}, fmt.Errorf("cluster key: %w", err)
			}
		}
	}
	b, err := keyfile.ReadSecret(path)
	if err != nil {
		return nil, auditpg.DeploymentKey{}, fmt.Errorf("cluster key: %w", err)
	}
	secret, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, auditpg.DeploymentKey{}, fmt.Errorf("cluster key %s: want hex: %w", path, err)
	}
	rec := clusterKeyRecord(secret)
	ring, err := transfer.NewKeyRing(transfer.Key{ID: rec.ID, Secret: secret})
	if err != nil {
		return nil, auditpg.DeploymentKey{}, fmt.Errorf("cluster key %s: %w", path, err)
	}
	return ring, rec, nil
}

// loadedModel is the model a node serves and its identity.
type loadedModel struct {
	f      *gguf.File
	be     kernels.Backend
	m      *model.Model
	tok    *tokenizer.Tokenizer
	name   string
	digest transfer.Digest // SHA-256 of the GGUF file: the same on every node serving the file
}

func (l *loadedModel) close() {
	if l.m != nil {
		l.m.Close()
	}
	if l.be != nil {
		l.be.Close()
	}
	if l.f != nil {
		l.f.Close()
	}
}

func loadModel(c config) (*loadedModel, error) {
	path := c.modelPath
	var err error
	if path == "" {
		if path, err = builtinModel(c.stateDir); err != nil {
			return nil, err
		}
	}
	l := &loadedModel{}
	if l.digest, err = fileDigest(path); err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	if l.f, err = gguf.Open(path); err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	if l.be, err = kernels.Open(c.backend, kernels.Options{Threads: c.threads}); err != nil {
		l.close()
		return nil, err
	}
	if l.m, err = model.Load(l.be, l.f); err != nil {
		l.close()
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	if l.tok, err = tokenizer.FromGGUF(l.f); err != nil {
		l.close()
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	l.name = c.modelName
	if l.name == "" {
		l.name = modelName(l.f)
	}
	return l, nil
}

func fileDigest(path string) (transfer.Digest, error) {
	var d transfer.Digest
	f, err := os.Open(path)
	if err != nil {
		return d, err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return d, err
	}
	copy(d[:], h.Sum(nil))
	return d, nil
}

// decodeNode is a decode node's transfer server and prefill client.
type decodeNode struct {
	remote    *engine.Remote
	gs        *grpc.Server
	ln        net.Listener
	client    *prefillrpc.Client
	log       *slog.Logger
	onFailure func(transfer.Failure)               // set by serve, before the first stream
	onUnauth  func(peer string, r transfer.Reason) // set by serve, before the first stream
	closeOnce sync.Once
	// clusterKey names the cluster key, recorded once the ledger is open.
	clusterKey auditpg.DeploymentKey
}

// close stops the transfer server and the prefill client. Idempotent.
func (d *decodeNode) close() {
	d.closeOnce.Do(func() {
		d.gs.Stop()
		_ = d.ln.Close() // if serve never ran
		d.client.Close()
	})
}

// startDecode builds the receiver, listens on --transfer-addr and returns the
// engine.Remote that asks --prefill-peers to prefill. The transfer server
// serves no stream until serve: what it reports refusals to (the API
// server's ledger hook) does not exist yet.
func startDecode(c config, lm *loadedModel, pool *isolation.Pool, arena kernels.Arena, log *slog.Logger) (*decodeNode, error) {
	serverTLS, clientTLS, err := c.roles.tlsConfigs(rolePrefill)
	if err != nil {
		return nil, err
	}
	keys, clusterKey, err := c.roles.keyRing(c.stateDir, c.keys.dev)
	if err != nil {
		return nil, err
	}
	d := &decodeNode{log: log, clusterKey: clusterKey}
	recv, err := transfer.NewReceiver(transfer.ReceiverConfig{Pool: pool, Arena: arena, Keys: keys, Model: lm.digest,
		OnVerificationFailed: func(f transfer.Failure) {
			log.Warn("transfer refused", "tenant", f.Lease.Tenant, "request", f.Lease.Request, "reason", f.Reason, "err", f.Err)
			d.onFailure(f) // set before serve started the server: never nil here
		},
		OnUnauthenticated: func(peer string, reason transfer.Reason) { d.onUnauth(peer, reason) }})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", c.roles.transferAddr)
	if err != nil {
		return nil, fmt.Errorf("--transfer-addr: %w", err)
	}
	advertise := ln.Addr().String()
	if c.roles.transferAdvertise != "" {
		advertise = c.roles.transferAdvertise
	}
	client, err := prefillrpc.NewClient(c.roles.peers(), advertise, clientTLS)
	if err != nil {
		ln.Close()
		return nil, err
	}
	d.ln, d.client = ln, client
	d.gs = grpc.NewServer(transfer.ServerOptions(serverTLS)...)
	transfer.Register(d.gs, recv)
	log.Info("decode node", "transfer_addr", advertise, "prefill_peers", c.roles.peers(), "cluster_key", keys.Current())
	d.remote = &engine.Remote{Receiver: recv, Prefill: client.Prefill, Timeout: c.roles.prefillTimeout}
	return d, nil
}

// transferReporter is what a decode node reports refused transfers to
// (*api.Server: ledger, incidents, metrics).
type transferReporter interface {
	RecordTransferFailure(transfer.Failure)
	CountUnauthenticatedTransfer(peer string, reason transfer.Reason)
}

// serve starts the transfer server, refusals reported to srv. Call it once,
// after srv exists.
func (d *decodeNode) serve(srv transferReporter) {
	// Both happen before every stream: Serve starts after.
	d.onFailure, d.onUnauth = srv.RecordTransferFailure, srv.CountUnauthenticatedTransfer
	go func() {
		if err := d.gs.Serve(d.ln); err != nil {
			d.log.Error("transfer server", "err", err)
		}
	}()
}

// attestPeers fetches every prefill node's attestation, retrying for up to
// wait while nodes start.
func (d *decodeNode) attestPeers(ctx context.Context, wait time.Duration) ([]attest.PrefillPeer, error) {
	deadline := time.Now().Add(wait)
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		peers, err := d.client.Attest(actx)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return peers, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runPrefill runs a prefill node: the model, a pool with the tenants'
// partitions (tenants created later are added on their first prefill), an
// arena, and the PrefillService over mutual TLS on --prefill-addr. HTTP on
// --addr serves /healthz only.
func runPrefill(ctx context.Context, c config, db *pgxpool.Pool, log *slog.Logger) error {
	serverTLS, clientTLS, err := c.roles.tlsConfigs(roleDecode)
	if err != nil {
		return err
	}
	keys, clusterKey, err := c.roles.keyRing(c.stateDir, c.keys.dev)
	if err != nil {
		return err
	}
	// A prefill node writes no ledger: it checks its cluster key against
	// the one the decode nodes recorded, and never records one itself.
	if _, err := auditpg.CheckKey(ctx, db, clusterKey, c.keys.policy(clusterKey.Purpose, nil)); err != nil {
		return explain(clusterKey, err)
	}
	lm, err := loadModel(c)
	if err != nil {
		return err
	}
	defer lm.close()
	zeroing, err := isolation.ParseZeroing(c.zeroing)
	if err != nil {
		return err
	}
	// Reject before allocate starts here: a prefill node whose pool cannot
	// hold a whole request of the served context refuses to start.
	att, err := attest.Capacity(attest.Config{ModelContext: lm.m.Context, ServedContext: c.servedContext, PoolPages: c.kvPages,
		PageTokens: c.pageTokens, K: c.attestK, Zeroing: zeroing})
	if err != nil {
		return err
	}
	log.Info("capacity attested", "model", lm.name, "served_context", att.ServedContext, "pool_tokens", att.PoolTokens, "k", att.K)
	pool, err := isolation.NewPool(isolation.Config{Pages: c.kvPages, PageTokens: c.pageTokens, DefaultZeroing: zeroing})
	if err != nil {
		return err
	}
	tenants := tenancy.NewStore(db)
	all, err := tenants.Tenants(ctx)
	if err != nil {
		return err
	}
	for _, t := range all {
		if err := pool.AddTenant(api.PoolTenant(t)); err != nil {
			return fmt.Errorf("tenant %s: %w", t.ID, err)
		}
	}
	arena, err := lm.be.NewArena(lm.m.ArenaConfig(c.kvPages, c.pageTokens))
	if err != nil {
		return err
	}
	sender, err := transfer.NewSender(transfer.SenderConfig{Pool: pool, Arena: arena, Keys: keys, Model: lm.digest})
	if err != nil {
		return err
	}
	runner := &engine.PrefillRunner{Model: lm.m, Pool: pool, Arena: arena, Sender: sender, Chunk: c.chunkTokens}
	// One prefill at a time: the model's forward pass and the arena are
	// driven by one caller (the engine loop does the same on a decode node).
	sem := make(chan struct{}, 1)
	prefill := func(ctx context.Context, d transfer.Dialer, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, to transfer.Target) error {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return cloison.NewError(cloison.CodeCanceled, "prefill: "+ctx.Err().Error())
		}
		defer func() { <-sem }()
		runner.Dialer = d // under sem
		start := time.Now()
		err := runner.Prefill(ctx, tenant, req, tokens, to)
		log.Info("prefill", "tenant", tenant, "request", req, "tokens", len(tokens), "elapsed", time.Since(start), "code", cloison.ErrorCode(err), "err", err)
		return err
	}
	before := func(ctx context.Context, tenant cloison.TenantID) error {
		if _, err := pool.Partition(tenant); err == nil {
			return nil
		}
		// A tenant created since this node started: its partition now.
		t, err := tenants.Tenant(ctx, tenant)
		if err != nil {
			return isolation.ErrUnknownTenant
		}
		if _, err := pool.EnsureTenant(api.PoolTenant(t)); err != nil && !errors.Is(err, isolation.ErrInvalidConfig) {
			return err
		}
		return nil
	}
	svc := prefillrpc.NewServer(prefill, clientTLS, before)
	defer svc.Close()
	if d := splitAddrs(c.roles.decodePeers); len(d) > 0 {
		svc.TrustDecode(d)
	}
	svc.SetAttestation(att, hex.EncodeToString(lm.digest[:]))

	gln, err := net.Listen("tcp", c.roles.prefillAddr)
	if err != nil {
		return fmt.Errorf("--prefill-addr: %w", err)
	}
	gs := grpc.NewServer(transfer.ServerOptions(serverTLS)...)
	prefillrpc.Register(gs, svc)
	ln, err := c.net.transport.Listen(c.addr)
	if err != nil {
		gln.Close()
		return err
	}
	tlsCfg, err := c.net.tlsConfig()
	if err != nil {
		gln.Close()
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok","role":"prefill"}` + "\n"))
	})
	hs := c.net.transport.HTTPServer(mux, tlsCfg, nil)
	served := make(chan error, 2)
	go func() { served <- gs.Serve(gln) }()
	go func() { served <- serveHTTP(hs, ln) }()
	log.Info("prefill node", "prefill_addr", gln.Addr().String(), "addr", ln.Addr().String(), "model", lm.name, "cluster_key", keys.Current())
	if c.grpcReadyFile != "" {
		_ = os.WriteFile(c.grpcReadyFile, []byte(gln.Addr().String()), 0o600)
	}
	if c.readyFile != "" {
		_ = os.WriteFile(c.readyFile, []byte(ln.Addr().String()), 0o600)
	}
	var serr error
	select {
	case <-ctx.Done():
	case serr = <-served:
	}
	sctx, cancel := context.WithTimeout(context.Background(), c.shutdownGrace)
	defer cancel()
	stopGRPC(sctx, gs)
	_ = hs.Shutdown(sctx)
	return serr
}
