// Package migrations holds Cloison's numbered SQL migrations, embedded in
// the binary, and applies them with pressly/goose v3.
//
// Up creates (if missing) the two roles the schema needs — roles are global
// to a PostgreSQL cluster, so their names are configurable and creation is
// idempotent and race-safe — grants them what they need on the current
// database, then runs the migrations as the owner role (SET ROLE) so every
// object belongs to it, with the runtime role's name in the session setting
// cloison.runtime_role for the GRANT statements.
//
// Concurrent starts: Up holds a session-level advisory lock on the database
// (SetupLockKey) for the whole of role setup and migration, so N nodes or
// migration jobs started at once on an empty or a migrated database run one
// after the other: the first applies the migrations, the others find nothing
// pending. The lock is the session's, so a migrator that dies releases it
// with its connection. Goose's own Postgres session locker also guards the
// migrations (its default lock id), so a goose CLI run beside a node waits
// too.
//
// Up needs an administrator's URL; servers never hold it. The runtime role
// is a LOGIN role (its password set from Roles.RuntimePassword) that servers
// log in as directly; EnsureRoles refuses a runtime role holding SUPERUSER,
// CREATEROLE, REPLICATION or BYPASSRLS.
//
// # Roles
//
// Migrations are applied at cloisond start through --migrate-database-url and
// by cloisonctl migrate. The owner role (cloison_owner, NOLOGIN) owns the
// ledger and register tables; the runtime role (cloison_runtime, LOGIN,
// password from --db-runtime-password-file / cloisonctl migrate
// --runtime-password-file), which cloisond logs in as, may INSERT and SELECT
// (and EXECUTE the append function), never UPDATE, DELETE or TRUNCATE them.
// make run generates that password once into
// .cache/cloison/db-runtime.password (mode 0600).
//
// Roles belong to one deployment. Role names are global to the server, so
// two deployments (two databases) left at the default names would share
// them: each start would set the runtime role's password to its own (the
// other's servers then failing to log in) and grant the roles the other's
// database. EnsureRoles therefore marks both roles as its deployment's
// (COMMENT ON ROLE, RoleMarker: the database's name, or Roles.Deployment)
// and refuses, before changing anything, a role marked as another's
// (ErrRolesOwned); the second deployment names roles of its own.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"

	"github.com/cloison/cloison"
)

//go:embed *.sql
var FS embed.FS

// ErrInvalidRoles: a role name that is not a plain lowercase identifier, or
// the same name for both roles.
var ErrInvalidRoles = cloison.NewError(cloison.CodeInvalid, "migrations: invalid role names")

// Roles names the two database roles.
type Roles struct {
	// Owner owns the ledger and register tables (NOLOGIN). Only it, and
	// superusers, could alter them; the triggers still refuse edits.
	Owner string
	// Runtime is the role servers log in as (LOGIN, never a superuser):
	// INSERT and SELECT on ledger and register tables, EXECUTE on
	// audit_head/audit_append, never UPDATE, DELETE or TRUNCATE. Servers
	// connect as this role itself, never as an administrator that SET
	// ROLEs to it (RESET ROLE would escape).
	Runtime string
	// Deployment names the deployment the roles belong to; EnsureRoles
	// marks both roles with it (COMMENT ON ROLE, RoleMarker) and refuses
	// roles another deployment marked, before it changes anything on
	// them. Empty: the database's own name (a deployment is its
	// database). Deployments that share roles on purpose (test databases
	// of one suite) give the same name.
	Deployment string
	// RuntimePassword, when set, becomes the runtime role's password
	// (set on every EnsureRoles, so rotating the secret and rerunning
	// role setup rotates the password). Empty: the password is left as
	// it is (certificate, peer or trust authentication).
	RuntimePassword string
}

// DefaultRoles are the names used when none are configured.
var DefaultRoles = Roles{Owner: "cloison_owner", Runtime: "cloison_runtime"}

var (
	roleName       = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)
	deploymentName = regexp.MustCompile(`^[a-z0-9_][a-z0-9_.-]{0,62}$`)
)

func (r Roles) check() error {
	if !roleName.MatchString(r.Owner) || !roleName.MatchString(r.Runtime) || r.Owner == r.Runtime {
		return fmt.Errorf("%w: owner %q, runtime %q", ErrInvalidRoles, r.Owner, r.Runtime)
	}
	if r.Deployment != "" && !deploymentName.MatchString(r.Deployment) {
		return fmt.Errorf("%w: deployment %q (want lowercase letters, digits, _ . -)", ErrInvalidRoles, r.Deployment)
	}
	return nil
}

// Check returns ErrInvalidRoles for role names Up would refuse.
func (r Roles) Check() error { return r.check() }

// Up connects to adminURL (a role allowed to create roles and objects in
// the database, typically the cluster's superuser or the database owner),
// ensures the roles and grants, and applies every pending migration. It
// returns the versions applied.
func Up(ctx context.Context, adminURL string, roles Roles) ([]int64, error) {
	return upTo(ctx, adminURL, roles, -1)
}

// UpTo is Up applying the pending migrations up to version only: what a
// test of a later migration uses to build a database as an older release
// left it (data included) before migrating it forward.
func UpTo(ctx context.Context, adminURL string, roles Roles, version int64) ([]int64, error) {
	if version < 0 {
		return nil, fmt.Errorf("migrations: version %d", version)
	}
	return upTo(ctx, adminURL, roles, version)
}

// upTo applies the pending migrations up to version (every one when
// version is negative).
func upTo(ctx context.Context, adminURL string, roles Roles, version int64) ([]int64, error) {
	if err := roles.check(); err != nil {
		return nil, err
	}
	unlock, err := setupLock(ctx, adminURL)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := EnsureRoles(ctx, adminURL, roles); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(adminURL)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	db := stdlib.OpenDB(*cfg, stdlib.OptionAfterConnect(func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, fmt.Sprintf("SET ROLE %s; SELECT set_config('cloison.runtime_role', '%s', false)",
			pgx.Identifier{roles.Owner}.Sanitize(), roles.Runtime))
		return err
	}))
	defer db.Close()
	db.SetMaxOpenConns(1) // SQL migrations only: goose runs them on its locked connection
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 600))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS, goose.WithSessionLocker(locker))
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	var res []*goose.MigrationResult
	if version < 0 {
		res, err = p.Up(ctx)
	} else {
		res, err = p.UpTo(ctx, version)
	}
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	versions := make([]int64, 0, len(res))
	for _, r := range res {
		versions = append(versions, r.Source.Version)
	}
	return versions, nil
}

// SetupLockKey names the advisory lock Up holds (the key is
// hashtextextended(SetupLockKey, 0), in the database being migrated).
const SetupLockKey = "cloison.migrations"

// setupLock waits (as long as ctx allows) for the database's setup lock on
// a connection of its own, and returns the function that releases it.
func setupLock(ctx context.Context, adminURL string) (func(), error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return nil, fmt.Errorf("migrations: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", SetupLockKey); err != nil {
		_ = conn.Close(context.Background())
		return nil, fmt.Errorf("migrations: setup lock: %w", err)
	}
	return func() {
		// Closing the session releases the lock even if the unlock fails.
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = conn.Exec(cctx, "SELECT pg_advisory_unlock(hashtextextended($1, 0))", SetupLockKey)
		_ = conn.Close(cctx)
	}, nil
}

// Status returns the latest applied version (0: none).
func Status(ctx context.Context, db *sql.DB) (int64, error) {
	p, err := goose.NewProvider(goose.DialectPostgres, db, FS)
	if err != nil {
		return 0, err
	}
	return p.GetDBVersion(ctx)
}

// EnsureRoles creates the roles if missing (tolerating a concurrent creator),
// makes the runtime role a LOGIN role (with roles.RuntimePassword as its
// password when set) and grants them what they need on the database
// adminURL names.
//
// Errors: ErrInvalidRoles for bad names or a runtime role holding
// SUPERUSER, CREATEROLE, REPLICATION or BYPASSRLS; connection and SQL
// errors wrapped with "migrations:" (never carrying the password).
func EnsureRoles(ctx context.Context, adminURL string, roles Roles) error {
	if err := roles.check(); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return fmt.Errorf("migrations: connect: %w", err)
	}
	defer conn.Close(ctx)
	var dbname string
	var adminSuper bool
	if err := conn.QueryRow(ctx, "SELECT current_database(), rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&dbname, &adminSuper); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	// Both roles are checked before either is touched: a role another
	// deployment marked is refused before anything (its password above
	// all) changes.
	mark := RoleMarker(roles.Deployment, dbname)
	both := []struct{ name, attrs string }{{roles.Owner, "NOLOGIN"}, {roles.Runtime, "LOGIN"}}
	for _, r := range both {
		if _, err := roleClaim(ctx, conn, r.name, mark); err != nil {
			return err
		}
	}
	for _, r := range both {
		if err := claimRole(ctx, conn, r.name, r.attrs, mark); err != nil {
			return err
		}
	}
	owner, runtime := pgx.Identifier{roles.Owner}.Sanitize(), pgx.Identifier{roles.Runtime}.Sanitize()
	// The server logs in as the runtime role: it must be able to log in
	// and hold no attribute that bypasses the grants below. A runtime role
	// with such rights is refused, never altered (it may be someone's
	// administrator).
	var login, super, createRole, repl, bypass bool
	if err := conn.QueryRow(ctx, "SELECT rolcanlogin, rolsuper, rolcreaterole, rolreplication, rolbypassrls FROM pg_roles WHERE rolname = $1",
		roles.Runtime).Scan(&login, &super, &createRole, &repl, &bypass); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if super || createRole || repl || bypass {
		return fmt.Errorf("%w: runtime role %q has SUPERUSER, CREATEROLE, REPLICATION or BYPASSRLS", ErrInvalidRoles, roles.Runtime)
	}
	var alter string
	if !login || roles.RuntimePassword != "" {
		alter = "ALTER ROLE " + runtime + " LOGIN"
	}
	if roles.RuntimePassword != "" {
		// Built by the server (format %L) so PostgreSQL quotes the
		// password itself: utility statements take no parameters.
		if err := conn.QueryRow(ctx, "SELECT $1::text || format(' PASSWORD %L', $2::text)", alter, roles.RuntimePassword).Scan(&alter); err != nil {
			return fmt.Errorf("migrations: %w", err)
		}
	}
	var stmts []string
	if alter != "" {
		stmts = append(stmts, alter)
	}
	stmts = append(stmts,
		fmt.Sprintf("GRANT CONNECT ON DATABASE %s TO %s, %s", pgx.Identifier{dbname}.Sanitize(), owner, runtime),
		fmt.Sprintf("GRANT USAGE, CREATE ON SCHEMA public TO %s", owner),
		fmt.Sprintf("GRANT USAGE ON SCHEMA public TO %s", runtime),
	)
	if !adminSuper {
		// A non-superuser administrator must be a member of the owner to
		// SET ROLE to it.
		stmts = append(stmts, fmt.Sprintf("GRANT %s TO CURRENT_USER", owner))
	}
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			var pe *pgconn.PgError
			// Concurrent GRANTs on the same shared catalog row can
			// collide ("tuple concurrently updated"); retry once.
			if errors.As(err, &pe) && pe.Code == "XX000" {
				_, err = conn.Exec(ctx, s)
			}
			if err != nil {
				if s == alter {
					s = "ALTER ROLE " + runtime // never the password in an error
				}
				return fmt.Errorf("migrations: %s: %w", s, err)
			}
		}
	}
	return nil
}

// ErrRolesOwned: a role EnsureRoles would set up is marked as another
// deployment's (or carries a comment that is not a Cloison marker), so it
// is left untouched.
var ErrRolesOwned = cloison.NewError(cloison.CodeConflict, "migrations: the database role belongs to another deployment")

// markerPrefix starts every role marker (RoleMarker).
const markerPrefix = "cloison deployment "

// RoleMarker is the comment (COMMENT ON ROLE) EnsureRoles puts on both
// roles of a deployment: "cloison deployment NAME" for Roles.Deployment
// NAME, "cloison deployment database:DB" when it is empty (DB the
// database's name).
//
// Roles are global to a PostgreSQL server while a deployment is one of
// its databases: without the marker, two deployments naming the same roles
// (the defaults) would each set the runtime role's password at every start
// (the other's servers then failing to log in) and grant each other's
// servers their database. With it, role setup claims a role that has no
// comment (a role created before markers existed, or by an administrator
// ahead of the first start), reclaims one whose marker names a database
// that no longer exists on the server, and refuses every other role that
// is not marked as its own (ErrRolesOwned), before changing anything.
func RoleMarker(deployment, database string) string {
	if deployment == "" {
		return markerPrefix + "database:" + database
	}
	return markerPrefix + deployment
}

// roleClaim reads role's marker: exists reports whether the role exists;
// err is ErrRolesOwned when it exists and is neither marked mark, nor
// unmarked, nor marked for a database the server no longer holds.
func roleClaim(ctx context.Context, conn *pgx.Conn, role, mark string) (exists bool, err error) {
	var comment *string
	err = conn.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1", role).Scan(&comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("migrations: %w", err)
	}
	if comment == nil || *comment == "" || *comment == mark {
		return true, nil
	}
	if db, ok := strings.CutPrefix(*comment, markerPrefix+"database:"); ok {
		var live bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", db).Scan(&live); err != nil {
			return false, fmt.Errorf("migrations: %w", err)
		}
		if !live {
			return true, nil // its database is gone: an orphan
		}
	}
	if !strings.HasPrefix(*comment, markerPrefix) {
		return true, fmt.Errorf("%w: role %q carries the comment %q, which is not a Cloison deployment marker: "+
			"give this deployment roles of its own (cloisond --db-owner-role and --db-runtime-role), or, if the role is this deployment's, drop the comment (COMMENT ON ROLE %s IS NULL)",
			ErrRolesOwned, role, *comment, pgx.Identifier{role}.Sanitize())
	}
	return true, fmt.Errorf("%w: role %q is marked %q, this deployment is %q: "+
		"two deployments on one PostgreSQL server need roles of their own (cloisond --db-owner-role and --db-runtime-role, cloisonctl migrate --owner-role and --runtime-role), "+
		"or the same --db-deployment to share them on purpose",
		ErrRolesOwned, role, strings.TrimPrefix(*comment, markerPrefix), strings.TrimPrefix(mark, markerPrefix))
}

// claimRole creates role (with attrs) marked mark, or marks an existing
// unmarked or orphaned one, each in one transaction. A concurrent claimer
// makes the second writer fail (a unique violation on the role or on its
// comment, or "tuple concurrently updated"): the claim is then read again,
// so of two deployments claiming one role at once only one gets it.
func claimRole(ctx context.Context, conn *pgx.Conn, role, attrs, mark string) error {
	var comment string
	if err := conn.QueryRow(ctx, "SELECT format('COMMENT ON ROLE %I IS %L', $1::text, $2::text)", role, mark).Scan(&comment); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	for attempt := 0; ; attempt++ {
		exists, err := roleClaim(ctx, conn, role, mark)
		if err != nil {
			return err
		}
		var stmts []string
		if !exists {
			stmts = append(stmts, fmt.Sprintf("CREATE ROLE %s %s", pgx.Identifier{role}.Sanitize(), attrs))
		} else {
			var current *string
			if err := conn.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1", role).Scan(&current); err != nil {
				return fmt.Errorf("migrations: %w", err)
			}
			if current != nil && *current == mark {
				return nil
			}
		}
		stmts = append(stmts, comment)
		err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			for _, s := range stmts {
				if _, err := tx.Exec(ctx, s); err != nil {
					return err
				}
			}
			return nil
		})
		if err == nil {
			return nil
		}
		var pe *pgconn.PgError
		// Another process created or marked it between our read and our
		// write: duplicate_object, unique_violation (pg_authid or
		// pg_shdescription), or "tuple concurrently updated".
		if attempt < 3 && errors.As(err, &pe) && (pe.Code == "42710" || pe.Code == "23505" || pe.Code == "XX000") {
			continue
		}
		return fmt.Errorf("migrations: claim role %s: %w", role, err)
	}
}
