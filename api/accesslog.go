package api

import (
	"context"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/cloison/cloison"
)

// Access logs: one JSON line (through the Server's slog.Logger, message
// "access") per HTTP request and per gRPC call, with the request id, the
// tenant (once authenticated), the route pattern or gRPC method, the HTTP
// status or gRPC code, the latency, and for generations the prompt and
// completion token counts. Never content: no prompt, completion, body,
// query string or raw path (a route is its mux pattern, e.g.
// "GET /admin/v1/tenants/{id}"). Health and readiness probes log at Debug,
// everything else at Info, so --log-level warn silences the access log.
//
// The record travels in the request's context: the middleware (HTTP) or
// the interceptor (gRPC) puts it there, auth fills the tenant, generate the
// token counts.

// access is one request's access-log record; its setters are safe on a nil
// record (a call outside the middleware) and for concurrent use.
type access struct {
	mu                 sync.Mutex
	tenant             cloison.TenantID // guarded by mu
	prompt, completion int              // guarded by mu
	tokens             bool             // guarded by mu: a generation ran (counts are meaningful)
}

type accessKey struct{}

func withAccess(ctx context.Context) (context.Context, *access) {
	a := &access{}
	return context.WithValue(ctx, accessKey{}, a), a
}

func accessOf(ctx context.Context) *access {
	a, _ := ctx.Value(accessKey{}).(*access)
	return a
}

func (a *access) setTenant(t cloison.TenantID) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.tenant = t
	a.mu.Unlock()
}

func (a *access) setTokens(prompt, completion int) {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.prompt, a.completion, a.tokens = prompt, completion, true
	a.mu.Unlock()
}

// attrs are the record's fields for the log line.
func (a *access) attrs() []slog.Attr {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []slog.Attr
	if a.tenant != "" {
		out = append(out, slog.String("tenant", string(a.tenant)))
	}
	if a.tokens {
		out = append(out, slog.Int("prompt_tokens", a.prompt), slog.Int("completion_tokens", a.completion))
	}
	return out
}

// probeRoutes log at Debug: a kubelet asks every few seconds.
var probeRoutes = map[string]bool{"GET /healthz": true, "GET /readyz": true}

// accessLog wraps the HTTP routes: it gives every response an X-Request-Id
// (the handler's, or a fresh one) and logs the request once it is answered.
func (s *Server) accessLog(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		ctx, rec := withAccess(r.Context())
		r = r.WithContext(ctx)
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			route := r.Pattern // set by the mux on this request
			setRoute(r.Context(), route)
			if route == "" {
				route = "unmatched"
			}
			lvl := slog.LevelInfo
			if probeRoutes[route] {
				lvl = slog.LevelDebug
			}
			status := sw.status
			if status == 0 {
				status = http.StatusOK
			}
			attrs := append([]slog.Attr{slog.String("transport", "http"), slog.String("request_id", w.Header().Get("X-Request-Id")),
				slog.String("route", route), slog.Int("status", status), slog.Float64("latency_seconds", time.Since(start).Seconds())}, rec.attrs()...)
			s.log.LogAttrs(context.Background(), lvl, "access", attrs...)
		}()
		next.ServeHTTP(sw, r)
	})
}

// statusWriter records the status and assigns the request id before the
// header is written. It keeps http.Flusher (the SSE streams) and Unwrap
// (http.ResponseController).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
		requestID(w.ResponseWriter)
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if w.status == 0 {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logGRPCAccess writes a gRPC call's access line (the interceptors' finish).
func logGRPCAccess(log *slog.Logger, ctx context.Context, method string, id cloison.RequestID, clientID string, code codes.Code, start time.Time) {
	lvl := slog.LevelInfo
	if isPublic(method) {
		lvl = slog.LevelDebug // health checks and reflection, as the HTTP probes
	}
	attrs := []slog.Attr{slog.String("transport", "grpc"), slog.String("request_id", string(id)), slog.String("method", method),
		slog.String("code", code.String()), slog.Float64("latency_seconds", time.Since(start).Seconds())}
	if clientID != "" {
		attrs = append(attrs, slog.String("client_request_id", clientID))
	}
	if rec := accessOf(ctx); rec != nil {
		attrs = append(attrs, rec.attrs()...)
	}
	log.LogAttrs(context.Background(), lvl, "access", attrs...)
}
