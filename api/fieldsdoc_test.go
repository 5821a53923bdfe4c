package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const (
	readmePath  = "../docs/api.md"
	fieldsBegin = "<!-- api-fields:begin (generated from api/fields.go by make config-doc) -->\n"
	fieldsEnd   = "<!-- api-fields:end -->"
)

// docs/api.md lists every OpenAI request field as implemented, ignored or
// refused, and that list is FieldTableMarkdown of the tables the server
// checks: a field added to a table without docs/api.md, or a table the page
// does not list, fails here. UPDATE_API_FIELDS=1 (make config-doc) rewrites
// the page's table. (The name is older than the page: the table was once in
// the README.)
func TestREADMEFieldTable(t *testing.T) {
	registered := map[string]bool{}
	for _, ft := range fieldTables {
		registered[ft.name] = true
	}
	declared := fieldTableVars(t)
	for name := range declared {
		if !registered[name] {
			t.Errorf("field table %s is not in fieldTables (docs/api.md's API field table)", name)
		}
	}
	for name := range registered {
		if !declared[name] {
			t.Errorf("fieldTables names %s, which is not a field table of this package", name)
		}
	}
	raw, err := os.ReadFile(readmePath)
	if err != nil {
		t.Fatal(err)
	}
	readme := string(raw)
	i, j := strings.Index(readme, fieldsBegin), strings.Index(readme, fieldsEnd)
	if i < 0 || j < i {
		t.Fatalf("docs/api.md lacks the %q … %q markers", fieldsBegin, fieldsEnd)
	}
	want := FieldTableMarkdown()
	if got := readme[i+len(fieldsBegin) : j]; got != want {
		if os.Getenv("UPDATE_API_FIELDS") != "" {
			if err := os.WriteFile(readmePath, []byte(readme[:i+len(fieldsBegin)]+want+readme[j:]), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		t.Fatalf("docs/api.md's API field table is stale (run make config-doc):\n got:\n%s\nwant:\n%s", got, want)
	}
}

// fieldTableVars finds, by parsing this package's sources, every
// package-level variable whose name ends in "Fields" and whose value is a
// map[string]field literal or withCommon(...) (commonFields aside: it is
// merged into both endpoints' tables).
func fieldTableVars(t *testing.T) map[string]bool {
	t.Helper()
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, spec := range g.Specs {
				vs := spec.(*ast.ValueSpec)
				for k, n := range vs.Names {
					if strings.HasSuffix(n.Name, "Fields") && n.Name != "commonFields" && k < len(vs.Values) && isFieldTable(vs.Values[k]) {
						out[n.Name] = true
					}
				}
			}
		}
	}
	return out
}

func isFieldTable(e ast.Expr) bool {
	switch v := e.(type) {
	case *ast.CompositeLit:
		m, ok := v.Type.(*ast.MapType)
		if !ok {
			return false
		}
		id, ok := m.Value.(*ast.Ident)
		return ok && id.Name == "field"
	case *ast.CallExpr:
		id, ok := v.Fun.(*ast.Ident)
		return ok && id.Name == "withCommon"
	}
	return false
}
