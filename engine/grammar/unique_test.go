package grammar

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// uniqueItemsSchemas are arrays with uniqueItems true over finite items.
var uniqueItemsSchemas = []string{
	`{"type":"array","uniqueItems":true,"items":{"enum":["a","b","c"]}}`,
	`{"type":"array","uniqueItems":true,"items":{"type":"boolean"},"minItems":1}`,
	`{"type":"array","uniqueItems":true,"items":{"type":["boolean","null"]},"maxItems":2}`,
	`{"type":"array","uniqueItems":true,"items":{"enum":[1,"a",1.0,true,null,2]}}`,
	`{"type":"array","uniqueItems":true,"items":{"type":"string","enum":["a","bb",3],"maxLength":1}}`,
	`{"type":"array","uniqueItems":true,"items":{"$ref":"#/$defs/v"},"minItems":2,"maxItems":3}`,
	`{"type":"array","uniqueItems":true,"items":{"const":"a"}}`,
	`{"type":"array","uniqueItems":true,"maxItems":1}`,
	`{"type":"array","uniqueItems":false,"items":{"type":["string","boolean"]},"maxItems":3}`,
	`{"type":"object","properties":{"tags":{"type":"array","uniqueItems":true,"items":{"enum":["x","y"]}}}}`,
}

// TestUniqueItemsExact: an array schema with uniqueItems accepts an
// instance exactly when the reference validator does (arrays of values
// drawn with repeats, and values of other types).
func TestUniqueItemsExact(t *testing.T) {
	vals := []string{`"a"`, `"b"`, `"c"`, `"bb"`, `1`, `1.0`, `2`, `true`, `false`, `null`, `"x"`, `"y"`}
	rapid.Check(t, func(rt *rapid.T) {
		schema := rapid.SampledFrom(uniqueItemsSchemas).Draw(rt, "schema")
		schema = strings.TrimSuffix(schema, "}") + `,"$defs":{"v":{"enum":["a","b","c","a"]}}}`
		g, err := FromSchema([]byte(schema))
		if err != nil {
			rt.Fatalf("%s: %v", schema, err)
		}
		oracle := validator(t, schema)
		wrapped := strings.Contains(schema, `"tags"`)
		for i := range 10 {
			items := rapid.SliceOfN(rapid.SampledFrom(vals), 0, 4).Draw(rt, fmt.Sprintf("items%d", i))
			inst := "[" + strings.Join(items, ",") + "]"
			if wrapped {
				inst = `{"tags":` + inst + `}`
			}
			if got, want := g.Match([]byte(inst)), validates(oracle, inst) == nil; got != want {
				rt.Fatalf("%s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
		}
	})
}

// TestUniqueItemsRefused: uniqueItems over items that are no finite set
// of scalars is refused by name; minItems above the distinct values is a
// bad schema.
func TestUniqueItemsRefused(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":"array","uniqueItems":true,"items":{"type":"string"}}`:                       `keyword "uniqueItems" beside items that are not a finite set`,
		`{"type":"array","uniqueItems":true}`:                                                 `keyword "uniqueItems" beside items`,
		`{"type":"array","uniqueItems":true,"items":{"enum":[{"a":1},{"a":2}]}}`:              `keyword "uniqueItems" beside items`,
		`{"type":"array","uniqueItems":true,"prefixItems":[{"const":1}],"items":{"const":2}}`: `keyword "uniqueItems" beside a tuple`,
	} {
		_, err := FromSchema([]byte(schema))
		if !errors.Is(err, ErrUnsupportedSchema) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a refusal naming %q", schema, err, want)
		}
	}
	_, err := FromSchema([]byte(`{"type":"array","uniqueItems":true,"items":{"type":"boolean"},"minItems":3}`))
	var u unsatisfiable
	if !errors.As(err, &u) {
		t.Errorf("minItems above the distinct values: got %v, want a bad schema", err)
	}
}

// TestUniqueItemsMaskMatchesBruteForce: along random walks through unique
// arrays, the mask equals trying every token with the reference
// recognizer, and some token is always allowed until the text is
// complete.
func TestUniqueItemsMaskMatchesBruteForce(t *testing.T) {
	var pieces [][]byte
	for b := 0x20; b < 0x7F; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`["a"`, `"a",`, `,"b"`, `"c"]`, `true`, `false,`, `null]`, `1,`, `[]`, `{"tags":[`, "\n"} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // end of generation
	eos := int32(len(pieces) - 1)
	v := NewVocab(pieces, []int32{eos})
	rapid.Check(t, func(rt *rapid.T) {
		schema := rapid.SampledFrom(uniqueItemsSchemas).Draw(rt, "schema")
		schema = strings.TrimSuffix(schema, "}") + `,"$defs":{"v":{"enum":["a","b","c","a"]}}}`
		walkAgainstBruteForce(rt, schema, v, pieces, eos, 40)
	})
}
