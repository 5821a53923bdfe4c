package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/migrations"
)

// templateRecipe names how a template is built from the migrations. The
// migrations themselves are hashed into the template's name; what is not
// (the steps of buildTemplate, migrations.Up's role setup) is covered by
// this string: change it when they change, so a template built the old
// way is never copied again.
const templateRecipe = "pgtest template 1"

// templatePrefix starts the name of every template database. The full name
// is templatePrefix, 16 hex digits of the recipe's hash and the version
// ("all" for every migration): at most 38 bytes, well under PostgreSQL's 63.
const templatePrefix = "cloison_tpl_"

var (
	migrationsHashOnce sync.Once
	migrationsHash     []byte
	migrationsHashErr  error
)

// hashMigrations hashes the embedded migrations (hashFS), once.
func hashMigrations() ([]byte, error) {
	migrationsHashOnce.Do(func() { migrationsHash, migrationsHashErr = hashFS(migrations.FS) })
	return migrationsHash, migrationsHashErr
}

// hashFS hashes every file at the top of fsys, name and contents, in name
// order: a changed, added or removed migration changes it.
func hashFS(fsys fs.FS) ([]byte, error) {
	h := sha256.New()
	entries, err := fs.ReadDir(fsys, ".") // sorted by name
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		b, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(h, "%s %d\n", e.Name(), len(b))
		h.Write(b)
	}
	return h.Sum(nil), nil
}

// templateName returns the name of the template database holding the
// migrations up to version (every one when negative) applied for Roles.
// salt is empty except in pgtest's own tests, which use it to build a
// template no other test has built yet.
func templateName(version int64, salt string) (string, error) {
	mh, err := hashMigrations()
	if err != nil {
		return "", fmt.Errorf("pgtest: hash migrations: %w", err)
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\nroles %s %s\nversion %d\nsalt %s\n", templateRecipe, Roles.Owner, Roles.Runtime, version, salt)
	h.Write(mh)
	v := "all"
	if version >= 0 {
		v = strconv.FormatInt(version, 10)
	}
	return templatePrefix + hex.EncodeToString(h.Sum(nil)[:8]) + "_" + v, nil
}

// readyTemplates holds "server name" for each template this process has
// seen ready, so later databases skip the look-up (a template is never
// changed once ready).
var readyTemplates sync.Map

// templateLockKey names the advisory lock (hashtextextended(key||name, 0),
// taken in the server URL's database) held while a template is built.
const templateLockKey = "cloison.pgtest.template:"

// ensureTemplate returns the name of a ready template database holding the
// migrations up to version, building it first if no process has.
//
// Test binaries run in parallel processes against one server, and a
// template outlives the run that built it. So: a template exists under its
// final name only once it is complete — it is built under name+"_build",
// marked IS_TEMPLATE and ALLOW_CONNECTIONS false (nobody can change it, and
// CREATE DATABASE ... TEMPLATE never finds a session in it) and only then
// renamed. Builders hold an advisory lock keyed by the name for the whole
// build, so one process builds while the others wait and then find it; a
// "_build" database met under that lock was left by a builder that died,
// and is dropped.
//
// built reports whether this call built the template (for pgtest's own
// tests).
func ensureTemplate(ctx context.Context, server string, version int64, salt string) (name string, built bool, err error) {
	name, err = templateName(version, salt)
	if err != nil {
		return "", false, err
	}
	if _, ok := readyTemplates.Load(server + " " + name); ok {
		return name, false, nil
	}
	defer func() {
		if err == nil {
			readyTemplates.Store(server+" "+name, true)
		}
	}()
	conn, err := pgx.Connect(ctx, server)
	if err != nil {
		return "", false, fmt.Errorf("pgtest: %w", err)
	}
	defer conn.Close(context.Background())
	ready := func() (bool, error) {
		var ok bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1 AND datistemplate)", name).Scan(&ok); err != nil {
			return false, fmt.Errorf("pgtest: %w", err)
		}
		return ok, nil
	}
	if ok, err := ready(); err != nil {
		return "", false, err
	} else if ok {
		return name, false, nil
	}
	// The lock is the session's: a builder that dies releases it with its
	// connection.
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtextextended($1, 0))", templateLockKey+name); err != nil {
		return "", false, fmt.Errorf("pgtest: template lock: %w", err)
	}
	defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(hashtextextended($1, 0))", templateLockKey+name)
	if ok, err := ready(); err != nil {
		return "", false, err
	} else if ok {
		return name, false, nil
	}
	if err := buildTemplate(ctx, conn, server, name, version); err != nil {
		return "", false, err
	}
	return name, true, nil
}

// buildTemplate migrates a new database name+"_build" and renames it to
// name once it is a read-only template. The caller holds the template lock.
func buildTemplate(ctx context.Context, conn *pgx.Conn, server, name string, version int64) error {
	build := name + "_build"
	id := pgx.Identifier{build}.Sanitize()
	if _, err := conn.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("pgtest: drop a half-built template: %w", err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return fmt.Errorf("pgtest: create template: %w", err)
	}
	fail := func(err error) error {
		_, _ = conn.Exec(context.Background(), "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)")
		return err
	}
	if err := migrate(ctx, withDatabase(server, build), version); err != nil {
		return fail(err)
	}
	// migrations.Up has closed its sessions; a backend still exiting is
	// waited for by ALTER DATABASE itself (it waits a few seconds for other
	// sessions to leave before it refuses).
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return fail(fmt.Errorf("pgtest: mark template: %w", err))
	}
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" RENAME TO "+pgx.Identifier{name}.Sanitize()); err != nil {
		return fail(fmt.Errorf("pgtest: rename template: %w", err))
	}
	return nil
}

// migrate applies the migrations up to version (every one when negative)
// to the database adminURL names.
func migrate(ctx context.Context, adminURL string, version int64) error {
	if version < 0 {
		_, err := migrations.Up(ctx, adminURL, Roles)
		return err
	}
	_, err := migrations.UpTo(ctx, adminURL, Roles, version)
	return err
}

// dropTemplate drops the template database name (pgtest's own tests drop
// the templates they build).
func dropTemplate(ctx context.Context, conn *pgx.Conn, name string) error {
	id := pgx.Identifier{name}.Sanitize()
	if _, err := conn.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE false"); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, "DROP DATABASE "+id+" WITH (FORCE)")
	return err
}
