package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// A tenant created after the node started (by another node, straight in
// the store) gets its partition on its first request, through the engine
// (Engine.EnsureTenant), as its record says; the API advertises and records
// what that partition gives. A tenant the pool cannot hold is refused
// before service (503, the isolation policy) and gets no partition.
func TestTenantPartitionOnFirstRequest(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	ctx := context.Background()
	create := func(id cloison.TenantID, pages int) {
		t.Helper()
		if _, err := p.Tenants.CreateTenant(ctx, tenancy.Tenant{ID: id, Name: string(id), Status: tenancy.StatusActive, Tier: isolation.TierDedicated,
			Zeroing: isolation.ZeroAlways, Classification: tenancy.ClassInternal, AllowedModels: []string{platformtest.Model}, IncidentContact: "x@example.test",
			Quotas: tenancy.Quotas{MaxConcurrent: 4, KVPages: pages, TokensPerMinute: 1 << 20, MaxContext: 1 << 20}}); err != nil {
			t.Fatal(err)
		}
	}
	create("late", 32)
	create("toobig", 10_000)
	for _, id := range []cloison.TenantID{"late", "toobig"} {
		if _, err := p.Pool.Partition(id); !errors.Is(err, isolation.ErrUnknownTenant) {
			t.Fatalf("%s before its first request: got %v, want no partition", id, err)
		}
	}

	// The models list already reaches the engine once: 32 pages of 16.
	code, _, body := call(t, p, "GET", "/v1/models", p.Token(t, "late", tenancy.ScopeInfer), "")
	var models struct {
		Data []struct {
			ContextLength int `json:"context_length"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &models); err != nil || code != 200 || len(models.Data) != 1 || models.Data[0].ContextLength != 32*16 {
		t.Fatalf("models: got %d %s, want one model of context %d", code, body, 32*16)
	}
	from := head(t, p)
	completion := `{"model":"` + platformtest.Model + `","prompt":"abc","max_tokens":2}`
	if code, _, body := call(t, p, "POST", "/v1/completions", p.Token(t, "late", tenancy.ScopeInfer), completion); code != 200 {
		t.Fatalf("late tenant: got %d %s, want 200", code, body)
	}
	part, err := p.Pool.Partition("late")
	if want := (isolation.Partition{Tenant: "late", Tier: isolation.TierDedicated, Zeroing: isolation.ZeroAlways, Reserved: 32,
		MaxLeaseTokens: 32 * 16, PageTokens: 16}); err != nil || part != want {
		t.Fatalf("late tenant's partition: got %+v, %v; want %+v", part, err, want)
	}
	var tier audit.Name
	for _, r := range rows(t, p, from) {
		if r.Kind != audit.KindRequestCompleted {
			continue
		}
		env, err := audit.DecodeEnvelope(r.Payload)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := env.DecodePayload()
		if err != nil {
			t.Fatal(err)
		}
		tier = pl.(*audit.RequestCompleted).Tier
	}
	if tier != "always" {
		t.Fatalf("request.completed records zeroing %q, want always", tier)
	}

	code, eb, body := call(t, p, "POST", "/v1/completions", p.Token(t, "toobig", tenancy.ScopeInfer), completion)
	if code != 503 || eb.Error.Message != "the KV pool cannot apply the isolation the policy requires for this tenant" {
		t.Fatalf("tenant the pool cannot hold: got %d %s, want 503 isolation policy", code, body)
	}
	if _, err := p.Pool.Partition("toobig"); !errors.Is(err, isolation.ErrUnknownTenant) {
		t.Fatalf("refused tenant: got %v, want no partition", err)
	}
	if err := p.Pool.Check(); err != nil {
		t.Fatal(err)
	}
}
