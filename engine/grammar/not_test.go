package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// notSchemas are schemas whose not reduces exactly.
var notSchemas = []string{
	`{"not":{"type":"string"}}`,
	`{"not":{"type":["number","object"]}}`,
	`{"type":["integer","string","null"],"not":{"type":"integer"}}`,
	`{"not":{"not":{"type":"boolean"}}}`,
	`{"type":"string","not":{"not":{"enum":["a","b"]}}}`,
	`{"enum":["a","b",1,{"k":1}],"not":{"enum":["b",1.0,{"k":1}]}}`,
	`{"const":"a","not":{"const":"b"}}`,
	`{"type":["string","null"],"not":{"const":null}}`,
	`{"type":"boolean","not":{"const":true}}`,
	`{"type":["boolean","string"],"not":{"enum":[true,false]}}`,
	`{"type":"integer","not":{"enum":[null,"x"]}}`,
	`{"not":false,"type":"null"}`,
	`{"type":"object","properties":{"a":{"not":{"$ref":"#/$defs/s"}}},"$defs":{"s":{"type":"string"}}}`,
	`{"type":"boolean","anyOf":[{"not":{}},{"not":{"const":false}}]}`,
	`{"type":"string","not":{"enum":["a","b"]}}`,
	`{"not":{"const":"a"}}`,
	`{"type":["string","null","integer"],"not":{"enum":["a",null,true]}}`,
	`{"type":"string","pattern":"^[ab]","maxLength":2,"not":{"const":"ab"}}`,
}

// TestNotExact: a schema whose not reduces accepts an instance exactly
// when the reference validator does.
func TestNotExact(t *testing.T) {
	vals := []string{`"a"`, `"b"`, `"c"`, `"ab"`, `"abc"`, `""`, `1`, `1.0`, `-2.5`, `true`, `false`, `null`, `{}`, `{"k":1}`, `{"a":"s"}`, `{"a":1}`, `[]`, `[1]`}
	for _, schema := range notSchemas {
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		oracle := validator(t, schema)
		accepted := 0
		for _, inst := range vals {
			got, want := g.Match([]byte(inst)), validates(oracle, inst) == nil
			// the grammar writes integers without a fraction: 1.0 is no
			// integer's spelling (a subset, never more)
			if got != want && !(inst == `1.0` && !got && strings.Contains(schema, "integer")) {
				t.Errorf("%s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
			if got {
				accepted++
			}
		}
		if accepted == 0 {
			t.Errorf("%s: accepts none of the instances", schema)
		}
	}
}

// TestNotRefused: the forms of not that do not reduce are refused by
// name; those that admit nothing are bad schemas.
func TestNotRefused(t *testing.T) {
	for _, schema := range []string{
		`{"not":{"pattern":"^a"}}`, `{"type":"number","not":{"const":1}}`,
		`{"type":"number","not":{"type":"integer"}}`, `{"not":{"type":"integer"}}`,
		`{"type":["boolean","null"],"not":{"const":true}}`, `{"not":{"minimum":3}}`,
	} {
		_, err := FromSchema([]byte(schema))
		if !errors.Is(err, ErrUnsupportedSchema) || !strings.Contains(err.Error(), `keyword "not" at #`) {
			t.Errorf("%s: got %v, want a refusal naming not", schema, err)
		}
	}
	for _, schema := range []string{`{"not":{}}`, `{"not":true}`, `{"type":"string","not":{"type":"string"}}`, `{"const":"a","not":{"enum":["a"]}}`} {
		_, err := FromSchema([]byte(schema))
		var u unsatisfiable
		if !errors.As(err, &u) {
			t.Errorf("%s: got %v, want a bad schema (no value)", schema, err)
		}
	}
}

// TestNotMaskMatchesBruteForce: along random walks through schemas whose
// not reduces, the mask equals trying every token with the reference
// recognizer.
func TestNotMaskMatchesBruteForce(t *testing.T) {
	var pieces [][]byte
	for b := 0x20; b < 0x7F; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`true`, `fal`, `null`, `"a"`, `{"a":`, `{"k":1}`, `1.0`, "\n"} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // end of generation
	eos := int32(len(pieces) - 1)
	v := NewVocab(pieces, []int32{eos})
	rapid.Check(t, func(rt *rapid.T) {
		schema := rapid.SampledFrom(notSchemas).Draw(rt, "schema")
		walkAgainstBruteForce(rt, schema, v, pieces, eos, 30)
	})
}

// TestNotStringsExact: a string schema with not {enum} of strings (beside
// a pattern or length bounds, or none) accepts a string exactly when the
// reference validator does.
func TestNotStringsExact(t *testing.T) {
	word := rapid.StringOfN(rapid.RuneFrom([]rune("abé\"")), 0, 3, -1)
	rapid.Check(t, func(rt *rapid.T) {
		words := rapid.SliceOfN(word, 1, 4).Draw(rt, "words")
		ex, _ := json.Marshal(words)
		beside := rapid.SampledFrom([]string{``, `,"maxLength":2`, `,"pattern":"^a"`, `,"pattern":"b$","minLength":1,"maxLength":3`, `,"format":"date"`}).Draw(rt, "beside")
		schema := fmt.Sprintf(`{"type":"string","not":{"enum":%s}%s}`, ex, beside)
		g, err := FromSchema([]byte(schema))
		if err != nil {
			rt.Fatalf("%s: %v", schema, err)
		}
		oracle := formatOracle(t, schema)
		for i := range 12 {
			s := word.Draw(rt, fmt.Sprintf("s%d", i))
			if i == 0 {
				s = rapid.SampledFrom(words).Draw(rt, "excluded")
			}
			inst, _ := json.Marshal(s)
			if got, want := g.Match(inst), oracle(string(inst)); got != want {
				rt.Fatalf("%s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
		}
	})
}

// TestNotBesideIgnoredRef: a not or if beside a $ref whose siblings the
// draft ignores is ignored (not true there is no "no value"), as the
// validator ignores it.
func TestNotBesideIgnoredRef(t *testing.T) {
	for _, sib := range []string{`"not":true`, `"not":{"type":"integer"}`, `"if":{"type":"integer"},"then":false`} {
		schema := `{"$schema":"http://json-schema.org/draft-07/schema#","$ref":"#/definitions/a",` + sib + `,"definitions":{"a":{"type":"integer"}}}`
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", schema, err)
		}
		oracle := oracleFor(t, []byte(schema))
		for _, inst := range []string{`1`, `"a"`} {
			if got, want := g.Match([]byte(inst)), validates(oracle, inst) == nil; got != want {
				t.Errorf("%s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
		}
	}
}
