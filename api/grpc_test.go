package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	compliancev1 "github.com/cloison/cloison/api/proto/cloison/compliance/v1"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	responsev1 "github.com/cloison/cloison/api/proto/cloison/response/v1"
	tlogv1 "github.com/cloison/cloison/api/proto/cloison/tlog/v1"
	"github.com/cloison/cloison/engine"
	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/tenancy"
	"github.com/cloison/cloison/tenancy/tenancytest"
	"github.com/jackc/pgx/v5/pgxpool"
)

// probe is an InferenceService whose handlers report what the
// interceptors gave them, or fail as the request's model says.
type probe struct {
	inferencev1.UnimplementedInferenceServiceServer
}

func (probe) fail(model string) error {
	switch model {
	case "panic":
		panic("secret state in a panic")
	case "context":
		return fmt.Errorf("%w: 5000 tokens", engine.ErrContextLength)
	case "internal":
		return errors.New("pq: secret table dump")
	case "retry":
		return limited()
	}
	return nil
}

func (p probe) ListModels(ctx context.Context, _ *inferencev1.ListModelsRequest) (*inferencev1.ListModelsResponse, error) {
	return &inferencev1.ListModelsResponse{Models: []*inferencev1.Model{{Id: string(grpcPrincipal(ctx).Tenant), OwnedBy: string(grpcRequestID(ctx))}}}, nil
}

func (p probe) Tokenize(ctx context.Context, req *inferencev1.TokenizeRequest) (*inferencev1.TokenizeResponse, error) {
	if err := p.fail(req.GetModel()); err != nil {
		return nil, err
	}
	return &inferencev1.TokenizeResponse{}, nil
}

func (p probe) GetAttestation(context.Context, *inferencev1.GetAttestationRequest) (*inferencev1.Attestation, error) {
	return &inferencev1.Attestation{Ok: true}, nil
}

func (p probe) Generate(req *inferencev1.GenerateRequest, stream grpc.ServerStreamingServer[inferencev1.GenerateResponse]) error {
	if err := p.fail(req.GetModel()); err != nil {
		return err
	}
	ctx := stream.Context()
	return stream.Send(&inferencev1.GenerateResponse{Kind: &inferencev1.GenerateResponse_Chunk{Chunk: &inferencev1.TokenChunk{
		Text: string(grpcPrincipal(ctx).Tenant) + " " + string(grpcRequestID(ctx))}}})
}

type interceptorEnv struct {
	env    *tenancytest.Env
	tenant cloison.TenantID
	conn   *grpc.ClientConn
	client inferencev1.InferenceServiceClient
}

// newInterceptorEnv serves probe, health and an unmapped service (Transfer)
// behind Interceptors on a loopback listener, with a real verifier over a
// real database.
func newInterceptorEnv(t *testing.T) *interceptorEnv {
	t.Helper()
	db := pgtest.New(t)
	pool, err := pgxpool.New(context.Background(), db.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	e := &interceptorEnv{env: tenancytest.New(t, pool)}
	e.tenant = e.env.Tenant(t, "acme", nil, nil).ID
	unary, stream := Interceptors(e.env.Verifier.Verify, nil)
	gs := grpc.NewServer(grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream))
	inferencev1.RegisterInferenceServiceServer(gs, probe{})
	transferv1.RegisterTransferServer(gs, transferv1.UnimplementedTransferServer{})
	healthpb.RegisterHealthServer(gs, health.NewServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go gs.Serve(ln)
	t.Cleanup(gs.Stop)
	if e.conn, err = grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials())); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.conn.Close() })
	e.client = inferencev1.NewInferenceServiceClient(e.conn)
	return e
}

func withAuth(value string) context.Context {
	if value == "" {
		return context.Background()
	}
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", value)
}

func TestInterceptorsAuth(t *testing.T) {
	e := newInterceptorEnv(t)
	infer := e.env.Token(t, e.tenant, tenancy.ScopeInfer)
	read := e.env.Token(t, e.tenant, tenancy.ScopeComplianceRead)
	tests := []struct {
		name string
		auth string
		code codes.Code
	}{
		{"no token", "", codes.Unauthenticated},
		{"empty bearer", "Bearer ", codes.Unauthenticated},
		{"basic scheme", "Basic dXNlcjpwYXNz", codes.Unauthenticated},
		{"garbage", "Bearer not.a.jwt", codes.Unauthenticated},
		{"tampered", "Bearer " + infer[:len(infer)-4] + "AAAA", codes.Unauthenticated},
		{"scope not granted", "Bearer " + read, codes.PermissionDenied},
		{"valid", "Bearer " + infer, codes.OK},
		{"valid, lower-case scheme", "bearer " + infer, codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var hdr metadata.MD
			resp, err := e.client.ListModels(withAuth(tt.auth), &inferencev1.ListModelsRequest{}, grpc.Header(&hdr))
			if status.Code(err) != tt.code {
				t.Fatalf("unary: got %v, want %v", err, tt.code)
			}
			if tt.code == codes.OK && resp.GetModels()[0].GetId() != string(e.tenant) {
				t.Fatalf("handler saw tenant %q, want %q", resp.GetModels()[0].GetId(), e.tenant)
			}
			if len(hdr.Get(RequestIDKey)) != 1 {
				t.Fatalf("no request id header: %v", hdr)
			}
			st, err := e.client.Generate(withAuth(tt.auth), &inferencev1.GenerateRequest{})
			if err == nil {
				var m *inferencev1.GenerateResponse
				if m, err = st.Recv(); err == nil && !strings.HasPrefix(m.GetChunk().GetText(), string(e.tenant)+" ") {
					t.Fatalf("stream handler saw %q", m.GetChunk().GetText())
				}
			}
			if status.Code(err) != tt.code {
				t.Fatalf("stream: got %v, want %v", err, tt.code)
			}
		})
	}
	// Any valid token is enough for a method with an empty scope list.
	if _, err := e.client.GetAttestation(withAuth("Bearer "+read), &inferencev1.GetAttestationRequest{}); err != nil {
		t.Fatalf("attestation with a compliance:read token: %v", err)
	}
	// A method without a scope rule is refused, even with a valid token.
	push, err := transferv1.NewTransferClient(e.conn).Push(withAuth("Bearer " + infer))
	if err == nil {
		_, err = push.CloseAndRecv()
	}
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "no scope rule") {
		t.Fatalf("unmapped method: %v", err)
	}
	// Health needs no token.
	if r, err := healthpb.NewHealthClient(e.conn).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health without a token: %v %v", r, err)
	}
}

func TestInterceptorsRequestID(t *testing.T) {
	e := newInterceptorEnv(t)
	ctx := metadata.AppendToOutgoingContext(withAuth("Bearer "+e.env.Token(t, e.tenant, tenancy.ScopeInfer)), RequestIDKey, "client-chosen-id")
	seen := map[string]bool{}
	for range 3 {
		var hdr metadata.MD
		resp, err := e.client.ListModels(ctx, &inferencev1.ListModelsRequest{}, grpc.Header(&hdr))
		if err != nil {
			t.Fatal(err)
		}
		id := hdr.Get(RequestIDKey)
		if len(id) != 1 || !strings.HasPrefix(id[0], "req-") || id[0] != resp.GetModels()[0].GetOwnedBy() {
			t.Fatalf("header %v, handler saw %q", id, resp.GetModels()[0].GetOwnedBy())
		}
		if seen[id[0]] {
			t.Fatalf("request id %s reused", id[0])
		}
		seen[id[0]] = true
	}
	// The stream handler sees the id sent in the header.
	st, err := e.client.Generate(ctx, &inferencev1.GenerateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	hdr, _ := st.Header()
	if id := hdr.Get(RequestIDKey); len(id) != 1 || !strings.HasSuffix(m.GetChunk().GetText(), " "+id[0]) {
		t.Fatalf("stream header %v, handler saw %q", id, m.GetChunk().GetText())
	}
}

func TestInterceptorsErrorsAndPanics(t *testing.T) {
	e := newInterceptorEnv(t)
	ctx := withAuth("Bearer " + e.env.Token(t, e.tenant, tenancy.ScopeInfer))
	tests := []struct {
		model string
		code  codes.Code
		msg   string
		retry string
	}{
		{"panic", codes.Internal, "Internal error.", ""},
		{"internal", codes.Internal, "Internal error.", ""},
		{"context", codes.InvalidArgument, "context length exceeded", ""},
		{"retry", codes.ResourceExhausted, "tenancy: rate limit exceeded (tokens_per_minute)", "2"},
		{"ok", codes.OK, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			var trailer metadata.MD
			_, err := e.client.Tokenize(ctx, &inferencev1.TokenizeRequest{Model: tt.model}, grpc.Trailer(&trailer))
			check := func(kind string, err error, trailer metadata.MD) {
				s := status.Convert(err)
				if s.Code() != tt.code || !strings.HasPrefix(s.Message(), tt.msg) || strings.Contains(s.Message(), "secret") {
					t.Fatalf("%s: got %v %q, want %v %q", kind, s.Code(), s.Message(), tt.code, tt.msg)
				}
				if got := strings.Join(trailer.Get(RetryAfterKey), ","); got != tt.retry {
					t.Fatalf("%s: retry-after %q, want %q", kind, got, tt.retry)
				}
				// The code and the wait travel as details, over real gRPC.
				if _, ok := rpcerr.Code(err); ok != (tt.code != codes.OK) {
					t.Fatalf("%s: ErrorInfo present %v, want %v", kind, ok, tt.code != codes.OK)
				}
				if got, want := rpcerr.RetryDelay(err), map[string]time.Duration{"2": 2 * time.Second}[tt.retry]; got != want {
					t.Fatalf("%s: RetryInfo %v, want %v", kind, got, want)
				}
			}
			check("unary", err, trailer)
			st, err := e.client.Generate(ctx, &inferencev1.GenerateRequest{Model: tt.model})
			if err != nil {
				t.Fatal(err)
			}
			for err == nil {
				_, err = st.Recv()
			}
			if errors.Is(err, io.EOF) {
				err = nil
			}
			check("stream", err, st.Trailer())
		})
	}
	// The server survived the panics.
	if _, err := e.client.ListModels(ctx, &inferencev1.ListModelsRequest{}); err != nil {
		t.Fatalf("after panics: %v", err)
	}
}

// Every method of the five services has a scope rule (but the public
// verifier key), and nothing else
// does: deny on doubt only catches what the table forgot.
func TestMethodScopesCoverEveryMethod(t *testing.T) {
	n := 0
	for _, sd := range []grpc.ServiceDesc{inferencev1.InferenceService_ServiceDesc, adminv1.AdminService_ServiceDesc, compliancev1.ComplianceService_ServiceDesc,
		tlogv1.TransparencyLogService_ServiceDesc, responsev1.ResponseService_ServiceDesc} {
		var names []string
		for _, m := range sd.Methods {
			names = append(names, m.MethodName)
		}
		for _, s := range sd.Streams {
			names = append(names, s.StreamName)
		}
		for _, name := range names {
			full := "/" + sd.ServiceName + "/" + name
			if full == tlogv1.TransparencyLogService_GetVerifierKey_FullMethodName { // a public key, public on purpose
				if _, ok := MethodScopes[full]; ok || !isPublic(full) {
					t.Errorf("%s: want public and no scope rule", full)
				}
				continue
			}
			if _, ok := MethodScopes[full]; !ok {
				t.Errorf("%s has no scope rule", full)
			}
			if isPublic(full) {
				t.Errorf("%s is public", full)
			}
			n++
		}
	}
	if n != len(MethodScopes) {
		t.Errorf("%d methods, %d scope rules", n, len(MethodScopes))
	}
	for method, scopes := range MethodScopes {
		if strings.HasPrefix(method, "/cloison.admin.v1.") && (len(scopes) != 1 || scopes[0] != tenancy.ScopeAdmin) {
			t.Errorf("%s: %v, want admin", method, scopes)
		}
	}
}
