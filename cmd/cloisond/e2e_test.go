package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/migrations"
	"github.com/cloison/cloison/tenancy"
)

// binary is cloisond, built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "cloisond-e2e")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "cloisond")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building cloisond: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// daemon is one cloisond subprocess.
type daemon struct {
	t        testing.TB
	base     string // http://addr
	grpcAddr string // host:port of the gRPC API
	metrics  string // http://addr of the metrics listener
	stateDir string
	dbURL    string
	cmd      *exec.Cmd
	logs     *syncBuffer
	done     chan error
	exited   bool // startNodeMayStop: the node stopped before it was ready
}

// startNode starts cloisond on the database dbURL (an administrator's URL,
// used for role setup and migrations): the node itself logs in as the
// runtime role (the one roles name, or the default).
func startNode(t testing.TB, dbURL string, roles []string, extra ...string) *daemon {
	t.Helper()
	return startNodeIn(t, t.TempDir(), dbURL, roles, extra...)
}

// startNodeIn is startNode with the state directory stateDir (a restart
// keeps its keys and checkpoints).
func startNodeIn(t testing.TB, stateDir, dbURL string, roles []string, extra ...string) *daemon {
	t.Helper()
	return startNodeOpts(t, stateDir, dbURL, roles, false, extra...)
}

// startNodeMayStop is startNodeIn for a node that may refuse to start: it
// returns the node stopped (exited set, its logs kept) instead of failing.
func startNodeMayStop(t testing.TB, stateDir, dbURL string, roles []string, extra ...string) *daemon {
	t.Helper()
	return startNodeOpts(t, stateDir, dbURL, roles, true, extra...)
}

func startNodeOpts(t testing.TB, stateDir, dbURL string, roles []string, mayStop bool, extra ...string) *daemon {
	t.Helper()
	n := &daemon{t: t, stateDir: stateDir, dbURL: dbURL, logs: &syncBuffer{}, done: make(chan error, 1)}
	ready := filepath.Join(n.stateDir, "ready")
	grpcReady := filepath.Join(n.stateDir, "grpc-ready")
	metricsReady := filepath.Join(n.stateDir, "metrics-ready")
	for _, f := range []string{ready, grpcReady, metricsReady} {
		_ = os.Remove(f) // a previous run's
	}
	runtime := migrations.DefaultRoles.Runtime
	if i := slices.Index(roles, "--db-runtime-role"); i >= 0 {
		runtime = roles[i+1]
	}
	args := append([]string{"--database-url", pgtest.AsRole(dbURL, runtime), "--migrate-database-url", dbURL, "--addr", "127.0.0.1:0", "--dev", "--state-dir", n.stateDir, "--ready-file", ready,
		"--grpc-addr", "127.0.0.1:0", "--grpc-ready-file", grpcReady, "--kv-pages", "256", "--node", "e2e", "--refusal-flush", "200ms",
		"--metrics-addr", "127.0.0.1:0", "--metrics-ready-file", metricsReady}, roles...)
	n.cmd = exec.Command(binary, append(args, extra...)...)
	n.cmd.Stdout, n.cmd.Stderr = n.logs, n.logs
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { n.done <- n.cmd.Wait() }()
	t.Cleanup(n.stop)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(ready); err == nil && len(b) > 0 {
			n.base = "http://" + string(b)
			g, _ := os.ReadFile(grpcReady) // written before the HTTP ready file
			n.grpcAddr = string(g)
			if m, _ := os.ReadFile(metricsReady); len(m) > 0 { // written before the HTTP ready file
				n.metrics = "http://" + string(m)
			}
			// The node's log key, for adminStore: --log-key-file, or the
			// dev key in its state directory (none on a node that holds
			// no ledger writer, as a prefill node).
			key, origin := filepath.Join(n.stateDir, "checkpoint.key"), "cloison"
			if i := slices.Index(extra, "--log-key-file"); i >= 0 {
				key = extra[i+1]
			}
			if i := slices.Index(extra, "--origin"); i >= 0 {
				origin = extra[i+1]
			}
			if _, err := os.Stat(key); err == nil {
				nodeLogKeys.Store(dbURL, nodeLogKey{file: key, origin: origin})
			}
			return n
		}
		select {
		case err := <-n.done:
			if mayStop {
				n.exited = true
				return n
			}
			t.Fatalf("cloisond exited: %v\n%s", err, n.logs)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("cloisond not ready\n%s", n.logs)
	return nil
}

func (n *daemon) stop() {
	if n.cmd.ProcessState != nil {
		return
	}
	_ = n.cmd.Process.Signal(os.Interrupt)
	select {
	case <-n.done:
	case <-time.After(20 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
	if strings.Contains(n.logs.String(), "panic") {
		n.t.Errorf("cloisond panicked:\n%s", n.logs)
	}
}

// syncBuffer collects a subprocess's output; tests read it while the
// process still writes (exec copies its pipes on another goroutine).
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// pgtestRoles are the flags that make cloisond use the test roles.
func pgtestRoles() []string {
	return []string{"--db-owner-role", pgtest.Roles.Owner, "--db-runtime-role", pgtest.Roles.Runtime, "--db-deployment", pgtest.Roles.Deployment}
}

func adminPool(t testing.TB, url string) *pgxpool.Pool {
	p, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// nodeLogKeys: database URL → the log key of the dev node started on it
// (its state directory's checkpoint.key) and its origin.
var nodeLogKeys sync.Map

type nodeLogKey struct{ file, origin string }

// adminStore is a tenancy store on url as the admin, ledgering its changes
// (as every tenancy change must be) to the database's ledger. Once a node
// runs on url its changes are signed with the node's log key, as an
// operator's tool holding the key signs them: after the node began
// signing, an unsigned tenant change is a verification break.
func adminStore(t testing.TB, url string) *tenancy.Store {
	t.Helper()
	p := adminPool(t, url)
	cfg := auditpg.Config{Origin: "e2e-admin"}
	if v, ok := nodeLogKeys.Load(url); ok {
		k, err := keyfile.Private(v.(nodeLogKey).file)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Origin, cfg.SigningKey = audit.Name(v.(nodeLogKey).origin), k
	}
	l, err := auditpg.Open(context.Background(), p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return tenancy.NewStore(p).WithLedger(l)
}

// token issues a token with the node's dev signing keys.
func (n *daemon) token(tenant cloison.TenantID, ttl time.Duration, scopes ...tenancy.Scope) string {
	n.t.Helper()
	ctx := context.Background()
	kek, err := tenancy.LoadKEK(filepath.Join(n.stateDir, "signing.kek"), false)
	if err != nil {
		n.t.Fatal(err)
	}
	ring, err := tenancy.OpenKeyRing(ctx, adminStore(n.t, n.dbURL), "cloison-dev", kek)
	if err != nil {
		n.t.Fatal(err)
	}
	tok, err := tenancy.NewIssuer(ring).Issue(tenancy.TokenRequest{Subject: "e2e-" + string(tenant), Tenant: tenant, Scopes: scopes, Audience: "cloison", TTL: ttl})
	if err != nil {
		n.t.Fatal(err)
	}
	return tok
}

func createTenant(t testing.TB, url string, id cloison.TenantID, mod func(*tenancy.Tenant)) {
	t.Helper()
	tn := tenancy.Tenant{ID: id, Name: string(id), Status: tenancy.StatusActive, Tier: isolation.TierShared, Zeroing: isolation.ZeroCrossTenant,
		Classification: tenancy.ClassInternal, Quotas: tenancy.Quotas{MaxConcurrent: 32, KVPages: 64, TokensPerMinute: 1_000_000, MaxContext: 4096},
		AllowedModels: []string{modelID}, IncidentContact: "dpo@example.test"}
	if mod != nil {
		mod(&tn)
	}
	if _, err := adminStore(t, url).CreateTenant(context.Background(), tn); err != nil {
		t.Fatal(err)
	}
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) code() string {
	var e struct {
		Error struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(r.body, &e)
	return e.Error.Code
}

func (n *daemon) do(method, path, token string, body []byte) reply {
	n.t.Helper()
	req, _ := http.NewRequest(method, n.base+path, bytes.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, resp.Header, b}
}

// scrape GETs the node's metrics listener, with a bearer token if one is
// given.
func (n *daemon) scrape(t testing.TB, token string) (int, string) {
	t.Helper()
	if n.metrics == "" {
		t.Fatal("the node serves no metrics listener")
	}
	req, _ := http.NewRequest("GET", n.metrics+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

const modelID = "cloison-context-bag"

func completion(prompt string, maxTokens int, stream bool) []byte {
	b, _ := json.Marshal(map[string]any{"model": modelID, "prompt": prompt, "max_tokens": maxTokens, "temperature": 0, "stream": stream})
	return b
}

// sse reads a streaming response: its data events until [DONE].
func sse(t testing.TB, body []byte) (texts []string, finish string, done bool, errCode string) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		if line == "[DONE]" {
			done = true
			continue
		}
		var ev struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Error *struct {
				Code string `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("bad event %q: %v", line, err)
		}
		if ev.Error != nil {
			errCode = ev.Error.Code
		}
		for _, c := range ev.Choices {
			texts = append(texts, c.Text)
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
	}
	return
}

// ledgerKinds lists the kinds of the ledger rows the token may see.
func (n *daemon) ledgerRows(token string) []map[string]any {
	r := n.do("GET", "/compliance/v1/ledger", token, nil)
	if r.status != 200 {
		n.t.Fatalf("ledger: %d %s", r.status, r.body)
	}
	var rows []map[string]any
	dec := json.NewDecoder(bytes.NewReader(r.body))
	for dec.More() {
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			n.t.Fatal(err)
		}
		rows = append(rows, m)
	}
	return rows
}

func TestE2EServeStreamAndTenantWalls(t *testing.T) {
	db := pgtest.New(t)
	n := startNode(t, db.AdminURL, pgtestRoles())
	createTenant(t, db.AdminURL, "acme", nil)
	createTenant(t, db.AdminURL, "globex", nil)
	acme := n.token("acme", time.Hour, tenancy.ScopeInfer, tenancy.ScopeComplianceRead)
	globex := n.token("globex", time.Hour, tenancy.ScopeInfer, tenancy.ScopeComplianceRead)
	admin := n.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead, tenancy.ScopeComplianceWrite)

	// A streamed completion.
	r := n.do("POST", "/v1/completions", acme, completion("aaab", 6, true))
	texts, finish, done, errCode := sse(t, r.body)
	if r.status != 200 || !done || finish != "length" || errCode != "" || strings.Join(texts, "") != "aaaaaa" {
		t.Fatalf("stream: %d texts %q finish %q done %v err %q", r.status, texts, finish, done, errCode)
	}
	if r.header.Get("X-Cloison-Decision-Id") == "" || r.header.Get("X-Request-Id") == "" {
		t.Fatalf("missing decision or request id headers: %v", r.header)
	}
	// A full completion for the other tenant.
	r = n.do("POST", "/v1/completions", globex, completion("zzy", 3, false))
	if r.status != 200 || !strings.Contains(string(r.body), `"text":"zzz"`) {
		t.Fatalf("completion: %d %s", r.status, r.body)
	}

	// Each tenant sees only its own ledger rows; admin sees all.
	for tok, want := range map[string]string{acme: "acme", globex: "globex"} {
		rows := n.ledgerRows(tok)
		if len(rows) == 0 {
			t.Fatalf("%s sees no ledger rows", want)
		}
		kinds := map[string]bool{}
		for _, row := range rows {
			if row["tenant"] != want {
				t.Fatalf("tenant %s sees a row of %v", want, row["tenant"])
			}
			kinds[row["kind"].(string)] = true
			if strings.Contains(fmt.Sprint(row["payload"]), "aaab") || strings.Contains(fmt.Sprint(row["payload"]), "zzy") {
				t.Fatalf("the ledger holds prompt text: %v", row)
			}
		}
		if !kinds["policy.decision"] || !kinds["request.completed"] {
			t.Fatalf("%s's rows lack policy.decision or request.completed: %v", want, kinds)
		}
	}
	// Before serving, the node records only admin changes (its signing
	// keys' creation, tenants) and where event signatures begin
	// (ledger.signing_began): the first other event is the attestation.
	all := n.ledgerRows(admin)
	first := ""
	for _, row := range all {
		if k := row["kind"].(string); !strings.HasPrefix(k, "key.") && !strings.HasPrefix(k, "tenant.") && k != string(audit.KindSigningBegan) {
			first = k
			break
		}
	}
	if first != "capacity.attestation" {
		t.Fatalf("the ledger does not open with the capacity attestation: %v", first)
	}
	// The bundle that serves from the start is on the record, as every
	// reload is.
	reloaded := false
	for _, row := range all {
		reloaded = reloaded || row["kind"] == "policy.reloaded"
	}
	if !reloaded {
		t.Fatal("the ledger has no policy.reloaded event for the starting bundle")
	}

	// An incident affecting acme: globex can neither list nor read it.
	inc := map[string]any{"status": "open", "circumstances": "e2e test", "personal_info_undescribed": "test data only",
		"occurred": map[string]any{"start": "2026-11-29"}, "awareness": map[string]any{"start": "2026-11-29"},
		"persons_concerned": 0, "assessment": map[string]any{"status": "pending"}, "affected_tenants": []string{"acme"},
		"organization": map[string]any{"name": "Cloison e2e"}, "contact": map[string]any{"name": "DPO", "email": "dpo@example.test"}}
	body, _ := json.Marshal(inc)
	r = n.do("POST", "/compliance/v1/incidents", admin, body)
	if r.status != 201 {
		t.Fatalf("open incident: %d %s", r.status, r.body)
	}
	var opened struct {
		Incident string `json:"incident"`
	}
	json.Unmarshal(r.body, &opened)
	if r := n.do("GET", "/compliance/v1/incidents/"+opened.Incident, acme, nil); r.status != 200 {
		t.Fatalf("acme reading its incident: %d %s", r.status, r.body)
	}
	if r := n.do("GET", "/compliance/v1/incidents/"+opened.Incident, globex, nil); r.status != 404 {
		t.Fatalf("globex reading acme's incident: %d %s", r.status, r.body)
	}
	if r := n.do("GET", "/compliance/v1/incidents", globex, nil); strings.Contains(string(r.body), opened.Incident) {
		t.Fatalf("globex lists acme's incident: %s", r.body)
	}
	// Writes to the register need admin.
	if r := n.do("POST", "/compliance/v1/incidents", acme, body); r.status != 403 {
		t.Fatalf("tenant opening an incident: %d", r.status)
	}
	// Metrics are not on the public API (not even for admin), but on
	// their own listener, and name the isolation counters.
	if r := n.do("GET", "/metrics", admin, nil); r.status != 404 {
		t.Fatalf("metrics on the public API: %d", r.status)
	}
	if st, body := n.scrape(t, ""); st != 200 || !strings.Contains(body, "cloison_isolation_pages_in_use{") ||
		!strings.Contains(body, "cloison_num_requests_running{") || !strings.Contains(body, "cloison_kv_cache_usage_ratio{") {
		t.Fatalf("metrics: %d", st)
	}
	// The chain verifies.
	if r := n.do("POST", "/compliance/v1/ledger/verify", admin, nil); r.status != 200 || !bytes.HasPrefix(r.body, []byte(`{"ok":true,`)) {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
}

func TestE2EAuthRejections(t *testing.T) {
	db := pgtest.New(t)
	n := startNode(t, db.AdminURL, pgtestRoles())
	createTenant(t, db.AdminURL, "acme", nil)
	createTenant(t, db.AdminURL, "sleepy", nil)
	good := n.token("acme", time.Hour, tenancy.ScopeInfer)
	parts := strings.Split(good, ".")
	hs, _ := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims{"iss": "cloison-dev", "aud": "cloison", "sub": "x", "tenant": "acme",
		"scopes": []string{"infer"}, "exp": time.Now().Add(time.Hour).Unix()}).SignedString([]byte("guess"))
	none := "eyJhbGciOiJub25lIiwidHlwIjoiSldUIn0." + parts[1] + "."
	_, otherKey, _ := ed25519.GenerateKey(nil)
	forged, _ := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": "cloison-dev", "aud": "cloison", "sub": "x", "tenant": "acme",
		"scopes": []string{"infer"}, "exp": time.Now().Add(time.Hour).Unix()}).SignedString(otherKey)
	sleepy := n.token("sleepy", time.Hour, tenancy.ScopeInfer)
	if _, err := adminStore(t, db.AdminURL).SetStatus(context.Background(), "sleepy", tenancy.StatusSuspended); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		token  string
		status int
	}{
		{"no token", "", 401},
		{"garbage", "not.a.jwt", 401},
		{"alg none", none, 401},
		{"HS256", hs, 401},
		{"tampered payload", parts[0] + "." + parts[1] + "x." + parts[2], 401},
		{"another key, unknown kid", forged, 401},
		{"expired", n.token("acme", time.Second, tenancy.ScopeInfer), 401},
		{"suspended tenant", sleepy, 403},
		{"scope not granted", n.token("acme", time.Hour, tenancy.ScopeComplianceRead), 403},
		{"unknown tenant", n.token("nobody", time.Hour, tenancy.ScopeInfer), 401},
		{"valid", good, 200},
	}
	time.Sleep(1100 * time.Millisecond) // let the one-second token expire
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := n.do("POST", "/v1/completions", tt.token, completion("hi", 2, false))
			if r.status != tt.status {
				t.Fatalf("got %d %s, want %d", r.status, r.body, tt.status)
			}
		})
	}
	// Liveness needs no token; the rest does.
	if r := n.do("GET", "/healthz", "", nil); r.status != 200 {
		t.Fatalf("healthz: %d", r.status)
	}
	for _, path := range []string{"/v1/models", "/v1/attestation", "/admin/v1/tenants", "/compliance/v1/incidents"} {
		if r := n.do("GET", path, "", nil); r.status != 401 {
			t.Errorf("%s without a token: %d", path, r.status)
		}
	}
}

func TestE2EBadInputsAndPolicy(t *testing.T) {
	db := pgtest.New(t)
	n := startNode(t, db.AdminURL, pgtestRoles())
	createTenant(t, db.AdminURL, "acme", nil)
	// The policy denies limited's requests (a residency this unlabelled
	// node is outside of); other may not use the node's model.
	createTenant(t, db.AdminURL, "limited", func(tn *tenancy.Tenant) { tn.Residency = tenancy.Residency{Regions: []string{"ca-qc"}} })
	createTenant(t, db.AdminURL, "other", func(tn *tenancy.Tenant) { tn.AllowedModels = []string{"some-other-model"} })
	acme := n.token("acme", time.Hour, tenancy.ScopeInfer)
	admin := n.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
	tests := []struct {
		name   string
		body   []byte
		status int
		code   string
	}{
		{"malformed JSON", []byte(`{"model":`), 400, "invalid_request_error"},
		{"invalid UTF-8", []byte("{\"model\":\"" + modelID + "\",\"prompt\":\"\xff\xfe\"}"), 400, "invalid_request_error"},
		{"negative max_tokens", []byte(`{"model":"` + modelID + `","prompt":"x","max_tokens":-1}`), 400, "invalid_request_error"},
		{"huge max_tokens", []byte(`{"model":"` + modelID + `","prompt":"x","max_tokens":9007199254740991}`), 400, "context_length_exceeded"},
		{"max_tokens not a number", []byte(`{"model":"` + modelID + `","prompt":"x","max_tokens":"lots"}`), 400, "invalid_request_error"},
		{"unknown model", []byte(`{"model":"gpt-9","prompt":"x"}`), 404, "model_not_found"},
		{"oversized body", []byte(`{"model":"` + modelID + `","prompt":"` + strings.Repeat("a", 2<<20) + `"}`), 400, "invalid_request_error"},
		{"over-long prompt", completion(strings.Repeat("ab", 3000), 10, false), 400, "context_length_exceeded"},
		{"temperature out of range", []byte(`{"model":"` + modelID + `","prompt":"x","temperature":5}`), 400, "invalid_request_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := n.do("POST", "/v1/completions", acme, tt.body)
			if r.status != tt.status || r.code() != tt.code {
				t.Fatalf("got %d %s, want %d %s", r.status, r.body, tt.status, tt.code)
			}
		})
	}
	// Nothing above allocated a page or completed a request.
	var pool struct {
		Pool isolation.Stats `json:"pool"`
	}
	r := n.do("GET", "/admin/v1/pool", admin, nil)
	if err := json.Unmarshal(r.body, &pool); err != nil || pool.Pool.Leased != 0 {
		t.Fatalf("pool after rejections: %s (%v)", r.body, err)
	}
	for _, row := range n.ledgerRows(admin) {
		if row["kind"] == "request.completed" {
			t.Fatalf("a rejected request was served: %v", row)
		}
	}
	// A policy denial carries its decision id to the client and is counted
	// in the tenant's next policy.refusals summary, not ledgered as a row of
	// its own.
	// A model outside the tenant's allow-list is answered as one the node
	// does not serve, before any decision.
	other := n.token("other", time.Hour, tenancy.ScopeInfer)
	if r := n.do("POST", "/v1/completions", other, completion("hello", 2, false)); r.status != 404 || r.code() != "model_not_found" {
		t.Fatalf("model outside the allow-list: %d %s, want 404 model_not_found", r.status, r.body)
	}
	limited := n.token("limited", time.Hour, tenancy.ScopeInfer)
	r = n.do("POST", "/v1/completions", limited, completion("hello", 2, false))
	if r.status != 403 || r.header.Get("X-Cloison-Decision-Id") == "" {
		t.Fatalf("a request the policy denies: %d %s (decision %q)", r.status, r.body, r.header.Get("X-Cloison-Decision-Id"))
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		denied, summarised := 0, false
		for _, row := range n.ledgerRows(admin) {
			if row["tenant"] != "limited" {
				continue
			}
			switch row["kind"] {
			case "policy.decision":
				denied++
			case "policy.refusals":
				data := row["payload"].(map[string]any)["data"].(map[string]any)
				for _, c := range data["counts"].([]any) {
					c := c.(map[string]any)
					summarised = summarised || c["stage"] == "policy" && c["code"] == "permission_denied"
				}
			}
		}
		if denied != 0 {
			t.Fatalf("%d policy.decision rows for a denied request, want 0", denied)
		}
		if summarised {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the policy denial is in no policy.refusals summary")
		}
	}
	// The server still serves.
	if r := n.do("POST", "/v1/completions", acme, completion("ok", 2, false)); r.status != 200 {
		t.Fatalf("after bad inputs: %d %s", r.status, r.body)
	}
}

// Fail closed on the ledger: with PostgreSQL stopped inference gets 503 (no
// unaudited service); it resumes by itself when the database returns, and no
// acknowledged request is missing from the chain.
func TestE2ELedgerOutage(t *testing.T) {
	root, err := pgtest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	env := append(os.Environ(), "CLOISON_PG_PRIVATE=1", "CLOISON_PG_DIR="+t.TempDir(), fmt.Sprintf("CLOISON_PG_PORT=%d", port))
	pg := func(args ...string) string {
		cmd := exec.Command(filepath.Join(root, "scripts", "pg.sh"), args...)
		cmd.Env = env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("pg.sh %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	url := pg()
	t.Cleanup(func() { pg("stop") })
	n := startNode(t, url, nil)
	createTenant(t, url, "acme", nil)
	tok := n.token("acme", time.Hour, tenancy.ScopeInfer)
	served := 0
	ask := func() reply {
		r := n.do("POST", "/v1/completions", tok, completion("abc", 2, false))
		if r.status == 200 {
			served++
		}
		return r
	}
	if r := ask(); r.status != 200 {
		t.Fatalf("before the outage: %d %s", r.status, r.body)
	}
	pg("stop")
	if r := ask(); r.status != 503 || r.code() != "unavailable" {
		t.Fatalf("during the outage: %d %s, want 503\n%s", r.status, r.body, n.logs)
	}
	if r := n.do("GET", "/readyz", "", nil); r.status != 503 {
		t.Fatalf("readyz during the outage: %d", r.status)
	}
	pg()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := ask()
		if r.status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("service did not resume: %d %s", r.status, r.body)
		}
		time.Sleep(500 * time.Millisecond)
	}
	ask()
	// Every served request has its request.completed in the ledger, and the
	// chain verifies (once the ledger read answers: a connection the
	// restart cut may still answer one read with 503, which a client retries).
	admin := n.token("acme", time.Hour, tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		r := n.do("GET", "/compliance/v1/ledger", admin, nil)
		if r.status == 200 {
			break
		}
		if r.status != 503 || time.Now().After(deadline) {
			t.Fatalf("ledger after the outage: %d %s", r.status, r.body)
		}
	}
	completed := 0
	for _, row := range n.ledgerRows(admin) {
		if row["kind"] == "request.completed" {
			completed++
		}
	}
	if completed != served {
		t.Fatalf("%d requests served, %d request.completed events", served, completed)
	}
	if r := n.do("POST", "/compliance/v1/ledger/verify", admin, nil); r.status != 200 || !bytes.HasPrefix(r.body, []byte(`{"ok":true,`)) {
		t.Fatalf("verify: %d %s", r.status, r.body)
	}
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// --trust-jwks: tokens of an external issuer verify with its keys, and only
// for its iss.
func TestE2EExternalIssuer(t *testing.T) {
	db := pgtest.New(t)
	pub, priv, _ := ed25519.GenerateKey(nil)
	kid := tenancy.Thumbprint(pub)
	jwks, _ := json.Marshal(tenancy.JWKS{Keys: []tenancy.JWK{tenancy.PublicJWK(kid, pub)}})
	path := filepath.Join(t.TempDir(), "ext.jwks.json")
	if err := os.WriteFile(path, jwks, 0o644); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, db.AdminURL, pgtestRoles(), "--trust-jwks", "https://idp.example.test="+path)
	createTenant(t, db.AdminURL, "acme", nil)
	sign := func(iss string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": iss, "aud": "cloison", "sub": "svc", "tenant": "acme",
			"scopes": []string{"infer"}, "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(priv)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if r := n.do("POST", "/v1/completions", sign("https://idp.example.test"), completion("hi", 2, false)); r.status != 200 {
		t.Fatalf("external issuer's token: %d %s", r.status, r.body)
	}
	if r := n.do("POST", "/v1/completions", sign("cloison-dev"), completion("hi", 2, false)); r.status != 401 {
		t.Fatalf("external key claiming our issuer: %d %s", r.status, r.body)
	}
}
