package transfer

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/cloison/cloison"
	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/internal/tracing"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Flow control: HTTP/2 windows bound the bytes in flight per stream and per
// connection; larger than gRPC's 64 KiB default so that one stream can fill a
// fast link, small enough that a stalled decode node holds little memory.
const (
	streamWindow = 8 << 20
	connWindow   = 32 << 20
	bufferBytes  = 1 << 20
	maxMessage   = 4 << 20
)

// codeKey is the trailer that also carries the cloison error code to the
// sender, for peers of an older release; the status's ErrorInfo detail
// (internal/rpcerr) is what remoteErr reads.
const codeKey = "cloison-code"

// ServerOptions returns the gRPC server options of a decode node: mutual TLS
// (tlsConfig must require and verify client certificates, see pki) and the
// transfer's flow-control windows.
func ServerOptions(tlsConfig *tls.Config) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.Creds(credentials.NewTLS(tlsConfig)),
		grpc.InitialWindowSize(streamWindow),
		grpc.InitialConnWindowSize(connWindow),
		grpc.ReadBufferSize(bufferBytes),
		grpc.WriteBufferSize(bufferBytes),
		grpc.MaxRecvMsgSize(maxMessage),
	}
}

// DialOptions returns the gRPC dial options of a prefill node.
func DialOptions(tlsConfig *tls.Config) []grpc.DialOption {
	return append([]grpc.DialOption{
		grpc.WithTransportCredentials(credentials.NewTLS(tlsConfig)),
		grpc.WithInitialWindowSize(streamWindow),
		grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithReadBufferSize(bufferBytes),
		grpc.WithWriteBufferSize(bufferBytes),
	}, tracing.DialOptions()...) // the caller's traceparent goes with every call
}

// Service receives transfers: a Receiver (one model) or a Router (a
// decode node's models, each its own Receiver).
type Service interface {
	Serve(ctx context.Context, src FrameSource) (*transferv1.Receipt, error)
}

// Register serves r's Transfer service on s.
func Register(s *grpc.Server, r Service) {
	transferv1.RegisterTransferServer(s, &server{r: r})
}

type server struct {
	transferv1.UnimplementedTransferServer
	r Service
}

func (s *server) Push(stream grpc.ClientStreamingServer[transferv1.Frame, transferv1.Receipt]) error {
	ctx := stream.Context()
	rc, err := s.r.Serve(WithPeer(ctx, peerName(ctx)), stream)
	if err != nil {
		// The sender gets the code and the public message only; the
		// refusal's detail (leases, digests) stays on this node, in the
		// Failure the receiver reports and the incident it opens.
		code := cloison.ErrorCode(err)
		msg := cloison.PublicMessage(err)
		if msg == "" || code == cloison.CodeInternal {
			msg = string(code)
		}
		stream.SetTrailer(metadata.Pairs(codeKey, string(code)))
		return rpcerr.New(grpcCode(code), code, msg, 0).Err()
	}
	return stream.SendAndClose(rc)
}

// grpcCode is the subset of api's error table a transfer can end with.
func grpcCode(c cloison.Code) codes.Code {
	switch c {
	case cloison.CodeTransferVerification:
		return codes.Aborted
	case cloison.CodeCanceled:
		return codes.Canceled
	case cloison.CodeInvalid:
		return codes.InvalidArgument
	case cloison.CodeUnavailable:
		return codes.Unavailable
	}
	return codes.Internal
}

// GRPC returns a Dialer over a connection to a decode node.
func GRPC(conn grpc.ClientConnInterface) Dialer {
	return grpcDialer{c: transferv1.NewTransferClient(conn)}
}

type grpcDialer struct{ c transferv1.TransferClient }

func (d grpcDialer) Open(ctx context.Context) (Stream, error) {
	st, err := d.c.Push(ctx)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// remoteErr turns the error that ended a stream into a typed error: the
// receiver's verdict (in-process, as it is; over gRPC, from the status).
func remoteErr(err error) error {
	if errors.Is(err, ErrVerification) || errors.Is(err, ErrCanceled) {
		return err
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	if code, ok := rpcerr.Code(err); ok {
		switch code {
		case cloison.CodeTransferVerification:
			return fmt.Errorf("%w: receiver: %s", ErrVerification, st.Message())
		case cloison.CodeCanceled, cloison.CodeDeadlineExceeded:
			return fmt.Errorf("%w: receiver: %s", ErrCanceled, st.Message())
		}
		return fmt.Errorf("%w: receiver: %s: %s", ErrUnavailable, code, st.Message())
	}
	// No ErrorInfo: the transport's own status (a broken or refused
	// connection) or a peer of an older release.
	switch st.Code() {
	case codes.Aborted:
		return fmt.Errorf("%w: receiver: %s", ErrVerification, st.Message())
	case codes.Canceled, codes.DeadlineExceeded:
		return fmt.Errorf("%w: receiver: %s", ErrCanceled, st.Message())
	}
	return fmt.Errorf("%w: %s: %s", ErrUnavailable, st.Code(), st.Message())
}

type peerKey struct{}

// WithPeer returns ctx naming the sender of the stream Serve receives in it
// (Failure.Peer; the unit of the unauthenticated-refusal window).
func WithPeer(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, peerKey{}, name)
}

// PeerOf returns the sender WithPeer named, or "local".
func PeerOf(ctx context.Context) string {
	if p, ok := ctx.Value(peerKey{}).(string); ok && p != "" {
		return p
	}
	return "local"
}

// peerName is the authenticated identity of a gRPC stream's sender: its TLS
// client certificate's subject (and serial, so that two certificates of one
// name stay apart), else its address.
func peerName(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); ok && len(ti.State.PeerCertificates) > 0 {
		c := ti.State.PeerCertificates[0]
		return fmt.Sprintf("%s#%x", c.Subject.CommonName, c.SerialNumber.Bytes())
	}
	if p.Addr != nil {
		return p.Addr.String()
	}
	return ""
}
