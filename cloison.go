package cloison

import (
	"errors"
	"fmt"
	"time"
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
	// CodeModelNotFound: a model this node does not serve or the tenant
	// may not use (OpenAI's code for it; the same 404 either way).
	CodeModelNotFound        Code = "model_not_found"
	CodeConflict             Code = "conflict"
	CodeUnavailable          Code = "unavailable"
	CodeIsolationViolation   Code = "isolation_violation"
	CodeTransferVerification Code = "transfer_verification_failed"
	CodeCanceled             Code = "canceled"
	CodeDeadlineExceeded     Code = "deadline_exceeded"
	CodeInternal             Code = "internal_error"
)

// Codes lists every Code, for tables that must cover them all.
var Codes = []Code{
	CodeInvalid, CodeUnsupported, CodeContextLengthExceeded, CodeQuotaExceeded, CodeRateLimited, CodeCapacityExhausted,
	CodeUnauthenticated, CodePermissionDenied, CodeNotFound, CodeModelNotFound, CodeConflict, CodeUnavailable,
	CodeIsolationViolation, CodeTransferVerification, CodeCanceled, CodeDeadlineExceeded, CodeInternal,
}

// Error is the project's typed error. Sentinels are *Error values compared by
// identity with errors.Is; wrap them with fmt.Errorf("context: %w", sentinel),
// or with Wrap and Withf, which also match the sentinel.
//
// The error boundary has one shape: Message is public, the only text of the
// error a client ever sees; Cause is private, logged with the request id by
// the API and never sent. Text that fmt.Errorf adds around an *Error is
// private too: PublicMessage takes the Message of the first coded error in
// the chain, so detail reaches a client only when written into a Message
// (Errorf, Withf) on purpose.
type Error struct {
	Code    Code
	Message string // public: safe to send to any client
	Cause   error  // private: driver errors, hosts, ids; logged, never sent

	kind *Error // the sentinel Wrap or Withf derived this from; errors.Is matches it
}

// Error returns the message and, after ": ", the private cause: the text
// for logs.
func (e *Error) Error() string {
	if e.Cause != nil {
		return e.Message + ": " + e.Cause.Error()
	}
	return e.Message
}

// Unwrap returns the private cause, so that errors.Is and errors.As see it.
func (e *Error) Unwrap() error { return e.Cause }

// Is makes an error made by Wrap or Withf match its sentinel.
func (e *Error) Is(target error) bool { return e.kind != nil && target == e.kind }

// PublicMessage returns Message: the text a client may see.
func (e *Error) PublicMessage() string { return e.Message }

// NewError returns a new *Error; use it to declare package sentinels.
func NewError(code Code, msg string) *Error { return &Error{Code: code, Message: msg} }

// Errorf returns a fresh *Error with a formatted message. Use it for errors
// that carry data but that callers do not compare by identity. The whole
// message is public.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an error with e's code and public message and cause as its
// private cause; errors.Is(result, e) holds. A nil cause gives e itself.
func (e *Error) Wrap(cause error) *Error {
	if cause == nil {
		return e
	}
	return &Error{Code: e.Code, Message: e.Message, Cause: cause, kind: e.root()}
}

// Withf returns an error with e's code whose public message is e's followed
// by ": " and the formatted detail; errors.Is(result, e) holds. The detail
// reaches clients: put in it only what the caller sent or may know.
func (e *Error) Withf(format string, args ...any) *Error {
	return &Error{Code: e.Code, Message: e.Message + ": " + fmt.Sprintf(format, args...), Cause: e.Cause, kind: e.root()}
}

func (e *Error) root() *Error {
	if e.kind != nil {
		return e.kind
	}
	return e
}

// coded is implemented by every error that carries a Code.
type coded interface{ ErrorCode() Code }

// ErrorCode returns the Code of the first *Error in err's chain, or of any
// error in the chain that has a Code() Code method; CodeInternal otherwise;
// the empty Code for a nil error.
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var ce coded
	if errors.As(err, &ce) {
		return ce.ErrorCode()
	}
	return CodeInternal
}

// ErrorCode lets *Error and types that embed or wrap it report their code.
func (e *Error) ErrorCode() Code { return e.Code }

// PublicMessage returns the text a client may see for err: the public
// message of the first coded error in err's chain (the one ErrorCode
// reports), taken from its PublicMessage() string method. It returns ""
// when that error has no such method, when no error in the chain has a
// code, and for nil: the caller then answers with a fixed text. Nothing
// fmt.Errorf wrapped around the coded error, and nothing below it, is in
// the result.
func PublicMessage(err error) string {
	var ce coded
	if err == nil || !errors.As(err, &ce) {
		return ""
	}
	if p, ok := ce.(interface{ PublicMessage() string }); ok {
		return p.PublicMessage()
	}
	return ""
}

// RetryAfter returns how long the first error in err's chain that knows
// (a RetryDelay() time.Duration method) asks a client to wait before it
// retries; zero when none does.
func RetryAfter(err error) time.Duration {
	var r interface{ RetryDelay() time.Duration }
	if errors.As(err, &r) {
		return max(0, r.RetryDelay())
	}
	return 0
}
