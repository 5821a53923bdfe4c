package migrations_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/migrations"
)

// server is a real PostgreSQL's admin connection and a source of empty
// databases and role names of this test only (all dropped at its end).
type server struct {
	t     *testing.T
	url   string
	admin *pgx.Conn
	roles []string // dropped at the end, after the databases
}

var names atomic.Int64

func newServer(t *testing.T) *server {
	t.Helper()
	url, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, url: url, admin: admin}
	// Registered first, so run last: after the databases that hold the
	// roles' grants are dropped.
	t.Cleanup(func() {
		defer admin.Close(context.Background())
		for _, r := range s.roles {
			s.exec("DROP ROLE IF EXISTS " + pgx.Identifier{r}.Sanitize())
		}
	})
	return s
}

func (s *server) exec(sql string, args ...any) {
	s.t.Helper()
	if _, err := s.admin.Exec(context.Background(), sql, args...); err != nil {
		s.t.Fatalf("%s: %v", sql, err)
	}
}

// name returns a name unique to this run.
func (s *server) name(kind string) string {
	return fmt.Sprintf("cloison_t_roles_%d_%s%d", os.Getpid(), kind, names.Add(1))
}

// database creates an empty database and returns its admin URL.
func (s *server) database() (name, url string) {
	s.t.Helper()
	name = s.name("db")
	s.exec("CREATE DATABASE " + pgx.Identifier{name}.Sanitize())
	s.t.Cleanup(func() { s.exec("DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)") })
	return name, pgtest.WithDatabase(s.url, name)
}

// newRoles returns two role names, dropped when the test ends.
func (s *server) newRoles() migrations.Roles {
	r := migrations.Roles{Owner: s.name("owner"), Runtime: s.name("runtime")}
	s.roles = append(s.roles, r.Owner, r.Runtime)
	return r
}

// state is a role's password hash and marker.
func (s *server) state(role string) (password, comment string) {
	s.t.Helper()
	var pw, c *string
	if err := s.admin.QueryRow(context.Background(), "SELECT rolpassword, shobj_description(oid, 'pg_authid') FROM pg_authid WHERE rolname = $1", role).Scan(&pw, &c); err != nil {
		s.t.Fatalf("role %s: %v", role, err)
	}
	if pw != nil {
		password = *pw
	}
	if c != nil {
		comment = *c
	}
	return password, comment
}

func withPassword(r migrations.Roles, deployment, pw string) migrations.Roles {
	r.Deployment, r.RuntimePassword = deployment, pw
	return r
}

// Two deployments (two databases) on one server naming the same roles: the
// first marks them its own; the second is refused with ErrRolesOwned before
// it changes anything — the first's runtime password is the one it set —
// and a restart of the first (rotating its password) still works.
func TestEnsureRolesTwoDeploymentsOneServer(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	roles := s.newRoles()
	dbA, urlA := s.database()
	_, urlB := s.database()

	if err := migrations.EnsureRoles(ctx, urlA, withPassword(roles, "", "password-of-a")); err != nil {
		t.Fatal(err)
	}
	pwA, mark := s.state(roles.Runtime)
	if _, ownerMark := s.state(roles.Owner); mark != migrations.RoleMarker("", dbA) || ownerMark != mark {
		t.Fatalf("markers: runtime %q owner %q, want %q", mark, ownerMark, migrations.RoleMarker("", dbA))
	}
	err := migrations.EnsureRoles(ctx, urlB, withPassword(roles, "", "password-of-b"))
	if !errors.Is(err, migrations.ErrRolesOwned) {
		t.Fatalf("second deployment on the same roles: got %v, want ErrRolesOwned", err)
	}
	t.Logf("refusal: %v", err)
	if pw, c := s.state(roles.Runtime); pw != pwA || c != mark {
		t.Fatalf("after the refused setup the runtime role changed: password changed %v, marker %q", pw != pwA, c)
	}
	// The first deployment's own restart rotates its password.
	if err := migrations.EnsureRoles(ctx, urlA, withPassword(roles, "", "password-of-a-2")); err != nil {
		t.Fatalf("first deployment's restart: %v", err)
	}
	if pw, _ := s.state(roles.Runtime); pw == pwA {
		t.Fatal("the first deployment's rotation did not set its password")
	}
	// The second deployment with roles of its own works, and leaves the
	// first's alone.
	pwA, _ = s.state(roles.Runtime)
	if err := migrations.EnsureRoles(ctx, urlB, withPassword(s.newRoles(), "", "password-of-b")); err != nil {
		t.Fatal(err)
	}
	if pw, c := s.state(roles.Runtime); pw != pwA || c != mark {
		t.Fatal("the second deployment's own roles changed the first's runtime role")
	}
}

// What role setup does with a role that exists before it, by its comment:
// none (created before markers, or by an administrator) is claimed; a
// marker of a database the server no longer holds is reclaimed; another
// live deployment's marker and a comment that is no Cloison marker are
// refused and left as they were; a shared Deployment name lets two
// databases use the same roles on purpose.
func TestEnsureRolesMarkers(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		comment    func(otherDB string) string // "" for none
		deployment string
		refused    bool
	}{
		{"unmarked", func(string) string { return "" }, "", false},
		{"orphan", func(string) string { return migrations.RoleMarker("", "cloison_t_roles_gone") }, "", false},
		{"live other database", func(db string) string { return migrations.RoleMarker("", db) }, "", true},
		{"other named deployment", func(string) string { return migrations.RoleMarker("prod", "") }, "", true},
		{"not a marker", func(string) string { return "the DBA's reporting role" }, "", true},
		{"shared deployment name", func(string) string { return migrations.RoleMarker("suite", "") }, "suite", false},
		{"named deployment meets a database marker", func(db string) string { return migrations.RoleMarker("", db) }, "suite", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newServer(t)
			roles := s.newRoles()
			other, _ := s.database()
			db, url := s.database()
			for _, r := range []string{roles.Owner, roles.Runtime} {
				s.exec("CREATE ROLE " + pgx.Identifier{r}.Sanitize() + " LOGIN PASSWORD 'before'")
				if c := tc.comment(other); c != "" {
					var stmt string
					if err := s.admin.QueryRow(ctx, "SELECT format('COMMENT ON ROLE %I IS %L', $1::text, $2::text)", r, c).Scan(&stmt); err != nil {
						t.Fatal(err)
					}
					s.exec(stmt)
				}
			}
			pw0, c0 := s.state(roles.Runtime)
			err := migrations.EnsureRoles(ctx, url, withPassword(roles, tc.deployment, "after"))
			pw, c := s.state(roles.Runtime)
			if tc.refused {
				if !errors.Is(err, migrations.ErrRolesOwned) {
					t.Fatalf("got %v, want ErrRolesOwned", err)
				}
				if pw != pw0 || c != c0 {
					t.Fatalf("refused, yet the role changed: password changed %v, comment %q → %q", pw != pw0, c0, c)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if want := migrations.RoleMarker(tc.deployment, db); pw == pw0 || c != want {
				t.Fatalf("claimed: password changed %v, comment %q, want %q", pw != pw0, c, want)
			}
		})
	}
}

// Two deployments setting up the same fresh roles at once: exactly one gets
// them, the other is refused (never both, which would leave the loser's
// password on the winner's role).
func TestEnsureRolesConcurrentClaims(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	for round := range 3 {
		roles := s.newRoles()
		urls := make([]string, 3)
		for i := range urls {
			_, urls[i] = s.database()
		}
		errs := make([]error, len(urls))
		var wg sync.WaitGroup
		for i, u := range urls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = migrations.EnsureRoles(ctx, u, withPassword(roles, "", fmt.Sprintf("pw-%d", i)))
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, migrations.ErrRolesOwned):
				t.Fatalf("round %d: %v", round, err)
			}
		}
		if ok != 1 {
			t.Fatalf("round %d: %d deployments got the roles (%v), want exactly 1", round, ok, errs)
		}
	}
}
