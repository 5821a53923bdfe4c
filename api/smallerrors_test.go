package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// An enum of more than 4,096 values is refused as an unsupported schema
// naming the bound (400), not left to fail inside the matcher (500).
func TestHugeEnumRefused(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	values := make([]string, 5000)
	for i := range values {
		values[i] = "v" + strconv.Itoa(i)
	}
	schema := map[string]any{"type": "string", "enum": values}
	body, err := json.Marshal(map[string]any{"model": platformtest.Model, "max_tokens": 8, "temperature": 0,
		"messages":        []map[string]string{{"role": "user", "content": "pick"}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "n", "schema": schema}}})
	if err != nil {
		t.Fatal(err)
	}
	code, eb, b := call(t, p, "POST", "/v1/chat/completions", tok, string(body))
	if code != 400 || eb.Error.Code != string(cloison.CodeUnsupported) || !strings.Contains(eb.Error.Message, "4096") {
		t.Fatalf("got %d %s, want 400 unsupported naming the 4096 bound", code, b)
	}
}

// A request that can never fit the tenant's quota (more tokens than its
// tokens-per-minute) is 429 insufficient_quota with x-should-retry: false,
// so that clients which retry 429 (the official openai client) do not; a
// request refused for a while (rate limit) keeps Retry-After and no such
// header.
func TestNeverSatisfiableQuotaNotRetried(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	if _, err := p.Tenants.UpdateTenant(context.Background(), "victim", func(tn *tenancy.Tenant) error {
		tn.Quotas.TokensPerMinute = 100
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	ask := func(maxTokens int) *http.Response {
		resp, _ := send(t, "POST", p.URL+"/v1/completions", tok,
			fmt.Sprintf(`{"model":%q,"prompt":"abc","max_tokens":%d,"temperature":0}`, platformtest.Model, maxTokens))
		return resp
	}
	resp := ask(1000)
	if resp.StatusCode != 429 || resp.Header.Get("X-Should-Retry") != "false" || resp.Header.Get("Retry-After") != "" {
		t.Fatalf("never fits: got %d, x-should-retry %q, Retry-After %q; want 429, false, none", resp.StatusCode, resp.Header.Get("X-Should-Retry"), resp.Header.Get("Retry-After"))
	}
	for range 20 {
		resp = ask(40)
		if resp.StatusCode == 429 {
			break
		}
	}
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" || resp.Header.Get("X-Should-Retry") != "" {
		t.Fatalf("rate limited: got %d, x-should-retry %q, Retry-After %q; want 429 with Retry-After only", resp.StatusCode, resp.Header.Get("X-Should-Retry"), resp.Header.Get("Retry-After"))
	}
}
