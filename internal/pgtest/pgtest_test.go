package pgtest

import (
	"context"
	"os"
	"os/exec"
	"strings"
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
			// The runtime pool logs in as the role (session_user), so
			// RESET ROLE cannot climb to the administrator.
			var who, session string
			ctx := context.Background()
			c, err := rt.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Release()
			if _, err := c.Exec(ctx, "RESET ROLE"); err != nil {
				t.Fatal(err)
			}
			if err := c.QueryRow(ctx, "SELECT current_user, session_user").Scan(&who, &session); err != nil {
				t.Fatal(err)
			}
			if who != Roles.Runtime || session != Roles.Runtime {
				t.Errorf("got current_user %q session_user %q, want %q", who, session, Roles.Runtime)
			}
		})
	}
}

// scripts/pg.sh's third step: a private cluster from /usr/lib/postgresql,
// initialised and started here (as user postgres when run as root).
func TestScriptStartsPrivateCluster(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	env := append(os.Environ(), "CLOISON_PG_PRIVATE=1", "CLOISON_PG_DIR="+dir, "CLOISON_PG_PORT=55439")
	script := root + "/scripts/pg.sh"
	cmd := exec.Command(script)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pg.sh: %v", err)
	}
	t.Cleanup(func() {
		stop := exec.Command(script, "stop")
		stop.Env = env
		if out, err := stop.CombinedOutput(); err != nil {
			t.Errorf("pg.sh stop: %v\n%s", err, out)
		}
	})
	url := strings.TrimSpace(string(out))
	if url != "postgres://postgres@127.0.0.1:55439/postgres?sslmode=disable" {
		t.Fatalf("got %q", url)
	}
	if err := ping(url); err != nil {
		t.Fatal(err)
	}
	// A second call finds the running cluster instead of starting another.
	again := exec.Command(script)
	again.Env = env
	if out2, err := again.Output(); err != nil || strings.TrimSpace(string(out2)) != url {
		t.Errorf("second call: got %q, %v", out2, err)
	}
}
