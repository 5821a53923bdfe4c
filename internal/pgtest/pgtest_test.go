package pgtest

import (
	"context"
	"os"
	"testing"
)

var pkgDB *DB

func TestMain(m *testing.M) { os.Exit(Main(m, &pkgDB)) }

func TestFreshMigratedDatabase(t *testing.T) {
	ctx := context.Background()
	for _, db := range []*DB{pkgDB, New(t)} {
		p := db.AdminPool(t)
		var n int
		if err := p.QueryRow(ctx, "SELECT count(*) FROM audit_events").Scan(&n); err != nil || n != 0 {
			t.Errorf("%s: got %d, %v; want an empty migrated ledger", db.Name, n, err)
		}
		var owner string
		if err := p.QueryRow(ctx, "SELECT tableowner FROM pg_tables WHERE tablename = 'audit_events'").Scan(&owner); err != nil || owner != Roles.Owner {
			t.Errorf("got owner %q (%v), want %q", owner, err, Roles.Owner)
		}
	}
	if pkgDB.Name == "" || pkgDB.AdminURL == "" {
		t.Error("package database not set")
	}
}

// Parallel creation of databases (and so of the shared roles) must not
// collide.
func TestParallelDatabases(t *testing.T) {
	for i := 0; i < 4; i++ {
		t.Run("db", func(t *testing.T) {
			t.Parallel()
			db := New(t)
			rt := db.RuntimePool(t)
			var who string
			if err := rt.QueryRow(context.Background(), "SELECT current_user").Scan(&who); err != nil || who != Roles.Runtime {
				t.Errorf("got %q %v, want %q", who, err, Roles.Runtime)
			}
		})
	}
}
