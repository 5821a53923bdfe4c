package cloison

import (
	"errors"
	"fmt"
)

// TenantID names a tenant. It is assigned by the platform, never taken from a
// prompt or from an unauthenticated header.
type TenantID string

// RequestID names one inference request; unique per server process.
type RequestID string

// Code is a stable, machine-readable error class. Its string form is what the
// HTTP API puts in error.code (OpenAI-compatible where such a code exists).
type Code string

// Error codes. The API maps each to exactly one gRPC code and HTTP status.
const (
	CodeInvalid Code = "invalid_request_error"
	// CodeUnsupported: the request asks for something Cloison does not
	// implement (a request field such as tools or logit_bias); it is
	// refused rather than silently ignored.
	CodeUnsupported           Code = "unsupported"
	CodeContextLengthExceeded Code = "context_length_exceeded"
	CodeQuotaExceeded         Code = "quota_exceeded"
	CodeRateLimited           Code = "rate_limit_exceeded"
	CodeCapacityExhausted     Code = "capacity_exhausted"
	CodeUnauthenticated       Code = "unauthenticated"
	CodePermissionDenied      Code = "permission_denied"
	CodeNotFound              Code = "not_found"
	CodeConflict              Code = "conflict"
	CodeUnavailable           Code = "unavailable"
	CodeIsolationViolation    Code = "isolation_violation"
	CodeTransferVerification  Code = "transfer_verification_failed"
	CodeCanceled              Code = "canceled"
	CodeDeadlineExceeded      Code = "deadline_exceeded"
	CodeInternal              Code = "internal_error"
)

// Codes lists every Code, for tables that must cover them all.
var Codes = []Code{
	CodeInvalid, CodeUnsupported, CodeContextLengthExceeded, CodeQuotaExceeded, CodeRateLimited, CodeCapacityExhausted,
	CodeUnauthenticated, CodePermissionDenied, CodeNotFound, CodeConflict, CodeUnavailable,
	CodeIsolationViolation, CodeTransferVerification, CodeCanceled, CodeDeadlineExceeded, CodeInternal,
}

// Error is the project's typed error. Sentinels are *Error values compared by
// identity with errors.Is; wrap them with fmt.Errorf("context: %w", sentinel).
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string { return e.Message }

// NewError returns a new *Error; use it to declare package sentinels.
func NewError(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// Errorf returns a fresh *Error with a formatted message. Use it for errors
// that carry data but that callers do not compare by identity.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the Code of the first *Error in err's chain, or of any
// error in the chain that has a Code() Code method; CodeInternal otherwise;
// the empty Code for a nil error.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var ce interface{ ErrorCode() Code }
	if errors.As(err, &ce) {
		return ce.ErrorCode()
	}
	return CodeInternal
}

// ErrorCode lets *Error and types that embed or wrap it report their code.
func (e *Error) ErrorCode() Code { return e.Code }
