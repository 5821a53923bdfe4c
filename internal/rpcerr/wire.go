// The one table of error codes on the wire: every cloison.Code maps to
// exactly one gRPC code, one HTTP status and one OpenAI-style error type.
// The wire carries only an error's public message (cloison.Error.Message);
// its cause is the caller's to log. Errors without a code are internal:
// their text never reaches a client.

package rpcerr

import (
	"net/http"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
)

// Wire is how one error code appears on the wire.
type Wire struct {
	GRPC codes.Code
	HTTP int
	Type string // OpenAI error.type
}

// Table maps every error code to its wire form. A code missing here is a
// bug caught by api's TestTableComplete.
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
	cloison.CodeModelNotFound:         {codes.NotFound, http.StatusNotFound, "invalid_request_error"},
	cloison.CodeConflict:              {codes.AlreadyExists, http.StatusConflict, "conflict_error"},
	cloison.CodeUnavailable:           {codes.Unavailable, http.StatusServiceUnavailable, "server_error"},
	cloison.CodeIsolationViolation:    {codes.Aborted, http.StatusInternalServerError, "server_error"},
	cloison.CodeTransferVerification:  {codes.Aborted, http.StatusInternalServerError, "server_error"},
	cloison.CodeCanceled:              {codes.Canceled, 499, "canceled"},
	cloison.CodeDeadlineExceeded:      {codes.DeadlineExceeded, http.StatusGatewayTimeout, "timeout_error"},
	cloison.CodeInternal:              {codes.Internal, http.StatusInternalServerError, "server_error"},
}

// InternalMessage replaces the text of errors that carry no code.
const InternalMessage = "Internal error."

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
		return cloison.CodeInternal, Table[cloison.CodeInternal], InternalMessage
	}
	msg := cloison.PublicMessage(err)
	if msg == "" {
		msg = string(code)
	}
	return code, w, msg
}

// RetryAfter is the wait to send with err (zero: none): the error's own
// hint, else the code's default, rounded up to whole seconds. code is
// Describe's: an internal error gets none, whatever it wraps.
func RetryAfter(err error, code cloison.Code) time.Duration {
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
	return RoundUp(d)
}

// Status converts err to its gRPC status: the table's code, the public
// message, and details carrying the cloison code (google.rpc.ErrorInfo,
// domain Domain) and the retry hint (google.rpc.RetryInfo). A status
// error itself (not one wrapped in text, which may be private) passes
// through unchanged.
func Status(err error) *status.Status {
	if err == nil {
		return nil
	}
	if se, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return se.GRPCStatus() // already a status
	}
	code, w, msg := Describe(err)
	return New(w.GRPC, code, msg, RetryAfter(err, code))
}

// Error is Status(err) as an error; nil for nil.
func Error(err error) error {
	if err == nil {
		return nil
	}
	return Status(err).Err()
}
