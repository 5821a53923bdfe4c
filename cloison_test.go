package cloison

import (
	"errors"
	"fmt"
	"testing"
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
