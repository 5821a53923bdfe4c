package tenancy

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/internal/pgstate"
)

// This file is the one place where PostgreSQL errors become domain errors.
// The driver's text (host, database, user, constraint names) stays in the
// chain, below the domain sentinel, for the log: the API sends only the
// sentinel's public message.

// SQLSTATEs the store branches on.
const (
	sqlUniqueViolation     = "23505"
	sqlForeignKeyViolation = "23503"
	sqlCheckViolation      = "23514"
	sqlNotNullViolation    = "23502"
	sqlSerialization       = "40001"
	sqlDeadlock            = "40P01"
	sqlKeyImmutable        = "CL010" // signing_keys_one_way
	sqlKeyBackwards        = "CL011" // signing_keys_one_way
	sqlNoData              = "P0002" // row_apply: the row to change does not exist
)

// translate maps err to a domain error, keeping err in the chain for logs.
// what names the object for the message ("tenant acme").
func translate(err error, what string) error {
	if err == nil {
		return nil
	}
	// Already a domain error (this package's, or the ledger's wrapped in
	// ErrLedger): keep it.
	var ce *cloison.Error
	if errors.As(err, &ce) {
		return err
	}
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return ErrUnavailable.Wrap(fmt.Errorf("%s: %w", what, err))
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case sqlUniqueViolation:
			return fmt.Errorf("%w: %s already exists (%s)", ErrConflict, what, pe.ConstraintName)
		case sqlNoData:
			return fmt.Errorf("%w: %s", ErrNotFound, what)
		case sqlForeignKeyViolation:
			return fmt.Errorf("%w: %s refers to a missing row (%s)", ErrNotFound, what, pe.ConstraintName)
		case sqlCheckViolation, sqlNotNullViolation:
			inv := ErrInvalidTenant
			if pe.TableName == "api_clients" {
				inv = ErrInvalidClient
			} else if pe.TableName == "signing_keys" {
				inv = ErrInvalidKey
			}
			return fmt.Errorf("%w: %s violates %s", inv, what, pe.ConstraintName)
		case sqlSerialization, sqlDeadlock:
			return fmt.Errorf("%w: %s: concurrent change (%s)", ErrConflict, what, pe.Code)
		case sqlKeyImmutable, sqlKeyBackwards:
			return fmt.Errorf("%w: %s: %s", ErrConflict, what, pe.Message)
		}
		// The database refusing or losing the connection (08, 53, 57,
		// 3D000, 55000, 25006: internal/pgstate) is not there now: 503,
		// and service resumes with it.
		if pgstate.OutageCode(pe.Code) {
			return ErrUnavailable.Wrap(fmt.Errorf("%s: %w", what, err))
		}
		return fmt.Errorf("%w: %s: %w", ErrStore, what, err)
	}
	// Anything else that is not the server's answer (a connection refused or
	// closed mid-query, a timeout, an I/O error) is the database being
	// unreachable.
	return ErrUnavailable.Wrap(fmt.Errorf("%s: %w", what, err))
}

// retryable reports whether a transaction that failed with err may run again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == sqlSerialization || pe.Code == sqlDeadlock)
}
