package main

import (
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cloison/cloison"
)

// The metrics listener: loopback by default; a non-loopback address needs
// the bearer token file; the tenant label bound and the log level are
// checked at start.
func TestMetricsFlags(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // "": accepted
	}{
		{"loopback default", nil, ""},
		{"off", []string{"--metrics-addr", ""}, ""},
		{"wildcard without token", []string{"--metrics-addr", "0.0.0.0:9464"}, "--metrics-token-file"},
		{"empty host without token", []string{"--metrics-addr", ":9464"}, "--metrics-token-file"},
		{"a LAN address without token", []string{"--metrics-addr", "10.0.0.5:9464"}, "--metrics-token-file"},
		{"wildcard with token", []string{"--metrics-addr", "0.0.0.0:9464", "--metrics-token-file", "/run/secrets/metrics-token"}, ""},
		{"insecure-listen is not a token", []string{"--metrics-addr", "0.0.0.0:9464", "--insecure-listen"}, "--metrics-token-file"},
		{"no tenant label", []string{"--metrics-max-tenants", "0"}, "--metrics-max-tenants"},
		{"log level debug", []string{"--log-level", "debug"}, ""},
		{"log level unknown", []string{"--log-level", "loud"}, "log-level"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseFlags(append([]string{"--database-url", "postgres://x", "--dev"}, tt.args...))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("got %v, want accepted", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error naming %s", err, tt.want)
			}
		})
	}
	c, err := parseFlags([]string{"--database-url", "postgres://x", "--dev", "--metrics-tenants", "acme, globex,", "--log-level", "warn"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []cloison.TenantID{"acme", "globex"}; !slices.Equal(c.obs.metricsTenants, want) {
		t.Fatalf("got --metrics-tenants %v, want %v", c.obs.metricsTenants, want)
	}
	if c.obs.logLevel != slog.LevelWarn || c.obs.logger().Enabled(t.Context(), slog.LevelInfo) {
		t.Fatalf("got level %v, want warn (info, the access log, off)", c.obs.logLevel)
	}
}

// With --metrics-token-file the listener answers only a scrape with that
// bearer token, and only GET /metrics; a token file others can read is
// refused at start.
func TestMetricsListenerToken(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-scrape-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ready := filepath.Join(dir, "ready")
	o := obsConfig{metricsAddr: "127.0.0.1:0", metricsToken: tokenFile, metricsReadyOut: ready}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "cloison_up 1\n") })
	stop, err := o.serveMetrics(h, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	addr, err := os.ReadFile(ready)
	if err != nil {
		t.Fatal(err)
	}
	get := func(method, path, auth string) int {
		req, _ := http.NewRequest(method, "http://"+string(addr)+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name, method, path, auth string
		want                     int
	}{
		{"no token", "GET", "/metrics", "", 401},
		{"wrong token", "GET", "/metrics", "Bearer s3cret-scrape-tokeN", 401},
		{"a prefix of the token", "GET", "/metrics", "Bearer s3cret", 401},
		{"not a bearer", "GET", "/metrics", "Basic s3cret-scrape-token", 401},
		{"the token", "GET", "/metrics", "Bearer s3cret-scrape-token", 200},
		{"another path", "GET", "/admin/v1/tenants", "Bearer s3cret-scrape-token", 404},
		{"another method", "POST", "/metrics", "Bearer s3cret-scrape-token", 405},
	} {
		if got := get(c.method, c.path, c.auth); got != c.want {
			t.Errorf("%s: got %d, want %d", c.name, got, c.want)
		}
	}

	if err := os.Chmod(tokenFile, 0o644); err != nil {
		t.Fatal(err)
	}
	o.metricsReadyOut = ""
	if stop, err := o.serveMetrics(h, slog.New(slog.DiscardHandler)); err == nil {
		stop()
		t.Fatal("a token file others can read was accepted")
	}
	empty := filepath.Join(dir, "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	o.metricsToken = empty
	if stop, err := o.serveMetrics(h, slog.New(slog.DiscardHandler)); err == nil {
		stop()
		t.Fatal("an empty token file was accepted")
	}
}
