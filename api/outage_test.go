package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// syncBuffer is a log sink shared by the server's goroutines and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A database that refuses connections is an outage: every answer is 503
// unavailable with Retry-After, never 500, and carries no text of the
// driver (host, port, database, user, SQLSTATE); the cause is in the log
// under the request id the answer names. The PostgreSQL is real and really
// refuses: a database that does not accept connections (55000) and one
// renamed away (3D000), each after its backends were terminated (57P01 on
// the pool's idle connections).
func TestOutageAnswers(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	var logs syncBuffer
	api.SetErrorLog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	t.Cleanup(func() { api.SetErrorLog(slog.Default()) })
	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	name := p.DB.Name
	ident := pgx.Identifier{name}.Sanitize()
	gone := pgx.Identifier{name[:min(len(name), 40)] + "_gone"}.Sanitize() // names end at 63 bytes
	exec := func(sql string, args ...any) error {
		_, err := admin.Exec(ctx, sql, args...)
		return err
	}
	terminate := func() error {
		return exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
	}
	infer := p.Token(t, "victim", tenancy.ScopeInfer)
	adminTok := p.Token(t, "victim", tenancy.ScopeAdmin)
	requests := []struct {
		name, method, path, token, body string
	}{
		{"completion", "POST", "/v1/completions", infer, `{"model":"` + platformtest.Model + `","prompt":"abc","max_tokens":2,"temperature":0}`},
		{"streamed completion", "POST", "/v1/completions", infer, `{"model":"` + platformtest.Model + `","prompt":"abc","max_tokens":2,"temperature":0,"stream":true}`},
		{"admin list", "GET", "/admin/v1/tenants", adminTok, ""},
	}
	outages := []struct {
		name       string
		down, up   func() error
		causeInLog string // a piece of the driver's text the log must keep
	}{
		{"allow_connections false (55000)",
			func() error {
				if err := exec("ALTER DATABASE " + ident + " ALLOW_CONNECTIONS false"); err != nil {
					return err
				}
				return terminate()
			},
			func() error { return exec("ALTER DATABASE " + ident + " ALLOW_CONNECTIONS true") },
			"55000"},
		{"database renamed (3D000)",
			func() error {
				// The rename needs the database free: terminate, then rename
				// before the pool reconnects.
				var err error
				for range 50 {
					if err = terminate(); err == nil {
						if err = exec("ALTER DATABASE " + ident + " RENAME TO " + gone); err == nil {
							return nil
						}
					}
					time.Sleep(20 * time.Millisecond)
				}
				return err
			},
			func() error { return exec("ALTER DATABASE " + gone + " RENAME TO " + ident) },
			"3D000"},
	}
	// What must never reach a client: the driver's vocabulary and the
	// database's coordinates.
	forbidden := []string{name, "SQLSTATE", "pgx", "postgres", "127.0.0.1", "5432", "failed to connect", "dial", "FATAL", "tenancy: tenant", "(57P01)"}
	for _, o := range outages {
		t.Run(o.name, func(t *testing.T) {
			if err := o.down(); err != nil {
				t.Fatal(err)
			}
			restored := false
			restore := func() {
				if !restored {
					restored = true
					if err := o.up(); err != nil {
						t.Fatalf("restore the database: %v", err)
					}
				}
			}
			t.Cleanup(restore)
			for _, rq := range requests {
				t.Run(rq.name, func(t *testing.T) {
					req, _ := http.NewRequest(rq.method, p.URL+rq.path, strings.NewReader(rq.body))
					req.Header.Set("Authorization", "Bearer "+rq.token)
					resp, err := http.DefaultClient.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					defer resp.Body.Close()
					raw, _ := io.ReadAll(resp.Body)
					if resp.StatusCode != http.StatusServiceUnavailable {
						t.Fatalf("got %d %s, want 503", resp.StatusCode, raw)
					}
					if got := resp.Header.Get("Retry-After"); got != "1" {
						t.Errorf("got Retry-After %q, want %q", got, "1")
					}
					var body api.ErrorBody
					if err := json.Unmarshal(raw, &body); err != nil {
						t.Fatalf("body %q: %v", raw, err)
					}
					if body.Error.Code != string(cloison.CodeUnavailable) || body.Error.Type != "server_error" {
						t.Errorf("got %+v, want code %s", body.Error, cloison.CodeUnavailable)
					}
					for _, f := range forbidden {
						if strings.Contains(string(raw), f) {
							t.Errorf("body %s carries %q", raw, f)
						}
						for k, v := range resp.Header {
							if strings.Contains(strings.Join(v, " "), f) {
								t.Errorf("header %s %q carries %q", k, v, f)
							}
						}
					}
					id := resp.Header.Get("X-Request-Id")
					if !strings.HasPrefix(id, "req-") {
						t.Fatalf("got X-Request-Id %q, want a request id", id)
					}
					var line string
					for _, l := range strings.Split(logs.String(), "\n") {
						if strings.Contains(l, "request_id="+id) {
							line = l
						}
					}
					// The first request after the terminate finds a pooled
					// connection that the server closed (57P01); the next
					// ones the refusal itself.
					if !strings.Contains(line, "code=unavailable") || !strings.Contains(line, o.causeInLog) && !strings.Contains(line, "57P01") {
						t.Errorf("got log line %q for %s, want code=unavailable and the cause (%s or 57P01)", line, id, o.causeInLog)
					}
				})
			}
			if !strings.Contains(logs.String(), o.causeInLog) {
				t.Errorf("no request met the refusal itself (%s) in log:\n%s", o.causeInLog, logs.String())
			}
			// Service resumes with the database.
			restore()
			req, _ := http.NewRequest("GET", p.URL+"/admin/v1/tenants", nil)
			req.Header.Set("Authorization", "Bearer "+adminTok)
			status := 0
			testwait.Eventually(t, 20*time.Second, func() bool {
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				status = resp.StatusCode
				return status == 200
			}, "a 200 after restore (last %s)", testwait.Lazy(func() string { return fmt.Sprint(status) }))
		})
	}
}
