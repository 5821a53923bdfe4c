package tracing

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
)

// Name is the instrumentation scope of every Cloison span.
const Name = "github.com/cloison/cloison"

// Span attribute keys. Values are identifiers and counts only.
const (
	AttrRequest    = attribute.Key("cloison.request_id")
	AttrTenant     = attribute.Key("cloison.tenant")
	AttrModel      = attribute.Key("cloison.model")
	AttrPrompt     = attribute.Key("cloison.prompt_tokens")
	AttrCompletion = attribute.Key("cloison.completion_tokens")
	AttrCode       = attribute.Key("cloison.code")
)

// Config is the exporter a node sends its spans to.
type Config struct {
	// Endpoint is the OTLP/gRPC collector (host:port); empty: tracing off,
	// a no-op provider.
	Endpoint string
	// Insecure sends without TLS (a collector on loopback or a sidecar);
	// otherwise TLS verified against CAFile, or the system roots if empty.
	Insecure bool
	CAFile   string
	// SampleRatio is the share of new traces recorded (0…1); a request
	// with an incoming sampled traceparent follows its parent's decision.
	SampleRatio float64
	// Service, Node and Role describe this process in the resource.
	Service, Node, Role string
}

// ErrConfig: the tracing configuration is unusable.
var ErrConfig = errors.New("tracing: invalid configuration")

// New returns the tracer provider cfg describes and its shutdown (which
// flushes what is still batched). With no Endpoint it is a no-op provider:
// no span is recorded or exported.
//
// Errors: ErrConfig (ratio out of range, CA file unreadable or empty).
func New(ctx context.Context, cfg Config) (trace.TracerProvider, func(context.Context) error, error) {
	if cfg.SampleRatio < 0 || cfg.SampleRatio > 1 {
		return nil, nil, fmt.Errorf("%w: sample ratio %v, want 0…1", ErrConfig, cfg.SampleRatio)
	}
	if cfg.Endpoint == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	opts := []otlptracegrpc.Option{otlptracegrpc.WithEndpoint(cfg.Endpoint)}
	switch {
	case cfg.Insecure:
		opts = append(opts, otlptracegrpc.WithInsecure())
	default:
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if cfg.CAFile != "" {
			pem, err := os.ReadFile(cfg.CAFile)
			if err != nil {
				return nil, nil, fmt.Errorf("%w: CA file: %v", ErrConfig, err)
			}
			tc.RootCAs = x509.NewCertPool()
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, nil, fmt.Errorf("%w: CA file %s holds no certificate", ErrConfig, cfg.CAFile)
			}
		}
		opts = append(opts, otlptracegrpc.WithTLSCredentials(credentials.NewTLS(tc)))
	}
	// The exporter connects lazily: a collector down at start delays no
	// start, and spans it misses are dropped (tracing never fails a request).
	exp, err := otlptracegrpc.New(ctx, opts...)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	service := cfg.Service
	if service == "" {
		service = "cloisond"
	}
	res := resource.NewSchemaless(attribute.String("service.name", service), attribute.String("service.instance.id", cfg.Node),
		attribute.String("cloison.role", cfg.Role))
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(cfg.SampleRatio))))
	return tp, tp.Shutdown, nil
}

// Tracer is tp's Cloison tracer; a nil tp is a no-op one.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = noop.NewTracerProvider()
	}
	return tp.Tracer(Name)
}

// Propagator is W3C Trace Context (traceparent, tracestate).
var Propagator propagation.TextMapPropagator = propagation.TraceContext{}

// Fail marks span failed with err's cloison code (never its message).
// A nil err leaves the span's status unset.
func Fail(span trace.Span, err error) {
	if err == nil {
		return
	}
	code := cloison.ErrorCode(err)
	span.SetAttributes(AttrCode.String(string(code)))
	span.SetStatus(codes.Error, string(code))
}

// Extract returns ctx with the span context of h's traceparent, if any.
func Extract(ctx context.Context, h http.Header) context.Context {
	return Propagator.Extract(ctx, propagation.HeaderCarrier(h))
}

// ResponseHeader sets the traceresponse header (W3C Trace Context Level 2)
// naming span, when it is recorded and sampled: a client can find its
// request's trace. A no-op span (tracing off) carries its parent's context:
// no header then.
func ResponseHeader(h http.Header, span trace.Span) {
	sc := span.SpanContext()
	if !span.IsRecording() || !sc.IsValid() || !sc.IsSampled() {
		return
	}
	h.Set("traceresponse", fmt.Sprintf("00-%s-%s-%s", sc.TraceID(), sc.SpanID(), sc.TraceFlags()))
}

// mdCarrier reads and writes gRPC metadata for the propagator.
type mdCarrier metadata.MD

func (c mdCarrier) Get(k string) string {
	if v := metadata.MD(c).Get(k); len(v) > 0 {
		return v[0]
	}
	return ""
}
func (c mdCarrier) Set(k, v string) { metadata.MD(c).Set(k, v) }
func (c mdCarrier) Keys() []string {
	out := make([]string, 0, len(c))
	for k := range c {
		out = append(out, k)
	}
	return out
}

func extractMD(ctx context.Context) context.Context {
	md, _ := metadata.FromIncomingContext(ctx)
	return Propagator.Extract(ctx, mdCarrier(md))
}

func injectMD(ctx context.Context) context.Context {
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	Propagator.Inject(ctx, mdCarrier(md))
	return metadata.NewOutgoingContext(ctx, md)
}

// serverSpan starts the span of one incoming call: its parent is the
// caller's traceparent.
func serverSpan(ctx context.Context, t trace.Tracer, method string) (context.Context, trace.Span) {
	return t.Start(extractMD(ctx), method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("rpc.system", "grpc"), attribute.String("rpc.method", method)))
}

func endRPC(span trace.Span, err error) {
	if err != nil {
		c := status.Code(err)
		span.SetAttributes(attribute.Int("rpc.grpc.status_code", int(c)))
		span.SetStatus(codes.Error, c.String()) // the code, not the message
	}
	span.End()
}

// UnaryServer starts a server span per call, child of the caller's
// traceparent (gRPC metadata). Put it first in the chain.
func UnaryServer(tp trace.TracerProvider) grpc.UnaryServerInterceptor {
	t := Tracer(tp)
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, span := serverSpan(ctx, t, info.FullMethod)
		resp, err := h(ctx, req)
		endRPC(span, err)
		return resp, err
	}
}

type tracedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *tracedStream) Context() context.Context { return s.ctx }

// StreamServer is UnaryServer for streams.
func StreamServer(tp trace.TracerProvider) grpc.StreamServerInterceptor {
	t := Tracer(tp)
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, span := serverSpan(ss.Context(), t, info.FullMethod)
		err := h(srv, &tracedStream{ServerStream: ss, ctx: ctx})
		endRPC(span, err)
		return err
	}
}

// UnaryClient sends the caller's span context (traceparent) with every
// call. It records no span itself: the caller's span is the client side.
func UnaryClient() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(injectMD(ctx), method, req, reply, cc, opts...)
	}
}

// StreamClient is UnaryClient for streams.
func StreamClient() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(injectMD(ctx), desc, cc, method, opts...)
	}
}

// DialOptions are the client interceptors, for grpc.NewClient.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(UnaryClient()), grpc.WithChainStreamInterceptor(StreamClient())}
}

// ServerOptions are the server interceptors, for grpc.NewServer; put them
// before any other interceptor so every other one runs inside the span.
func ServerOptions(tp trace.TracerProvider) []grpc.ServerOption {
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(UnaryServer(tp)), grpc.ChainStreamInterceptor(StreamServer(tp))}
}
