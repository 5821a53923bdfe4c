package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/node/prefill"
)

// Node roles: both (one node does everything, the
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
func (r *roleConfig) keyRing(stateDir string, dev bool) (*transfer.KeyRing, audit.DeploymentKey, error) {
	path := r.clusterKey
	if path == "" {
		if !dev {
			return nil, audit.DeploymentKey{}, fmt.Errorf("%w: --cluster-key", ErrMissingSecret)
		}
		path = filepath.Join(stateDir, "cluster.key")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			k, err := transfer.NewKey("dev")
			if err != nil {
				return nil, audit.DeploymentKey{}, err
			}
			if err := os.WriteFile(path, []byte(hex.EncodeToString(k.Secret)+"\n"), 0o600); err != nil {
				return nil, audit.DeploymentKey{}, fmt.Errorf("cluster key: %w", err)
			}
		}
	}
	b, err := keyfile.ReadSecret(path)
	if err != nil {
		return nil, audit.DeploymentKey{}, fmt.Errorf("cluster key: %w", err)
	}
	secret, err := hex.DecodeString(strings.TrimSpace(string(b)))
	if err != nil {
		return nil, audit.DeploymentKey{}, fmt.Errorf("cluster key %s: want hex: %w", path, err)
	}
	rec := clusterKeyRecord(secret)
	ring, err := transfer.NewKeyRing(transfer.Key{ID: rec.ID, Secret: secret})
	if err != nil {
		return nil, audit.DeploymentKey{}, fmt.Errorf("cluster key %s: %w", path, err)
	}
	return ring, rec, nil
}

// runPrefill runs a prefill node (prefill.Open): the model, a pool
// with the tenants' partitions (tenants created later are added on their
// first prefill), an arena, and the PrefillService over mutual TLS on
// --prefill-addr. HTTP on --addr serves /healthz only; --metrics-addr the
// node's metrics (prefill.Node.MetricsHandler).
func runPrefill(ctx context.Context, c config, db *pgxpool.Pool, log *slog.Logger, tp trace.TracerProvider) error {
	s, err := c.prefillSpec(db, log, tp)
	if err != nil {
		return err
	}
	pn, err := prefill.Open(ctx, s)
	if err != nil {
		return explainKey(err)
	}
	gln := s.Listener
	stopped := false
	defer func() {
		if !stopped { // an error before serving
			ctx, cancel := context.WithTimeout(context.Background(), c.shutdownGrace)
			defer cancel()
			pn.Shutdown(ctx)
		}
	}()
	// Metrics on --metrics-addr, as a decode node's (metrics.go).
	stopMetrics, err := c.obs.serveMetrics(pn.MetricsHandler(), log)
	if err != nil {
		return err
	}
	defer stopMetrics()
	ln, err := c.net.transport.Listen(c.addr)
	if err != nil {
		return err
	}
	tlsCfg, err := c.net.tlsConfig()
	if err != nil {
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
	log.Info("prefill node", "prefill_addr", gln.Addr().String(), "addr", ln.Addr().String(), "model", pn.Model.Name, "cluster_key", s.Keys.Current())
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
	stopped = true
	pn.Shutdown(sctx)
	_ = hs.Shutdown(sctx)
	return serr
}

// prefillSpec is the prefill node the flags describe (prefill.Spec):
// its TLS, the cluster key (checked against the decode nodes' record), the
// model and its capacity, and the PrefillService listener, opened last.
func (c config) prefillSpec(db *pgxpool.Pool, log *slog.Logger, tp trace.TracerProvider) (prefill.Spec, error) {
	serverTLS, clientTLS, err := c.roles.tlsConfigs(roleDecode, c.labels())
	if err != nil {
		return prefill.Spec{}, err
	}
	keys, clusterKey, err := c.roles.keyRing(c.stateDir, c.keys.dev)
	if err != nil {
		return prefill.Spec{}, err
	}
	mf, err := c.modelFile()
	if err != nil {
		return prefill.Spec{}, err
	}
	zeroing, err := isolation.ParseZeroing(c.zeroing)
	if err != nil {
		return prefill.Spec{}, err
	}
	gln, err := net.Listen("tcp", c.roles.prefillAddr)
	if err != nil {
		return prefill.Spec{}, fmt.Errorf("--prefill-addr: %w", err)
	}
	return prefill.Spec{DB: db, ClusterKey: clusterKey, Rotate: c.keys.rotate, Keys: keys, Model: mf, Models: c.furtherModels(), Capacity: c.capacity(zeroing),
		Listener: gln, ServerTLS: serverTLS, ClientTLS: clientTLS, DecodePeers: splitAddrs(c.roles.decodePeers), Chunk: c.chunkTokens,
		Logger: log, Tracer: tp}, nil
}
