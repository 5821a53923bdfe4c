package cloison

import (
	"errors"
	"fmt"
	"testing"
	"time"
)

type customErr struct{}

func (customErr) Error() string   { return "custom" }
func (customErr) ErrorCode() Code { return CodeIsolationViolation }

func TestErrorCode(t *testing.T) {
	sentinel := NewError(CodeQuotaExceeded, "quota exceeded")
	tests := []struct {
		name string
		err  error
		want Code
	}{
		{"nil", nil, ""},
		{"sentinel", sentinel, CodeQuotaExceeded},
		{"wrapped", fmt.Errorf("tenant t1: %w", sentinel), CodeQuotaExceeded},
		{"custom type", fmt.Errorf("x: %w", customErr{}), CodeIsolationViolation},
		{"plain", errors.New("boom"), CodeInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ErrorCode(tt.err); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
	if !errors.Is(fmt.Errorf("a: %w", sentinel), sentinel) {
		t.Error("errors.Is does not see a wrapped sentinel")
	}
}

type publicErr struct{}

func (publicErr) Error() string         { return "public: secret detail" }
func (publicErr) ErrorCode() Code       { return CodeInvalid }
func (publicErr) PublicMessage() string { return "public" }

type retryErr struct{}

func (retryErr) Error() string             { return "retry" }
func (retryErr) RetryDelay() time.Duration { return 3 * time.Second }

// The wire gets the public message only: never a cause, never text that
// fmt.Errorf put around a coded error.
func TestPublicMessage(t *testing.T) {
	sentinel := NewError(CodeUnavailable, "store unavailable")
	cause := errors.New("failed to connect to `host=db.internal database=prod`")
	tests := []struct {
		name   string
		err    error
		public string
		text   string // Error(): what the log gets
		is     bool   // errors.Is(err, sentinel)
	}{
		{"nil", nil, "", "", false},
		{"sentinel", sentinel, "store unavailable", "store unavailable", true},
		{"wrap keeps the cause private", sentinel.Wrap(cause), "store unavailable", "store unavailable: " + cause.Error(), true},
		{"wrap of nil is the sentinel", sentinel.Wrap(nil), "store unavailable", "store unavailable", true},
		{"withf detail is public", sentinel.Withf("retry in %ds", 2), "store unavailable: retry in 2s", "store unavailable: retry in 2s", true},
		{"withf then wrap", sentinel.Withf("tenant %s", "acme").Wrap(cause), "store unavailable: tenant acme", "store unavailable: tenant acme: " + cause.Error(), true},
		{"fmt text around is private", fmt.Errorf("%w: %w", sentinel, cause), "store unavailable", "store unavailable: " + cause.Error(), true},
		{"outer fmt text is private", fmt.Errorf("tenant acme: %w", sentinel.Wrap(cause)), "store unavailable", "tenant acme: store unavailable: " + cause.Error(), true},
		{"typed public message", fmt.Errorf("x: %w", publicErr{}), "public", "x: public: secret detail", false},
		{"coded without a public message", customErr{}, "", "custom", false},
		{"uncoded", cause, "", cause.Error(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PublicMessage(tt.err); got != tt.public {
				t.Errorf("got public %q, want %q", got, tt.public)
			}
			if tt.err == nil {
				return
			}
			if got := tt.err.Error(); got != tt.text {
				t.Errorf("got text %q, want %q", got, tt.text)
			}
			if got := errors.Is(tt.err, sentinel); got != tt.is {
				t.Errorf("got errors.Is %v, want %v", got, tt.is)
			}
		})
	}
	if errors.Is(sentinel.Wrap(cause), NewError(CodeUnavailable, "store unavailable")) {
		t.Error("a wrapped sentinel matches another sentinel of the same text")
	}
	if !errors.Is(sentinel.Wrap(cause), cause) {
		t.Error("the cause is not in the chain")
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want time.Duration
	}{
		{"nil", nil, 0},
		{"none", errors.New("x"), 0},
		{"hint", fmt.Errorf("y: %w", retryErr{}), 3 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := RetryAfter(tt.err); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}
