package api_test

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// grpcClient serves p's gRPC API on loopback and returns a client of it.
func grpcClient(t *testing.T, p *platformtest.Platform) inferencev1.InferenceServiceClient {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	gs := p.Server.GRPCServer(ctx)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); gs.Stop(); cancel() })
	return inferencev1.NewInferenceServiceClient(conn)
}

func bearer(t *testing.T, p *platformtest.Platform, tenant cloison.TenantID) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+p.Token(t, tenant, tenancy.ScopeInfer))
}

// Tokenize is charged to the tenant's tokens-per-minute quota: a tenant
// that tokenizes in a loop is refused with RESOURCE_EXHAUSTED
// (before, Tokenize was unmetered and never refused, a free way to load the
// node).
func TestTokenizeMetered(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	if _, err := p.Tenants.UpdateTenant(context.Background(), "victim", func(tn *tenancy.Tenant) error {
		tn.Quotas.TokensPerMinute = 200
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	c := grpcClient(t, p)
	ctx := bearer(t, p, "victim")
	req := &inferencev1.TokenizeRequest{Model: platformtest.Model, Input: &inferencev1.TokenizeRequest_Text{Text: strings.Repeat("ab ", 20)}}
	var got codes.Code
	calls := 0
	for ; calls < 200 && got == codes.OK; calls++ {
		_, err := c.Tokenize(ctx, req)
		got = status.Code(err)
	}
	if got != codes.ResourceExhausted || calls < 2 {
		t.Fatalf("got %v after %d calls, want RESOURCE_EXHAUSTED after some calls (200 tokens a minute)", got, calls)
	}
	// Another tenant's quota is its own.
	if _, err := c.Tokenize(bearer(t, p, "attacker"), req); err != nil {
		t.Fatalf("another tenant: got %v, want OK", err)
	}
}

// gRPC takes no bigger request than HTTP: a Generate of more than MaxBody
// bytes (here pre-tokenized ids, which the text and chat bounds do not
// cover) is refused as too large before any policy decision or admission,
// as an HTTP body of that size is, by gRPC itself on the message's length
// prefix (RESOURCE_EXHAUSTED, no ErrorInfo: no interceptor runs first).
func TestGRPCMessageLimit(t *testing.T) {
	const maxBody = 64 << 10
	p := platformtest.New(t, platformtest.Options{API: func(c *api.Config) { c.MaxBody = maxBody }})
	c := grpcClient(t, p)
	ids := make([]int32, maxBody) // ≥ 1 byte each on the wire
	for i := range ids {
		ids[i] = 3
	}
	tests := []struct {
		name string
		ids  []int32
		want codes.Code
		code cloison.Code
	}{
		{"over MaxBody", ids, codes.ResourceExhausted, ""},
		{"within MaxBody: admission decides", ids[:maxBody/4], codes.InvalidArgument, cloison.CodeContextLengthExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := c.Generate(bearer(t, p, "victim"), &inferencev1.GenerateRequest{Model: platformtest.Model, MaxTokens: ptr(int64(1)),
				Prompt: &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: tt.ids}}})
			if err == nil {
				_, err = st.Recv()
			}
			s, _ := status.FromError(err)
			if code, _ := rpcerr.Code(err); s.Code() != tt.want || code != tt.code {
				t.Fatalf("got %v %q, want %v %s", s.Code(), s.Message(), tt.want, tt.code)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// Generations in flight are capped per tenant (429) and in total (503)
// on the one request path, over HTTP and gRPC alike, with Retry-After; a
// freed slot serves again: one tenant cannot take every generation slot.
func TestStreamCaps(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "attacker", "third"},
		API: func(c *api.Config) { c.MaxStreams, c.MaxStreamsPerTenant = 2, 1 }})
	pl := &platform{Platform: p, srvURL: p.URL}
	c := grpcClient(t, p)
	body := `{"model":"cloison-context-bag","prompt":"abc","max_tokens":2,"temperature":0}`
	grpcCode := func(tenant cloison.TenantID) codes.Code {
		st, err := c.Generate(bearer(t, p, tenant), &inferencev1.GenerateRequest{Model: platformtest.Model, MaxTokens: ptr(int64(2)),
			Prompt: &inferencev1.GenerateRequest_Text{Text: "abc"}})
		for err == nil {
			_, err = st.Recv()
		}
		if err == io.EOF {
			return codes.OK
		}
		return status.Code(err)
	}
	relVictim, err := api.HoldStreams(p.Server, "victim", 1)
	if err != nil {
		t.Fatal(err)
	}
	relThird := func() {}
	before := head(t, p)
	steps := []struct {
		name   string
		before func()
		tenant cloison.TenantID
		status int
		code   codes.Code
	}{
		{"victim at its per-tenant cap", nil, "victim", 429, codes.ResourceExhausted},
		{"another tenant has room", nil, "attacker", 200, codes.OK},
		{"the node at its total cap", func() { relThird, _ = api.HoldStreams(p.Server, "third", 1) }, "attacker", 503, codes.Unavailable},
		{"slots freed", func() { relVictim(); relThird() }, "victim", 200, codes.OK},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		resp := pl.post(t, s.tenant, body)
		if resp.StatusCode != s.status {
			t.Fatalf("%s: got HTTP %d, want %d", s.name, resp.StatusCode, s.status)
		}
		if s.status != 200 && resp.Header.Get("Retry-After") == "" {
			t.Fatalf("%s: got no Retry-After, want one", s.name)
		}
		if got := grpcCode(s.tenant); got != s.code {
			t.Fatalf("%s: got gRPC %v, want %v", s.name, got, s.code)
		}
	}
	// Each refusal (HTTP and gRPC) is in the policy.refusals summaries.
	for tenant, want := range map[cloison.TenantID]int64{"victim": 2, "attacker": 2} {
		if n := capacityRefusals(t, p, tenant, before); n != want {
			t.Errorf("policy.refusals counts %d capacity refusals of %s, want %d", n, tenant, want)
		}
	}
}
