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
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison/api/prefillrpc"
	"github.com/cloison/cloison/attest"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	assemble "github.com/cloison/cloison/node"
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
// name its --role: a certificate of the other role does not start; and
// exactly the labels it attests (--node-region, --node-tier): what the CA
// signed is what its peers will check (attest.Prefill).
func (r *roleConfig) tlsConfigs(peerRole string, labels attest.Labels) (server, client *tls.Config, err error) {
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
	l, err := pki.LabelsOf(cert.Leaf)
	if err != nil {
		return nil, nil, fmt.Errorf("--tls-cert %s: %w", r.tlsCert, err)
	}
	if l.Region != labels.Region || l.Tier != labels.Tier {
		return nil, nil, fmt.Errorf("--tls-cert %s names region %q tier %q, but --node-region is %q and --node-tier %q: a node attests the labels its certificate names (cloisonctl cert init --labels NAME=REGION/TIER)",
			r.tlsCert, l.Region, l.Tier, labels.Region, labels.Tier)
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

// node is the loaded model as node takes it.
func (l *loadedModel) node() assemble.Model {
	return assemble.Model{Backend: l.be, Model: l.m, Tokenizer: l.tok, Name: l.name, Digest: l.digest}
}

// capacity is the KV pool and attestation the flags ask for.
func (c config) capacity(zeroing isolation.Zeroing) assemble.Capacity {
	return assemble.Capacity{Pool: isolation.Config{Pages: c.kvPages, PageTokens: c.pageTokens, DefaultZeroing: zeroing},
		ServedContext: c.servedContext, K: c.attestK, Labels: c.labels(), KV: c.kvType}
}

// labels are the residency labels the node attests.
func (c config) labels() attest.Labels { return attest.Labels{Region: c.nodeRegion, Tier: c.nodeTier} }

// decodeConfig is a decode node's part of the assembly: it listens on
// --transfer-addr (served by the node once its API server exists) and
// dials --prefill-peers, attested at start (peers.go with
// --prefill-resolve-interval). It returns the cluster key's record, for the
// ledger.
func decodeConfig(ctx context.Context, c config, lm *loadedModel, log *slog.Logger) (*assemble.Decode, auditpg.DeploymentKey, error) {
	serverTLS, clientTLS, err := c.roles.tlsConfigs(rolePrefill, c.labels())
	if err != nil {
		return nil, auditpg.DeploymentKey{}, err
	}
	keys, clusterKey, err := c.roles.keyRing(c.stateDir, c.keys.dev)
	if err != nil {
		return nil, auditpg.DeploymentKey{}, err
	}
	ln, err := net.Listen("tcp", c.roles.transferAddr)
	if err != nil {
		return nil, auditpg.DeploymentKey{}, fmt.Errorf("--transfer-addr: %w", err)
	}
	advertise := ln.Addr().String()
	if c.roles.transferAdvertise != "" {
		advertise = c.roles.transferAdvertise
	}
	client, err := prefillrpc.NewClient(c.roles.peers(), advertise, clientTLS)
	if err != nil {
		ln.Close()
		return nil, auditpg.DeploymentKey{}, err
	}
	log.Info("decode node", "transfer_addr", advertise, "prefill_peers", c.roles.peers(), "cluster_key", keys.Current())
	d := &assemble.Decode{Listener: ln, ServerOptions: transfer.ServerOptions(serverTLS), Keys: keys, Client: client, Timeout: c.roles.prefillTimeout,
		Peers: func(ctx context.Context, _ attest.Attestation) ([]attest.PrefillPeer, error) {
			return attestPeers(ctx, client, c.roles.attestWait)
		}}
	if c.peers.interval > 0 { // peers.go: names re-resolved, each address attested before use
		w := &peerWatcher{entries: c.roles.peers(), lookup: c.peers.lookup(), client: client, digest: hex.EncodeToString(lm.digest[:]), log: log}
		d.Peers = func(ctx context.Context, self attest.Attestation) ([]attest.PrefillPeer, error) {
			w.self = self
			return w.initial(ctx, c.roles.attestWait)
		}
		d.OnAttested = func(capacity int) {
			w.capacity = capacity
			go w.run(ctx, c.peers.interval)
		}
	}
	return d, clusterKey, nil
}

// attestPeers fetches every prefill node's attestation, retrying for up to
// wait while nodes start.
func attestPeers(ctx context.Context, client *prefillrpc.Client, wait time.Duration) ([]attest.PrefillPeer, error) {
	deadline := time.Now().Add(wait)
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		peers, err := client.Attest(actx)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return peers, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runPrefill runs a prefill node (node.NewPrefill): the model, a
// pool with the tenants' partitions (tenants created later are added on
// their first prefill), an arena, and the PrefillService over mutual TLS on
// --prefill-addr. HTTP on --addr serves /healthz only; --metrics-addr the
// node's metrics (node.Prefill.MetricsHandler).
func runPrefill(ctx context.Context, c config, db *pgxpool.Pool, log *slog.Logger, tp trace.TracerProvider) error {
	serverTLS, clientTLS, err := c.roles.tlsConfigs(roleDecode, c.labels())
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
	gln, err := net.Listen("tcp", c.roles.prefillAddr)
	if err != nil {
		return fmt.Errorf("--prefill-addr: %w", err)
	}
	pn, err := assemble.NewPrefill(ctx, assemble.PrefillConfig{Model: lm.node(), Capacity: c.capacity(zeroing), Tenants: tenancy.NewStore(db), Keys: keys,
		Listener: gln, ServerOptions: transfer.ServerOptions(serverTLS), ClientTLS: clientTLS, DecodePeers: splitAddrs(c.roles.decodePeers),
		Chunk: c.chunkTokens, Logger: log, Tracer: tp})
	if err != nil {
		gln.Close()
		return err
	}
	// Metrics on --metrics-addr, as a decode node's (metrics.go).
	stopMetrics, err := c.obs.serveMetrics(pn.MetricsHandler(), log)
	if err != nil {
		gln.Close()
		return err
	}
	defer stopMetrics()
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
	go func() { served <- pn.Serve() }()
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
	pn.Shutdown(sctx)
	_ = hs.Shutdown(sctx)
	return serr
}
