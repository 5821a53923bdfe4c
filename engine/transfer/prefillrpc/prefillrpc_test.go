package prefillrpc

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/engine/transfer/pki"
	"github.com/cloison/cloison/isolation"
)

type fakeNode struct {
	addr  string
	mu    sync.Mutex
	calls []transfer.Target
	gs    *grpc.Server
	srv   *Server
}

func certs(t *testing.T, ca *pki.CA, name string) (server, client *tls.Config) {
	return labelledCerts(t, ca, name, pki.Labels{})
}

func labelledCerts(t *testing.T, ca *pki.CA, name string, l pki.Labels) (server, client *tls.Config) {
	t.Helper()
	c, err := ca.IssueNode(name, "", l, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return pki.ServerConfig(c, ca.Pool()), pki.ClientConfig(c, ca.Pool(), "")
}

// startFake serves PrefillService over mutual TLS with a prefill function
// that records its calls and returns fail.
func startFake(t *testing.T, ca *pki.CA, fail error) *fakeNode {
	return startLabelled(t, ca, fail, pki.Labels{})
}

// startLabelled is startFake with a certificate naming labels l.
func startLabelled(t *testing.T, ca *pki.CA, fail error, l pki.Labels) *fakeNode {
	t.Helper()
	f := &fakeNode{}
	st, ct := labelledCerts(t, ca, "prefill", l)
	srv := NewServer(func(ctx context.Context, d transfer.Dialer, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, to transfer.Target) error {
		f.mu.Lock()
		f.calls = append(f.calls, to)
		f.mu.Unlock()
		if d == nil || len(tokens) != to.Tokens {
			return errors.New("bad call")
		}
		return fail
	}, ct, nil)
	t.Cleanup(srv.Close)
	f.srv = srv
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.addr = ln.Addr().String()
	f.gs = grpc.NewServer(transfer.ServerOptions(st)...)
	Register(f.gs, srv)
	go f.gs.Serve(ln)
	t.Cleanup(f.gs.Stop)
	return f
}

func target(n int) transfer.Target {
	return transfer.Target{Tenant: "acme", Request: "r1", Epoch: 7, Reservation: transfer.ReservationID{1, 2, 3}, Tokens: n}
}

// Calls reach the peers round-robin with the target intact; an unreachable
// peer is skipped.
func TestClientRoundRobinAndFailover(t *testing.T) {
	ca, _ := pki.NewCA("test")
	a, b := startFake(t, ca, nil), startFake(t, ca, nil)
	_, ct := certs(t, ca, "decode")
	c, err := NewClient([]string{a.addr, b.addr}, "127.0.0.1:1", ct)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 4 {
		if err := c.Prefill(context.Background(), "acme", "r1", []int32{1, 2, 3}, target(3)); err != nil {
			t.Fatal(err)
		}
	}
	if len(a.calls) != 2 || len(b.calls) != 2 {
		t.Fatalf("calls %d and %d, want 2 and 2", len(a.calls), len(b.calls))
	}
	if a.calls[0] != target(3) {
		t.Fatalf("target %+v, want %+v", a.calls[0], target(3))
	}
	a.gs.Stop()
	// A call racing the stop may fail (the connection broke under it: not
	// retried, the request fails closed); once the peer is known down, every
	// call goes to the live one.
	failed := 0
	for range 6 {
		if err := c.Prefill(context.Background(), "acme", "r1", []int32{1, 2, 3}, target(3)); err != nil {
			if cloison.ErrorCode(err) != cloison.CodeUnavailable {
				t.Fatalf("with one peer down: %v", err)
			}
			failed++
		}
	}
	if failed > 1 || len(b.calls) != 2+6-failed {
		t.Fatalf("with one peer down: %d failed, the live peer got %d calls", failed, len(b.calls))
	}
	b.gs.Stop()
	err = c.Prefill(context.Background(), "acme", "r1", []int32{1, 2, 3}, target(3))
	if cloison.ErrorCode(err) != cloison.CodeUnavailable {
		t.Fatalf("no peer: %v (code %s)", err, cloison.ErrorCode(err))
	}
}

// A prefill node's typed errors keep their code across the wire, and a
// failure that is not "unreachable" is not retried on another peer (the
// reservation is single-use).
func TestErrorsKeepTheirCode(t *testing.T) {
	ca, _ := pki.NewCA("test")
	for _, want := range []error{isolation.ErrTooLarge, transfer.ErrVerification, isolation.ErrUnknownTenant} {
		a, b := startFake(t, ca, want), startFake(t, ca, want)
		_, ct := certs(t, ca, "decode")
		c, err := NewClient([]string{a.addr, b.addr}, "127.0.0.1:1", ct)
		if err != nil {
			t.Fatal(err)
		}
		err = c.Prefill(context.Background(), "acme", "r1", []int32{1}, target(1))
		c.Close()
		if got := cloison.ErrorCode(err); got != cloison.ErrorCode(want) {
			t.Fatalf("%v: got %v (code %s)", want, err, got)
		}
		if len(a.calls)+len(b.calls) != 1 {
			t.Fatalf("%v: retried on another peer (%d calls)", want, len(a.calls)+len(b.calls))
		}
	}
}

// Mutual TLS: a client with a certificate of another CA is refused, and a
// malformed request is invalid.
func TestMutualTLSAndValidation(t *testing.T) {
	ca, _ := pki.NewCA("test")
	a := startFake(t, ca, nil)
	other, _ := pki.NewCA("other")
	_, ct := certs(t, other, "intruder")
	c, err := NewClient([]string{a.addr}, "127.0.0.1:1", ct)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Prefill(context.Background(), "acme", "r1", []int32{1}, target(1)); err == nil || len(a.calls) != 0 {
		t.Fatalf("a foreign certificate was served: %v, %d calls", err, len(a.calls))
	}
	_, good := certs(t, ca, "decode")
	c2, _ := NewClient([]string{a.addr}, "", good)
	if c2 != nil {
		t.Fatal("a client without an advertised transfer address")
	}
	srv := NewServer(func(context.Context, transfer.Dialer, cloison.TenantID, cloison.RequestID, []int32, transfer.Target) error {
		return nil
	}, good, nil)
	_, err = srv.Prefill(context.Background(), nil)
	if cloison.ErrorCode(FromStatus(err)) != cloison.CodeInvalid {
		t.Fatalf("empty request: %v", err)
	}
}

// A prefill node dials only decode addresses it trusts:
// those --decode-peers lists (TrustDecode), or else one whose host the
// calling decode node's certificate names. A request naming any other
// address is refused (permission_denied) before anything is dialed or
// computed.
func TestUntrustedDecodeAddressRefused(t *testing.T) {
	ca, _ := pki.NewCA("test")
	_, ct := certs(t, ca, "decode") // names 127.0.0.1 only
	tests := []struct {
		name      string
		trust     []string // nil: attested by the caller's certificate
		advertise string
		allowed   bool
	}{
		{"host in the caller's certificate", nil, "127.0.0.1:1", true},
		{"host not in the caller's certificate", nil, "10.0.0.9:9190", false},
		{"DNS name not in the caller's certificate", nil, "metadata.internal:80", false},
		{"not host:port", nil, "127.0.0.1", false},
		{"listed in --decode-peers", []string{"127.0.0.1:1"}, "127.0.0.1:1", true},
		{"not listed in --decode-peers", []string{"127.0.0.1:2"}, "127.0.0.1:1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := startFake(t, ca, nil)
			if tt.trust != nil {
				b.srv.TrustDecode(tt.trust)
			}
			c, err := NewClient([]string{b.addr}, tt.advertise, ct)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			err = c.Prefill(context.Background(), "acme", "r1", []int32{1}, target(1))
			b.mu.Lock()
			calls := len(b.calls)
			b.mu.Unlock()
			if tt.allowed {
				if err != nil || calls != 1 {
					t.Fatalf("got %v and %d calls, want nil and 1", err, calls)
				}
				return
			}
			if got := cloison.ErrorCode(err); got != cloison.CodePermissionDenied || calls != 0 {
				t.Fatalf("got %v (code %s) and %d calls, want permission_denied and 0", err, got, calls)
			}
		})
	}
}

// Residency: the client sends a tenant's prompt only to
// prefill nodes whose attested labels its residency allows — never falling
// back to another, not even when the compliant one is unreachable — and
// refuses (permission_denied) when none is in the set, before calling any.
func TestClientResidency(t *testing.T) {
	ca, _ := pki.NewCA("test")
	qc, us := startLabelled(t, ca, nil, pki.Labels{Region: "ca-qc", Tier: "shared"}), startLabelled(t, ca, nil, pki.Labels{Region: "us-east", Tier: "shared"})
	// liar's certificate names us-east; it attests ca-qc.
	liar := startLabelled(t, ca, nil, pki.Labels{Region: "us-east", Tier: "shared"})
	base := attest.Attestation{ModelContext: 64, ServedContext: 64, PoolTokens: 64, PoolPages: 4, PageTokens: 16, K: 1, OK: true}
	for f, region := range map[*fakeNode]string{qc: "ca-qc", us: "us-east", liar: "ca-qc"} {
		a := base
		a.Labels = attest.Labels{Region: region, Tier: "shared"}
		f.srv.SetAttestation(a, "m")
	}
	_, ct := certs(t, ca, "decode")
	c, err := NewClient([]string{qc.addr, us.addr, liar.addr}, "127.0.0.1:1", ct)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peers, err := c.Attest(context.Background(), "")
	if err != nil || len(peers) != 3 || peers[0].Attestation.Labels.Region != "ca-qc" {
		t.Fatalf("attest: %+v, %v", peers, err)
	}
	// The decode node's check refuses the liar: the CA signed us-east for it.
	self := base
	if _, _, err := attest.Prefill(self, "m", peers); !errors.Is(err, attest.ErrFailed) || peers[2].Certified == nil || peers[2].Certified.Region != "us-east" {
		t.Fatalf("a node attesting a region its certificate does not name: got %v (certified %+v), want ErrFailed", err, peers[2].Certified)
	}
	if _, _, err := attest.Prefill(self, "m", peers[:2]); err != nil {
		t.Fatalf("the honest nodes: %v", err)
	}
	residency := map[cloison.TenantID][]string{"acme": {"ca-qc"}, "eu": {"eu-fr"}}
	c.SetResidency(func(_ context.Context, id cloison.TenantID) ([]string, string, error) {
		r, ok := residency[id]
		if !ok {
			return nil, "", errors.New("no such tenant")
		}
		return r, "", nil
	})
	calls := func(f *fakeNode) int { f.mu.Lock(); defer f.mu.Unlock(); return len(f.calls) }
	for range 4 {
		if err := c.Prefill(context.Background(), "acme", "r1", make([]int32, 3), target(3)); err != nil {
			t.Fatal(err)
		}
	}
	if calls(qc) != 4 || calls(us) != 0 || calls(liar) != 0 {
		t.Fatalf("ca-qc tenant: ca-qc got %d, us-east %d, the liar %d calls, want 4, 0 and 0", calls(qc), calls(us), calls(liar))
	}
	if n, ok := c.Served("r1"); !ok || n.Addr != qc.addr || n.Labels.Region != "ca-qc" {
		t.Fatalf("served: %+v %v", n, ok)
	}
	if err := c.Compliant(context.Background(), "eu"); !errors.Is(err, ErrNoCompliantPrefill) {
		t.Fatalf("eu: Compliant = %v, want ErrNoCompliantPrefill", err)
	}
	err = c.Prefill(context.Background(), "eu", "r2", make([]int32, 3), target(3))
	if !errors.Is(err, ErrNoCompliantPrefill) || cloison.ErrorCode(err) != cloison.CodePermissionDenied {
		t.Fatalf("eu: got %v, want ErrNoCompliantPrefill (permission_denied)", err)
	}
	if err := c.Prefill(context.Background(), "ghost", "r3", make([]int32, 3), target(3)); cloison.ErrorCode(err) != cloison.CodeUnavailable {
		t.Fatalf("unreadable residency: got %v, want unavailable", err)
	}
	if calls(us) != 0 || calls(qc) != 4 {
		t.Fatalf("a refused prefill reached a node: ca-qc %d, us-east %d", calls(qc), calls(us))
	}
	// The compliant node goes away: the prompt fails, never goes to us-east.
	qc.gs.Stop()
	if err := c.Prefill(context.Background(), "acme", "r4", make([]int32, 3), target(3)); err == nil {
		t.Fatal("prefilled with the only compliant node down")
	}
	if calls(us) != 0 {
		t.Fatalf("the ca-qc tenant's prompt fell back to us-east")
	}
}

// Several models: a prefill node attests each model with its own pool and
// prefills a request with the model it names (its digest). A model it does
// not serve is refused (not_found) before its prefill is called — never
// prefilled with another model — and a decode node's Attest of that model
// returns the node with no digest, which attest.Prefill refuses ("does not
// serve model"), as it refuses one whose pool is smaller than the model's
// served context.
func TestSeveralModelsRouted(t *testing.T) {
	ca, _ := pki.NewCA("test")
	f := startFake(t, ca, nil)
	base := attest.Attestation{ModelContext: 64, ServedContext: 64, PoolTokens: 64, PoolPages: 4, PageTokens: 16, K: 1, OK: true, KVType: "f32"}
	f.srv.SetAttestation(base, "aa")
	small := base
	small.PoolTokens, small.PoolPages = 32, 2
	var second []transfer.Target
	if err := f.srv.AddModel(small, "bb", func(_ context.Context, _ transfer.Dialer, _ cloison.TenantID, _ cloison.RequestID, _ []int32, to transfer.Target) error {
		second = append(second, to)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"aa", "bb", ""} {
		if err := f.srv.AddModel(base, d, nil); cloison.ErrorCode(err) != cloison.CodeInvalid {
			t.Fatalf("AddModel(%q) again: got %v, want invalid", d, err)
		}
	}
	_, ct := certs(t, ca, "decode")
	c, err := NewClient([]string{f.addr}, f.addr, ct)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	f.srv.TrustDecode([]string{f.addr})
	for _, tt := range []struct {
		digest      string
		first, more int
		code        cloison.Code
	}{{"aa", 1, 0, ""}, {"", 2, 0, ""}, {"bb", 2, 1, ""}, {"cc", 2, 1, cloison.CodeNotFound}} {
		err := c.PrefillModel(tt.digest)(context.Background(), "acme", "r1", []int32{1, 2, 3}, target(3))
		if cloison.ErrorCode(err) != tt.code && !(tt.code == "" && err == nil) || len(f.calls) != tt.first || len(second) != tt.more {
			t.Fatalf("model %q: got %v, calls %d and %d; want code %q, calls %d and %d", tt.digest, err, len(f.calls), len(second), tt.code, tt.first, tt.more)
		}
	}
	self := base
	for _, tt := range []struct {
		digest, reason string
	}{{"aa", ""}, {"bb", "prefill pool holds 32 tokens"}, {"cc", "does not serve model"}} {
		peers, err := c.Attest(context.Background(), tt.digest)
		if err != nil || len(peers) != 1 {
			t.Fatalf("attest %q: %+v %v", tt.digest, peers, err)
		}
		_, _, err = attest.Prefill(self, tt.digest, peers)
		if tt.reason == "" && err != nil || tt.reason != "" && (!errors.Is(err, attest.ErrFailed) || !strings.Contains(err.Error(), tt.reason)) {
			t.Fatalf("attest.Prefill of model %q: got %v, want %q", tt.digest, err, tt.reason)
		}
	}
}
