package pki

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"testing"
)

// handshake runs a TLS handshake over loopback TCP and returns the server's
// and the client's errors.
func handshake(t *testing.T, srv, cli *tls.Config) (error, error) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errc := make(chan error, 1)
	go func() {
		a, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		s := tls.Server(a, srv)
		err = s.Handshake()
		if err == nil {
			// TLS 1.3: the client learns of a refused client certificate
			// only on its first read.
			_, err = s.Write([]byte{1})
		}
		errc <- err
		s.Close()
	}()
	b, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(b, cli)
	err = c.Handshake()
	if err == nil {
		var one [1]byte
		_, err = io.ReadFull(c, one[:])
	}
	c.Close()
	return <-errc, err
}

func TestMutualTLS(t *testing.T) {
	ca, err := NewCA("cluster")
	if err != nil {
		t.Fatal(err)
	}
	rogue, err := NewCA("rogue")
	if err != nil {
		t.Fatal(err)
	}
	decode, _ := ca.Issue("decode-0", "127.0.0.1", "decode-0.cloison")
	prefill, _ := ca.Issue("prefill-0", "127.0.0.1")
	intruder, _ := rogue.Issue("prefill-x", "127.0.0.1")
	tests := []struct {
		name    string
		client  *tls.Config
		wantErr bool
	}{
		{"cluster node", ClientConfig(prefill, ca.Pool(), "decode-0.cloison"), false},
		{"certificate of another CA", ClientConfig(intruder, ca.Pool(), "decode-0.cloison"), true},
		{"no client certificate", &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: ca.Pool(), ServerName: "decode-0.cloison"}, true},
		{"wrong server name", ClientConfig(prefill, ca.Pool(), "other.cloison"), true},
		{"TLS 1.2 client", func() *tls.Config {
			c := ClientConfig(prefill, ca.Pool(), "decode-0.cloison")
			c.MinVersion, c.MaxVersion = tls.VersionTLS12, tls.VersionTLS12
			return c
		}(), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serr, cerr := handshake(t, ServerConfig(decode, ca.Pool()), tt.client)
			if got := serr != nil || cerr != nil; got != tt.wantErr {
				t.Fatalf("got server %v, client %v; want failure %v", serr, cerr, tt.wantErr)
			}
		})
	}
}

func TestPEMRoundTrip(t *testing.T) {
	ca, _ := NewCA("cluster")
	c, err := ca.Issue("node", "::1", "node.local")
	if err != nil {
		t.Fatal(err)
	}
	certPEM, keyPEM, err := EncodePEM(c)
	if err != nil {
		t.Fatal(err)
	}
	back, err := LoadPEM(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(back.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: ca.Pool(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Fatalf("issued certificate does not verify as a client: %v", err)
	}
	if err := leaf.VerifyHostname("node.local"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := EncodePEM(tls.Certificate{}); err == nil {
		t.Fatal("EncodePEM of an empty certificate: got nil error")
	}
	if _, err := ca.Issue(""); err == nil {
		t.Fatal("Issue with an empty name: got nil error")
	}
	if _, err := LoadPEM([]byte("x"), keyPEM); err == nil || errors.Unwrap(err) == nil {
		t.Fatalf("LoadPEM of garbage: got %v, want a wrapped error", err)
	}
}

// A role is bound into the certificate as one URI SAN; RoleOf reads it back
// and refuses a certificate with none; IssueRole refuses an unknown role.
func TestRoles(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		role    string
		want    string
		wantErr bool
	}{
		{RolePrefill, RolePrefill, false},
		{RoleDecode, RoleDecode, false},
		{"", "", true},
	} {
		c, err := ca.IssueRole("n", tt.role, "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		got, err := RoleOf(c.Leaf)
		if got != tt.want || (err != nil) != tt.wantErr || (err != nil && !errors.Is(err, ErrRole)) {
			t.Fatalf("role %q: got %q, %v; want %q (error %v)", tt.role, got, err, tt.want, tt.wantErr)
		}
	}
	if _, err := ca.IssueRole("n", "admin", "127.0.0.1"); !errors.Is(err, ErrRole) {
		t.Fatalf("unknown role: got %v, want ErrRole", err)
	}
}

// Labels are signed into the certificate and read back; a malformed one is
// refused at issue, and a certificate naming an unknown label or one twice
// is refused when read.
func TestLabels(t *testing.T) {
	ca, err := NewCA("test")
	if err != nil {
		t.Fatal(err)
	}
	c, err := ca.IssueNode("p", RolePrefill, Labels{Region: "ca-qc", Tier: "dedicated"}, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	if l, err := LabelsOf(c.Leaf); err != nil || l != (Labels{Region: "ca-qc", Tier: "dedicated"}) {
		t.Fatalf("got %+v, %v", l, err)
	}
	if r, err := RoleOf(c.Leaf); err != nil || r != RolePrefill {
		t.Fatalf("role: got %q, %v", r, err)
	}
	if l, err := LabelsOf(mustIssue(t, ca).Leaf); err != nil || l != (Labels{}) {
		t.Fatalf("no labels: got %+v, %v", l, err)
	}
	for _, bad := range []Labels{{Region: "CA"}, {Tier: "-x"}, {Region: "a/b"}} {
		if _, err := ca.IssueNode("p", RolePrefill, bad); !errors.Is(err, ErrLabel) {
			t.Errorf("issue %+v: got %v, want ErrLabel", bad, err)
		}
	}
	for _, uris := range [][]string{{labelPrefix + "zone/a"}, {labelPrefix + "region/a", labelPrefix + "region/b"}, {labelPrefix + "region"}} {
		leaf := *c.Leaf
		leaf.URIs = nil
		for _, s := range uris {
			u, _ := url.Parse(s)
			leaf.URIs = append(leaf.URIs, u)
		}
		if _, err := LabelsOf(&leaf); !errors.Is(err, ErrLabel) {
			t.Errorf("%v: got %v, want ErrLabel", uris, err)
		}
	}
}

func mustIssue(t *testing.T, ca *CA) tls.Certificate {
	t.Helper()
	c, err := ca.IssueRole("d", RoleDecode)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
