package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/internal/pgtest"
)

// cloisond logs in as the runtime role itself. Before the
// fix it connected as the superuser of --database-url and only SET ROLE'd
// to the runtime role, so any statement that ran RESET ROLE had the
// superuser's rights. Now session_user of every server connection is the
// runtime role (a LOGIN role with its own password, set by role setup from
// --db-runtime-password-file), RESET ROLE leaves it there, and an
// administrator's URL as --database-url stops the server.
func TestE2ERuntimeLogin(t *testing.T) {
	// A database of its own, created and migrated by cloisond itself, with
	// roles of this test only (it sets the runtime role's password).
	const owner, runtime = "cloison_test_login_owner", "cloison_test_login_runtime"
	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("cloison_t_login_%d", os.Getpid())
	db := struct{ AdminURL string }{pgtest.WithDatabase(server, name)}
	t.Cleanup(func() {
		if _, err := adminPool(t, server).Exec(context.Background(), "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("drop %s: %v", name, err)
		}
	})
	roles := []string{"--db-owner-role", owner, "--db-runtime-role", runtime}
	secret := filepath.Join(t.TempDir(), "runtime.password")
	if err := os.WriteFile(secret, []byte("not-the-superuser's\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, db.AdminURL, roles, "--db-runtime-password-file", secret, "--create-database")
	if r := n.do("GET", "/readyz", "", nil); r.status != 200 {
		t.Fatalf("readyz: got %d %s, want 200", r.status, r.body)
	}
	ctx := context.Background()
	admin := adminPool(t, db.AdminURL)

	// Every connection the server holds logs in as the runtime role.
	rows, err := admin.Query(ctx, `SELECT usename, application_name FROM pg_stat_activity
		WHERE datname = current_database() AND application_name LIKE 'cloisond:%'`)
	if err != nil {
		t.Fatal(err)
	}
	users, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var user, app string
		err := r.Scan(&user, &app)
		return user + " (" + app + ")", err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(users) == 0 {
		t.Fatal("got no server connections in pg_stat_activity, want the runtime role's")
	}
	for _, u := range users {
		if !strings.HasPrefix(u, runtime+" ") {
			t.Errorf("server connection: got session user %s, want %s", u, runtime)
		}
	}

	// The runtime role has its own credentials.
	var hasPassword, login, super bool
	if err := admin.QueryRow(ctx, "SELECT rolpassword IS NOT NULL, rolcanlogin, rolsuper FROM pg_authid WHERE rolname = $1", runtime).
		Scan(&hasPassword, &login, &super); err != nil {
		t.Fatal(err)
	}
	if !hasPassword || !login || super {
		t.Errorf("runtime role: got password %v login %v superuser %v, want true true false", hasPassword, login, super)
	}

	// RESET ROLE on a runtime login leaves it the runtime role.
	conn, err := pgx.Connect(ctx, pgtest.AsRole(db.AdminURL, runtime))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var session, current string
	if _, err := conn.Exec(ctx, "RESET ROLE"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, "SELECT session_user, current_user").Scan(&session, &current); err != nil {
		t.Fatal(err)
	}
	if session != runtime || current != runtime {
		t.Errorf("after RESET ROLE: got session_user %q current_user %q, want %q", session, current, runtime)
	}

	// An administrator's URL as --database-url: the server refuses to start.
	out := startNodeExpectExit(t, db.AdminURL, t.TempDir(), append(roles, "--database-url", db.AdminURL)...)
	if !strings.Contains(out, "must log in as the runtime role") {
		t.Errorf("cloisond with the superuser's URL: got\n%s\nwant a refusal naming the runtime role", out)
	}
}
