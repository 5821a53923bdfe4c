package tracing_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/cloison/cloison/internal/tracing"
)

// TestNewOff: without an endpoint (the default) the provider is a no-op:
// its spans record nothing, yet carry their parent's context on.
func TestNewOff(t *testing.T) {
	tp, shutdown, err := tracing.New(context.Background(), tracing.Config{SampleRatio: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer shutdown(context.Background())
	_, span := tp.Tracer("x").Start(context.Background(), "s")
	if span.IsRecording() {
		t.Errorf("a span of the default provider records")
	}
	span.End()
}

func TestNewErrors(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(empty, []byte("no certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []tracing.Config{
		{SampleRatio: -0.1}, {SampleRatio: 1.5}, {Endpoint: "127.0.0.1:4317", SampleRatio: 1, CAFile: filepath.Join(t.TempDir(), "missing.pem")},
		{Endpoint: "127.0.0.1:4317", SampleRatio: 1, CAFile: empty},
	} {
		if _, _, err := tracing.New(context.Background(), c); !errors.Is(err, tracing.ErrConfig) {
			t.Errorf("New(%+v): got %v, want ErrConfig", c, err)
		}
	}
}

// collector is an OTLP/gRPC trace receiver: what an exporter sent.
type collector struct {
	coltracepb.UnimplementedTraceServiceServer
	mu    sync.Mutex
	names []string
	attrs map[string]string // resource attributes
}

func (c *collector) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, rs := range req.GetResourceSpans() {
		for _, a := range rs.GetResource().GetAttributes() {
			c.attrs[a.GetKey()] = a.GetValue().GetStringValue()
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				c.names = append(c.names, s.GetName())
			}
		}
	}
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestNewExports: with an endpoint, spans reach an OTLP collector (here an
// in-process OTLP/gRPC receiver) by shutdown, with the node's resource.
func TestNewExports(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	col := &collector{attrs: map[string]string{}}
	gs := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(gs, col)
	go gs.Serve(ln)
	defer gs.Stop()
	tp, shutdown, err := tracing.New(context.Background(), tracing.Config{Endpoint: ln.Addr().String(), Insecure: true, SampleRatio: 1, Node: "node-7", Role: "decode"})
	if err != nil {
		t.Fatal(err)
	}
	_, span := tracing.Tracer(tp).Start(context.Background(), "inference")
	span.End()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	col.mu.Lock()
	defer col.mu.Unlock()
	if len(col.names) != 1 || col.names[0] != "inference" {
		t.Errorf("collector got %v, want [inference]", col.names)
	}
	for k, want := range map[string]string{"service.name": "cloisond", "service.instance.id": "node-7", "cloison.role": "decode"} {
		if got := col.attrs[k]; got != want {
			t.Errorf("resource %s = %q, want %q", k, got, want)
		}
	}
}

// TestSampleRatioZero: a ratio of 0 records no new trace, but a request
// whose caller sampled it is recorded (parent-based).
func TestSampleRatioZero(t *testing.T) {
	tp, shutdown, err := tracing.New(context.Background(), tracing.Config{Endpoint: "127.0.0.1:1", Insecure: true, SampleRatio: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = shutdown(ctx)
	}()
	_, root := tp.Tracer("x").Start(context.Background(), "root")
	if root.IsRecording() {
		t.Errorf("ratio 0 recorded a new trace")
	}
	h := map[string][]string{"Traceparent": {"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
	_, child := tp.Tracer("x").Start(tracing.Extract(context.Background(), h), "child")
	if !child.IsRecording() {
		t.Errorf("ratio 0 dropped a request its caller sampled")
	}
}

// TestGRPCPropagation: the client interceptors send the caller's span
// context in the call's metadata; the server interceptors start the call's
// span as its (remote) child.
func TestGRPCPropagation(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(tracing.ServerOptions(tp)...)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go gs.Serve(ln)
	defer gs.Stop()
	conn, err := grpc.NewClient(ln.Addr().String(), append(tracing.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, parent := tracing.Tracer(tp).Start(context.Background(), "caller")
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	var srv *tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == "/grpc.health.v1.Health/Check" {
			srv = &s
		}
	}
	if srv == nil {
		t.Fatalf("no server span: %v", exp.GetSpans())
	}
	if srv.Parent.SpanID() != parent.SpanContext().SpanID() || !srv.Parent.IsRemote() || srv.SpanContext.TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("server span parent %v (remote %v), want the caller's %v", srv.Parent.SpanID(), srv.Parent.IsRemote(), parent.SpanContext().SpanID())
	}
	// A failed call marks the span with its code only.
	exp.Reset()
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: "no such service"}); err == nil {
		t.Fatal("unknown service answered")
	}
	for _, s := range exp.GetSpans() {
		if s.Status.Description != "NotFound" {
			t.Errorf("failed call's status %+v, want NotFound", s.Status)
		}
	}
}
