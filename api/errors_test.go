package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestTableComplete(t *testing.T) {
	for _, c := range cloison.Codes {
		if _, ok := Table[c]; !ok {
			t.Errorf("code %s has no wire form", c)
		}
	}
	if len(Table) != len(cloison.Codes) {
		t.Errorf("table has %d entries for %d codes", len(Table), len(cloison.Codes))
	}
}

// limited returns a real limiter's rejection: a tokens-per-minute bucket of
// 40 emptied by one request, so the next request of 1 token must wait 1.5 s
// (Retry-After 2, rounded up).
func limited() error {
	l := tenancy.NewLimiter()
	at := time.Unix(1_800_000_000, 0)
	l.Now = func() time.Time { return at }
	q := tenancy.Quotas{MaxConcurrent: 10, TokensPerMinute: 40}
	if _, err := l.Admit("acme", q, 40); err != nil {
		return err
	}
	_, err := l.Admit("acme", q, 1)
	return err
}

// driverText is what pgx says when it cannot connect: host, user and
// database, none of which may reach a client.
const driverText = "failed to connect to `user=cloison_runtime database=cloison_prod`: 10.0.3.7:5432 (db-primary.internal): dial error: connect: connection refused"

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		http     int
		grpc     codes.Code
		code     string
		message  string
		retryHdr string
	}{
		{"public detail", engine.ErrContextLength.Withf("5000 tokens"), 400, codes.InvalidArgument, "context_length_exceeded", "context length exceeded: 5000 tokens", ""},
		{"wrapped detail is private", fmt.Errorf("%w: tenant secret-co", engine.ErrContextLength), 400, codes.InvalidArgument, "context_length_exceeded", "context length exceeded", ""},
		{"isolation violation names no lease", &isolation.ViolationError{Page: 3, Reason: isolation.ReasonUnwritten, Owner: isolation.Lease{Tenant: "victim"}}, 500, codes.Aborted, "isolation_violation", "isolation: violation (unwritten-slot)", ""},
		{"internal text never leaks", errors.New("pq: secret table dump"), 500, codes.Internal, "internal_error", internalMessage, ""},
		{"internal code hides its text", cloison.Errorf(cloison.CodeInternal, "stack trace here"), 500, codes.Internal, "internal_error", internalMessage, ""},
		{"rate limited by the real limiter", limited(), 429, codes.ResourceExhausted, "rate_limit_exceeded", "tenancy: rate limit exceeded (tokens_per_minute)", "2"},
		{"unauthenticated", cloison.NewError(cloison.CodeUnauthenticated, "bad token"), 401, codes.Unauthenticated, "unauthenticated", "bad token", ""},
		{"outage cause is private", tenancy.ErrUnavailable.Wrap(errors.New(driverText)), 503, codes.Unavailable, "unavailable", "tenancy: store unavailable", "1"},
		{"outage wrapped in text", fmt.Errorf("%w: tenant acme: %w", tenancy.ErrUnavailable, errors.New(driverText)), 503, codes.Unavailable, "unavailable", "tenancy: store unavailable", "1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			WriteHTTPError(rec, tt.err)
			if rec.Code != tt.http {
				t.Errorf("got HTTP %d, want %d", rec.Code, tt.http)
			}
			if got := rec.Header().Get("Retry-After"); got != tt.retryHdr {
				t.Errorf("got Retry-After %q, want %q", got, tt.retryHdr)
			}
			if got := rec.Header().Get("X-Request-Id"); !strings.HasPrefix(got, "req-") {
				t.Errorf("got X-Request-Id %q, want a request id", got)
			}
			var body ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			if body.Error.Code != tt.code || body.Error.Message != tt.message || body.Error.Type == "" {
				t.Errorf("got body %+v, want code %s message %q", body.Error, tt.code, tt.message)
			}
			st := status.Convert(GRPCError(tt.err))
			if st.Code() != tt.grpc || st.Message() != tt.message {
				t.Errorf("got gRPC %s %q, want %s %q", st.Code(), st.Message(), tt.grpc, tt.message)
			}
			if got, ok := rpcerr.Code(st.Err()); !ok || string(got) != tt.code {
				t.Errorf("got ErrorInfo code %q (%v), want %q", got, ok, tt.code)
			}
			wantDelay := time.Duration(0)
			if tt.retryHdr != "" {
				n, _ := strconv.Atoi(tt.retryHdr)
				wantDelay = time.Duration(n) * time.Second
			}
			if got := rpcerr.RetryDelay(st.Err()); got != wantDelay {
				t.Errorf("got RetryInfo %v, want %v", got, wantDelay)
			}
		})
	}
	if GRPCError(nil) != nil {
		t.Error("GRPCError(nil) is not nil")
	}
	_ = http.StatusOK
}

// A stream that has begun and then fails ends with an error event that
// follows the same rule as a body: the public message only, and the cause
// in the log under the request id.
func TestSSEErrorEventIsPublic(t *testing.T) {
	var logs strings.Builder
	s := &Server{log: slog.New(slog.NewTextHandler(&logs, nil)), cfg: Config{ModelName: "m"}}
	for _, chat := range []bool{false, true} {
		t.Run(fmt.Sprintf("chat=%v", chat), func(t *testing.T) {
			rec := httptest.NewRecorder()
			in := inference{common: &Common{}, chat: chat}
			x := s.newSSE(rec, "req-sse1", in, []*collector{{s: s, in: in}})
			x.begin()
			x.end(genResult{}, fmt.Errorf("%w: ledger: %w", ErrLedgerUnavailable, errors.New(driverText)))
			out := rec.Body.String()
			if strings.Contains(out, "10.0.3.7") || strings.Contains(out, "cloison_prod") || strings.Contains(out, "connection refused") {
				t.Errorf("stream carries driver text: %s", out)
			}
			want := `"message":"` + ErrLedgerUnavailable.Message + `"`
			if !strings.Contains(out, want) || !strings.Contains(out, `"code":"unavailable"`) {
				t.Errorf("got stream %s, want an error event with %s", out, want)
			}
			if !strings.Contains(logs.String(), "request_id=req-sse1") || !strings.Contains(logs.String(), "cloison_prod") {
				t.Errorf("got log %q, want the cause under request_id=req-sse1", logs.String())
			}
		})
	}
}
