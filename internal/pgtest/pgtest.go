// Package pgtest gives tests a real PostgreSQL: it finds or starts a server
// exactly as scripts/pg.sh does, and creates a fresh, migrated database per
// test package (Main) or per test (New, NewAt), dropped afterwards.
//
// Finding a server: $DATABASE_URL if set; else 127.0.0.1:5432 as user
// postgres (trust) if it answers; else scripts/pg.sh, which starts a private
// cluster under ./.cache/pg (installing postgresql with apt-get when no
// server binaries exist). When none works the test FAILS — with CI set or
// not; a missing database is never a skip.
//
// Each database is a copy (CREATE DATABASE ... TEMPLATE) of a template
// database migrated once per server, migration set and version: PostgreSQL
// copies its files, which takes a fraction of the time migrating takes. A
// template is named cloison_tpl_<hash>_<version>, the hash covering every
// migration file, the role names and the way templates are built, so a
// changed migration gets a template of its own; the old ones stay on the
// server until dropped (ALTER DATABASE t IS_TEMPLATE false; DROP DATABASE
// t, while no test runs). A template becomes visible under its name only
// complete and read-only (ALLOW_CONNECTIONS false), and test binaries
// running in parallel build it once between them, under an advisory lock.
// The copy gets the template's objects, owners and grants; the
// database-level grants, which PostgreSQL does not copy, are made again.
//
// Runtime pools (DB.RuntimeURL, RuntimePool) log in as the runtime role
// itself, as cloisond does: privilege checks are exactly the role's, and
// RESET ROLE cannot reach the administrator.
//
// # scripts/pg.sh
//
// scripts/pg.sh prints an admin URL the same way: $DATABASE_URL if set; else
// 127.0.0.1:5432 user postgres (trust) if it answers; else a private cluster
// under ./.cache/pg (port 55432, initdb/pg_ctl run as user postgres when
// root); else it runs apt-get install -y postgresql first. make test, make
// bench and make run use it. Tests use the roles cloison_test_owner /
// cloison_test_runtime (DB.RuntimeURL logs in as the runtime one).
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison/migrations"
)

// Roles are the role names tests use. Roles are global to a cluster; their
// creation is idempotent and race-safe, so test databases of packages
// running in parallel share them without colliding: they are one
// deployment's (Deployment), so role setup on each test database finds
// them marked as its own.
var Roles = migrations.Roles{Owner: "cloison_test_owner", Runtime: "cloison_test_runtime", Deployment: "cloison_tests"}

var (
	serverOnce sync.Once
	serverURL  string
	serverErr  error
)

// ServerURL returns the admin URL of a running server, finding or starting
// one on first use.
func ServerURL() (string, error) {
	serverOnce.Do(func() { serverURL, serverErr = findServer() })
	return serverURL, serverErr
}

func findServer() (string, error) {
	if u := os.Getenv("DATABASE_URL"); u != "" {
		if err := ping(u); err != nil {
			return "", fmt.Errorf("pgtest: DATABASE_URL does not answer: %w", err)
		}
		return u, nil
	}
	const local = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	if ping(local) == nil {
		return local, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "pg.sh"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("pgtest: scripts/pg.sh found no PostgreSQL: %w", err)
	}
	u := strings.TrimSpace(string(out))
	if err := ping(u); err != nil {
		return "", fmt.Errorf("pgtest: scripts/pg.sh printed %q, which does not answer: %w", u, err)
	}
	return u, nil
}

func ping(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.Ping(ctx)
}

// RepoRoot returns the directory holding go.mod, searching up from the
// working directory.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("pgtest: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// DB is one fresh, migrated database.
type DB struct {
	Name     string
	AdminURL string // superuser (or the server's admin) connected to this database
	// RuntimeURL logs in as the runtime role itself (no SET ROLE): what a
	// server's --database-url is.
	RuntimeURL string
	Roles      migrations.Roles
}

// Create makes a fresh database named after prefix, applies the migrations
// and returns it with a function that drops it.
func Create(ctx context.Context, prefix string) (*DB, func() error, error) {
	return create(ctx, prefix, -1)
}

// create is Create applying the migrations up to version only (every one
// when version is negative): a copy of the template database for version
// (built by the first caller on this server, see ensureTemplate).
func create(ctx context.Context, prefix string, version int64) (*DB, func() error, error) {
	server, err := ServerURL()
	if err != nil {
		return nil, nil, err
	}
	tpl, _, err := ensureTemplate(ctx, server, version, "")
	if err != nil {
		return nil, nil, err
	}
	return createFrom(ctx, server, prefix, version, tpl)
}

// createFrom makes a database named after prefix: a copy of the template
// database tpl, or, when tpl is empty, an empty database migrated up to
// version (every migration when negative).
func createFrom(ctx context.Context, server, prefix string, version int64, tpl string) (*DB, func() error, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	name := sanitize(prefix)
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("cloison_t_%s_%d_%s", name, os.Getpid(), hex.EncodeToString(rnd[:]))
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return nil, nil, fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(ctx)
	stmt := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if tpl != "" {
		stmt += " TEMPLATE " + pgx.Identifier{tpl}.Sanitize()
	}
	if _, err := conn.Exec(ctx, stmt); err != nil {
		return nil, nil, fmt.Errorf("pgtest: create database: %w", err)
	}
	drop := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, server)
		if err != nil {
			return err
		}
		defer c.Close(ctx)
		_, err = c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
		return err
	}
	admin := withDatabase(server, name)
	db := &DB{Name: name, AdminURL: admin, RuntimeURL: AsRole(admin, Roles.Runtime), Roles: Roles}
	setup := func() error { return migrate(ctx, db.AdminURL, version) }
	if tpl != "" {
		// The copy holds the template's schema, its objects' owners and
		// grants, and its schema privileges; database-level grants
		// (CONNECT) are not copied, so role setup runs again on the copy,
		// as migrations.Up would have run it here.
		setup = func() error { return migrations.EnsureRoles(ctx, db.AdminURL, Roles) }
	}
	if err := setup(); err != nil {
		_ = drop()
		return nil, nil, err
	}
	return db, drop, nil
}

// NewAt is New with the migrations applied up to version only: a database
// as an older release left it, for a test that fills it and then migrates
// it forward (migrations.Up on AdminURL).
func NewAt(tb testing.TB, version int64) *DB {
	tb.Helper()
	if version < 0 {
		tb.Fatalf("pgtest: NewAt: version %d", version)
	}
	return newDB(tb, version)
}

// New returns a fresh database for one test, dropped when the test ends.
func New(tb testing.TB) *DB {
	tb.Helper()
	return newDB(tb, -1)
}

// newDB is New and NewAt: the migrations up to version (every one when
// negative).
func newDB(tb testing.TB, version int64) *DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, drop, err := create(ctx, tb.Name(), version)
	if err != nil {
		tb.Fatalf("pgtest: no database (a missing PostgreSQL fails the run, it is never skipped): %v", err)
	}
	tb.Cleanup(func() {
		if err := drop(); err != nil {
			tb.Errorf("pgtest: drop %s: %v", db.Name, err)
		}
	})
	return db
}

// Main runs a test package against its own fresh database: call it from
// TestMain as os.Exit(pgtest.Main(m, &db)). *db is set before the tests run
// and the database is dropped after. Without a server it prints why and
// returns 1: the run fails.
func Main(m *testing.M, db **DB) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	d, drop, err := Create(ctx, pkgName())
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: no database (a missing PostgreSQL fails the run, it is never skipped; CI=%q): %v\n", os.Getenv("CI"), err)
		return 1
	}
	*db = d
	code := m.Run()
	if err := drop(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: drop %s: %v\n", d.Name, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

func pkgName() string {
	wd, _ := os.Getwd()
	return filepath.Base(wd)
}

func sanitize(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// WithDatabase returns url pointing at database name.
func WithDatabase(url, name string) string { return withDatabase(url, name) }

func withDatabase(url, name string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return url
	}
	return rebuild(cfg, cfg.User, cfg.Password, name)
}

// AsRole returns url logging in as role (no password: the test servers
// trust local connections) on the same server and database.
func AsRole(url, role string) string {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return url
	}
	return rebuild(cfg, role, "", cfg.Database)
}

// rebuild writes cfg back as a URL (pgx accepts URL and keyword/value
// forms; tests pass URLs on command lines).
func rebuild(cfg *pgx.ConnConfig, user, password, name string) string {
	u := (&neturl.URL{Scheme: "postgres", Host: fmt.Sprintf("%s:%d", cfg.Host, cfg.Port), Path: "/" + name})
	if password != "" {
		u.User = neturl.UserPassword(user, password)
	} else {
		u.User = neturl.User(user)
	}
	ssl := "disable"
	if cfg.TLSConfig != nil {
		ssl = "require"
	}
	u.RawQuery = "sslmode=" + ssl
	return u.String()
}

// AdminPool opens a pool on the database as the admin (superuser).
func (d *DB) AdminPool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	p, err := pgxpool.New(context.Background(), d.AdminURL)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}

// RuntimeConfig returns a pool config that logs in as the runtime role
// (RuntimeURL), so privilege checks are exactly the runtime role's and
// RESET ROLE leaves them so.
func (d *DB) RuntimeConfig() (*pgxpool.Config, error) {
	return pgxpool.ParseConfig(d.RuntimeURL)
}

// RuntimePool opens a pool on the database as the runtime role.
func (d *DB) RuntimePool(tb testing.TB) *pgxpool.Pool {
	tb.Helper()
	cfg, err := d.RuntimeConfig()
	if err != nil {
		tb.Fatal(err)
	}
	p, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(p.Close)
	return p
}
