package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/migrations"
)

// Database credentials and pools: each role logs in with its own rights.
//
// The server logs in as the runtime role itself (--database-url): no SET
// ROLE, so no RESET ROLE can climb back to an administrator, and no session
// state. Behind a transaction pooler (PgBouncer pool_mode=transaction before
// 1.21, or without max_prepared_statements) --db-transaction-pooling makes
// the pools use no named prepared statements (pgx's cache_describe mode:
// unnamed statements, parsed with their execution in one round trip), so a
// statement prepared on one server connection is never looked up on
// another. The owner/administrator URL
// (--migrate-database-url) is used only for role setup and migrations, on
// a connection closed before serving starts.
//
// Two pools split --db-max-conns: --db-scan-conns connections for
// compliance scans, verification and exports, the rest for the request
// path (policy decisions, request.completed, incidents, tenancy, /readyz).
// A scan never takes a request-path connection, so however many scans run
// (or stall), requests wait only on each other.
type dbConfig struct {
	url, migrateURL     string
	ownerRole           string
	runtimeRole         string
	deployment          string
	runtimePasswordFile string
	maxConns, scanConns int
	txPooling           bool
}

func (d *dbConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&d.url, "database-url", os.Getenv("DATABASE_URL"), "PostgreSQL URL the server logs in with, as --db-runtime-role itself (env DATABASE_URL); never an administrator")
	fs.StringVar(&d.migrateURL, "migrate-database-url", "", "PostgreSQL URL of an administrator (superuser or database owner), used only for role setup and migrations at start; empty: neither (a migration job does them)")
	fs.StringVar(&d.ownerRole, "db-owner-role", migrations.DefaultRoles.Owner, "role owning the ledger tables (NOLOGIN)")
	fs.StringVar(&d.runtimeRole, "db-runtime-role", migrations.DefaultRoles.Runtime, "role --database-url logs in as: INSERT/SELECT only on the ledger; the server refuses any other login")
	fs.StringVar(&d.deployment, "db-deployment", "", "name role setup marks the owner and runtime roles with (COMMENT ON ROLE), refusing roles another deployment on the server marked; empty: the database's name. Deployments sharing roles on purpose give the same name")
	fs.StringVar(&d.runtimePasswordFile, "db-runtime-password-file", "", "file (mode 0600) holding the runtime role's password: role setup sets it, and the server logs in with it when --database-url has none")
	fs.BoolVar(&d.txPooling, "db-transaction-pooling", false, "--database-url is a transaction pooler (PgBouncer pool_mode=transaction): use no named prepared statements (the URL's default_query_exec_mode, when set, is kept)")
	fs.IntVar(&d.maxConns, "db-max-conns", 10, "PostgreSQL connections this process opens at most, both pools together")
	fs.IntVar(&d.scanConns, "db-scan-conns", 2, "of --db-max-conns, the connections reserved to compliance scans, verification and exports (the rest serve requests)")
}

func (d *dbConfig) check() error {
	if d.url == "" {
		return errors.New("no database: set --database-url or DATABASE_URL (make run starts one)")
	}
	if err := (migrations.Roles{Owner: d.ownerRole, Runtime: d.runtimeRole, Deployment: d.deployment}).Check(); err != nil {
		return err
	}
	if d.scanConns < 1 || d.maxConns-d.scanConns < 1 {
		return fmt.Errorf("--db-max-conns %d, --db-scan-conns %d: want at least one scan and one request connection", d.maxConns, d.scanConns)
	}
	return nil
}

// ErrRuntimeLogin: --database-url logs in as a role other than the runtime
// role, or as a superuser. The server refuses to run with more rights than
// the runtime role's.
var ErrRuntimeLogin = cloison.NewError(cloison.CodeInvalid, "--database-url must log in as the runtime role (not a superuser, no SET ROLE)")

// password reads --db-runtime-password-file ("" when unset).
//
// Errors: the file's read error; CodeInvalid when it is readable by group
// or others, or empty.
func (d *dbConfig) password() (string, error) {
	if d.runtimePasswordFile == "" {
		return "", nil
	}
	st, err := os.Stat(d.runtimePasswordFile)
	if err != nil {
		return "", fmt.Errorf("--db-runtime-password-file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", cloison.Errorf(cloison.CodeInvalid, "--db-runtime-password-file %s: mode %o, want 0600 or stricter", d.runtimePasswordFile, st.Mode().Perm())
	}
	b, err := os.ReadFile(d.runtimePasswordFile)
	if err != nil {
		return "", fmt.Errorf("--db-runtime-password-file: %w", err)
	}
	pw := strings.TrimRight(string(b), "\r\n")
	if pw == "" {
		return "", cloison.Errorf(cloison.CodeInvalid, "--db-runtime-password-file %s is empty", d.runtimePasswordFile)
	}
	return pw, nil
}

// setup creates the roles (the runtime role's password from the password
// file) and applies the migrations through --migrate-database-url; a no-op
// without it.
func (d *dbConfig) setup(ctx context.Context) ([]int64, error) {
	if d.migrateURL == "" {
		return nil, nil
	}
	pw, err := d.password()
	if err != nil {
		return nil, err
	}
	return migrations.Up(ctx, d.migrateURL, migrations.Roles{Owner: d.ownerRole, Runtime: d.runtimeRole, Deployment: d.deployment, RuntimePassword: pw})
}

// poolConfig parses --database-url; with --db-transaction-pooling, a URL
// that names no default_query_exec_mode gets cache_describe.
func (d *dbConfig) poolConfig() (*pgxpool.Config, error) {
	cfg, err := pgxpool.ParseConfig(d.url)
	if err != nil {
		return nil, errors.New("--database-url: not a PostgreSQL URL") // the URL may hold a password: not echoed
	}
	if d.txPooling && !strings.Contains(d.url, "default_query_exec_mode") {
		cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeCacheDescribe
	}
	return cfg, nil
}

// pools opens the request and scan pools on --database-url. Every
// connection is checked when made: its session_user must be the runtime
// role and not a superuser (ErrRuntimeLogin otherwise), so a mistaken
// administrator URL stops the server instead of serving with its rights.
func (d *dbConfig) pools(ctx context.Context, node string) (requests, scans *pgxpool.Pool, err error) {
	pw, err := d.password()
	if err != nil {
		return nil, nil, err
	}
	open := func(name string, conns int) (*pgxpool.Pool, error) {
		cfg, err := d.poolConfig()
		if err != nil {
			return nil, err
		}
		if cfg.ConnConfig.Password == "" {
			cfg.ConnConfig.Password = pw
		}
		if _, ok := cfg.ConnConfig.RuntimeParams["application_name"]; !ok {
			cfg.ConnConfig.RuntimeParams["application_name"] = "cloisond:" + node + ":" + name
		}
		// Sized from configuration, never from the machine's core count
		// (pgxpool's default): the database's connection budget is the
		// operator's to divide among nodes.
		cfg.MaxConns = int32(conns)
		cfg.MinConns = 0
		// A connection idle for more than 100 ms is pinged before use
		// (pgxpool's default is 1 s), so that after a database restart
		// the connections it cut are dropped before a request meets them.
		cfg.ShouldPing = func(_ context.Context, p pgxpool.ShouldPingParams) bool { return p.IdleDuration > 100*time.Millisecond }
		role := d.runtimeRole
		cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
			var who string
			var super bool
			if err := c.QueryRow(ctx, "SELECT session_user, rolsuper FROM pg_roles WHERE rolname = session_user").Scan(&who, &super); err != nil {
				return err
			}
			if who != role || super {
				return fmt.Errorf("%w: logged in as %q (superuser %v), want %q", ErrRuntimeLogin, who, super, role)
			}
			return nil
		}
		p, err := pgxpool.NewWithConfig(ctx, cfg)
		if err != nil {
			return nil, err
		}
		// Connect now: a wrong login fails the start, not the first request.
		if err := p.Ping(ctx); err != nil {
			p.Close()
			return nil, err
		}
		return p, nil
	}
	if requests, err = open("requests", d.maxConns-d.scanConns); err != nil {
		return nil, nil, err
	}
	if scans, err = open("scans", d.scanConns); err != nil {
		requests.Close()
		return nil, nil, err
	}
	return requests, scans, nil
}
