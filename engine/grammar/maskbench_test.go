package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// TestMaskBenchSlices runs MaskBench's methodology (compile the schema,
// accept every valid instance, refuse every invalid one) over the small
// hand-written cases of testdata/maskbench, in its file format: the shapes
// of real-world schemas (annotations, vendor keywords, undeclared
// properties, zod's integer bounds, nested definitions) without the data
// set itself. A case with "refused" must be refused naming that text. The
// reference validator checks each case's labels, so a label cannot be
// wrong in the grammar's favour.
func TestMaskBenchSlices(t *testing.T) {
	files, err := filepath.Glob("testdata/maskbench/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var tc struct {
				Refused string          `json:"refused"`
				Schema  json.RawMessage `json:"schema"`
				Tests   []struct {
					Valid bool            `json:"valid"`
					Data  json.RawMessage `json:"data"`
				} `json:"tests"`
			}
			if err := json.Unmarshal(raw, &tc); err != nil {
				t.Fatal(err)
			}
			g, err := FromSchema(tc.Schema)
			if tc.Refused != "" {
				if !errors.Is(err, ErrUnsupportedSchema) || !strings.Contains(err.Error(), tc.Refused) {
					t.Fatalf("got %v, want a refusal naming %q", err, tc.Refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			oracle := oracleFor(t, tc.Schema)
			for _, x := range tc.Tests {
				var b bytes.Buffer
				if err := json.Compact(&b, x.Data); err != nil {
					t.Fatal(err)
				}
				if err := validates(oracle, b.String()); (err == nil) != x.Valid {
					t.Fatalf("test data: oracle says %v for %s labelled valid=%v", err, b.String(), x.Valid)
				}
				if got := g.Match(b.Bytes()); got != x.Valid {
					t.Errorf("grammar accepts %s: %v, want %v", b.String(), got, x.Valid)
				}
			}
		})
	}
}

// oracleFor compiles schema with the reference validator, honouring its
// $schema (draft-04's boolean exclusive bounds need it).
func oracleFor(t testing.TB, schema []byte) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("oracle cannot compile schema: %v", err)
	}
	return sch
}
