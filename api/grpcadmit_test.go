package api_test

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// rawCodec sends pre-encoded messages as they are, so that the client's
// side of the test allocates nothing per call and the memory measured is
// the server's.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		return b, nil
	}
	return proto.Marshal(v.(proto.Message))
}
func (rawCodec) Unmarshal(data []byte, v any) error { return proto.Unmarshal(data, v.(proto.Message)) }
func (rawCodec) Name() string                       { return "proto" }

// A caller of a unary method who is not authenticated (or lacks the
// method's scope) is refused when its call's headers arrive, before gRPC
// reads its message (a streaming method's request is read by its handler,
// after the interceptors have refused the caller with the request id
// header):
// calls with messages of 7 × MaxBody answer with the project's code and
// leave the server's allocations far below what reading them would cost.
// An authenticated tenant's message over MaxBody is refused on its length
// prefix, unread, whatever the method (gRPC's limit is MaxBody, not the
// 8 × of the policy reload). An admin's policy reload of a bundle between
// 1 × and 8 × MaxBody works over several messages (ReloadPoliciesStream);
// in one message it is refused as any message over MaxBody.
func TestGRPCRefusesBeforeReading(t *testing.T) {
	const maxBody = 64 << 10
	p := platformtest.New(t, platformtest.Options{API: func(c *api.Config) { c.MaxBody = maxBody }})
	ctx, cancel := context.WithCancel(context.Background())
	// Fixed flow-control windows: what a refused caller has in flight is
	// then at most 64 KiB per call whatever the machine's speed (with
	// the default, growing windows a slow server lets more arrive, which
	// it reads and drops).
	gs := p.Server.GRPCServer(ctx, grpc.InitialWindowSize(64<<10), grpc.InitialConnWindowSize(64<<10))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(64<<20), grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); gs.Stop(); cancel() })

	big, err := proto.Marshal(&inferencev1.TokenizeRequest{Model: platformtest.Model,
		Input: &inferencev1.TokenizeRequest_Text{Text: strings.Repeat("a", 7*maxBody)}})
	if err != nil {
		t.Fatal(err)
	}
	files := policies.Shipped()
	files["decision.rego"] += "\n# " + strings.Repeat("x", 3*maxBody) + "\n" // another digest, the same decisions
	bundle, err := proto.Marshal(&adminv1.ReloadPoliciesRequest{Files: files})
	if err != nil {
		t.Fatal(err)
	}
	auth := func(tok string) context.Context {
		if tok == "" {
			return context.Background()
		}
		return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
	}
	tenant := p.Token(t, "attacker", tenancy.ScopeInfer)
	tests := []struct {
		name, method string
		msg          []byte
		ctx          context.Context
		want         codes.Code
		code         cloison.Code
	}{
		{"no token", inferencev1.InferenceService_Tokenize_FullMethodName, big, auth(""), codes.Unauthenticated, cloison.CodeUnauthenticated},
		{"forged token", inferencev1.InferenceService_Tokenize_FullMethodName, big, auth(tenant[:len(tenant)-4] + "AAAA"), codes.Unauthenticated, cloison.CodeUnauthenticated},
		{"tenant reloads policies", adminv1.AdminService_ReloadPolicies_FullMethodName, big, auth(tenant), codes.PermissionDenied, cloison.CodePermissionDenied},
		// gRPC's own refusal, before the interceptors: no ErrorInfo.
		{"tenant sends 7 × MaxBody", inferencev1.InferenceService_Tokenize_FullMethodName, big, auth(tenant), codes.ResourceExhausted, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			call := func() error {
				return conn.Invoke(tt.ctx, tt.method, tt.msg, new(inferencev1.TokenizeResponse))
			}
			err := call() // warm: connection, pools
			if s, _ := status.FromError(err); s.Code() != tt.want {
				t.Fatalf("got %v %q, want %v", s.Code(), s.Message(), tt.want)
			}
			if code, _ := rpcerr.Code(err); code != tt.code {
				t.Fatalf("got ErrorInfo %q, want %q", code, tt.code)
			}
			const n = 40
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			for range n {
				if status.Code(call()) != tt.want {
					t.Fatal("a later call answered differently")
				}
			}
			runtime.ReadMemStats(&after)
			if grew := after.TotalAlloc - before.TotalAlloc; grew > uint64(n*len(tt.msg)/2) { // reading them costs more than n × the size
				t.Fatalf("%d calls of %d bytes allocated %d bytes: the server read the messages it refuses", n, len(tt.msg), grew)
			}
		})
	}
	admin := auth(p.Token(t, "victim", tenancy.ScopeAdmin))
	t.Run("admin reloads a bundle of 3 × MaxBody in one message", func(t *testing.T) {
		if len(bundle) <= 2*maxBody || len(bundle) >= 8*maxBody {
			t.Fatalf("bundle of %d bytes, want between 2 × and 8 × %d", len(bundle), maxBody)
		}
		var resp adminv1.ReloadPoliciesResponse
		err := conn.Invoke(admin, adminv1.AdminService_ReloadPolicies_FullMethodName, bundle, &resp)
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("admin reload in one message: %v, want ResourceExhausted", err)
		}
	})
	t.Run("admin reloads a bundle of 3 × MaxBody over a stream", func(t *testing.T) {
		st, err := adminv1.NewAdminServiceClient(conn).ReloadPoliciesStream(admin, grpc.ForceCodec(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		// Every file, the large one in parts of half MaxBody.
		for name, src := range files {
			for len(src) > 0 {
				n := min(len(src), maxBody/2)
				if err := st.Send(&adminv1.ReloadPoliciesRequest{Files: map[string]string{name: src[:n]}}); err != nil {
					t.Fatal(err)
				}
				src = src[n:]
			}
		}
		resp, err := st.CloseAndRecv()
		if err != nil {
			t.Fatalf("admin reload: %v", err)
		}
		if resp.GetRevision() != p.Decider.Revision() {
			t.Fatalf("got revision %q, serving %q", resp.GetRevision(), p.Decider.Revision())
		}
	})
	t.Run("a streamed bundle over 8 × MaxBody", func(t *testing.T) {
		st, err := adminv1.NewAdminServiceClient(conn).ReloadPoliciesStream(admin, grpc.ForceCodec(rawCodec{}))
		if err != nil {
			t.Fatal(err)
		}
		part := strings.Repeat("#", maxBody/2)
		for i := range 17 {
			if err := st.Send(&adminv1.ReloadPoliciesRequest{Files: map[string]string{"x.rego": part}}); err != nil {
				t.Logf("send %d: %v", i, err) // refused while sending
				break
			}
		}
		_, err = st.CloseAndRecv()
		if code, _ := rpcerr.Code(err); status.Code(err) != codes.InvalidArgument || code != cloison.CodeInvalid {
			t.Fatalf("got %v, want InvalidArgument (too large)", err)
		}
	})
	t.Run("tenant streams a policy bundle", func(t *testing.T) {
		st, err := adminv1.NewAdminServiceClient(conn).ReloadPoliciesStream(auth(tenant), grpc.ForceCodec(rawCodec{}))
		if err == nil {
			_, err = st.CloseAndRecv()
		}
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("got %v, want PermissionDenied", err)
		}
	})
}

func netListen(*testing.T) (net.Listener, error) { return net.Listen("tcp", "127.0.0.1:0") }

func grpcInsecure() grpc.DialOption { return grpc.WithTransportCredentials(insecure.NewCredentials()) }
