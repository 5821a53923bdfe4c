package api

import (
	"crypto/tls"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/cloison/cloison"
)

// Transport bounds what one client connection can hold. The guarantees:
//   - a connection that sends nothing (no request line, or idle between
//     keep-alive requests) is closed after ReadHeader or Idle;
//   - a request body that is not all read within Read of the request's
//     start is cut (a client dribbling a body holds nothing longer);
//   - a response write that makes no progress for Write is cut, but a
//     stream that keeps writing is never cut: the write deadline is moved
//     Write ahead before every write and flush (http.ResponseController),
//     never set once for the whole response as http.Server.WriteTimeout
//     would, which cuts long streams;
//   - at most MaxConns connections are open per listener (more wait in the
//     kernel's accept queue, holding no goroutine);
//   - generations in flight are bounded in total and per tenant (Config's
//     MaxStreams and MaxStreamsPerTenant; streamGate).
type Transport struct {
	ReadHeader time.Duration // request line and headers (default 10 s)
	Read       time.Duration // whole request, body included (default 60 s)
	Write      time.Duration // longest a write may make no progress (default 60 s)
	Idle       time.Duration // keep-alive connection between requests (default 120 s)
	MaxConns   int           // open connections per listener (default 1024)
}

// DefaultTransport is Transport's defaults.
var DefaultTransport = Transport{ReadHeader: 10 * time.Second, Read: 60 * time.Second, Write: 60 * time.Second, Idle: 120 * time.Second, MaxConns: 1024}

func (t Transport) withDefaults() Transport {
	d := DefaultTransport
	if t.ReadHeader > 0 {
		d.ReadHeader = t.ReadHeader
	}
	if t.Read > 0 {
		d.Read = t.Read
	}
	if t.Write > 0 {
		d.Write = t.Write
	}
	if t.Idle > 0 {
		d.Idle = t.Idle
	}
	if t.MaxConns > 0 {
		d.MaxConns = t.MaxConns
	}
	return d
}

// Listen listens on addr with at most MaxConns connections open at once.
func (t Transport) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return netutil.LimitListener(ln, t.withDefaults().MaxConns), nil
}

// HTTPServer returns an http.Server for h with t's limits, serving TLS
// with tlsConfig when it is not nil (call ServeTLS(ln, "", "") then).
// WriteTimeout and ReadTimeout stay zero on purpose: deadlines wraps h and
// sets them per request and per write instead.
func (t Transport) HTTPServer(h http.Handler, tlsConfig *tls.Config, errorLog *log.Logger) *http.Server {
	t = t.withDefaults()
	return &http.Server{Handler: t.deadlines(h), ReadHeaderTimeout: t.ReadHeader, IdleTimeout: t.Idle, TLSConfig: tlsConfig, ErrorLog: errorLog}
}

// GRPCOptions are the gRPC server options for t's limits and tlsConfig
// (nil: plaintext): handshake bound, idle connections closed, keepalive
// pings enforced, streams per connection bounded.
func (t Transport) GRPCOptions(tlsConfig *tls.Config) []grpc.ServerOption {
	t = t.withDefaults()
	opts := []grpc.ServerOption{
		grpc.ConnectionTimeout(t.ReadHeader),
		grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionIdle: t.Idle, Time: t.Idle, Timeout: t.Write}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.MaxConcurrentStreams(100),
	}
	if tlsConfig != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConfig)))
	}
	return opts
}

// deadlines sets the request's read deadline (body included) at Read from
// its start and clears it once the body is read, so that the server's
// background read of a long stream does not time out; and moves the write
// deadline Write ahead before each write and once more when the handler
// returns (for the server's final flush).
func (t Transport) deadlines(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(t.Read))
		_ = rc.SetWriteDeadline(time.Now().Add(t.Write))
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &bodyDone{ReadCloser: r.Body, done: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		} else {
			_ = rc.SetReadDeadline(time.Time{})
		}
		pw := &progressWriter{ResponseWriter: w, rc: rc, d: t.Write}
		defer pw.extend()
		h.ServeHTTP(pw, r)
	})
}

// bodyDone calls done once, when the body has been read to its end. Not on
// another error or on Close: the deadline must then stay, so that the
// server's read of what is left of the body after the handler is bounded
// too.
type bodyDone struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *bodyDone) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.done)
	}
	return n, err
}

// progressWriter moves the write deadline before every write: a response
// is cut only when one write (or flush) makes no progress for d.
type progressWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (p *progressWriter) extend() { _ = p.rc.SetWriteDeadline(time.Now().Add(p.d)) }

func (p *progressWriter) WriteHeader(code int) {
	p.extend()
	p.ResponseWriter.WriteHeader(code)
}

func (p *progressWriter) Write(b []byte) (int, error) {
	p.extend()
	return p.ResponseWriter.Write(b)
}

// Flush implements http.Flusher (the SSE writer flushes every chunk).
func (p *progressWriter) Flush() {
	p.extend()
	_ = p.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection.
func (p *progressWriter) Unwrap() http.ResponseWriter { return p.ResponseWriter }

// Errors of the stream gate.
var (
	// ErrTooManyStreams: the node runs as many generations as it takes.
	ErrTooManyStreams = cloison.NewError(cloison.CodeCapacityExhausted, "this node is serving as many requests as it can; retry later")
	// ErrTenantStreams: the tenant runs as many generations on this node
	// as one tenant may.
	ErrTenantStreams = cloison.NewError(cloison.CodeRateLimited, "too many concurrent requests from this tenant on this node")
)

// streamGate bounds the generations in flight on this node, in total and
// per tenant, whatever the tenant's own quota (which counts across the
// tenant's requests, and may be larger than one node should give one
// tenant). A refusal takes nothing.
type streamGate struct {
	total, perTenant int // 0: unbounded

	mu       sync.Mutex
	n        int                      // in flight, guarded by mu
	byTenant map[cloison.TenantID]int // in flight per tenant, guarded by mu
}

// gateError carries Retry-After.
type gateError struct{ err *cloison.Error }

func (e gateError) Error() string           { return e.err.Error() }
func (e gateError) Unwrap() error           { return e.err }
func (gateError) RetryDelay() time.Duration { return time.Second }

// acquire takes one slot for tenant t; release gives it back.
// Errors: ErrTooManyStreams (503), ErrTenantStreams (429), both with
// Retry-After one second.
func (g *streamGate) acquire(t cloison.TenantID) (release func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.total > 0 && g.n >= g.total {
		return nil, gateError{ErrTooManyStreams}
	}
	if g.perTenant > 0 && g.byTenant[t] >= g.perTenant {
		return nil, gateError{ErrTenantStreams}
	}
	if g.byTenant == nil {
		g.byTenant = map[cloison.TenantID]int{}
	}
	g.n++
	g.byTenant[t]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.n--
			if g.byTenant[t]--; g.byTenant[t] == 0 {
				delete(g.byTenant, t)
			}
		})
	}, nil
}
