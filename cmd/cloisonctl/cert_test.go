package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/transfer/pki"
)

// cert init writes a CA and node certificates that complete a mutual TLS
// handshake with each other, and a cluster key; a second init refuses to
// overwrite the CA.
func TestCertInit(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	out := mustRun(t, "cert", "init", "--dir", dir, "--nodes", "decode,prefill-1", "--labels", "prefill-1=ca-qc/dedicated,decode=ca-qc/")
	if !strings.Contains(out, "prefill-1") {
		t.Fatalf("output: %s", out)
	}
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	ca := x509.NewCertPool()
	if !ca.AppendCertsFromPEM(caPEM) {
		t.Fatal("ca.pem holds no certificate")
	}
	load := func(n string) tls.Certificate {
		c, _ := os.ReadFile(filepath.Join(dir, n+".pem"))
		k, _ := os.ReadFile(filepath.Join(dir, n+"-key.pem"))
		cert, err := pki.LoadPEM(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return cert
	}
	// Each certificate names the node's role, inferred from the name.
	for n, want := range map[string]string{"decode": pki.RoleDecode, "prefill-1": pki.RolePrefill} {
		if got, err := pki.RoleOf(load(n).Leaf); got != want || err != nil {
			t.Fatalf("%s: got role %q, %v; want %q", n, got, err, want)
		}
	}
	// And the residency labels given (region, tier).
	for n, want := range map[string]pki.Labels{"decode": {Region: "ca-qc"}, "prefill-1": {Region: "ca-qc", Tier: "dedicated"}} {
		if got, err := pki.LabelsOf(load(n).Leaf); got != want || err != nil {
			t.Fatalf("%s: got labels %+v, %v; want %+v", n, got, err, want)
		}
	}
	for _, bad := range []string{"prefill-1=CA QC/", "nobody=ca-qc/", "prefill-1"} {
		if _, err := run(t, "cert", "init", "--dir", filepath.Join(t.TempDir(), "y"), "--nodes", "decode,prefill-1", "--labels", bad); err == nil {
			t.Fatalf("--labels %q: got nil, want a refusal", bad)
		}
	}
	if _, err := run(t, "cert", "init", "--dir", filepath.Join(t.TempDir(), "x"), "--nodes", "node-1"); err == nil {
		t.Fatal("got a certificate without a role, want the node refused")
	}
	if st, err := os.Stat(filepath.Join(dir, "prefill-1-key.pem")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode: %v %v", st, err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "cluster.key"))
	if b, derr := hex.DecodeString(strings.TrimSpace(string(key))); err != nil || derr != nil || len(b) < 32 {
		t.Fatalf("cluster key: %q %v %v", key, err, derr)
	}

	ln, err := tls.Listen("tcp", "127.0.0.1:0", pki.ServerConfig(load("decode"), ca))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan string, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- err.Error()
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		if err := tc.Handshake(); err != nil {
			got <- err.Error()
			return
		}
		got <- tc.ConnectionState().PeerCertificates[0].Subject.CommonName
		_, _ = io.WriteString(c, "ok")
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), pki.ClientConfig(load("prefill-1"), ca, "127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if peer := <-got; peer != "prefill-1" {
		t.Fatalf("server saw client %q", peer)
	}
	if _, err := run(t, "cert", "init", "--dir", dir); err == nil {
		t.Fatal("a second init overwrote the CA")
	}
}
