package api

import (
	"context"
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
	"google.golang.org/grpc/stats"

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
//   - a connection must send its first byte within FirstByte, and at most
//     MaxSilentPerSource connections from one source address may be open
//     without having sent one (one more is closed at accept, taking no
//     slot of MaxConns): silent connections from one host cannot fill the
//     cap;
//   - at most MaxConnsPerTenant connections per listener carry a tenant's
//     requests: a connection counts for every tenant whose token
//     authenticated on it, until it closes (connCaps). A request of a
//     tenant at its cap on a connection new to it is refused (429
//     ErrTenantConnections, Retry-After) and, on HTTP, the connection is
//     closed after the answer;
//   - generations in flight are bounded in total and per tenant (Config's
//     MaxStreams and MaxStreamsPerTenant; streamGate).
type Transport struct {
	ReadHeader time.Duration // request line and headers (default 10 s)
	Read       time.Duration // whole request, body included (default 60 s)
	Write      time.Duration // longest a write may make no progress (default 60 s)
	Idle       time.Duration // keep-alive connection between requests (default 120 s)
	MaxConns   int           // open connections per listener (default 1024)
	// MaxConnsPerTenant bounds the connections per listener that carry one
	// tenant's requests (default 128).
	MaxConnsPerTenant int
	// FirstByte is how long a new connection may stay silent (default 5 s).
	FirstByte time.Duration
	// MaxSilentPerSource bounds the connections per listener from one
	// source address that have not sent their first byte (default 32).
	MaxSilentPerSource int
}

// DefaultTransport is Transport's defaults.
var DefaultTransport = Transport{ReadHeader: 10 * time.Second, Read: 60 * time.Second, Write: 60 * time.Second, Idle: 120 * time.Second, MaxConns: 1024, MaxConnsPerTenant: 128,
	FirstByte: 5 * time.Second, MaxSilentPerSource: 32}

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
	if t.MaxConnsPerTenant > 0 {
		d.MaxConnsPerTenant = t.MaxConnsPerTenant
	}
	if t.FirstByte > 0 {
		d.FirstByte = t.FirstByte
	}
	if t.MaxSilentPerSource > 0 {
		d.MaxSilentPerSource = t.MaxSilentPerSource
	}
	return d
}

// Listen listens on addr with at most MaxConns connections open at once,
// of which at most MaxSilentPerSource per source address have sent
// nothing, each for at most FirstByte.
func (t Transport) Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return t.Limit(ln), nil
}

// Limit applies Listen's connection limits to ln.
func (t Transport) Limit(ln net.Listener) net.Listener {
	t = t.withDefaults()
	// The silent check is under the global cap: a connection it closes at
	// accept never holds one of MaxConns' slots.
	return netutil.LimitListener(&silentLimit{Listener: ln, perSource: t.MaxSilentPerSource, firstByte: t.FirstByte, silent: map[string]int{}}, t.MaxConns)
}

// HTTPServer returns an http.Server for h with t's limits, serving TLS
// with tlsConfig when it is not nil (call ServeTLS(ln, "", "") then).
// WriteTimeout and ReadTimeout stay zero on purpose: deadlines wraps h and
// sets them per request and per write instead.
func (t Transport) HTTPServer(h http.Handler, tlsConfig *tls.Config, errorLog *log.Logger) *http.Server {
	t = t.withDefaults()
	caps := newConnCaps(t.MaxConnsPerTenant)
	var conns sync.Map // net.Conn → *connSlot
	return &http.Server{Handler: t.deadlines(h), ReadHeaderTimeout: t.ReadHeader, IdleTimeout: t.Idle, TLSConfig: tlsConfig, ErrorLog: errorLog,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			slot := caps.slot()
			conns.Store(c, slot)
			return context.WithValue(ctx, connSlotKey{}, slot)
		},
		ConnState: func(c net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				if slot, ok := conns.LoadAndDelete(c); ok {
					slot.(*connSlot).release()
				}
			}
		}}
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
		grpc.StatsHandler(connStats{newConnCaps(t.MaxConnsPerTenant)}),
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

// ErrTenantConnections: the tenant's requests already hold as many
// connections to this listener as one tenant may (Transport.MaxConnsPerTenant).
var ErrTenantConnections = cloison.NewError(cloison.CodeRateLimited, "too many connections from this tenant; reuse an open connection or retry later")

// connCaps counts, per tenant, the open connections of one listener that
// carried a request the tenant's token authenticated. A connection is
// counted from its first such request to its close (connSlot), for each
// tenant that used it; an unauthenticated connection counts for no tenant
// (MaxConns and the idle and read limits bound those).
type connCaps struct {
	perTenant int // 0: unbounded

	mu       sync.Mutex
	byTenant map[cloison.TenantID]int // connections per tenant, guarded by mu
}

func newConnCaps(perTenant int) *connCaps {
	return &connCaps{perTenant: perTenant, byTenant: map[cloison.TenantID]int{}}
}

// slot is the bookkeeping of one new connection.
func (c *connCaps) slot() *connSlot { return &connSlot{caps: c} }

// connSlot is one connection's share of its listener's connCaps.
type connSlot struct {
	caps *connCaps

	mu      sync.Mutex
	tenants []cloison.TenantID // counted for this connection, guarded by mu
	closed  bool               // released, guarded by mu
}

type connSlotKey struct{}

// bindConn counts the connection that ctx's request came on (when it was
// accepted by a Transport) for tenant t, once per connection and tenant.
// Errors: ErrTenantConnections (429, Retry-After one second) when t holds
// MaxConnsPerTenant other connections.
func bindConn(ctx context.Context, t cloison.TenantID) error {
	s, _ := ctx.Value(connSlotKey{}).(*connSlot)
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	for _, have := range s.tenants {
		if have == t {
			return nil
		}
	}
	c := s.caps
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.perTenant > 0 && c.byTenant[t] >= c.perTenant {
		return gateError{ErrTenantConnections}
	}
	c.byTenant[t]++
	s.tenants = append(s.tenants, t)
	return nil
}

// release gives back the connection's counts; later calls do nothing.
func (s *connSlot) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	c := s.caps
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range s.tenants {
		if c.byTenant[t]--; c.byTenant[t] <= 0 {
			delete(c.byTenant, t)
		}
	}
	s.tenants = nil
}

// connStats gives every gRPC connection a connSlot (its RPCs' contexts
// derive from the connection's) and releases it when the connection ends.
type connStats struct{ caps *connCaps }

func (h connStats) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connSlotKey{}, h.caps.slot())
}

func (connStats) HandleConn(ctx context.Context, s stats.ConnStats) {
	if _, end := s.(*stats.ConnEnd); end {
		if slot, _ := ctx.Value(connSlotKey{}).(*connSlot); slot != nil {
			slot.release()
		}
	}
}

func (connStats) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (connStats) HandleRPC(context.Context, stats.RPCStats)                       {}
