package grammar

import (
	"errors"
	"strings"
	"testing"
)

// TestAllOfAnyOfMerged: allOf merged into one schema, keywords beside
// anyOf distributed over its branches; valid and invalid instances
// through the grammar and the reference validator.
func TestAllOfAnyOfMerged(t *testing.T) {
	cases := []struct {
		schema         string
		valid, invalid []string
	}{
		// properties from two branches, required united
		{`{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},{"properties":{"b":{"type":"integer"}},"required":["b"]}]}`,
			[]string{`{"a":"x","b":1}`, `{"a":"x","b":1,"c":null}`}, []string{`{"a":"x"}`, `{"b":1}`, `{"a":1,"b":1}`}},
		// the same property in two branches: both schemas
		{`{"allOf":[{"properties":{"n":{"type":"integer","minimum":0}}},{"properties":{"n":{"maximum":10}}}],"type":"object"}`,
			[]string{`{"n":0}`, `{"n":10}`, `{}`}, []string{`{"n":-1}`, `{"n":11}`, `{"n":"x"}`}},
		// additionalProperties false of one branch forbids another's property
		{`{"allOf":[{"properties":{"a":{"type":"string"}},"additionalProperties":false},{"properties":{"b":{"type":"string"}}}]}`,
			[]string{`{}`, `{"a":"x"}`}, []string{`{"b":"x"}`, `{"a":"x","c":1}`}},
		// additionalProperties as a schema applies to another branch's property
		{`{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}},{"properties":{"b":{"minLength":2}}}]}`,
			[]string{`{"a":"x","b":"yy"}`}, []string{`{"b":"y"}`, `{"b":5}`, `{"c":5}`}},
		// types intersected, bounds tightened
		{`{"allOf":[{"type":["integer","string"]},{"type":"number","minimum":2},{"maximum":5}]}`,
			[]string{`2`, `5`}, []string{`1`, `6`, `"x"`, `2.5`}},
		// $ref branches (draft 2020-12: siblings apply)
		{`{"$defs":{"base":{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"]}},"allOf":[{"$ref":"#/$defs/base"},{"properties":{"name":{"type":"string"}},"required":["name"]}]}`,
			[]string{`{"id":1,"name":"x"}`}, []string{`{"id":1}`, `{"name":"x"}`, `{"id":"1","name":"x"}`}},
		// enums intersected
		{`{"allOf":[{"enum":["a","b","c"]},{"enum":["b","c","d"]}]}`, []string{`"b"`, `"c"`}, []string{`"a"`, `"d"`}},
		// keywords beside anyOf go into each branch
		{`{"type":"object","properties":{"kind":{"type":"string"}},"required":["kind"],"anyOf":[{"properties":{"x":{"type":"integer"}},"required":["x"]},{"properties":{"y":{"type":"boolean"}},"required":["y"]}]}`,
			[]string{`{"kind":"a","x":1}`, `{"kind":"b","y":true}`}, []string{`{"x":1}`, `{"kind":"a"}`, `{"kind":"a","x":"1"}`}},
		// oneOf of objects told apart by a const discriminator
		{`{"oneOf":[{"type":"object","properties":{"t":{"const":"a"},"v":{"type":"integer"}},"required":["t","v"]},{"type":"object","properties":{"t":{"const":"b"},"v":{"type":"string"}},"required":["t","v"]}]}`,
			[]string{`{"t":"a","v":1}`, `{"t":"b","v":"x"}`}, []string{`{"t":"a","v":"x"}`, `{"t":"c","v":1}`, `{"v":1}`}},
	}
	for _, tc := range cases {
		g, err := FromSchema([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.schema, err)
			continue
		}
		oracle := formatOracle(t, tc.schema)
		for _, v := range tc.valid {
			if !oracle(v) {
				t.Errorf("%s: the validator refuses %s (a bad label)", tc.schema, v)
			}
			if !g.Match([]byte(v)) {
				t.Errorf("%s: valid %s refused", tc.schema, v)
			}
		}
		for _, v := range tc.invalid {
			if oracle(v) {
				t.Errorf("%s: the validator accepts %s (a bad label)", tc.schema, v)
			}
			if g.Match([]byte(v)) {
				t.Errorf("%s: invalid %s accepted", tc.schema, v)
			}
		}
	}
}

func TestAllOfRefusedByName(t *testing.T) {
	for schema, want := range map[string]string{
		`{"allOf":[{"type":"string","pattern":"^a"},{"pattern":"b$"}]}`:                                 `"pattern" set differently by allOf branches at #`,
		`{"properties":{"p":{"allOf":[{"anyOf":[{"type":"string"}]},{"anyOf":[{"type":"integer"}]}]}}}`: `"anyOf" set differently by allOf branches at #/properties/p`,
		`{"$defs":{"a":{"allOf":[{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`:                           `"allOf" nested deeper than`,
	} {
		_, err := FromSchema([]byte(schema))
		if !errors.Is(err, ErrUnsupportedSchema) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a refusal naming %q", schema, err, want)
		}
	}
}

// TestAllOfRecursive: an allOf that inlines a recursive definition meets
// itself again and compiles to a recursive rule, not forever.
func TestAllOfRecursive(t *testing.T) {
	schema := `{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"ChildFoo":{"type":"object"},"Foo":{"properties":{"childFoos":{"allOf":[{"$ref":"#/definitions/Foo"},{"$ref":"#/definitions/ChildFoo"}]}},"type":"object"}},"properties":{"Foo":{"$ref":"#/definitions/Foo"}},"required":["Foo"]}`
	g, err := FromSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{`{"Foo":{}}`, `{"Foo":{"childFoos":{"childFoos":{}}}}`} {
		if !g.Match([]byte(v)) {
			t.Errorf("valid %s refused", v)
		}
	}
	if g.Match([]byte(`{"Foo":{"childFoos":1}}`)) {
		t.Error("invalid instance accepted")
	}
}

// TestMinMaxProperties: the declared properties written are counted.
func TestMinMaxProperties(t *testing.T) {
	cases := []struct {
		schema         string
		valid, invalid []string
	}{
		{`{"type":"object","properties":{"a":{},"b":{},"c":{}},"minProperties":2,"maxProperties":2}`,
			[]string{`{"a":1,"c":2}`, `{"c":1,"b":2}`}, []string{`{}`, `{"a":1}`, `{"a":1,"b":2,"c":3}`}},
		{`{"type":"object","properties":{"a":{}},"minProperties":1}`,
			[]string{`{"a":1}`, `{"x":0,"a":1}`}, []string{`{}`}},
		{`{"type":"object","additionalProperties":{"type":"integer"},"maxProperties":1}`,
			[]string{`{}`, `{"k":1}`}, []string{`{"k":1,"l":2}`, `{"k":"x"}`}},
		{`{"type":"object","minProperties":1}`,
			[]string{`{"k":1}`, `{"k":1,"l":[]}`}, []string{`{}`, `[]`}},
	}
	for _, tc := range cases {
		g, err := FromSchema([]byte(tc.schema))
		if err != nil {
			t.Errorf("%s: %v", tc.schema, err)
			continue
		}
		oracle := formatOracle(t, tc.schema)
		for _, v := range tc.valid {
			if !oracle(v) || !g.Match([]byte(v)) {
				t.Errorf("%s: valid %s refused (validator %v)", tc.schema, v, oracle(v))
			}
		}
		for _, v := range tc.invalid {
			if g.Match([]byte(v)) {
				t.Errorf("%s: invalid %s accepted", tc.schema, v)
			}
		}
	}
	for schema, want := range map[string]string{
		`{"type":"object","minProperties":2}`:                               "minProperties above 1 on an object without declared properties",
		`{"type":"object","properties":{"a":{}},"minProperties":2}`:         "minProperties above the number of declared properties",
		`{"type":"object","patternProperties":{"^a":{}},"maxProperties":2}`: "beside patternProperties",
	} {
		if _, err := FromSchema([]byte(schema)); !errors.Is(err, ErrUnsupportedSchema) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a refusal naming %q", schema, err, want)
		}
	}
}
