// Package api serves Cloison over gRPC and an OpenAI-compatible HTTP API.
//
// This file is the one place where typed errors become wire statuses: every
// cloison.Code maps to exactly one gRPC code, one HTTP status and one
// OpenAI-style error type. Errors without a code are internal: their text
// never reaches a client.
package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/cloison/cloison"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Wire is how one error code appears on the wire.
type Wire struct {
	GRPC codes.Code
	HTTP int
	Type string // OpenAI error.type
}

// Table maps every error code to its wire form. A code missing here is a
// bug caught by TestTableComplete.
var Table = map[cloison.Code]Wire{
	cloison.CodeInvalid:               {codes.InvalidArgument, http.StatusBadRequest, "invalid_request_error"},
	cloison.CodeUnsupported:           {codes.InvalidArgument, http.StatusBadRequest, "invalid_request_error"},
	cloison.CodeContextLengthExceeded: {codes.InvalidArgument, http.StatusBadRequest, "invalid_request_error"},
	cloison.CodeQuotaExceeded:         {codes.ResourceExhausted, http.StatusTooManyRequests, "insufficient_quota"},
	cloison.CodeRateLimited:           {codes.ResourceExhausted, http.StatusTooManyRequests, "rate_limit_error"},
	cloison.CodeCapacityExhausted:     {codes.Unavailable, http.StatusServiceUnavailable, "server_error"},
	cloison.CodeUnauthenticated:       {codes.Unauthenticated, http.StatusUnauthorized, "authentication_error"},
	cloison.CodePermissionDenied:      {codes.PermissionDenied, http.StatusForbidden, "permission_error"},
	cloison.CodeNotFound:              {codes.NotFound, http.StatusNotFound, "not_found_error"},
	cloison.CodeConflict:              {codes.AlreadyExists, http.StatusConflict, "conflict_error"},
	cloison.CodeUnavailable:           {codes.Unavailable, http.StatusServiceUnavailable, "server_error"},
	cloison.CodeIsolationViolation:    {codes.Aborted, http.StatusInternalServerError, "server_error"},
	cloison.CodeTransferVerification:  {codes.Aborted, http.StatusInternalServerError, "server_error"},
	cloison.CodeCanceled:              {codes.Canceled, 499, "canceled"},
	cloison.CodeDeadlineExceeded:      {codes.DeadlineExceeded, http.StatusGatewayTimeout, "timeout_error"},
	cloison.CodeInternal:              {codes.Internal, http.StatusInternalServerError, "server_error"},
}

// internalMessage replaces the text of errors that carry no code.
const internalMessage = "Internal error."

// Describe returns an error's code, wire form and the message a client may
// see. Errors without a code become internal_error with a fixed message.
func Describe(err error) (cloison.Code, Wire, string) {
	code := cloison.ErrorCode(err)
	w, ok := Table[code]
	if !ok || code == cloison.CodeInternal {
		return cloison.CodeInternal, Table[cloison.CodeInternal], internalMessage
	}
	return code, w, err.Error()
}

// GRPCError converts err to a gRPC status error.
func GRPCError(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && cloison.ErrorCode(err) == cloison.CodeInternal {
		return err // already a status
	}
	code, w, msg := Describe(err)
	if code == cloison.CodeInternal {
		LogInternal(err)
	}
	return status.Error(w.GRPC, string(code)+": "+msg)
}

// RetryAfter is implemented by errors that tell the client when to retry.
type RetryAfter interface{ RetryAfter() time.Duration }

// ErrorBody is the OpenAI-shaped JSON error body.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail is the body's error object.
type ErrorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// LogInternal receives the full text of every internal error before it is
// replaced by a fixed message on the wire; NewServer points it at its logger.
var LogInternal = func(err error) {}

// WriteHTTPError writes err as an OpenAI-shaped JSON error with its status
// (and Retry-After when the error says when to retry).
func WriteHTTPError(w http.ResponseWriter, err error) {
	code, wire, msg := Describe(err)
	if code == cloison.CodeInternal {
		LogInternal(err)
	}
	var ra RetryAfter
	if errors.As(err, &ra) {
		secs := int((ra.RetryAfter() + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.Itoa(max(1, secs)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(wire.HTTP)
	_ = json.NewEncoder(w).Encode(ErrorBody{Error: ErrorDetail{Message: msg, Type: wire.Type, Code: string(code)}})
}
