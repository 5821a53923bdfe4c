package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgstate"
)

// Sentinel errors of this package; the SQLSTATE translation below is the
// only place PostgreSQL error codes are interpreted.
var (
	// ErrAppendOnly: an UPDATE, DELETE or TRUNCATE on a ledger or register
	// table, refused by privilege (42501) or by trigger (CL001).
	ErrAppendOnly = cloison.NewError(cloison.CodePermissionDenied, "audit/postgres: ledger and register tables are append-only")
	// ErrRetention: a register row whose five-year retention has not ended,
	// or a delete outside the ledgered purge (CL002).
	ErrRetention = cloison.NewError(cloison.CodePermissionDenied, "audit/postgres: register retention forbids this delete")
	// ErrChainRejected: the database refused a batch that does not extend
	// its committed head (CL003), or events the Merkle tree does not
	// cover (CL006). It means two writers raced without the
	// lock, or a bug: the batch is not stored.
	ErrChainRejected = cloison.NewError(cloison.CodeConflict, "audit/postgres: batch does not extend the chain head")
	// ErrConflict: a concurrent writer took the same incident version or
	// notice number, or a duplicate id (23505, CL005). Retry with fresh data.
	ErrConflict = cloison.NewError(cloison.CodeConflict, "audit/postgres: concurrent update")
	// ErrPayloadRejected: audit_sequence or the staging table refused a
	// payload that is not the ledger envelope its columns copy (CL020):
	// not UTF-8 JSON, another shape, or a kind, tenant, actor or
	// occurred_at other than its column's. Nothing of the batch is stored.
	ErrPayloadRejected = cloison.NewError(cloison.CodeInvalid, "audit/postgres: payload is not the envelope its columns copy")
	// ErrUnavailable: the database cannot be reached or the connection
	// broke. An Append that returns it may or may not have been recorded;
	// it was not acknowledged.
	ErrUnavailable = cloison.NewError(cloison.CodeUnavailable, "audit/postgres: database unavailable")
	// ErrPending: an event is durable in staging but not yet sequenced
	// within the bound (Sync, Append at Close): no integrator is running.
	ErrPending = cloison.NewError(cloison.CodeUnavailable, "audit/postgres: ledger entry pending integration")
	// ErrClosed: Append after Close.
	ErrClosed = cloison.NewError(cloison.CodeUnavailable, "audit/postgres: ledger closed")
	// ErrSchema: the database is not migrated, or another error the schema
	// should have made impossible (CL004, undefined table/function).
	ErrSchema = cloison.NewError(cloison.CodeInternal, "audit/postgres: schema error")
)

// translate maps a PostgreSQL error to this package's sentinels, keeping
// the original in the chain and the text for the log; the API sends only
// the sentinel's public message. Errors that are already domain errors, and
// context errors, pass through.
func translate(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ce *cloison.Error
	if errors.As(err, &ce) {
		return err
	}
	var be *audit.BreakError
	if errors.As(err, &be) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %v", audit.ErrNotFound, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pgstate.OutageCode(pe.Code) {
		// The database refuses or lost the connection (internal/pgstate):
		// 503 with Retry-After, whatever the driver said.
		return ErrUnavailable.Wrap(err)
	}
	if errors.As(err, &pe) {
		var s *cloison.Error
		switch pe.Code {
		case "42501": // insufficient_privilege
			s = ErrAppendOnly
		case "CL001":
			s = ErrAppendOnly
		case "CL002":
			s = ErrRetention
		case "CL020": // payload not the envelope of its columns
			s = ErrPayloadRejected
		case "CL003", "CL006": // chain or tree not extended
			s = ErrChainRejected
		case "CL005", "23505", "40001", "40P01": // version race, unique_violation, serialization, deadlock
			s = ErrConflict
		case "CL004", "42P01", "42883", "42703": // content mismatch, undefined table/function/column
			s = ErrSchema
		case "23503": // foreign_key_violation: an incident that does not exist
			s = audit.ErrNotFound
		default:
			return fmt.Errorf("audit/postgres: %w", err)
		}
		return fmt.Errorf("%w: %s (SQLSTATE %s)", s, pe.Message, pe.Code)
	}
	if pgstate.Outage(err) {
		return ErrUnavailable.Wrap(err)
	}
	return fmt.Errorf("audit/postgres: %w", err)
}
