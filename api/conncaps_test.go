package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// keepAlive is one raw HTTP/1.1 keep-alive connection.
type keepAlive struct {
	c net.Conn
	r *bufio.Reader
}

func dialKeepAlive(t *testing.T, addr string) *keepAlive {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &keepAlive{c: c, r: bufio.NewReader(c)}
}

// get sends GET /v1/models with token on the connection and returns the
// status, the error code of a refusal and the response's headers.
func (k *keepAlive) get(t *testing.T, token string) (int, string, http.Header) {
	t.Helper()
	_ = k.c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := fmt.Fprintf(k.c, "GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", token); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(k.r, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body api.ErrorBody
	raw, _ := io.ReadAll(resp.Body)
	_ = json.Unmarshal(raw, &body)
	return resp.StatusCode, body.Error.Code, resp.Header
}

// closed reports whether the server closed the connection (EOF or reset).
func (k *keepAlive) closed() bool {
	_ = k.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	_, err := k.r.ReadByte()
	return err != nil
}

// capacityRefusals flushes the server's refusal counts and returns how
// many requests of tenant t the capacity stage refused since ledger seq
// from, as the policy.refusals summary states them.
func capacityRefusals(t *testing.T, p *platformtest.Platform, tenant cloison.TenantID, from uint64) int64 {
	t.Helper()
	if err := p.Server.FlushRefusals(context.Background()); err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, r := range rows(t, p, from) {
		if r.Kind != audit.KindPolicyRefusals || r.Tenant != tenant {
			continue
		}
		for _, c := range refusalsOf(t, r).Counts {
			if c.Stage == "capacity" {
				n += c.Count
			}
		}
	}
	return n
}

// Per-tenant connection caps, so that one tenant cannot exhaust the
// listener: at most MaxConnsPerTenant
// connections of a listener carry one tenant's requests. A request of that
// tenant on one more connection is refused with 429 and Retry-After, and
// the connection is closed; the tenant's own connections keep serving,
// another tenant is not affected, and a slot comes back when a connection
// closes. Before, connections were capped per listener only, so one tenant
// could hold every one of them.
func TestTenantConnectionCapHTTP(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "attacker"}})
	tr := api.Transport{MaxConnsPerTenant: 2}
	ln, err := tr.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := tr.HTTPServer(p.Server.Handler(), nil, nil)
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { _ = hs.Close() })
	addr := ln.Addr().String()
	attacker, victim := p.Token(t, "attacker", tenancy.ScopeInfer), p.Token(t, "victim", tenancy.ScopeInfer)

	held := []*keepAlive{dialKeepAlive(t, addr), dialKeepAlive(t, addr)}
	for i, k := range held {
		for range 2 { // a second request on a counted connection takes nothing more
			if code, _, _ := k.get(t, attacker); code != 200 {
				t.Fatalf("attacker's connection %d: got %d, want 200", i, code)
			}
		}
	}
	before := head(t, p)
	third := dialKeepAlive(t, addr)
	code, errCode, h := third.get(t, attacker)
	if code != 429 || errCode != string(cloison.CodeRateLimited) || h.Get("Retry-After") != "1" {
		t.Fatalf("attacker's third connection: got %d %q Retry-After %q, want 429 %s with Retry-After 1", code, errCode, h.Get("Retry-After"), cloison.CodeRateLimited)
	}
	if !third.closed() {
		t.Fatal("attacker's refused connection: got it kept open, want it closed")
	}
	// The refusal is counted in the ledger's policy.refusals summary, as
	// every refusal before service is.
	if n := capacityRefusals(t, p, "attacker", before); n != 1 {
		t.Fatalf("policy.refusals counts %d capacity refusals of the attacker, want 1", n)
	}
	// Another tenant is served on a new connection, and on one the
	// attacker already uses (a proxy's connection may carry several).
	if code, _, _ := dialKeepAlive(t, addr).get(t, victim); code != 200 {
		t.Fatalf("victim while the attacker is at its cap: got %d, want 200", code)
	}
	if code, _, _ := held[0].get(t, victim); code != 200 {
		t.Fatalf("victim on the attacker's connection: got %d, want 200", code)
	}
	// A held connection closes: its slot comes back (once the server has
	// seen the close).
	held[0].c.Close()
	testwait.Eventually(t, time.Minute, func() bool {
		code, _, _ := dialKeepAlive(t, addr).get(t, attacker)
		return code == 200
	}, "the attacker's slot to come back")
}

// TestTenantConnectionCapGRPC is the per-tenant connection cap over gRPC:
// a call of a tenant at its cap on another connection is RESOURCE_EXHAUSTED
// with rate_limit_exceeded; the tenant's counted connection still serves;
// closing it frees the slot.
func TestTenantConnectionCapGRPC(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "attacker"}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	gs := p.Server.GRPCServer(ctx, api.Transport{MaxConnsPerTenant: 1}.GRPCOptions(nil)...)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	dial := func() (*grpc.ClientConn, inferencev1.InferenceServiceClient) {
		conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		return conn, inferencev1.NewInferenceServiceClient(conn)
	}
	list := func(c inferencev1.InferenceServiceClient, tenant cloison.TenantID) error {
		_, err := c.ListModels(bearer(t, p, tenant), &inferencev1.ListModelsRequest{})
		return err
	}
	firstConn, first := dial()
	if err := list(first, "attacker"); err != nil {
		t.Fatalf("attacker's first connection: got %v, want served", err)
	}
	_, second := dial()
	before := head(t, p)
	err = list(second, "attacker")
	if st := status.Convert(err); st.Code() != codes.ResourceExhausted {
		t.Fatalf("attacker's second connection: got %v, want %v", err, codes.ResourceExhausted)
	}
	if n := capacityRefusals(t, p, "attacker", before); n != 1 {
		t.Fatalf("policy.refusals counts %d capacity refusals of the attacker, want 1", n)
	}
	if err := list(second, "victim"); err != nil {
		t.Fatalf("victim on another connection: got %v, want served", err)
	}
	if err := list(first, "attacker"); err != nil {
		t.Fatalf("attacker's counted connection: got %v, want served", err)
	}
	firstConn.Close()
	testwait.Eventually(t, time.Minute, func() bool { return list(second, "attacker") == nil }, "the attacker's slot to come back")
}
