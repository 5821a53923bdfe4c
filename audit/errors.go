package audit

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cloison/cloison"
)

// Sentinel errors. Callers branch on them with errors.Is; each carries the
// cloison.Code the API reports.
var (
	// ErrInvalidEvent: an event or payload that the ledger refuses to record
	// (missing field, malformed identifier, unknown kind).
	ErrInvalidEvent = cloison.NewError(cloison.CodeInvalid, "audit: invalid event")
	// ErrTextNotAllowed: a field that must hold an identifier, a count or a
	// digest was given something that looks like free text. The ledger never
	// stores prompt or completion text.
	ErrTextNotAllowed = cloison.NewError(cloison.CodeInvalid, "audit: free text is not allowed in the ledger")
	// ErrNotCanonical: input that is not valid I-JSON, or bytes that are not
	// the RFC 8785 canonical form of themselves.
	ErrNotCanonical = cloison.NewError(cloison.CodeInvalid, "audit: not canonical JSON")
	// ErrMalformed: a checkpoint (or other signed text) that does not parse.
	ErrMalformed = cloison.NewError(cloison.CodeInvalid, "audit: malformed signed statement")
	// ErrBadSignature: a signature that does not verify, or made by a key
	// that is not trusted.
	ErrBadSignature = cloison.NewError(cloison.CodePermissionDenied, "audit: bad signature")
	// ErrChainBroken is matched by every *BreakError (errors.Is).
	ErrChainBroken = cloison.NewError(cloison.CodeConflict, "audit: hash chain broken")
	// ErrInvalidIncident: a register version that misses a required element
	// or holds an inconsistent one.
	ErrInvalidIncident = cloison.NewError(cloison.CodeInvalid, "audit: invalid incident register entry")

	// ErrNotFound: no such incident, report, stored response or request
	// entry (or one of another tenant: the answer is no oracle). Its
	// message keeps the audit/postgres prefix clients have always seen.
	ErrNotFound = cloison.NewError(cloison.CodeNotFound, "audit/postgres: not found")
	// ErrOutOfRange: an entry position or tree size beyond a log, or a
	// range whose end is before its start.
	ErrOutOfRange = cloison.NewError(cloison.CodeInvalid, "audit/postgres: entry or tree size out of range")
)

// Reason says why verification stopped at a sequence number.
type Reason string

// Reasons a chain fails verification.
const (
	ReasonGap           Reason = "gap"            // a sequence number is missing
	ReasonOrder         Reason = "order"          // rows out of order or duplicated
	ReasonPrevHash      Reason = "prev_hash"      // prev_hash is not the previous row's hash
	ReasonHash          Reason = "hash"           // hash does not match seq, prev_hash and payload
	ReasonPayload       Reason = "payload"        // payload is not canonical or not a valid envelope
	ReasonColumns       Reason = "columns"        // stored columns disagree with the hashed payload
	ReasonCheckpoint    Reason = "checkpoint"     // a signed checkpoint names another head at this size
	ReasonCheckpointSig Reason = "checkpoint_sig" // a checkpoint's signature does not verify
	ReasonTruncated     Reason = "truncated"      // the chain ends before a signed checkpoint's size
	ReasonRangeStart    Reason = "range_start"    // an exported range does not start where its manifest says
	ReasonRangeEnd      Reason = "range_end"      // an exported range does not end where its manifest says
	ReasonTree          Reason = "tree"           // a stored Merkle tree hash is not the one the entries give
	ReasonTenantLog     Reason = "tenant_log"     // a stored tenant log row is not the one the entries give
	ReasonStaged        Reason = "staged"         // an event stayed staged, under no hash, beyond IntegrationBound
	ReasonRowState      Reason = "row_state"      // a live tenant, client or key row is not what its last event states
	ReasonSignature     Reason = "signature"      // a signed kind unsigned after signing began, or a bad event signature
	ReasonBackdated     Reason = "backdated"      // occurred_at is beyond ClockTolerance from the database's clock at sequencing
)

// IntegrationBound is the longest an acknowledged event may stay staged
// (durable, but under no chain hash or tree leaf yet) before a writer must
// have sequenced it; a verifier reports an older staged event as a break
// (ReasonStaged).
const IntegrationBound = time.Second

// BreakError reports a sequence number at which a chain fails verification
// and why. errors.Is(err, ErrChainBroken) holds for it.
type BreakError struct {
	Seq    uint64 // first broken sequence number
	Reason Reason
	Detail string
}

func (e *BreakError) Error() string {
	return fmt.Sprintf("audit: chain broken at seq %d (%s): %s", e.Seq, e.Reason, e.Detail)
}

// Unwrap makes errors.Is(err, ErrChainBroken) true.
func (e *BreakError) Unwrap() error { return ErrChainBroken }

// ErrorCode reports the code of ErrChainBroken.
func (e *BreakError) ErrorCode() cloison.Code { return ErrChainBroken.Code }

func breakAt(seq uint64, r Reason, format string, args ...any) *BreakError {
	return &BreakError{Seq: seq, Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// MaxBreaks bounds the breaks a Verifier keeps (a ledger rewritten from
// its first entry breaks everywhere); Breaks.More counts the rest.
const MaxBreaks = 1000

// Breaks is every break a verification found, in the order found (by seq
// for the chain). It is what Verifier.Finish and the stores' Verify return
// when anything is broken: a known-bad entry never hides a later one.
// errors.As(err, &be) with be a *BreakError finds the first; errors.Is
// (err, ErrChainBroken) holds.
type Breaks struct {
	All  []*BreakError
	More int // breaks found beyond MaxBreaks, not kept
}

func (b *Breaks) Error() string {
	var s strings.Builder
	fmt.Fprintf(&s, "audit: %d break(s)", len(b.All)+b.More)
	for _, e := range b.All {
		fmt.Fprintf(&s, "\n  seq %d (%s): %s", e.Seq, e.Reason, e.Detail)
	}
	if b.More > 0 {
		fmt.Fprintf(&s, "\n  and %d more", b.More)
	}
	return s.String()
}

// Unwrap returns every break kept, first first.
func (b *Breaks) Unwrap() []error {
	errs := make([]error, len(b.All))
	for i, e := range b.All {
		errs[i] = e
	}
	return errs
}

// ErrorCode reports the code of ErrChainBroken.
func (b *Breaks) ErrorCode() cloison.Code { return ErrChainBroken.Code }

// add keeps e (nil: nothing).
func (b *Breaks) add(e *BreakError) {
	if e == nil {
		return
	}
	if len(b.All) >= MaxBreaks {
		b.More++
		return
	}
	b.All = append(b.All, e)
}

// JoinBreaks returns one error holding every *BreakError in errs (found
// with errors.As, each *Breaks flattened) and the other errors, in order:
// nil when all are nil. A store's Verify joins its checks' errors with it,
// so a chain break does not hide a tree or tenant log break.
func JoinBreaks(errs ...error) error {
	var b Breaks
	var other []error
	for _, err := range errs {
		if err == nil {
			continue
		}
		var bs *Breaks
		var be *BreakError
		switch {
		case errors.As(err, &bs):
			for _, e := range bs.All {
				b.add(e)
			}
			b.More += bs.More
		case errors.As(err, &be):
			b.add(be)
		default:
			other = append(other, err)
		}
	}
	switch {
	case len(b.All) == 0 && len(other) == 0:
		return nil
	case len(b.All) == 0:
		return errors.Join(other...)
	case len(other) == 0:
		return &b
	}
	return errors.Join(append([]error{&b}, other...)...)
}
