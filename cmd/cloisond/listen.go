package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/internal/keyfile"
)

// netConfig is the public listeners' transport: TLS, connection limits and
// timeouts (api.Transport), stream caps. The public TLS flags are named
// --public-tls-* because --tls-ca/--tls-cert/--tls-key already name the
// node-to-node mutual TLS (roles.go), a different trust domain: clients of
// the public API are tenants holding bearer tokens, not cluster nodes, and
// their certificates come from another CA (or none).
type netConfig struct {
	tlsCert, tlsKey, clientCA string
	insecureListen            bool
	transport                 api.Transport
	maxStreams, maxPerTenant  int
}

func (n *netConfig) flags(fs *flag.FlagSet) {
	d := api.DefaultTransport
	fs.StringVar(&n.tlsCert, "public-tls-cert", "", "PEM certificate (chain) of the public HTTP and gRPC listeners; with --public-tls-key they serve TLS only")
	fs.StringVar(&n.tlsKey, "public-tls-key", "", "PEM private key of --public-tls-cert (a file readable by its owner only)")
	fs.StringVar(&n.clientCA, "public-client-ca", "", "PEM CA the public listeners require client certificates from (optional; needs --public-tls-cert)")
	fs.BoolVar(&n.insecureListen, "insecure-listen", false, "allow a non-loopback --addr or --grpc-addr without TLS (behind a TLS-terminating proxy on a trusted network)")
	fs.DurationVar(&n.transport.ReadHeader, "read-header-timeout", d.ReadHeader, "longest a client may take to send a request's headers")
	fs.DurationVar(&n.transport.Read, "read-timeout", d.Read, "longest a client may take to send a whole request, body included")
	fs.DurationVar(&n.transport.Write, "write-timeout", d.Write, "longest one response write may make no progress (a stream that keeps writing is never cut)")
	fs.DurationVar(&n.transport.Idle, "idle-timeout", d.Idle, "how long an idle keep-alive connection is kept")
	fs.IntVar(&n.transport.MaxConns, "max-connections", d.MaxConns, "open connections per public listener (more wait to be accepted)")
	fs.DurationVar(&n.transport.FirstByte, "first-byte-timeout", d.FirstByte, "longest a new connection may send nothing before it is closed")
	fs.IntVar(&n.transport.MaxSilentPerSource, "max-silent-connections-per-source", d.MaxSilentPerSource, "open connections per public listener from one source address that have sent nothing yet (one more waits up to 1 s for its first byte outside the cap, then is closed)")
	fs.IntVar(&n.transport.MaxConnsPerTenant, "max-connections-per-tenant", d.MaxConnsPerTenant, "open connections per public listener that carry one tenant's requests (a request on one more: 429, and the connection is closed)")
	fs.IntVar(&n.maxStreams, "max-streams", 256, "generations in flight on this node, HTTP and gRPC together (beyond: 503; 0: unbounded)")
	fs.IntVar(&n.maxPerTenant, "max-streams-per-tenant", 64, "generations in flight per tenant on this node (beyond: 429; 0: unbounded)")
}

// check refuses a public listener on a non-loopback address without TLS,
// unless --insecure-listen: bearer tokens and prompts would cross the
// network in the clear.
func (n *netConfig) check(addrs map[string]string) error {
	if (n.tlsCert == "") != (n.tlsKey == "") {
		return fmt.Errorf("--public-tls-cert and --public-tls-key go together")
	}
	if n.clientCA != "" && n.tlsCert == "" {
		return fmt.Errorf("--public-client-ca needs --public-tls-cert and --public-tls-key")
	}
	if n.tlsCert != "" || n.insecureListen {
		return nil
	}
	for flagName, addr := range addrs {
		if addr != "" && !loopback(addr) {
			return fmt.Errorf("--%s %s is not a loopback address: serve TLS (--public-tls-cert, --public-tls-key) or pass --insecure-listen", flagName, addr)
		}
	}
	return nil
}

// loopback reports whether addr (host:port) listens on loopback only. An
// empty host, a wildcard or a name other than localhost is not loopback.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// tlsConfig is the public listeners' TLS configuration, nil without
// --public-tls-cert. The key file must not be readable by group or others
// (keyfile.ReadSecret).
func (n *netConfig) tlsConfig() (*tls.Config, error) {
	if n.tlsCert == "" {
		return nil, nil
	}
	certPEM, err := os.ReadFile(n.tlsCert)
	if err != nil {
		return nil, fmt.Errorf("--public-tls-cert: %w", err)
	}
	keyPEM, err := keyfile.ReadSecret(n.tlsKey)
	if err != nil {
		return nil, fmt.Errorf("--public-tls-key: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("--public-tls-cert/--public-tls-key: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if n.clientCA != "" {
		caPEM, err := os.ReadFile(n.clientCA)
		if err != nil {
			return nil, fmt.Errorf("--public-client-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			return nil, fmt.Errorf("--public-client-ca %s: no PEM certificate", n.clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}
