package postgres

import (
	"context"
	"flag"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cloison/cloison/internal/pgtest"
)

var rewriteSchema = flag.Bool("rewrite-schema", false, "rewrite the function definitions of schema.sql from a migrated database (comments kept)")

// schemaFunctionsSQL lists the functions the migrations leave in the
// schema (none of an extension's), with PostgreSQL's own rendering of each
// definition.
const schemaFunctionsSQL = `SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc p
	JOIN pg_namespace n ON n.oid = p.pronamespace
	WHERE n.nspname = 'public' AND p.prokind IN ('f', 'p')
	  AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass AND d.objid = p.oid AND d.deptype = 'e')
	ORDER BY p.proname`

// schemaFunction finds each definition in schema.sql: pg_get_functiondef's
// text, which starts with this line, followed by a line holding only ";".
var schemaFunction = regexp.MustCompile(`(?m)^CREATE OR REPLACE (?:FUNCTION|PROCEDURE) public\.([a-z_0-9]+)\(`)

// schemaDefs splits schema.sql into its function definitions by name, and
// the text around them (comments) in order: text[i] precedes the i-th
// definition, text[len(names)] follows the last.
func schemaDefs(src string) (names []string, defs map[string]string, text []string, err error) {
	defs = map[string]string{}
	rest := src
	for {
		m := schemaFunction.FindStringSubmatchIndex(rest)
		if m == nil {
			text = append(text, rest)
			return names, defs, text, nil
		}
		name := rest[m[2]:m[3]]
		end := strings.Index(rest[m[0]:], "\n;\n")
		next := schemaFunction.FindStringIndex(rest[m[1]:])
		if end < 0 || (next != nil && m[1]+next[0] < m[0]+end) {
			return nil, nil, nil, fmt.Errorf("schema.sql: the definition of %s does not end with a line holding only ;", name)
		}
		if _, dup := defs[name]; dup {
			return nil, nil, nil, fmt.Errorf("schema.sql: %s is defined twice", name)
		}
		text = append(text, rest[:m[0]])
		names = append(names, name)
		defs[name] = rest[m[0] : m[0]+end+1]
		rest = rest[m[0]+end+len("\n;\n"):]
	}
}

// schema.sql is the current definition of every SQL function of the
// ledger, kept once: migrations redefine functions whole (audit_sequence
// three times), so the migration files show history, not the schema in
// force. This holds schema.sql to a freshly migrated database, function by
// function (PostgreSQL's own rendering, pg_get_functiondef), in both
// directions: a migration that changes a function without schema.sql, or
// an edit of schema.sql that no migration made, fails here. Run it with
// -rewrite-schema after writing a migration to bring the definitions up to
// date (the comments between them are kept; a new function is added at
// the end).
func TestSchemaSQLIsTheMigratedSchema(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t).AdminPool(t) // fresh: no other test's tampering

	rows, err := pool.Query(ctx, schemaFunctionsSQL)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	var order []string
	for rows.Next() {
		var name, def string
		if err := rows.Scan(&name, &def); err != nil {
			t.Fatal(err)
		}
		if _, dup := got[name]; dup {
			t.Fatalf("function %s is overloaded: schema.sql keys functions by name", name)
		}
		got[name], order = def, append(order, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 {
		t.Fatal("the migrated database has no function")
	}
	src, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	names, defs, text, err := schemaDefs(string(src))
	if err != nil {
		t.Fatal(err)
	}
	if *rewriteSchema {
		var b strings.Builder
		for i, name := range names {
			b.WriteString(text[i])
			if def, ok := got[name]; ok {
				b.WriteString(def + ";\n")
			}
		}
		for _, name := range order {
			if _, ok := defs[name]; !ok {
				b.WriteString("\n-- " + name + ": added by a migration; say what it is for.\n" + got[name] + ";\n")
			}
		}
		b.WriteString(text[len(names)])
		if err := os.WriteFile("schema.sql", []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, name := range order {
		def, ok := defs[name]
		switch {
		case !ok:
			t.Errorf("function %s is in the migrated database, not in schema.sql; add it (go test -run TestSchemaSQL -rewrite-schema):\n%s", name, got[name])
		case def != got[name]:
			t.Errorf("function %s: schema.sql differs from the migrated database (go test -run TestSchemaSQL -rewrite-schema); the database has:\n%s", name, got[name])
		}
	}
	for _, name := range names {
		if _, ok := got[name]; !ok {
			t.Errorf("function %s is in schema.sql, not in the migrated database", name)
		}
	}
}

// schemaDefs finds every definition of schema.sql whole, so the
// comparison above sees any edit of one: a changed body is another
// definition, a definition cut short is refused.
func TestSchemaDefsSplitsSchemaSQL(t *testing.T) {
	src, err := os.ReadFile("schema.sql")
	if err != nil {
		t.Fatal(err)
	}
	names, defs, text, err := schemaDefs(string(src))
	if err != nil {
		t.Fatal(err)
	}
	if len(names) == 0 || len(text) != len(names)+1 {
		t.Fatalf("got %d definitions and %d texts around them", len(names), len(text))
	}
	var back strings.Builder
	for i, name := range names {
		back.WriteString(text[i] + defs[name] + ";\n")
	}
	back.WriteString(text[len(names)])
	if back.String() != string(src) {
		t.Fatal("the definitions and the text around them do not make schema.sql again")
	}
	edited := strings.Replace(string(src), "pg_advisory_xact_lock(-3458794010727121273)", "pg_advisory_xact_lock(1)", 1)
	_, editedDefs, _, err := schemaDefs(edited)
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for _, name := range names {
		if editedDefs[name] != defs[name] {
			changed++
		}
	}
	if changed != 1 {
		t.Errorf("one edited lock id: got %d definitions changed, want 1", changed)
	}
	if _, _, _, err := schemaDefs(strings.Replace(string(src), "$function$\n;\n", "$function$\n", 1)); err == nil {
		t.Error("a definition without its terminating ; line: got nil, want an error")
	}
}
