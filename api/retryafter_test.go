package api_test

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// A client must learn when to come back, not retry at once: a request the real
// limiter refuses (the tenant's tokens-per-minute bucket is empty) is answered
// 429 with Retry-After over HTTP, and RESOURCE_EXHAUSTED with a RetryInfo
// detail and a retry-after trailer over gRPC; the wait is the limiter's, and
// after it the same request fits. Before, the API looked for a RetryAfter
// method that tenancy.LimitError did not have: no wait was sent.
func TestRateLimitedRetryAfter(t *testing.T) {
	q := tenancy.Quotas{MaxConcurrent: 64, KVPages: 256, TokensPerMinute: 600} // 10 tokens a second
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"acme"}, Quotas: &q})
	var now atomic.Int64 // read by the server's goroutines
	now.Store(time.Now().UnixNano())
	// No refill but the one the test makes; the bucket, emptied.
	p.Limiter.Now = func() time.Time { return time.Unix(0, now.Load()) }
	permit, err := p.Limiter.AdmitLease("acme", q, 600, 1)
	if err != nil {
		t.Fatal(err)
	}
	permit.Release(600)
	tok := p.Token(t, "acme", tenancy.ScopeInfer)

	resp, body := send(t, "POST", p.URL+"/v1/completions", tok, completion("hello", 40))
	wait, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if resp.StatusCode != 429 || err != nil || wait < 1 {
		t.Fatalf("HTTP: got %d %s Retry-After %q, want 429 with a positive Retry-After", resp.StatusCode, body, resp.Header.Get("Retry-After"))
	}

	c := grpcClient(t, p)
	var trailer metadata.MD
	st, err := c.Generate(bearer(t, p, "acme"), &inferencev1.GenerateRequest{Model: platformtest.Model, MaxTokens: ptr(int64(40)),
		Prompt: &inferencev1.GenerateRequest_Text{Text: "hello"}}, grpc.Trailer(&trailer))
	for err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("gRPC: got %v, want %v", err, codes.ResourceExhausted)
	}
	if d := rpcerr.RetryDelay(err); d < time.Second {
		t.Fatalf("gRPC: got RetryInfo %v, want at least 1s", d)
	}
	if v := trailer.Get(api.RetryAfterKey); len(v) != 1 || v[0] == "0" {
		t.Fatalf("gRPC: got retry-after trailer %v, want one positive value", v)
	}

	// After the wait the limiter sent, the same request is served.
	now.Add(int64(time.Duration(wait) * time.Second))
	if resp, body := send(t, "POST", p.URL+"/v1/completions", tok, completion("hello", 40)); resp.StatusCode != 200 {
		t.Fatalf("after Retry-After %ds: got %d %s, want 200", wait, resp.StatusCode, body)
	}
}
