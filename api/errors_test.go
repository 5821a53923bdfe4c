package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/isolation"
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

type retryErr struct{ e *cloison.Error }

func (r retryErr) Error() string           { return r.e.Error() }
func (r retryErr) ErrorCode() cloison.Code { return r.e.Code }
func (retryErr) RetryAfter() time.Duration { return 1500 * time.Millisecond }

func TestErrors(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		http     int
		grpc     codes.Code
		code     string
		message  string // "" means the error's own text
		retryHdr string
	}{
		{"over-long prompt", fmt.Errorf("%w: 5000 tokens", engine.ErrContextLength), 400, codes.InvalidArgument, "context_length_exceeded", "", ""},
		{"isolation violation", &isolation.ViolationError{Page: 3, Reason: isolation.ReasonUnwritten}, 500, codes.Aborted, "isolation_violation", "", ""},
		{"internal text never leaks", errors.New("pq: secret table dump"), 500, codes.Internal, "internal_error", internalMessage, ""},
		{"internal code hides its text", cloison.Errorf(cloison.CodeInternal, "stack trace here"), 500, codes.Internal, "internal_error", internalMessage, ""},
		{"rate limited with retry", retryErr{cloison.NewError(cloison.CodeRateLimited, "slow down")}, 429, codes.ResourceExhausted, "rate_limit_exceeded", "", "2"},
		{"unauthenticated", cloison.NewError(cloison.CodeUnauthenticated, "bad token"), 401, codes.Unauthenticated, "unauthenticated", "", ""},
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
			var body ErrorBody
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatal(err)
			}
			want := tt.message
			if want == "" {
				want = tt.err.Error()
			}
			if body.Error.Code != tt.code || body.Error.Message != want || body.Error.Type == "" {
				t.Errorf("got body %+v, want code %s message %q", body.Error, tt.code, want)
			}
			st, _ := status.FromError(GRPCError(tt.err))
			if st.Code() != tt.grpc {
				t.Errorf("got gRPC %s, want %s", st.Code(), tt.grpc)
			}
			if tt.message == internalMessage && st.Message() != "internal_error: "+internalMessage {
				t.Errorf("gRPC message leaks: %q", st.Message())
			}
		})
	}
	if GRPCError(nil) != nil {
		t.Error("GRPCError(nil) is not nil")
	}
	_ = http.StatusOK
}
