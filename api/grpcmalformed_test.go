package api_test

import (
	"context"
	"io"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/cloison/cloison"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/node/platformtest"
)

// A message that is not valid protobuf, or whose string holds invalid
// UTF-8, is INVALID_ARGUMENT with the project's ErrorInfo, on unary and
// streaming methods alike, never INTERNAL with the library's text.
func TestGRPCMalformedMessages(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	c := grpcClient(t, p)
	_ = c
	conn := rawGRPCConn(t, p)
	ctx := bearer(t, p, "victim")
	textField := (&inferencev1.TokenizeRequest{}).ProtoReflect().Descriptor().Fields().ByName("text").Number()
	badUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, textField, protowire.BytesType), []byte("a\xffb"))
	genText := (&inferencev1.GenerateRequest{}).ProtoReflect().Descriptor().Fields().ByName("text").Number()
	genBadUTF8 := protowire.AppendBytes(protowire.AppendTag(nil, genText, protowire.BytesType), []byte("a\xffb"))
	garbage := []byte{0xff, 0xff, 0xff, 0xff}
	check := func(t *testing.T, err error) {
		t.Helper()
		s, _ := status.FromError(err)
		if code, _ := rpcerr.Code(err); s.Code() != codes.InvalidArgument || code != cloison.CodeInvalid {
			t.Fatalf("got %v %q (ErrorInfo %q), want INVALID_ARGUMENT invalid_request", s.Code(), s.Message(), code)
		}
	}
	for name, msg := range map[string][]byte{"garbage": garbage, "invalid UTF-8": badUTF8} {
		t.Run("unary "+name, func(t *testing.T) {
			check(t, conn.Invoke(ctx, inferencev1.InferenceService_Tokenize_FullMethodName, msg, new(inferencev1.TokenizeResponse)))
		})
	}
	for name, msg := range map[string][]byte{"garbage": garbage, "invalid UTF-8": genBadUTF8} {
		t.Run("stream "+name, func(t *testing.T) {
			st, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, inferencev1.InferenceService_Generate_FullMethodName)
			if err == nil {
				err = st.SendMsg(msg)
			}
			if err == nil {
				err = st.CloseSend()
			}
			for err == nil {
				err = st.RecvMsg(new(inferencev1.GenerateResponse))
			}
			if err == io.EOF {
				t.Fatal("the stream ended without an error")
			}
			check(t, err)
		})
	}
}

// rawGRPCConn serves p's gRPC API on loopback and returns a connection that
// sends pre-encoded messages as they are.
func rawGRPCConn(t *testing.T, p *platformtest.Platform) *grpc.ClientConn {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	gs := p.Server.GRPCServer(ctx)
	ln, err := netListen(t)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpcInsecure(), grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); gs.Stop(); cancel() })
	return conn
}
