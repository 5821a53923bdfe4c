package tenancy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/internal/pgtest"
)

// A real PostgreSQL that refuses, in each way internal/pgstate names, makes
// the store answer ErrUnavailable (503), never ErrStore (500): its public
// message is the sentinel's alone, and the driver's text stays in the
// error for the log.
func TestStoreOutages(t *testing.T) {
	ctx := context.Background()
	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(ctx) })
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := admin.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	terminate := func(name string) {
		exec("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", name)
	}
	tests := []struct {
		name  string
		state string // the SQLSTATE in the logged text; "" for a refused TCP connection
		// down takes the database away and returns the pool to query.
		down func(t *testing.T, db *pgtest.DB) *pgxpool.Pool
	}{
		{"backend terminated (57P01)", "57P01", func(t *testing.T, db *pgtest.DB) *pgxpool.Pool {
			cfg, err := db.RuntimeConfig()
			if err != nil {
				t.Fatal(err)
			}
			// No ping before reuse: the query meets the terminated backend.
			cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
			cfg.MaxConns = 1
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pool.Close)
			if err := pool.Ping(ctx); err != nil {
				t.Fatal(err)
			}
			terminate(db.Name)
			return pool
		}},
		{"allow_connections false (55000)", "55000", func(t *testing.T, db *pgtest.DB) *pgxpool.Pool {
			exec("ALTER DATABASE " + pgx.Identifier{db.Name}.Sanitize() + " ALLOW_CONNECTIONS false")
			t.Cleanup(func() { exec("ALTER DATABASE " + pgx.Identifier{db.Name}.Sanitize() + " ALLOW_CONNECTIONS true") })
			return db.RuntimePool(t)
		}},
		{"database renamed (3D000)", "3D000", func(t *testing.T, db *pgtest.DB) *pgxpool.Pool {
			// PostgreSQL truncates names at 63 bytes: shorten before the suffix.
			gone := pgx.Identifier{db.Name[:min(len(db.Name), 40)] + "_gone"}.Sanitize()
			terminate(db.Name)
			exec("ALTER DATABASE " + pgx.Identifier{db.Name}.Sanitize() + " RENAME TO " + gone)
			t.Cleanup(func() { exec("ALTER DATABASE " + gone + " RENAME TO " + pgx.Identifier{db.Name}.Sanitize()) })
			return db.RuntimePool(t)
		}},
		{"too many connections (53300)", "53300", func(t *testing.T, db *pgtest.DB) *pgxpool.Pool {
			// A database that takes no more connections of a non-superuser:
			// the runtime role's next connection is refused with 53300.
			exec("ALTER DATABASE " + pgx.Identifier{db.Name}.Sanitize() + " CONNECTION LIMIT 0")
			t.Cleanup(func() { exec("ALTER DATABASE " + pgx.Identifier{db.Name}.Sanitize() + " CONNECTION LIMIT -1") })
			return db.RuntimePool(t)
		}},
		{"closed port (08)", "", func(t *testing.T, _ *pgtest.DB) *pgxpool.Pool {
			return downStore(t).pool
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := pgtest.New(t)
			s := NewStore(tt.down(t, db))
			_, err := s.Tenant(ctx, "acme")
			if !errors.Is(err, ErrUnavailable) || cloison.ErrorCode(err) != cloison.CodeUnavailable {
				t.Fatalf("got %v (code %s), want %v", err, cloison.ErrorCode(err), ErrUnavailable)
			}
			if got := cloison.PublicMessage(err); got != ErrUnavailable.Message {
				t.Errorf("got public message %q, want %q", got, ErrUnavailable.Message)
			}
			if !strings.Contains(err.Error(), tt.state) {
				t.Errorf("got %q, want the cause (%s) kept for the log", err, tt.state)
			}
		})
	}
}
