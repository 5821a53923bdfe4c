package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/tenancy"
)

// --console-addr: off by default, an ephemeral loopback port with --dev
// unless off, and a non-loopback address only with TLS or
// --insecure-listen, as the public listeners.
func TestConsoleAddr(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // listen address; "error: X" for a refused start
	}{
		{nil, ""},
		{[]string{"--dev"}, "127.0.0.1:0"},
		{[]string{"--dev", "--console-addr", "off"}, ""},
		{[]string{"--console-addr", "127.0.0.1:8081"}, "127.0.0.1:8081"},
		{[]string{"--console-addr", "0.0.0.0:8081"}, "error: --console-addr"},
		{[]string{"--dev", "--console-addr", "10.0.0.5:8081"}, "error: --console-addr"},
		{[]string{"--console-addr", "0.0.0.0:8081", "--insecure-listen"}, "0.0.0.0:8081"},
		{[]string{"--console-addr", "0.0.0.0:8081", "--public-tls-cert", "c.pem", "--public-tls-key", "k.pem"}, "0.0.0.0:8081"},
	} {
		c, err := parseFlags(append([]string{"--database-url", "postgres://x", "--kek-file", "k", "--log-key-file", "l"}, tt.args...))
		if want, ok := strings.CutPrefix(tt.want, "error: "); ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%v: got %v, want an error naming %s", tt.args, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if got := c.console.listenAddr(c.keys.dev); got != tt.want {
			t.Errorf("%v: listens on %q, want %q", tt.args, got, tt.want)
		}
	}
}

// Console sign-in with an OpenID Connect provider is all or nothing, only
// with a provider the node trusts (--jwks-url), and https only off
// loopback.
func TestConsoleOIDCFlags(t *testing.T) {
	idp := []string{"--jwks-url", "https://idp.example/jwks", "--jwt-issuer", "https://idp.example"}
	full := []string{"--console-oidc-authorize-url", "https://idp.example/auth", "--console-oidc-token-url", "https://idp.example/token", "--console-oidc-client-id", "console"}
	for _, tt := range []struct {
		args []string
		want string // "" : accepted
	}{
		{nil, ""},
		{append(append([]string{}, idp...), full...), ""},
		{full, "--jwks-url"},
		{append(append([]string{}, idp...), full[:4]...), "go together"},
		{append(append([]string{}, idp...), "--console-oidc-authorize-url", "http://idp.example/auth", "--console-oidc-token-url", "https://idp.example/token", "--console-oidc-client-id", "c"), "https only"},
		{append(append([]string{}, idp...), "--console-oidc-authorize-url", "https://idp.example/auth", "--console-oidc-token-url", "http://127.0.0.1:9/token", "--console-oidc-client-id", "c"), ""},
	} {
		_, err := parseFlags(append([]string{"--database-url", "postgres://x", "--dev"}, tt.args...))
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%v: got %v, want %q", tt.args, err, tt.want)
		}
	}
}

// The console on a real node holds no privilege of its own: every API
// route answers through it exactly as on the node's own listener, for
// every kind of token; a change made through it is ledgered with the
// token's subject as actor; a cross-site call is refused before it
// changes anything; and its origin serves nothing but the console and the
// admin and compliance routes.
func TestE2EConsole(t *testing.T) {
	db := pgtest.New(t)
	ready := filepath.Join(t.TempDir(), "console-ready")
	n := startNode(t, db.AdminURL, pgtestRoles(), "--console-ready-file", ready)
	addr, err := os.ReadFile(ready) // written before the node's ready file
	if err != nil || len(addr) == 0 {
		t.Fatalf("console ready file: %v", err)
	}
	c := *n
	c.base = "http://" + string(addr)
	createTenant(t, db.AdminURL, "dev", nil)
	createTenant(t, db.AdminURL, "acme", nil)
	admin := n.token("dev", time.Hour, tenancy.ScopeAdmin)
	officer := n.token("dev", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead, tenancy.ScopeComplianceWrite)
	infer := n.token("acme", time.Hour, tenancy.ScopeInfer)
	tenantOfficer := n.token("acme", time.Hour, tenancy.ScopeComplianceRead)

	if r := c.do("GET", "/", "", nil); r.status != 200 || !strings.Contains(r.header.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("console page: %d, CSP %q", r.status, r.header.Get("Content-Security-Policy"))
	}
	for _, p := range []struct{ method, path string }{{"POST", "/v1/completions"}, {"POST", "/v1/chat/completions"}, {"GET", "/v1/models"},
		{"GET", "/healthz"}, {"GET", "/readyz"}, {"GET", "/log/checkpoint"}, {"GET", "/.well-known/jwks.json"}, {"GET", "/metrics"}} {
		if r := c.do(p.method, p.path, infer, completion("hi", 1, false)); r.status != 404 {
			t.Errorf("console %s %s: %d, want 404", p.method, p.path, r.status)
		}
	}
	// Same answer through the console as on the API, token by token.
	tokens := map[string]string{"none": "", "infer": infer, "tenant officer": tenantOfficer, "admin": admin, "officer": officer}
	for _, route := range []struct{ method, path string }{
		{"GET", "/admin/v1/tenants"}, {"GET", "/admin/v1/pool"}, {"GET", "/admin/v1/keys"},
		{"GET", "/compliance/v1/incidents"}, {"GET", "/compliance/v1/tlog/checkpoint"}, {"GET", "/compliance/v1/tlog/tenant/checkpoint"},
		{"GET", "/compliance/v1/ledger?from=1&to=2"}, {"GET", "/v1/attestation"},
		{"POST", "/admin/v1/tenants/nobody/suspend"}, {"POST", "/compliance/v1/incidents"},
	} {
		for name, tok := range tokens {
			body := []byte("{}")
			api, con := n.do(route.method, route.path, tok, body), c.do(route.method, route.path, tok, body)
			if api.status != con.status {
				t.Errorf("%s %s with %s: API %d, console %d", route.method, route.path, name, api.status, con.status)
			}
			if con.header.Get("Cache-Control") != "no-store" {
				t.Errorf("%s %s: API answer through the console without Cache-Control: no-store", route.method, route.path)
			}
		}
	}
	// A cross-site call changes nothing, even with a token.
	if r := c.doHeader("POST", "/admin/v1/tenants/acme/suspend", admin, map[string]string{"Sec-Fetch-Site": "cross-site"}); r.status != 403 {
		t.Fatalf("cross-site suspend: %d %s", r.status, r.body)
	}
	// A change through the console is the person's, in the ledger.
	if r := c.do("POST", "/admin/v1/tenants/acme/suspend", admin, nil); r.status != 200 {
		t.Fatalf("suspend through the console: %d %s", r.status, r.body)
	}
	var disabled []string
	for _, row := range n.ledgerRows(officer) {
		p, _ := row["payload"].(map[string]any)
		if row["kind"] == "tenant.disabled" && row["tenant"] == "acme" {
			disabled = append(disabled, p["actor"].(string))
		}
	}
	if len(disabled) != 1 || disabled[0] != "admin:e2e-dev" {
		t.Fatalf("acme's suspension ledgered as %v, want once by admin:e2e-dev (the cross-site call changed nothing)", disabled)
	}
}

// doHeader is do with extra request headers.
func (n *daemon) doHeader(method, path, token string, hdr map[string]string) reply {
	n.t.Helper()
	req, _ := http.NewRequest(method, n.base+path, bytes.NewReader(nil))
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}
}
