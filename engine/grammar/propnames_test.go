package grammar

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// propertyNamesForms are the propertyNames enforced: finite sets, regular
// languages, a type that admits no string, false.
var propertyNamesForms = []string{
	`{"enum":["a","b","ab"]}`, `{"const":"a1"}`, `{"enum":["a","b",1],"type":"string"}`,
	`{"enum":["a","bb","ab"],"maxLength":1}`, `{"pattern":"^[a-b]+$"}`, `{"pattern":"1"}`,
	`{"maxLength":1}`, `{"minLength":2,"maxLength":3}`, `{"pattern":"^a","minLength":2}`,
	`{"type":"integer"}`, `false`, `{"$ref":"#/$defs/k"}`, `{"format":"ipv4"}`,
}

// propertyNamesObjects are object schemas the forms stand in (%s).
var propertyNamesObjects = []string{
	`{"type":"object","propertyNames":%s}`,
	`{"type":"object","propertyNames":%s,"additionalProperties":{"type":"integer"}}`,
	`{"type":"object","propertyNames":%s,"properties":{"a":{"type":"string"},"zz":{}},"additionalProperties":false}`,
	`{"type":"object","propertyNames":%s,"properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`,
	`{"type":"object","propertyNames":%s,"patternProperties":{"^a":{"type":"integer"},"b":{"type":"boolean"}},"additionalProperties":false}`,
	`{"type":"object","propertyNames":%s,"patternProperties":{"^a":{"type":"integer"}}}`,
	`{"type":"object","propertyNames":%s,"minProperties":1,"maxProperties":2}`,
	`{"propertyNames":%s,"maxProperties":1}`,
	`{"type":"object","propertyNames":%s,"properties":{"a":{"type":"string"},"ab":{"type":"integer"}}}`,
	`{"type":"object","propertyNames":%s,"properties":{"b":{"type":"boolean"}},"additionalProperties":{"type":"integer"},"maxProperties":2}`,
	`{"type":"object","propertyNames":%s,"properties":{"a":{"type":"string"}},"patternProperties":{"^a":{"type":["integer","string"]}}}`,
}

// TestPropertyNamesExact: an object schema with propertyNames accepts an
// instance exactly when the reference validator does (objects whose keys
// and values are drawn from small sets, and values of other types); or it
// is refused by name, or is a bad schema because no object satisfies it.
func TestPropertyNamesExact(t *testing.T) {
	keys := []string{"a", "b", "ab", "a1", "1", "bb", "zz", "", "aaa", "1.2.3.4", "a\"", "b\u00e9"}
	vals := []string{`1`, `"s"`, `true`, `-2`}
	rapid.Check(t, func(rt *rapid.T) {
		form := rapid.SampledFrom(propertyNamesForms).Draw(rt, "form")
		obj := rapid.SampledFrom(propertyNamesObjects).Draw(rt, "object")
		schema := fmt.Sprintf(obj, form)
		schema = strings.TrimSuffix(schema, "}") + `,"$defs":{"k":{"enum":["b","a1"]}}}`
		// A key a pattern generates carries the schemas of every pattern
		// it may also match, an undeclared one every pattern's
		// (patternObject): there the grammar is a subset, so only its
		// soundness is checked.
		subset := strings.Contains(obj, "patternProperties")
		g, err := FromSchema([]byte(schema))
		var u unsatisfiable
		if errors.As(err, &u) {
			return
		}
		if err != nil {
			rt.Fatalf("%s: %v", schema, err)
		}
		oracle := formatOracle(t, schema) // formats asserted, as the grammar does
		for i := range 12 {
			var inst string
			switch rapid.IntRange(0, 5).Draw(rt, fmt.Sprintf("kind%d", i)) {
			case 0:
				inst = rapid.SampledFrom([]string{`1`, `"a"`, `[]`, `null`}).Draw(rt, "other")
			default:
				ks := rapid.SliceOfNDistinct(rapid.SampledFrom(keys), 0, 3, rapid.ID[string]).Draw(rt, fmt.Sprintf("keys%d", i))
				var b strings.Builder
				b.WriteByte('{')
				for j, k := range ks {
					if j > 0 {
						b.WriteByte(',')
					}
					b.WriteString(strconv.Quote(k) + ":" + rapid.SampledFrom(vals).Draw(rt, "v"))
				}
				b.WriteByte('}')
				inst = b.String()
			}
			if got, want := g.Match([]byte(inst)), oracle(inst); got != want && (got || !subset) {
				rt.Fatalf("%s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
		}
	})
}

// TestPropertyNamesCases: each form's refusals and bad schemas, by name.
func TestPropertyNamesCases(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":"object","propertyNames":{"not":{"const":"a"}}}`:                                                                `keyword "propertyNames"`,
		`{"type":"object","propertyNames":{"enum":["a"]},"properties":{"b":{}},"required":["b"]}`:                                `required property "b"`,
		`{"type":"object","propertyNames":{"pattern":"^a"},"properties":{"b":{}},"required":["b"],"additionalProperties":false}`: `required property "b"`,
		`{"type":"object","propertyNames":{"pattern":"^a"},"properties":{"b":{}},"required":["b"],"patternProperties":{"x":{}}}`: `required property "b"`,
		`{"type":"object","propertyNames":{"anyOf":[{"pattern":"^a"}]}}`:                                                         `keyword "propertyNames"`,
		`{"type":"object","propertyNames":{"format":"uri-reference"}}`:                                                           `"format" "uri-reference"`,
	} {
		_, err := FromSchema([]byte(schema))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want an error naming %q", schema, err, want)
		}
	}
}

// TestPropertyNamesMaskMatchesBruteForce: along random walks through
// objects whose keys propertyNames narrows, the mask equals trying every
// token with the reference recognizer.
func TestPropertyNamesMaskMatchesBruteForce(t *testing.T) {
	var pieces [][]byte
	for b := 0x20; b < 0x7F; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`",`, `":`, `"}`, `{"`, `"a":`, `"ab":1`, `,"b":`, `1}`, `ab`, `a1`, `\u0061`, `\"`, "é"} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // end of generation
	eos := int32(len(pieces) - 1)
	v := NewVocab(pieces, []int32{eos})
	rapid.Check(t, func(rt *rapid.T) {
		form := rapid.SampledFrom(propertyNamesForms).Draw(rt, "form")
		schema := fmt.Sprintf(rapid.SampledFrom(propertyNamesObjects).Draw(rt, "object"), form)
		schema = strings.TrimSuffix(schema, "}") + `,"$defs":{"k":{"enum":["b","a1"]}}}`
		if _, err := FromSchema([]byte(schema)); err != nil {
			return // refused or unsatisfiable: TestPropertyNamesExact checks which
		}
		walkAgainstBruteForce(rt, schema, v, pieces, eos, 40)
	})
}
