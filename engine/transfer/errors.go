package transfer

import (
	"fmt"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
)

// Errors. Callers branch with errors.Is; cloison.ErrorCode gives the API code.
var (
	// ErrVerification is matched by every *VerificationError and by the
	// sender's error when the receiver refused the transfer. Code
	// transfer_verification_failed: the request ends with an error, never
	// with tokens.
	ErrVerification = cloison.NewError(cloison.CodeTransferVerification, "transfer: verification failed")
	// ErrCanceled: the transfer was cancelled (engine abort, decode timeout)
	// and the cancellation acknowledged; nothing was recorded as written.
	ErrCanceled = cloison.NewError(cloison.CodeCanceled, "transfer: canceled")
	// ErrInvalid: a configuration or call that can never succeed.
	ErrInvalid = cloison.NewError(cloison.CodeInvalid, "transfer: invalid argument")
	// ErrUnavailable: the peer could not be reached or the stream broke on
	// the sender's side.
	ErrUnavailable = cloison.NewError(cloison.CodeUnavailable, "transfer: peer unavailable")
)

// Reason says which check a transfer failed.
type Reason string

const (
	ReasonUnknownReservation Reason = "unknown-reservation" // no pending reservation has the header's epoch
	ReasonDuplicateStream    Reason = "duplicate-stream"    // a second stream for one reservation
	ReasonVersion            Reason = "version"
	ReasonUnknownKey         Reason = "unknown-key" // key id not in the receiver's ring
	ReasonHeaderMAC          Reason = "header-mac"
	ReasonManifestMAC        Reason = "manifest-mac"
	ReasonTenant             Reason = "tenant"
	ReasonRequest            Reason = "request"
	ReasonReservation        Reason = "reservation" // nonce of another (or an old) reservation
	ReasonModel              Reason = "model"
	ReasonLayout             Reason = "layout"
	ReasonKVType             Reason = "kv-type"     // pages of another (or an unknown) KV element type than the arena's
	ReasonTokenCount         Reason = "token-count" // transferred tokens != reserved tokens (the 2026 failure)
	ReasonPageCount          Reason = "page-count"
	ReasonChunkOrder         Reason = "chunk-order" // duplicated, reordered or missing chunks
	ReasonDigest             Reason = "digest"
	ReasonTruncated          Reason = "truncated" // the stream ended or broke before the manifest completed
	ReasonStalled            Reason = "stalled"   // the transfer did not complete before the decode node's deadline
	ReasonMalformed          Reason = "malformed"
	ReasonCommit             Reason = "commit" // the pool refused to record the verified tokens (lease ended)
)

// VerificationError reports a transfer the receiver refused. The reservation's
// lease was discarded (its pages are scrubbed before any reuse) and not a
// token was recorded as written.
type VerificationError struct {
	Reason Reason
	Lease  isolation.Lease // the receiver's reservation; zero if none matched
	Sender uint64          // sender epoch as the header claimed it; 0 before a header
	Detail string
}

func (e *VerificationError) Error() string {
	return fmt.Sprintf("transfer verification failed (%s) for reservation %s: %s", e.Reason, e.Lease, e.Detail)
}

// Is makes errors.Is(err, ErrVerification) true.
func (e *VerificationError) Is(target error) bool { return target == ErrVerification }

// PublicMessage is ErrVerification's message and the reason; the
// reservation and the detail stay in Error, for the log.
func (e *VerificationError) PublicMessage() string {
	return ErrVerification.Message + " (" + string(e.Reason) + ")"
}

// ErrorCode reports cloison.CodeTransferVerification.
func (e *VerificationError) ErrorCode() cloison.Code { return cloison.CodeTransferVerification }

func refuse(r Reason, format string, args ...any) *VerificationError {
	return &VerificationError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}
