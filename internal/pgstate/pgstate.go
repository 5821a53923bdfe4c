// Package pgstate classifies PostgreSQL failures that mean "the database is
// not there now", for the two SQLSTATE tables (audit/postgres/errors.go and
// tenancy/sqlstate.go) to share one answer. Guarantee: an error Outage
// reports is one that clients may retry once the database is back, so the
// API answers 503 unavailable with Retry-After, never 500.
package pgstate

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// OutageCode reports whether SQLSTATE code means the database refuses or
// lost the connection:
//   - class 08, connection exception (a closed port, a broken connection);
//   - class 53, insufficient resources (too many connections, disk full);
//   - class 57, operator intervention (57P01 admin shutdown, which is also
//     what pg_terminate_backend sends; 57P02 crash shutdown; 57P03 cannot
//     connect now; 57014 a statement cancelled by timeout);
//   - 3D000 invalid_catalog_name: the database was dropped or renamed;
//   - 55000 object_not_in_prerequisite_state: the database does not accept
//     connections now (ALLOW_CONNECTIONS false);
//   - 25006 read_only_sql_transaction: a write reached a standby (a
//     failover in progress).
func OutageCode(code string) bool {
	switch code {
	case "3D000", "55000", "25006":
		return true
	}
	return strings.HasPrefix(code, "08") || strings.HasPrefix(code, "53") || strings.HasPrefix(code, "57")
}

// Outage reports whether err means the database is unreachable: a server
// error of an OutageCode; a failure to connect that carries no server error
// (refused, reset, DNS, TLS); a connection that broke or was closed under
// the query (a network error, an unexpected EOF, pgconn.ErrConnClosed); or
// an error pgconn says happened before the query was sent or timed out. A
// server error of any other SQLSTATE is the server's answer, not an outage.
func Outage(err error) bool {
	if err == nil {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return OutageCode(pe.Code)
	}
	var ce *pgconn.ConnectError
	var ne net.Error
	return errors.As(err, &ce) || errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err) || pgconn.Timeout(err)
}
