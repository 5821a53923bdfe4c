package grammar

import (
	"errors"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// ifSchemas are if/then/else schemas whose condition negates exactly.
var ifSchemas = []string{
	`{"type":"object","properties":{"kind":{"enum":["a","b","c"]},"n":{"type":"integer"},"s":{"type":"string"}},
	  "if":{"properties":{"kind":{"const":"a"}},"required":["kind"]},"then":{"required":["n"]},"else":{"required":["s"]}}`,
	`{"type":"object","properties":{"kind":{"enum":["a","b"]},"n":{"type":"integer"}},
	  "if":{"properties":{"kind":{"const":"a"}}},"then":{"properties":{"n":{"maximum":3}}}}`,
	`{"if":{"type":"string"},"then":{"enum":["a","b"]},"else":{"type":["integer","null"]}}`,
	`{"type":"object","if":{"type":"object","properties":{"kind":{"enum":["b"]}},"required":["kind"]},"then":{"properties":{"n":{"type":"integer"}}},"else":false,
	  "properties":{"kind":{"enum":["a","b"]}}}`,
	`{"if":true,"then":{"type":"boolean"},"else":{"type":"null"}}`,
	`{"if":false,"then":{"type":"boolean"},"else":{"type":"null"}}`,
	`{"type":["boolean","null"],"if":{"const":null},"else":{"const":true}}`,
	`{"type":"integer","then":{"minimum":5}}`,
	`{"type":"object","properties":{"kind":{"type":"string"},"n":{"type":"integer"}},"required":["kind"],
	  "if":{"properties":{"kind":{"const":"a"}}},"then":{"required":["n"]},"else":{"properties":{"n":{"maximum":0}}}}`,
}

// TestIfThenElseExact: an if/then/else schema accepts an instance exactly
// when the reference validator does.
func TestIfThenElseExact(t *testing.T) {
	vals := []string{`{}`, `{"kind":"a"}`, `{"kind":"a","n":1}`, `{"kind":"a","n":5}`, `{"kind":"b","s":"x"}`, `{"kind":"b"}`,
		`{"kind":"c","s":"x","n":2}`, `{"n":1}`, `{"s":"x"}`, `{"kind":"b","n":1}`, `{"kind":"b","n":"x"}`, `"a"`, `"c"`, `1`, `7`, `null`, `true`, `false`, `[]`}
	for _, schema := range ifSchemas {
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		oracle := validator(t, schema)
		accepted := 0
		for _, inst := range vals {
			if got, want := g.Match([]byte(inst)), validates(oracle, inst) == nil; got != want {
				t.Errorf("%s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			} else if got {
				accepted++
			}
		}
		if accepted == 0 {
			t.Errorf("%s: accepts none of the instances", schema)
		}
	}
}

// TestIfThenElseRefused: a condition whose negation is no compiled form
// is refused by name.
func TestIfThenElseRefused(t *testing.T) {
	for schema, want := range map[string]string{
		`{"if":{"minimum":3},"then":{"type":"integer"}}`:                                               `keyword "if" at #`,
		`{"if":{"properties":{"a":{"type":"string"}}},"then":{"required":["a"]}}`:                      `keyword "if" at #`,
		`{"anyOf":[{"type":"string"}],"if":{"type":"string"},"then":{"maxLength":3}}`:                  `keyword "if" at #`,
		`{"type":"object","properties":{"a":{"type":"number"}},"if":{"properties":{"a":{"const":1}}}}`: `keyword "not"`,
	} {
		_, err := FromSchema([]byte(schema))
		if !errors.Is(err, ErrUnsupportedSchema) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a refusal naming %q", schema, err, want)
		}
	}
}

// TestIfThenElseMaskMatchesBruteForce: along random walks through
// if/then/else schemas, the mask equals trying every token with the
// reference recognizer.
func TestIfThenElseMaskMatchesBruteForce(t *testing.T) {
	var pieces [][]byte
	for b := 0x20; b < 0x7F; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`{"kind":`, `"a"`, `"b",`, `"n":`, `"s":"`, `null`, `true`, "\n"} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // end of generation
	eos := int32(len(pieces) - 1)
	v := NewVocab(pieces, []int32{eos})
	rapid.Check(t, func(rt *rapid.T) {
		walkAgainstBruteForce(rt, rapid.SampledFrom(ifSchemas).Draw(rt, "schema"), v, pieces, eos, 40)
	})
}
