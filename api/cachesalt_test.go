package api_test

import (
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// cache_salt (vLLM's) only narrows the tenant's prefix cache: a request
// finds the prompt pages its tenant computed under the same salt — the
// same salt shares, another salt or none does not — and another tenant
// sending the same prompt and the same salt shares nothing (the ledger's
// request.completed counts the tokens taken from the cache). An empty or
// oversized salt is refused.
func TestCacheSalt(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "attacker"}, Pages: 256, PrefixCache: true})
	// 4 full pages of 16 tokens and 3 more: each byte is one token here.
	prompt := strings.Repeat("abcdefgh", 8) + "xyz"
	send := func(tenant cloison.TenantID, salt any) (int, []byte, string) {
		body := map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 1, "temperature": 0}
		if salt != nil {
			body["cache_salt"] = salt
		}
		resp, b := request(t, "POST", p.URL+"/v1/completions", "Bearer "+p.Token(t, tenant, tenancy.ScopeInfer), mustJSON(body))
		return resp.StatusCode, b, resp.Header.Get("X-Request-Id")
	}
	cached := func(tenant cloison.TenantID, salt any) int64 {
		t.Helper()
		from := head(t, p)
		status, b, id := send(tenant, salt)
		if status != 200 {
			t.Fatalf("%s, salt %v: %d %s", tenant, salt, status, b)
		}
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
			if rc, ok := pl.(*audit.RequestCompleted); ok && string(rc.Request) == id {
				return rc.CachedTokens
			}
		}
		t.Fatalf("%s, salt %v: no request.completed for %s", tenant, salt, id)
		return 0
	}
	for i, tc := range []struct {
		tenant cloison.TenantID
		salt   any
		want   int64
	}{
		{"victim", "alpha", 0},   // computes and publishes the pages under alpha
		{"victim", "alpha", 64},  // same tenant, same salt: shared
		{"victim", "beta", 0},    // another salt
		{"victim", nil, 0},       // no salt: the tenant's unsalted pages, none yet
		{"victim", nil, 64},      // which the previous request published
		{"attacker", "alpha", 0}, // another tenant, the same salt: never
		{"attacker", nil, 0},
	} {
		if got := cached(tc.tenant, tc.salt); got != tc.want {
			t.Fatalf("request %d (%s, salt %v): %d prompt tokens from the cache, want %d", i, tc.tenant, tc.salt, got, tc.want)
		}
	}
	for _, bad := range []any{"", strings.Repeat("s", 1025), 7} {
		if status, b, _ := send("victim", bad); status != 400 {
			t.Fatalf("cache_salt %.20v: %d %s, want 400", bad, status, b)
		}
	}
}
