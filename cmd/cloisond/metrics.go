package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/internal/keyfile"
	"github.com/cloison/cloison/internal/tracing"
)

// obsConfig is what operators watch the node with: the log level (the
// access log is at info) and the Prometheus listener.
type obsConfig struct {
	logLevel        slog.Level
	metricsAddr     string
	metricsToken    string // file holding the bearer token
	metricsTenants  []cloison.TenantID
	metricsMax      int
	metricsReadyOut string
	trace           tracing.Config // --otlp-*, --trace-sample-ratio
}

func (o *obsConfig) flags(fs *flag.FlagSet) {
	o.logLevel = slog.LevelInfo
	fs.Func("log-level", "least severe log level written: debug, info (the access log), warn or error (default info)", func(v string) error {
		return o.logLevel.UnmarshalText([]byte(v))
	})
	fs.StringVar(&o.metricsAddr, "metrics-addr", "127.0.0.1:9464", "Prometheus listener (GET /metrics, no JWT); a non-loopback address needs --metrics-token-file (empty: no metrics)")
	fs.StringVar(&o.metricsToken, "metrics-token-file", "", "file holding the bearer token scrapers must send to --metrics-addr (readable by its owner only)")
	fs.Func("metrics-tenants", "comma-separated tenants whose metrics carry their own tenant label; every other is aggregated as \"other\" (default: the first --metrics-max-tenants seen)", func(v string) error {
		o.metricsTenants = o.metricsTenants[:0]
		for _, t := range strings.Split(v, ",") {
			if t = strings.TrimSpace(t); t != "" {
				o.metricsTenants = append(o.metricsTenants, cloison.TenantID(t))
			}
		}
		return nil
	})
	fs.IntVar(&o.metricsMax, "metrics-max-tenants", api.DefaultMetricsMaxTenants, "without --metrics-tenants, how many tenants (the first seen) get their own metrics label; the rest are \"other\"")
	fs.StringVar(&o.metricsReadyOut, "metrics-ready-file", "", "write the metrics listen address to this file once serving (tests; written before --ready-file)")
	fs.StringVar(&o.trace.Endpoint, "otlp-endpoint", "", "OpenTelemetry collector (host:port, OTLP/gRPC) the node sends its traces to (empty: tracing off, no spans recorded; W3C traceparent is still passed on)")
	fs.BoolVar(&o.trace.Insecure, "otlp-insecure", false, "send traces to --otlp-endpoint without TLS (a collector on loopback or a sidecar)")
	fs.StringVar(&o.trace.CAFile, "otlp-ca-file", "", "PEM CA bundle that verifies --otlp-endpoint's certificate (default: the system roots)")
	fs.Float64Var(&o.trace.SampleRatio, "trace-sample-ratio", 1, "share of new traces recorded, 0…1 (a request with a sampled incoming traceparent is always recorded)")
}

// tracer is the node's tracer provider (internal/tracing.New) and its
// shutdown, which flushes the spans still batched.
func (o *obsConfig) tracer(ctx context.Context, node, role string) (trace.TracerProvider, func(), error) {
	cfg := o.trace
	cfg.Node, cfg.Role = node, role
	tp, shutdown, err := tracing.New(ctx, cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("--otlp-endpoint: %w", err)
	}
	return tp, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = shutdown(sctx)
	}, nil
}

// check refuses metrics on a non-loopback address without a bearer token:
// the series name tenants and their traffic.
func (o *obsConfig) check() error {
	if o.metricsMax < 1 {
		return fmt.Errorf("--metrics-max-tenants %d: want at least 1", o.metricsMax)
	}
	if r := o.trace.SampleRatio; r < 0 || r > 1 {
		return fmt.Errorf("--trace-sample-ratio %v: want 0…1", r)
	}
	if o.metricsAddr != "" && o.metricsToken == "" && !loopback(o.metricsAddr) {
		return fmt.Errorf("--metrics-addr %s is not a loopback address: pass --metrics-token-file", o.metricsAddr)
	}
	return nil
}

// logger is the process logger: JSON lines on stderr at --log-level.
func (o *obsConfig) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(os.Stderr, &slog.HandlerOptions{Level: o.logLevel}))
}

func (o *obsConfig) metricsConfig() api.MetricsConfig {
	return api.MetricsConfig{Tenants: o.metricsTenants, MaxTenants: o.metricsMax}
}

// serveMetrics serves h as GET /metrics on --metrics-addr until stop is
// called (nothing without --metrics-addr). The token file is read once,
// here (keyfile.ReadSecret: owner-only modes).
func (o *obsConfig) serveMetrics(h http.Handler, log *slog.Logger) (stop func(), err error) {
	if o.metricsAddr == "" {
		return func() {}, nil
	}
	var token []byte
	if o.metricsToken != "" {
		b, err := keyfile.ReadSecret(o.metricsToken)
		if err != nil {
			return nil, fmt.Errorf("--metrics-token-file: %w", err)
		}
		if token = bytes.TrimSpace(b); len(token) == 0 {
			return nil, fmt.Errorf("--metrics-token-file %s: empty", o.metricsToken)
		}
	}
	ln, err := net.Listen("tcp", o.metricsAddr)
	if err != nil {
		return nil, fmt.Errorf("--metrics-addr: %w", err)
	}
	hs := &http.Server{Handler: metricsMux(h, token), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: time.Minute, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics listener", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String(), "token", len(token) > 0)
	if o.metricsReadyOut != "" {
		_ = os.WriteFile(o.metricsReadyOut, []byte(ln.Addr().String()), 0o600)
	}
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx)
	}, nil
}

// errMetricsToken answers a scrape without the metrics bearer token.
var errMetricsToken = cloison.NewError(cloison.CodeUnauthenticated, "missing or wrong metrics bearer token")

// metricsMux serves only GET /metrics, behind the bearer token when one is
// set (compared in constant time).
func metricsMux(h http.Handler, token []byte) http.Handler {
	want := sha256.Sum256(token)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if len(token) > 0 {
			raw, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			got := sha256.Sum256([]byte(strings.TrimSpace(raw)))
			if !ok || subtle.ConstantTimeCompare(got[:], want[:]) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="cloison-metrics"`)
				api.WriteHTTPError(w, errMetricsToken)
				return
			}
		}
		h.ServeHTTP(w, r)
	})
	return mux
}
