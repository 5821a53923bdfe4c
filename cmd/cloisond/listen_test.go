package main

import (
	"context"
	"crypto/tls"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/internal/keyfile"
)

// A public listener on a non-loopback address needs TLS or an explicit
// --insecure-listen.
func TestPublicListenNeedsTLS(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // "" : accepted
	}{
		{"loopback defaults", nil, ""},
		{"localhost", []string{"--addr", "localhost:8080", "--grpc-addr", "[::1]:9090"}, ""},
		{"wildcard HTTP", []string{"--addr", "0.0.0.0:8080"}, "--addr"},
		{"empty host gRPC", []string{"--grpc-addr", ":9090"}, "--grpc-addr"},
		{"a LAN address", []string{"--addr", "10.0.0.5:8080"}, "--addr"},
		{"a host name", []string{"--addr", "api.example.com:443"}, "--addr"},
		{"insecure-listen", []string{"--addr", "0.0.0.0:8080", "--insecure-listen"}, ""},
		{"with TLS", []string{"--addr", "0.0.0.0:8080", "--public-tls-cert", "c.pem", "--public-tls-key", "k.pem"}, ""},
		{"cert without key", []string{"--public-tls-cert", "c.pem"}, "go together"},
		{"client CA without TLS", []string{"--public-client-ca", "ca.pem"}, "needs --public-tls-cert"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(append([]string{"--database-url", "postgres://x", "--dev"}, tt.args...))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want accepted", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
}

// The public listeners serve TLS with --public-tls-cert/--public-tls-key,
// require client certificates with --public-client-ca, and refuse a key
// file that group or others can read.
func TestPublicTLS(t *testing.T) {
	dir := t.TempDir()
	ca, err := pki.NewCA("test-ca")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, b []byte, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srvCert, _ := ca.Issue("api", "127.0.0.1", "localhost")
	certPEM, keyPEM, _ := pki.EncodePEM(srvCert)
	n := netConfig{tlsCert: write("api.pem", certPEM, 0o644), tlsKey: write("api-key.pem", keyPEM, 0o644), clientCA: write("ca.pem", ca.CertPEM(), 0o644)}
	if _, err := n.tlsConfig(); !errors.Is(err, keyfile.ErrInsecureMode) {
		t.Fatalf("key of mode 0644: got %v, want ErrInsecureMode", err)
	}
	if err := os.Chmod(n.tlsKey, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := n.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := n.transport.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := n.transport.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("ok")) }), cfg, nil)
	go func() { _ = serveHTTP(hs, ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	url := "https://" + ln.Addr().String() + "/"
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: certs}}}
	}
	clientCert, _ := ca.Issue("tenant-client")
	tests := []struct {
		name string
		c    *http.Client
		url  string
		ok   bool
	}{
		{"TLS with a client certificate", client(clientCert), url, true},
		{"TLS without a client certificate", client(), url, false},
		{"plaintext", http.DefaultClient, strings.Replace(url, "https", "http", 1), false},
	}
	for _, tt := range tests {
		t.Run("HTTP "+tt.name, func(t *testing.T) {
			resp, err := tt.c.Get(tt.url)
			ok := err == nil && resp.StatusCode == 200
			if resp != nil {
				resp.Body.Close()
			}
			if ok != tt.ok {
				t.Fatalf("got ok=%v (%v), want %v", ok, err, tt.ok)
			}
		})
	}

	// gRPC: the same configuration through Transport.GRPCOptions.
	gln, err := n.transport.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(n.transport.GRPCOptions(cfg)...)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(gln) }()
	t.Cleanup(gs.Stop)
	grpcTests := []struct {
		name  string
		creds credentials.TransportCredentials
		ok    bool
	}{
		{"TLS with a client certificate", credentials.NewTLS(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{clientCert}}), true},
		{"TLS without a client certificate", credentials.NewTLS(&tls.Config{RootCAs: ca.Pool()}), false},
		{"plaintext", insecure.NewCredentials(), false},
	}
	for _, tt := range grpcTests {
		t.Run("gRPC "+tt.name, func(t *testing.T) {
			conn, err := grpc.NewClient(gln.Addr().String(), grpc.WithTransportCredentials(tt.creds))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err = healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if (err == nil) != tt.ok {
				t.Fatalf("got %v, want ok=%v", err, tt.ok)
			}
		})
	}
}
