package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// Admission before work: a long prompt from a tenant that its quota refuses
// (its bucket empty, or its concurrent requests all in flight), or naming a
// model it may not use, is refused with the error Generate would give and
// is never tokenized — the tokenizer's count of bytes encoded does not
// move — on every route that tokenizes a caller's text: completions, chat
// completions, the Responses API and gRPC Generate (text and chat). The
// same requests from a tenant with room are tokenized (the count moves by
// the prompt at least): the probe can fail.
func TestLongPromptNotTokenizedBeforeAdmission(t *testing.T) {
	q := tenancy.Quotas{MaxConcurrent: 1, KVPages: 256, TokensPerMinute: 100_000}
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"drained", "busy", "fresh"}, Quotas: &q})
	frozen := time.Now()
	p.Limiter.Now = func() time.Time { return frozen } // the drained bucket does not refill
	drain, err := p.Limiter.Admit("drained", q, q.TokensPerMinute)
	if err != nil {
		t.Fatal(err)
	}
	drain.Release(q.TokensPerMinute)
	busy, err := p.Limiter.Admit("busy", q, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Release(1) })

	// Long (3,150 bytes, about as many tokens in the served 4,096), and a lower bound of its tokens well inside every quota: only
	// the bucket's level or the concurrency refuses it.
	prompt := strings.Repeat("the quick brown fox jumps over the lazy dog; ", 70)
	if lb := p.Tokenizer.MinTokens(len(prompt)); lb < 1 || lb+1 > q.TokensPerMinute/2 {
		t.Fatalf("lower bound %d tokens: the test's prompt does not fit its quotas", lb)
	}
	pj, _ := json.Marshal(prompt)
	routes := []struct {
		name string
		send func(t *testing.T, tenant cloison.TenantID, model string) (status int, code string)
	}{
		{"completions", func(t *testing.T, tenant cloison.TenantID, model string) (int, string) {
			return post(t, p, "/v1/completions", tenant, fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":1}`, model, pj))
		}},
		{"chat completions", func(t *testing.T, tenant cloison.TenantID, model string) (int, string) {
			return post(t, p, "/v1/chat/completions", tenant, fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%s}],"max_tokens":1}`, model, pj))
		}},
		{"responses", func(t *testing.T, tenant cloison.TenantID, model string) (int, string) {
			return post(t, p, "/v1/responses", tenant, fmt.Sprintf(`{"model":%q,"input":%s,"max_output_tokens":1,"store":false}`, model, pj))
		}},
		{"grpc text", func(t *testing.T, tenant cloison.TenantID, model string) (int, string) {
			return grpcGenerate(t, p, tenant, &inferencev1.GenerateRequest{Model: model, Prompt: &inferencev1.GenerateRequest_Text{Text: prompt}})
		}},
		{"grpc chat", func(t *testing.T, tenant cloison.TenantID, model string) (int, string) {
			return grpcGenerate(t, p, tenant, &inferencev1.GenerateRequest{Model: model, Prompt: &inferencev1.GenerateRequest_Chat{Chat: &inferencev1.ChatMessages{
				Messages: []*inferencev1.ChatMessage{{Role: "user", Content: prompt}}}}})
		}},
	}
	for _, r := range routes {
		t.Run(r.name, func(t *testing.T) {
			for _, tc := range []struct {
				tenant cloison.TenantID
				model  string
				status int
				code   string
			}{
				{"drained", platformtest.Model, 429, "rate_limit_exceeded"},
				{"busy", platformtest.Model, 429, "quota_exceeded"},
				{"fresh", "not-this-model", 404, "model_not_found"},
			} {
				before := p.Tokenizer.EncodedBytes()
				status, code := r.send(t, tc.tenant, tc.model)
				if status != tc.status || code != tc.code {
					t.Fatalf("%s, model %s: got %d %q, want %d %q", tc.tenant, tc.model, status, code, tc.status, tc.code)
				}
				if n := p.Tokenizer.EncodedBytes() - before; n != 0 {
					t.Fatalf("%s, model %s: refused after %d bytes were tokenized, want none", tc.tenant, tc.model, n)
				}
			}
			before := p.Tokenizer.EncodedBytes()
			if status, code := r.send(t, "fresh", platformtest.Model); status != 200 {
				t.Fatalf("fresh: %d %q", status, code)
			}
			if n := p.Tokenizer.EncodedBytes() - before; n < int64(len(prompt)) {
				t.Fatalf("fresh: %d bytes tokenized, want the prompt's %d at least", n, len(prompt))
			}
		})
	}
}

// post sends body to path as tenant and returns the status and error code.
func post(t *testing.T, p *platformtest.Platform, path string, tenant cloison.TenantID, body string) (int, string) {
	t.Helper()
	resp, b := send(t, "POST", p.URL+path, p.Token(t, tenant, tenancy.ScopeInfer), body)
	var v struct {
		Error struct{ Code string } `json:"error"`
	}
	_ = json.Unmarshal(b, &v)
	return resp.StatusCode, v.Error.Code
}

// grpcGenerate runs req as tenant and returns the HTTP status its error
// maps to (200 when it ends normally) and the ErrorInfo reason.
func grpcGenerate(t *testing.T, p *platformtest.Platform, tenant cloison.TenantID, req *inferencev1.GenerateRequest) (int, string) {
	t.Helper()
	conn, ctx := p.GRPC(t)
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.Token(t, tenant, tenancy.ScopeInfer))
	one := int64(1)
	req.MaxTokens = &one
	st, err := inferencev1.NewInferenceServiceClient(conn).Generate(ctx, req)
	for err == nil {
		_, err = st.Recv()
	}
	if err == io.EOF {
		return 200, ""
	}
	return grpcHTTPStatus(err)
}

// grpcHTTPStatus is err's gRPC code as the HTTP status the same error
// gets over HTTP (the codes this file meets), and its ErrorInfo code.
func grpcHTTPStatus(err error) (int, string) {
	code, _ := rpcerr.Code(err)
	switch status.Code(err) {
	case codes.ResourceExhausted:
		return 429, string(code)
	case codes.NotFound:
		return 404, string(code)
	default:
		return 500, fmt.Sprintf("%s (%v)", code, err)
	}
}

// Embeddings too: a drained tenant's long inputs are refused before any is
// tokenized; a tenant with room has them tokenized.
func TestLongEmbeddingInputsNotTokenizedBeforeAdmission(t *testing.T) {
	q := tenancy.Quotas{MaxConcurrent: 4, KVPages: 256, TokensPerMinute: 100_000}
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"drained", "fresh"}, Quotas: &q, Pooling: 1})
	frozen := time.Now()
	p.Limiter.Now = func() time.Time { return frozen }
	drain, err := p.Limiter.Admit("drained", q, q.TokensPerMinute)
	if err != nil {
		t.Fatal(err)
	}
	drain.Release(q.TokensPerMinute)
	input := strings.Repeat("zebra quilt ", 150)
	body := fmt.Sprintf(`{"model":%q,"input":[%q,%q]}`, platformtest.Model, input, input)
	before := p.Tokenizer.EncodedBytes()
	if status, code := post(t, p, "/v1/embeddings", "drained", body); status != 429 || code != "rate_limit_exceeded" {
		t.Fatalf("drained: got %d %q, want 429 rate_limit_exceeded", status, code)
	}
	if n := p.Tokenizer.EncodedBytes() - before; n != 0 {
		t.Fatalf("drained: refused after %d bytes were tokenized, want none", n)
	}
	if status, code := post(t, p, "/v1/embeddings", "fresh", body); status != 200 {
		t.Fatalf("fresh: %d %q", status, code)
	}
	if n := p.Tokenizer.EncodedBytes() - before; n < int64(2*len(input)) {
		t.Fatalf("fresh: %d bytes tokenized, want both inputs' %d", n, 2*len(input))
	}
}
