package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/tenancy"
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
	// (--db-deployment "": the database's name, not the test suite's.)
	roles := []string{"--db-owner-role", owner, "--db-runtime-role", runtime, "--db-deployment", ""}
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

// Two deployments on one PostgreSQL server, each with its database, both
// naming the same roles (as two left at the defaults would): the second's
// start is refused before it touches the roles, so the first keeps its
// runtime password and serves; the second then starts with roles of its
// own, and the first still holds its password and serves.
func TestE2ETwoDeploymentsOneServer(t *testing.T) {
	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin := adminPool(t, server)
	pid := os.Getpid()
	dbA, dbB := fmt.Sprintf("cloison_t_dep_a_%d", pid), fmt.Sprintf("cloison_t_dep_b_%d", pid)
	shared := []string{fmt.Sprintf("cloison_t_dep_owner_%d", pid), fmt.Sprintf("cloison_t_dep_runtime_%d", pid)}
	own := []string{fmt.Sprintf("cloison_t_dep_b_owner_%d", pid), fmt.Sprintf("cloison_t_dep_b_runtime_%d", pid)}
	// Registered first, so run after the nodes stopped: the databases,
	// then the roles their objects and grants depended on.
	t.Cleanup(func() {
		for _, db := range []string{dbA, dbB} {
			if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{db}.Sanitize()+" WITH (FORCE)"); err != nil {
				t.Errorf("drop %s: %v", db, err)
			}
		}
		for _, r := range append(append([]string{}, shared...), own...) {
			if _, err := admin.Exec(ctx, "DROP ROLE IF EXISTS "+pgx.Identifier{r}.Sanitize()); err != nil {
				t.Errorf("drop role %s: %v", r, err)
			}
		}
	})
	password := func(name string) string {
		f := filepath.Join(t.TempDir(), "runtime.password")
		if err := os.WriteFile(f, []byte(name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	flags := func(roles []string, pw string) []string {
		// --db-deployment "": the database's name, as a deployment left
		// at its defaults (pgtestRoles would share the test suite's).
		return []string{"--db-owner-role", roles[0], "--db-runtime-role", roles[1], "--db-deployment", "", "--db-runtime-password-file", pw, "--create-database"}
	}
	runtimePassword := func() string {
		var pw string
		if err := admin.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = $1", shared[1]).Scan(&pw); err != nil {
			t.Fatal(err)
		}
		return pw
	}
	urlA, urlB := pgtest.WithDatabase(server, dbA), pgtest.WithDatabase(server, dbB)
	a := startNode(t, urlA, flags(shared, password("secret-of-a")))
	createTenant(t, urlA, "acme", nil)
	tok := a.token("acme", time.Hour, tenancy.ScopeInfer)
	serves := func(when string) {
		t.Helper()
		if r := a.do("POST", "/v1/completions", tok, completion("abc", 2, false)); r.status != 200 {
			t.Fatalf("deployment a %s: %d %s", when, r.status, r.body)
		}
	}
	serves("alone")
	pwA := runtimePassword()

	logs := startNodeExpectExit(t, urlB, t.TempDir(), append(flags(shared, password("secret-of-b")), "--database-url", pgtest.AsRole(urlB, shared[1]))...)
	if !strings.Contains(logs, "belongs to another deployment") || !strings.Contains(logs, "database:"+dbA) {
		t.Fatalf("deployment b on a's roles: got\n%s\nwant a refusal naming a's database", logs)
	}
	if runtimePassword() != pwA {
		t.Fatal("deployment b's refused start changed a's runtime password")
	}
	serves("after b was refused")

	b := startNode(t, urlB, flags(own, password("secret-of-b")))
	if r := b.do("GET", "/readyz", "", nil); r.status != 200 {
		t.Fatalf("deployment b with its own roles: readyz %d %s", r.status, r.body)
	}
	if runtimePassword() != pwA {
		t.Fatal("deployment b's start changed a's runtime password")
	}
	serves("beside b")
}
