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

	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/internal/rpcerr"
)

// Wire is how one error code appears on the wire (rpcerr.Wire: the table
// lives beside the gRPC encoding, so that a node-to-node server answers
// with the same statuses without linking this package).
type Wire = rpcerr.Wire

// Table maps every error code to its wire form (rpcerr.Table). A code
// missing there is a bug caught by TestTableComplete.
var Table = rpcerr.Table

// internalMessage replaces the text of errors that carry no code.
const internalMessage = rpcerr.InternalMessage

// UnavailableRetryAfter is the Retry-After sent with unavailable (503) when
// the error names no wait of its own (rpcerr.UnavailableRetryAfter).
const UnavailableRetryAfter = rpcerr.UnavailableRetryAfter

// Describe returns an error's code, wire form and the message a client may
// see (rpcerr.Describe): the public message only, never its cause.
func Describe(err error) (cloison.Code, Wire, string) { return rpcerr.Describe(err) }

// retryAfter is the wait to send with err (rpcerr.RetryAfter).
func retryAfter(err error, code cloison.Code) time.Duration { return rpcerr.RetryAfter(err, code) }

// GRPCStatus converts err to its gRPC status (rpcerr.Status): the table's
// code, the public message, and details carrying the cloison code and the
// retry hint. A status error itself passes through unchanged.
func GRPCStatus(err error) *status.Status { return rpcerr.Status(err) }

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
// retry or is unavailable (X-Should-Retry: false on a 429 without one: it
// never succeeds as sent); it logs the cause with the request id.
func WriteHTTPError(w http.ResponseWriter, err error) {
	logCause(nil, requestID(w), err)
	code, wire, msg := Describe(err)
	if d := retryAfter(err, code); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(d/time.Second)))
	} else if wire.HTTP == http.StatusTooManyRequests {
		// A 429 with no wait never succeeds as sent (a request larger
		// than the quota): clients that retry every 429, as the openai
		// libraries do, read this header and stop.
		w.Header().Set("X-Should-Retry", "false")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(wire.HTTP)
	_ = json.NewEncoder(w).Encode(ErrorBody{Error: ErrorDetail{Message: msg, Type: wire.Type, Code: string(code)}})
}
