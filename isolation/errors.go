package isolation

import (
	"fmt"

	"github.com/cloison/cloison"
)

// Sentinel errors. Callers branch on them with errors.Is; each carries the
// cloison.Code the API reports.
var (
	// ErrInvalidConfig: a Config or TenantConfig that cannot be honoured.
	ErrInvalidConfig = cloison.NewError(cloison.CodeInvalid, "isolation: invalid configuration")
	// ErrUnknownTenant: the tenant was never added to the pool. Fail closed:
	// the pool never invents a tenant.
	ErrUnknownTenant = cloison.NewError(cloison.CodePermissionDenied, "isolation: unknown tenant")
	// ErrTooLarge: the request needs more pages than the tenant could ever
	// hold at once (its partition or its cap). Permanent: reject, never retry.
	ErrTooLarge = cloison.NewError(cloison.CodeContextLengthExceeded, "isolation: request exceeds the KV capacity available to the tenant")
	// ErrQuotaExceeded: the tenant's live leases already hold its cap.
	// Transient: retry after the tenant's other requests finish.
	ErrQuotaExceeded = cloison.NewError(cloison.CodeQuotaExceeded, "isolation: tenant KV page quota exceeded")
	// ErrPoolExhausted: not enough pages now (others hold them, or they are
	// reserved for other tenants). Transient.
	ErrPoolExhausted = cloison.NewError(cloison.CodeCapacityExhausted, "isolation: KV pool exhausted")
	// ErrScrubPending: enough pages exist but some must be zeroed first. The
	// caller runs ScrubWork/ConfirmScrub and retries. Transient.
	ErrScrubPending = cloison.NewError(cloison.CodeCapacityExhausted, "isolation: KV pages awaiting scrub")
	// ErrStaleLease: the lease was released, preempted or never existed.
	ErrStaleLease = cloison.NewError(cloison.CodeIsolationViolation, "isolation: stale or unknown lease")
	// ErrLeaseOverflow: a write past the lease's reserved slots; Extend first.
	ErrLeaseOverflow = cloison.NewError(cloison.CodeInvalid, "isolation: write beyond the lease's reserved slots")
	// ErrNotScrubbing: ConfirmScrub for a page that was not handed out by
	// ScrubWork (or was confirmed twice).
	ErrNotScrubbing = cloison.NewError(cloison.CodeInternal, "isolation: page is not awaiting scrub confirmation")
	// ErrUnknownHold: Unhold of a hold that does not exist.
	ErrUnknownHold = cloison.NewError(cloison.CodeInternal, "isolation: unknown transfer hold")
	// ErrViolation is matched by every *ViolationError (errors.Is).
	ErrViolation = cloison.NewError(cloison.CodeIsolationViolation, "isolation: violation")
	// ErrCorrupt: Check found a broken invariant of the pool's own books.
	ErrCorrupt = cloison.NewError(cloison.CodeInternal, "isolation: pool invariant broken")
)

// Reason says why a read was refused.
type Reason string

const (
	// ReasonUnwritten: a slot to be read was not written in the current epoch
	// by the reading lease (the 2026 failure: pages reserved for the full
	// prompt, written for one token).
	ReasonUnwritten Reason = "unwritten-slot"
	// ReasonForeignPage: the page is owned by another lease.
	ReasonForeignPage Reason = "foreign-page"
	// ReasonStaleGeneration: the page was freed (and maybe reused) since the
	// lease took it.
	ReasonStaleGeneration Reason = "stale-generation"
	// ReasonForeignNamespace: a prefix page of another namespace.
	ReasonForeignNamespace Reason = "foreign-namespace"
)

// ViolationError reports a refused read: reader asked for a page that it may
// not read. The engine aborts every request whose read touched the page,
// withholds their output and opens an incident.
type ViolationError struct {
	Page   int32
	Owner  Lease // the page's owner or last writer; zero if none
	Reader Lease
	Reason Reason
}

func (e *ViolationError) Error() string {
	return fmt.Sprintf("isolation violation: lease %s may not read page %d owned by %s (%s)", e.Reader, e.Page, e.Owner, e.Reason)
}

// PublicMessage is ErrViolation's message: the leases and the page (another
// tenant's lease among them) stay in Error, for the log and the incident.
func (e *ViolationError) PublicMessage() string {
	return ErrViolation.Message + " (" + string(e.Reason) + ")"
}

// ErrorCode reports cloison.CodeIsolationViolation.
func (e *ViolationError) ErrorCode() cloison.Code { return cloison.CodeIsolationViolation }

// Is makes errors.Is(err, ErrViolation) true for every *ViolationError.
func (e *ViolationError) Is(target error) bool { return target == ErrViolation }
