package api_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

func call(t *testing.T, p *platformtest.Platform, method, path, token, body string) (int, api.ErrorBody, []byte) {
	t.Helper()
	resp, b := send(t, method, p.URL+path, token, body)
	var eb api.ErrorBody
	_ = json.Unmarshal(b, &eb)
	return resp.StatusCode, eb, b
}

// TestAdminPlantedKeyIs401: a signing key planted in the database grants
// nothing, end to end. The runtime
// database role plants a next signing key with its own public key (through
// row_apply, with an unsigned event); the key refresh refuses it and a
// self-signed admin token for any tenant gets 401.
func TestAdminPlantedKeyIs401(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{})
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	kid := tenancy.Thumbprint(pub)
	fake := make([]byte, 60)
	_, _ = rand.Read(fake)
	// The runtime role writes key rows only through row_apply, with an
	// event of its own (unsigned: it has no log key).
	rt := p.DB.RuntimePool(t)
	plant := func(row map[string]any, op audit.KeyOp, public []byte) {
		var prev int64
		_ = rt.QueryRow(ctx, `SELECT coalesce(ledger_seq, 0) FROM signing_keys WHERE kid = $1`, row["kid"]).Scan(&prev)
		st, err := audit.RowState(audit.RowSigningKeys, uint64(prev), row)
		if err != nil {
			t.Fatal(err)
		}
		d := audit.Sum(st)
		payload, err := audit.Event{OccurredAt: time.Now(), Actor: "admin:mallory", Payload: audit.KeyChange{Op: op,
			Key: audit.Name(row["kid"].(string)), Purpose: "jwt", PublicKeyDigest: audit.Sum(public), State: &d}}.Canonical()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rt.Exec(ctx, `SELECT * FROM row_apply($1, $2)`, payload, st); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range p.Ring.Keys() {
		if k.State != tenancy.KeyNext {
			continue
		}
		var sealed []byte
		if err := rt.QueryRow(ctx, `SELECT sealed_private FROM signing_keys WHERE kid = $1`, k.ID).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		plant(map[string]any{"kid": k.ID, "issuer": k.Issuer, "algorithm": "EdDSA", "public_key": `\x` + hex.EncodeToString(k.Public),
			"sealed_private": `\x` + hex.EncodeToString(sealed), "state": "retired"}, audit.KeyRevoked, k.Public)
	}
	plant(map[string]any{"kid": kid, "issuer": p.Ring.Issuer(), "algorithm": "EdDSA", "public_key": `\x` + hex.EncodeToString(pub),
		"sealed_private": `\x` + hex.EncodeToString(fake), "state": "next"}, audit.KeyCreated, pub)
	// The key refresh every node runs: the rows are not what signed
	// events state, so the ring keeps the keys it had.
	if err := p.Ring.Reload(ctx); !errors.Is(err, tenancy.ErrRowUnproven) {
		t.Fatalf("reload after the plant: got %v, want ErrRowUnproven", err)
	}
	for _, tenant := range []string{"victim", "attacker"} {
		tok := jwt.NewWithClaims(jwt.SigningMethodEdDSA, jwt.MapClaims{"iss": p.Ring.Issuer(), "aud": "cloison", "sub": "mallory",
			"tenant": tenant, "scopes": []string{"admin", "infer", "compliance:read"}, "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = kid
		forged, err := tok.SignedString(priv)
		if err != nil {
			t.Fatal(err)
		}
		if code, _, _ := call(t, p, "GET", "/admin/v1/tenants", forged, ""); code != 401 {
			t.Fatalf("self-signed admin token for %s: got %d, want 401", tenant, code)
		}
	}
}

// TestAdminChangesAndRevocations: admin changes take effect at once and
// are ledgered, over HTTP. Rotation
// has a minimum interval; one key is retired; a tenant's quotas and models
// are updated; an API client and a single token are revoked and stop
// verifying at once; each change is in the ledger, by the admin who made it.
func TestAdminChangesAndRevocations(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{})
	admin := p.Token(t, "victim", tenancy.ScopeAdmin)
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Rotation within the minimum interval: 409, keys unchanged.
	before := p.Ring.Keys()
	if code, eb, _ := call(t, p, "POST", "/admin/v1/keys/rotate", admin, ""); code != 409 || eb.Error.Code != string(cloison.CodeConflict) {
		t.Fatalf("quick rotation: got %d %+v, want 409 conflict", code, eb)
	}
	if got := p.Ring.Keys(); len(got) != len(before) || got[0].State != before[0].State {
		t.Fatalf("keys after a refused rotation: got %+v, want %+v", got, before)
	}
	// Retire the next key; the current one cannot be retired.
	var next, current string
	for _, k := range before {
		switch k.State {
		case tenancy.KeyNext:
			next = k.ID
		case tenancy.KeyCurrent:
			current = k.ID
		}
	}
	if code, _, body := call(t, p, "POST", "/admin/v1/keys/"+next+"/retire", admin, ""); code != 200 || !strings.Contains(string(body), `"state":"retired"`) {
		t.Fatalf("retire next: got %d %s, want 200 with a retired key", code, body)
	}
	if code, _, _ := call(t, p, "POST", "/admin/v1/keys/"+current+"/retire", admin, ""); code != 409 {
		t.Fatalf("retire current: got %d, want 409", code)
	}

	// Tenant update: quotas and models change; kv_pages cannot.
	code, _, body := call(t, p, "PATCH", "/admin/v1/tenants/attacker", admin, `{"quotas":{"max_concurrent":3},"allowed_models":["`+platformtest.Model+`"]}`)
	var upd tenancy.Tenant
	_ = json.Unmarshal(body, &upd)
	if code != 200 || upd.Quotas.MaxConcurrent != 3 || len(upd.AllowedModels) != 1 {
		t.Fatalf("update: got %d %s, want 200 with max_concurrent 3 and one model", code, body)
	}
	if code, _, _ := call(t, p, "PATCH", "/admin/v1/tenants/attacker", admin, `{"quotas":{"kv_pages":`+"1"+`}}`); code != 400 {
		t.Fatalf("kv_pages update: got %d, want 400", code)
	}

	// An API client, revoked: its token stops verifying at once.
	if code, _, body := call(t, p, "POST", "/admin/v1/tenants/attacker/clients", admin, `{"id":"test-attacker","name":"a","scopes":["infer"]}`); code != 201 {
		t.Fatalf("create client: got %d %s, want 201", code, body)
	}
	user := p.Token(t, "attacker", tenancy.ScopeInfer) // subject test-attacker
	if code, _, _ := call(t, p, "GET", "/v1/models", user, ""); code != 200 {
		t.Fatalf("client token before revocation: got %d, want 200", code)
	}
	if code, _, body := call(t, p, "POST", "/admin/v1/clients/test-attacker/revoke", admin, ""); code != 200 {
		t.Fatalf("revoke client: got %d %s, want 200", code, body)
	}
	if code, _, _ := call(t, p, "GET", "/v1/models", user, ""); code != 401 {
		t.Fatalf("revoked client's token: got %d, want 401", code)
	}

	// One token revoked by jti; another of the same subject still works.
	one, other := p.Token(t, "victim", tenancy.ScopeInfer), p.Token(t, "victim", tenancy.ScopeInfer)
	var cl tenancy.Claims
	if _, _, err := jwt.NewParser().ParseUnverified(one, &cl); err != nil {
		t.Fatal(err)
	}
	rev, _ := json.Marshal(map[string]any{"jti": cl.ID, "issuer": cl.Issuer, "expires_at": cl.ExpiresAt.Time, "tenant": "victim"})
	if code, _, body := call(t, p, "POST", "/admin/v1/tokens/revoke", admin, string(rev)); code != 200 {
		t.Fatalf("revoke token: got %d %s, want 200", code, body)
	}
	if code, _, _ := call(t, p, "GET", "/v1/models", one, ""); code != 401 {
		t.Fatalf("revoked token: got %d, want 401", code)
	}
	if code, _, _ := call(t, p, "GET", "/v1/models", other, ""); code != 200 {
		t.Fatalf("another token of the subject: got %d, want 200", code)
	}

	// Every change is in the ledger, by the admin.
	want := map[audit.Kind]bool{audit.KindKeyRevoked: false, audit.KindTenantUpdated: false, audit.KindClientCreated: false,
		audit.KindClientRevoked: false, audit.KindTokenRevoked: false}
	err = p.Ledger.Scan(ctx, head.Seq+1, 0, func(r audit.Record) error {
		if _, ok := want[r.Kind]; ok && r.Actor == "admin:test-victim" {
			want[r.Kind] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for k, seen := range want {
		if !seen {
			t.Errorf("ledger: no %s event by admin:test-victim", k)
		}
	}
}

// TestAdminLedgerDownChangesNothing: no change without its ledger row,
// over HTTP. With the
// ledger closed, creating or suspending a tenant answers 503 and changes
// nothing (the API used to apply the change, then fail to ledger it).
func TestAdminLedgerDownChangesNothing(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	admin := p.Token(t, "victim", tenancy.ScopeAdmin)
	_ = p.Ledger.Close()
	tenant := `{"id":"newco","name":"New","classification":"internal","quotas":{"max_concurrent":1,"kv_pages":8,"tokens_per_minute":100},"allowed_models":["` + platformtest.Model + `"]}`
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/admin/v1/tenants", tenant},
		{"POST", "/admin/v1/tenants/attacker/suspend", ""},
		{"PATCH", "/admin/v1/tenants/attacker", `{"quotas":{"max_concurrent":2}}`},
		{"POST", "/admin/v1/tenants/attacker/clients", `{"id":"c1","name":"c","scopes":["infer"]}`},
	} {
		if code, _, body := call(t, p, c.method, c.path, admin, c.body); code != 503 {
			t.Fatalf("%s %s with the ledger down: got %d %s, want 503", c.method, c.path, code, body)
		}
	}
	if code, _, _ := call(t, p, "GET", "/admin/v1/tenants/newco", admin, ""); code != 404 {
		t.Fatalf("tenant created without its event: got %d, want 404", code)
	}
	code, _, body := call(t, p, "GET", "/admin/v1/tenants/attacker", admin, "")
	var got tenancy.Tenant
	_ = json.Unmarshal(body, &got)
	if code != 200 || got.Status != tenancy.StatusActive || got.Quotas.MaxConcurrent == 2 {
		t.Fatalf("attacker after refused changes: got %d %s, want active and unchanged", code, body)
	}
	if code, _, body := call(t, p, "GET", "/admin/v1/tenants/attacker/clients", admin, ""); code != 200 || strings.Contains(string(body), `"c1"`) {
		t.Fatalf("client created without its event: got %d %s", code, body)
	}
}
