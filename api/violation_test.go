package api_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// platform is the whole request path in process, on real PostgreSQL, OPA
// and the CPU backend, with the 2026 placeholder bug switched on in the
// scheduler for prompts over 64 tokens (well under the served context, so
// admission and policy let them through).
type platform struct {
	srv    *httptest.Server
	ledger *auditpg.Store
	issuer *tenancy.Issuer
}

func newPlatform(t *testing.T) *platform {
	t.Helper()
	ctx := context.Background()
	db := pgtest.New(t)
	pool := db.RuntimePool(t)
	_, key, _ := ed25519.GenerateKey(nil)
	ledger, err := auditpg.Open(ctx, pool, auditpg.Config{Origin: "api-test", SigningKey: key, CheckpointDir: t.TempDir(),
		Organization: audit.Organization{Name: "Cloison test"}, Contact: audit.Contact{Name: "DPO", Email: "dpo@example.test"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ledger.Close() })
	store := tenancy.NewStore(pool)
	kek := make([]byte, tenancy.KEKSize)
	rand.Read(kek)
	ring, err := tenancy.OpenKeyRing(ctx, store, "api-test", kek)
	if err != nil {
		t.Fatal(err)
	}
	verifier, err := tenancy.NewVerifier(tenancy.VerifierConfig{Audience: "cloison", Sources: []tenancy.KeySource{ring}, Tenants: store})
	if err != nil {
		t.Fatal(err)
	}
	const name = "cloison-context-bag"
	for _, id := range []cloison.TenantID{"victim", "attacker"} {
		if _, err := store.CreateTenant(ctx, tenancy.Tenant{ID: id, Name: string(id), Status: tenancy.StatusActive, Tier: isolation.TierShared,
			Zeroing: isolation.ZeroCrossTenant, Classification: tenancy.ClassInternal, AllowedModels: []string{name}, IncidentContact: "x@example.test",
			Quotas: tenancy.Quotas{MaxConcurrent: 8, KVPages: 64, TokensPerMinute: 1_000_000, MaxContext: 4096}}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := synth.ContextBag(synth.BagConfig{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w.WriteTo(&buf)
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	be, _ := cpu.New(kernels.Options{})
	t.Cleanup(func() { be.Close() })
	m, err := model.Load(be, f)
	if err != nil {
		t.Fatal(err)
	}
	tok, _ := tokenizer.FromGGUF(f)
	kv, _ := isolation.NewPool(isolation.Config{Pages: 256, PageTokens: 16})
	att, err := engine.Attest(engine.AttestConfig{ModelContext: m.Context, PoolPages: 256, PageTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	arena, _ := be.NewArena(m.ArenaConfig(256, 16))
	var srv *api.Server
	eng, err := engine.New(engine.Config{Model: m, Tokenizer: tok, Pool: kv, Arena: arena, Attestation: att,
		Scheduler:  engine.SchedulerConfig{UnsafePlaceholderOver: 64},
		OnIncident: func(in engine.Incident) { srv.RecordIncident(in) }})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { eng.Run(runCtx); close(done) }()
	t.Cleanup(func() { stop(); <-done })
	decider, err := policies.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	srv, err = api.NewServer(api.Config{Engine: eng, ModelName: name, Tokenizer: tok, Pool: kv, Verifier: verifier, Limiter: tenancy.NewLimiter(),
		Decider: decider, Ledger: ledger, Tenants: store, Keys: ring, Node: "engine:test"})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &platform{srv: hs, ledger: ledger, issuer: tenancy.NewIssuer(ring)}
}

func (p *platform) post(t *testing.T, tenant cloison.TenantID, body string) *http.Response {
	tokStr, err := p.issuer.Issue(tenancy.TokenRequest{Subject: "t", Tenant: tenant, Scopes: []tenancy.Scope{tenancy.ScopeInfer}, Audience: "cloison"})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", p.srv.URL+"/v1/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tokStr)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// An isolation violation ends the response with an error — never a 200 or a
// normal finish — ledgers isolation.violation and opens a Loi 25 incident
// with the tenant and the withheld response pre-filled.
func TestIsolationViolationFailsClosed(t *testing.T) {
	p := newPlatform(t)
	short := `{"model":"cloison-context-bag","prompt":"abc","max_tokens":3,"temperature":0}`
	if resp := p.post(t, "victim", short); resp.StatusCode != 200 {
		t.Fatalf("a normal request: %d", resp.StatusCode)
	}
	long := `{"model":"cloison-context-bag","prompt":"` + strings.Repeat("xy", 60) + `","max_tokens":4,"temperature":0}`
	// Not streamed: an error status, no completion body.
	resp := p.post(t, "attacker", long)
	var body api.ErrorBody
	json.NewDecoder(resp.Body).Decode(&body)
	if resp.StatusCode != 500 || body.Error.Code != string(cloison.CodeIsolationViolation) {
		t.Fatalf("got %d %+v, want 500 isolation_violation", resp.StatusCode, body)
	}
	// Streamed: an error event, no finish reason, no [DONE].
	resp = p.post(t, "attacker", strings.Replace(long, `"temperature":0`, `"temperature":0,"stream":true`, 1))
	sc := bufio.NewScanner(resp.Body)
	var sawErr, sawFinish, sawDone bool
	for sc.Scan() {
		line := sc.Text()
		sawErr = sawErr || strings.Contains(line, `"code":"isolation_violation"`)
		sawFinish = sawFinish || strings.Contains(line, `"finish_reason":"`)
		sawDone = sawDone || line == "data: [DONE]"
	}
	if !sawErr || sawFinish || sawDone {
		t.Fatalf("stream: error %v, finish %v, done %v; want only an error", sawErr, sawFinish, sawDone)
	}
	// Two incidents, opened in the background by the hook.
	var incs []audit.IncidentFile
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		if incs, err = p.ledger.Incidents(context.Background()); err != nil {
			t.Fatal(err)
		}
		if len(incs) == 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if len(incs) != 2 {
		t.Fatalf("got %d incidents, want 2", len(incs))
	}
	for _, f := range incs {
		v := f.Latest()
		if f.Source != audit.SourceIsolationViolation || v.Assessment.Status != audit.AssessmentPending || v.AffectedResponses != 1 ||
			len(v.AffectedTenants) == 0 || v.AffectedTenants[0] != "attacker" || len(v.LedgerEvents) != 1 {
			t.Fatalf("incident %s: %+v", f.ID, v)
		}
	}
	// The ledger holds the violations (counts and ids, no text) and no
	// completion for them.
	kinds := map[audit.Kind]int{}
	if err := p.ledger.Scan(context.Background(), 1, 0, func(r audit.Record) error {
		kinds[r.Kind]++
		if bytes.Contains(r.Payload, []byte("xyxy")) {
			t.Fatalf("prompt text in the ledger: %s", r.Payload)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if kinds[audit.KindIsolationViolation] != 2 || kinds[audit.KindIncidentOpened] != 2 {
		t.Fatalf("ledger kinds %v", kinds)
	}
}
