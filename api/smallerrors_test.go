package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
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

// Admin and compliance strings with control characters (NUL, which the
// database refuses, and ESC or CR, which would reach a terminal or a
// draft) are refused 400 before they are stored, over HTTP and gRPC.
func TestAdminStringsWithoutControlCharacters(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	admin := p.Token(t, "victim", tenancy.ScopeAdmin)
	for i, bad := range []string{`a\u0000b`, `a\u001b[31mb`, `a\rb`} {
		body := `{"id":"newco` + strconv.Itoa(i) + `","name":"` + bad + `","classification":"internal","quotas":{"max_concurrent":1,"kv_pages":8,"tokens_per_minute":100},"allowed_models":["` + platformtest.Model + `"]}`
		if code, eb, b := call(t, p, "POST", "/admin/v1/tenants", admin, body); code != 400 || eb.Error.Code != string(cloison.CodeInvalid) {
			t.Errorf("tenant name %s: got %d %s, want 400 invalid_request", bad, code, b)
		}
	}
	ok := `{"id":"newco9","name":"New\tCo\nLtd","classification":"internal","quotas":{"max_concurrent":1,"kv_pages":8,"tokens_per_minute":100},"allowed_models":["` + platformtest.Model + `"]}`
	if code, _, b := call(t, p, "POST", "/admin/v1/tenants", admin, ok); code != 201 && code != 200 {
		t.Errorf("tab and newline: got %d %s, want it created", code, b)
	}
	conn := rawGRPCConn(t, p)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+admin)
	err := conn.Invoke(ctx, adminv1.AdminService_CreateTenant_FullMethodName, &adminv1.CreateTenantRequest{Tenant: &adminv1.Tenant{
		Id: "grpcco", Name: "a\x1b[2Jb", Classification: "internal"}}, new(adminv1.Tenant))
	if s, _ := status.FromError(err); s.Code() != codes.InvalidArgument || !strings.Contains(s.Message(), "control character") {
		t.Errorf("gRPC tenant name with ESC: got %v %q, want INVALID_ARGUMENT", s.Code(), s.Message())
	}
}
