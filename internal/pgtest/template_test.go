package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// schemaSQL lists, one line each, what a migrated database holds: relations
// with their owners, grants and row counts, columns and defaults,
// constraints, indexes, functions (owner, grants, body), triggers, row
// policies, schemas, default privileges, extensions, goose's record of the
// applied versions and the database-level grants. Names of the database
// itself never appear, so two databases compare line by line.
const schemaSQL = `
SELECT 'relation ' || c.relname || ' kind=' || c.relkind::text || ' owner=' || c.relowner::regrole
       || ' acl=' || coalesce(c.relacl::text, '') || ' rls=' || c.relrowsecurity
       || CASE WHEN c.relkind IN ('r', 'p') THEN ' rows=' ||
            (xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %I', c.relname), false, true, '')))[1]::text
          ELSE '' END
FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace
UNION ALL
SELECT 'column ' || c.relname || '.' || a.attname || ' ' || format_type(a.atttypid, a.atttypmod)
       || ' notnull=' || a.attnotnull || ' default=' || coalesce(pg_get_expr(d.adbin, d.adrelid), '')
       || ' acl=' || coalesce(a.attacl::text, '')
FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE c.relnamespace = 'public'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint ' || conrelid::regclass::text || ' ' || conname || ' ' || pg_get_constraintdef(oid)
FROM pg_constraint WHERE connamespace = 'public'::regnamespace
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE c.relnamespace = 'public'::regnamespace
UNION ALL
SELECT 'function ' || p.oid::regprocedure::text || ' owner=' || p.proowner::regrole || ' acl=' || coalesce(p.proacl::text, '')
       || ' definer=' || p.prosecdef || ' config=' || coalesce(p.proconfig::text, '') || ' body=' || md5(p.prosrc)
FROM pg_proc p WHERE p.pronamespace = 'public'::regnamespace
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid) || ' enabled=' || t.tgenabled::text
FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
WHERE c.relnamespace = 'public'::regnamespace AND NOT t.tgisinternal
UNION ALL
SELECT 'policy ' || polrelid::regclass::text || ' ' || polname || ' ' || coalesce(pg_get_expr(polqual, polrelid), '')
FROM pg_policy
UNION ALL
SELECT 'schema ' || nspname || ' owner=' || nspowner::regrole || ' acl=' || coalesce(nspacl::text, '')
FROM pg_namespace WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'
UNION ALL
SELECT 'default_acl ' || defaclrole::regrole || ' ' || defaclobjtype::text || ' ' || defaclacl::text FROM pg_default_acl
UNION ALL
SELECT 'extension ' || extname || ' ' || extversion FROM pg_extension
UNION ALL
SELECT 'goose ' || version_id || ' applied=' || is_applied FROM goose_db_version
UNION ALL
SELECT 'database_acl ' || coalesce(string_agg(
         CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END || ':' || a.privilege_type, ','
         ORDER BY CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE a.grantee::regrole::text END, a.privilege_type), '')
FROM pg_database d LEFT JOIN LATERAL aclexplode(d.datacl) a ON true WHERE d.datname = current_database()
ORDER BY 1`

func schemaOf(t *testing.T, db *DB) []string {
	t.Helper()
	ctx := context.Background()
	p, err := pgxpool.New(ctx, db.AdminURL)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	rows, err := p.Query(ctx, schemaSQL)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// fresh is a database migrated from empty, as every test's was before
// templates: the reference a copy must equal.
func fresh(t *testing.T, version int64) *DB {
	t.Helper()
	server, err := ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	db, drop, err := createFrom(ctx, server, "fresh", version, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	})
	return db
}

// diff returns the lines only in a (prefixed "-") and only in b ("+").
func diff(a, b []string) []string {
	var out []string
	for _, l := range a {
		if !slices.Contains(b, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range b {
		if !slices.Contains(a, l) {
			out = append(out, "+ "+l)
		}
	}
	return out
}

// A database copied from the template holds what a freshly migrated one
// holds — objects, owners, grants (database-level ones included), goose's
// versions — for every migration (New) and for an older version (NewAt).
func TestTemplateCopyEqualsFreshMigration(t *testing.T) {
	all := schemaOf(t, fresh(t, -1))
	if d := diff(all, schemaOf(t, New(t))); len(d) > 0 {
		t.Errorf("New differs from a fresh migration:\n%s", strings.Join(d, "\n"))
	}
	const older = 22
	at := schemaOf(t, fresh(t, older))
	if d := diff(at, schemaOf(t, NewAt(t, older))); len(d) > 0 {
		t.Errorf("NewAt(%d) differs from a fresh migration:\n%s", older, strings.Join(d, "\n"))
	}
	// The comparison sees what migrations do: the two versions differ, so
	// a template of the wrong version would not pass.
	if len(diff(all, at)) == 0 {
		t.Errorf("schemas of version %d and of every migration compare equal: the comparison sees nothing", older)
	}
	for _, want := range []string{"database_acl PUBLIC:CONNECT", Roles.Runtime + ":CONNECT", "goose 25 applied=true"} {
		if !slices.ContainsFunc(all, func(l string) bool { return strings.Contains(l, want) }) {
			t.Errorf("no line holds %q: the catalog query misses it", want)
		}
	}
}

func newSalt(t *testing.T) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return t.Name() + hex.EncodeToString(b[:])
}

// dropTemplateAfter drops template name (and a leftover "_build") when the
// test ends.
func dropTemplateAfter(t *testing.T, server, name string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, server)
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name + "_build"}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Error(err)
		}
		if err := dropTemplate(ctx, c, name); err != nil {
			t.Error(err)
		}
	})
}

// Sessions racing for a template that does not exist yet (as test binaries
// of packages run in parallel do, each its own session) build it once
// between them, all get the same ready template, and copy it at the same
// time.
func TestTemplateConcurrentCreation(t *testing.T) {
	server, err := ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	salt := newSalt(t)
	const version = 3 // few migrations: the race, not the migrating, is tested
	want, err := templateName(version, salt)
	if err != nil {
		t.Fatal(err)
	}
	dropTemplateAfter(t, server, want)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 6
	var builds atomic.Int32
	var wg sync.WaitGroup
	dbs := make([]*DB, n)
	for i := range n {
		wg.Go(func() {
			name, built, err := ensureTemplate(ctx, server, version, salt)
			if err != nil {
				t.Error(err)
				return
			}
			if built {
				builds.Add(1)
			}
			if name != want {
				t.Errorf("got template %q, want %q", name, want)
			}
			db, drop, err := createFrom(ctx, server, "concurrent", version, name)
			if err != nil {
				t.Error(err)
				return
			}
			t.Cleanup(func() {
				if err := drop(); err != nil {
					t.Error(err)
				}
			})
			dbs[i] = db
		})
	}
	wg.Wait()
	if got := builds.Load(); got != 1 {
		t.Errorf("template built %d times, want once", got)
	}
	if t.Failed() {
		return
	}
	ref := schemaOf(t, fresh(t, version))
	for _, db := range dbs {
		if d := diff(ref, schemaOf(t, db)); len(d) > 0 {
			t.Errorf("%s differs from a fresh migration:\n%s", db.Name, strings.Join(d, "\n"))
		}
	}
	// The template is read-only: nobody can connect to it and change what
	// later copies get.
	c, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var isTemplate, allowConn bool
	if err := c.QueryRow(ctx, "SELECT datistemplate, datallowconn FROM pg_database WHERE datname = $1", want).Scan(&isTemplate, &allowConn); err != nil {
		t.Fatal(err)
	}
	if !isTemplate || allowConn {
		t.Errorf("template: datistemplate %v datallowconn %v, want true, false", isTemplate, allowConn)
	}
}

// A builder that died mid-build leaves name_build behind, never a database
// under the template's name: the next caller does not copy it, but drops
// it and builds the template whole.
func TestTemplateHalfBuiltNeverUsed(t *testing.T) {
	server, err := ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	salt := newSalt(t)
	const version = 3
	name, err := templateName(version, salt)
	if err != nil {
		t.Fatal(err)
	}
	dropTemplateAfter(t, server, name)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	// The dead builder's database: created, migrated to version 1 only.
	build := name + "_build"
	if _, err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{build}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if err := migrate(ctx, withDatabase(server, build), 1); err != nil {
		t.Fatal(err)
	}
	got, built, err := ensureTemplate(ctx, server, version, salt)
	if err != nil {
		t.Fatal(err)
	}
	if got != name || !built {
		t.Fatalf("got %q built %v, want %q built", got, built, name)
	}
	var left bool
	if err := c.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", build).Scan(&left); err != nil || left {
		t.Errorf("half-built database still there (%v)", err)
	}
	db, drop, err := createFrom(ctx, server, "halfbuilt", version, got)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := drop(); err != nil {
			t.Error(err)
		}
	}()
	if d := diff(schemaOf(t, fresh(t, version)), schemaOf(t, db)); len(d) > 0 {
		t.Errorf("copy differs from a fresh migration:\n%s", strings.Join(d, "\n"))
	}
}

// A changed migration set, role pair or version gets a template of its own.
func TestTemplateNameKeyed(t *testing.T) {
	base := fstest.MapFS{"00001_a.sql": {Data: []byte("CREATE TABLE a ();")}, "00002_b.sql": {Data: []byte("CREATE TABLE b ();")}}
	h0, err := hashFS(base)
	if err != nil {
		t.Fatal(err)
	}
	for what, fsys := range map[string]fstest.MapFS{
		"changed": {"00001_a.sql": base["00001_a.sql"], "00002_b.sql": {Data: []byte("CREATE TABLE b (x int);")}},
		"added":   {"00001_a.sql": base["00001_a.sql"], "00002_b.sql": base["00002_b.sql"], "00003_c.sql": {Data: nil}},
		"removed": {"00001_a.sql": base["00001_a.sql"]},
		"renamed": {"00001_a.sql": base["00001_a.sql"], "00003_b.sql": base["00002_b.sql"]},
	} {
		if h, err := hashFS(fsys); err != nil || string(h) == string(h0) {
			t.Errorf("%s migration: hash unchanged (%v)", what, err)
		}
	}
	a, _ := templateName(-1, "")
	b, _ := templateName(22, "")
	c, _ := templateName(-1, "x")
	if a == b || a == c || !strings.HasPrefix(a, templatePrefix) || !strings.HasSuffix(a, "_all") || !strings.HasSuffix(b, "_22") {
		t.Errorf("names %q %q %q", a, b, c)
	}
	if len(a+"_build") > 63 {
		t.Errorf("%q is longer than PostgreSQL's 63-byte names", a+"_build")
	}
}
