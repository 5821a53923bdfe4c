// This file is the one place where typed errors become wire statuses: every
// cloison.Code maps to exactly one gRPC code, one HTTP status and one
// OpenAI-style error type. The wire carries only an error's public message
// (cloison.Error.Message); its cause, and anything wrapped around it, is
// logged with the request id. Errors without a code are internal: their
// text never reaches a client. Over gRPC the code travels as a
// google.rpc.ErrorInfo detail, never as a prefix of the message.

package api

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/internal/rpcerr"
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

// UnavailableRetryAfter is the Retry-After sent with unavailable (503) when
// the error names no wait of its own: an outage of the database or of a
// peer is expected to pass, and clients should come back rather than fail.
const UnavailableRetryAfter = time.Second

// Describe returns an error's code, wire form and the message a client may
// see: the public message of the first coded error in the chain
// (cloison.PublicMessage), never its cause or text wrapped around it.
// Errors without a code become internal_error with a fixed message, and so
// do internal errors with a code; a coded error without a public message
// gets its code as the text.
func Describe(err error) (cloison.Code, Wire, string) {
	code := cloison.ErrorCode(err)
	w, ok := Table[code]
	if !ok || code == cloison.CodeInternal {
		return cloison.CodeInternal, Table[cloison.CodeInternal], internalMessage
	}
	msg := cloison.PublicMessage(err)
	if msg == "" {
		msg = string(code)
	}
	return code, w, msg
}

// retryAfter is the wait to send with err (zero: none): the error's own
// hint, else the code's default, rounded up to whole seconds. code is
// Describe's: an internal error gets none, whatever it wraps.
func retryAfter(err error, code cloison.Code) time.Duration {
	if code == cloison.CodeInternal {
		return 0
	}
	d := cloison.RetryAfter(err)
	if d <= 0 && code == cloison.CodeUnavailable {
		d = UnavailableRetryAfter
	}
	if d <= 0 {
		return 0
	}
	return rpcerr.RoundUp(d)
}

// GRPCStatus converts err to its gRPC status: the table's code, the public
// message, and details carrying the cloison code (google.rpc.ErrorInfo,
// domain rpcerr.Domain) and the retry hint (google.rpc.RetryInfo). A status
// error itself (not one wrapped in text, which may be private) passes
// through unchanged.
func GRPCStatus(err error) *status.Status {
	if err == nil {
		return nil
	}
	if se, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return se.GRPCStatus() // already a status
	}
	code, w, msg := Describe(err)
	return rpcerr.New(w.GRPC, code, msg, retryAfter(err, code))
}

// GRPCError converts err to a gRPC status error (GRPCStatus) and logs its
// cause; nil for nil.
func GRPCError(err error) error {
	if err == nil {
		return nil
	}
	logCause(nil, "", err)
	return GRPCStatus(err).Err()
}

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

// errorLog is where logCause writes; NewServer sets it (SetErrorLog).
var errorLog atomic.Pointer[slog.Logger]

// SetErrorLog directs the log of error causes to l.
func SetErrorLog(l *slog.Logger) { errorLog.Store(l) }

// logCause logs what the wire does not carry: the full text of an error
// answered with a server-side status (5xx) at level Error, and of a client
// error whose text says more than its public message at level Debug; each
// with the request id, so that an operator can match a client's report.
func logCause(log *slog.Logger, id cloison.RequestID, err error) {
	if err == nil {
		return
	}
	if log == nil {
		if log = errorLog.Load(); log == nil {
			log = slog.Default()
		}
	}
	code, w, msg := Describe(err)
	switch {
	case w.HTTP >= 500:
		log.Error("request failed", "request_id", id, "code", code, "cause", err.Error())
	case err.Error() != msg:
		log.Debug("request refused", "request_id", id, "code", code, "cause", err.Error())
	}
}

// requestID returns the request id of the response being written (its
// X-Request-Id header), assigning one when the handler did not: every error
// answer names the id its cause is logged under.
func requestID(w http.ResponseWriter) cloison.RequestID {
	if id := w.Header().Get("X-Request-Id"); id != "" {
		return cloison.RequestID(id)
	}
	id := NewRequestID()
	w.Header().Set("X-Request-Id", string(id))
	return id
}

// WriteHTTPError writes err as an OpenAI-shaped JSON error with its status,
// the public message only, and Retry-After when the error says when to
// retry or is unavailable; it logs the cause with the request id.
func WriteHTTPError(w http.ResponseWriter, err error) {
	logCause(nil, requestID(w), err)
	code, wire, msg := Describe(err)
	if d := retryAfter(err, code); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d/time.Second)))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(wire.HTTP)
	_ = json.NewEncoder(w).Encode(ErrorBody{Error: ErrorDetail{Message: msg, Type: wire.Type, Code: string(code)}})
}
