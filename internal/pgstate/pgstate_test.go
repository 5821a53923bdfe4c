package pgstate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

// The SQLSTATEs of a database that refuses or lost the
// connection are outages (503), every other server answer is not (a
// constraint, a syntax error, a privilege stays what it is).
func TestOutageCode(t *testing.T) {
	for _, tt := range []struct {
		code string
		want bool
	}{
		{"08000", true}, {"08006", true}, {"08001", true}, // connection exception
		{"53000", true}, {"53100", true}, {"53300", true}, // insufficient resources: too many connections
		{"57P01", true}, {"57P02", true}, {"57P03", true}, {"57014", true}, // operator intervention
		{"3D000", true}, {"55000", true}, {"25006", true},
		{"23505", false}, {"42601", false}, {"42501", false}, {"40001", false}, {"22P02", false}, {"55P03", false}, {"3D001", false}, {"", false},
	} {
		if got := OutageCode(tt.code); got != tt.want {
			t.Errorf("OutageCode(%q): got %v, want %v", tt.code, got, tt.want)
		}
		err := fmt.Errorf("query: %w", &pgconn.PgError{Code: tt.code})
		if tt.code != "" {
			if got := Outage(err); got != tt.want {
				t.Errorf("Outage(PgError %q): got %v, want %v", tt.code, got, tt.want)
			}
		}
	}
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"closed connection", pgconn.ErrConnClosed, true},
		{"unexpected EOF", fmt.Errorf("read: %w", io.ErrUnexpectedEOF), true},
		{"network error", &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"plain error", errors.New("no rows"), false},
		{"cancelled by the caller", context.Canceled, false},
	} {
		if got := Outage(tt.err); got != tt.want {
			t.Errorf("Outage(%s): got %v, want %v", tt.name, got, tt.want)
		}
	}
}
