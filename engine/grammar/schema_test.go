package grammar

import (
	"errors"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// validator compiles schema with santhosh-tekuri/jsonschema (draft 2020-12),
// the oracle the grammar's output must satisfy.
func validator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("oracle cannot read schema: %v", err)
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

func validates(sch *jsonschema.Schema, instance string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(instance))
	if err != nil {
		return err
	}
	return sch.Validate(v)
}

// schemaCases are the cases of llama.cpp's
// tests/test-json-schema-to-grammar.cpp (read at the copy in .cache), with
// what this package does with each: compile it (and then accept the valid
// instances and refuse the invalid ones), or refuse it with an error that
// names the feature. Cases llama.cpp accepts that this package refuses are
// the features it does not enforce (patterns with lookaround, prefixItems,
// allOf); refusing is the fail-closed
// answer, never a grammar that might let an invalid value through.
var schemaCases = []struct {
	name    string
	schema  string
	refused string // substring of the error; "" if compiled
	valid   []string
	invalid []string
}{
	{name: "min 0", schema: `{"type":"integer","minimum":0}`,
		valid: []string{`0`, `1`, `10`, `9999999999999999`}, invalid: []string{`-1`, `-0`, `01`, `0.5`}},
	{name: "max 30", schema: `{"type":"integer","maximum":30}`,
		valid: []string{`30`, `29`, `3`, `0`, `-9999999999999999`}, invalid: []string{`31`, `40`, `100`, `300`}},
	{name: "min -10 max 10", schema: `{"type":"integer","minimum":-10,"maximum":10}`,
		valid: []string{`-10`, `-1`, `0`, `7`, `10`}, invalid: []string{`-11`, `11`, `-100`, `100`, `-0`}},
	{name: "number min", schema: `{"type":"number","minimum":0}`,
		valid: []string{`0`, `0.5`, `12.25`}, invalid: []string{`-1`, `-0.5`, `1e3`}},
	{name: "number fractional max", schema: `{"type":"number","maximum":1.5}`,
		valid:   []string{`1.5`, `1.50`, `1.4999999999999999`, `-3`, `0`, `1`, `-1.5`},
		invalid: []string{`1.5000000000000001`, `1.6`, `2`, `1.51`, `15`}},
	{name: "number fractional range", schema: `{"type":"number","minimum":-0.25,"maximum":0.75}`,
		valid:   []string{`-0.25`, `-0.2`, `0`, `-0`, `0.75`, `0.7`, `0.125`, `-0.0`},
		invalid: []string{`-0.26`, `-0.250001`, `0.76`, `1`, `-1`, `0.7500000000000001`}},
	{name: "number exclusive", schema: `{"type":"number","exclusiveMinimum":0,"exclusiveMaximum":1}`,
		valid:   []string{`0.5`, `0.0000000000000001`, `0.9999999999999999`},
		invalid: []string{`0`, `0.0`, `-0`, `1`, `1.0`, `-0.5`}},
	{name: "number exclusive fractional", schema: `{"type":"number","exclusiveMinimum":-1.5,"maximum":2.25}`,
		valid:   []string{`-1.4`, `-1.4999`, `2.25`, `2.2`, `2`},
		invalid: []string{`-1.5`, `-1.50`, `-2`, `2.26`, `3`}},
	{name: "number draft-04 exclusive", schema: `{"$schema":"http://json-schema.org/draft-04/schema#","type":"number","minimum":0.5,"exclusiveMinimum":true}`,
		valid:   []string{`0.6`, `0.5000000000000001`, `100`},
		invalid: []string{`0.5`, `0.50`, `0`, `-1`}},
	{name: "number bound past 16 digits", schema: `{"type":"number","minimum":0.12345678901234567,"maximum":0.2}`,
		valid:   []string{`0.1234567890123457`, `0.2`},
		invalid: []string{`0.1234567890123456`, `0.12345678901234567`, `0.3`}},
	{name: "number empty range", schema: `{"type":"number","exclusiveMinimum":1,"exclusiveMaximum":1.00000000000000001}`, refused: "admitting no number"},
	{name: "unknown type", schema: `{"type":"kaboom"}`, refused: `unknown type "kaboom"`},
	{name: "invalid type", schema: `{"type":123}`, refused: "type must be a string"},
	{name: "empty schema (any value)", schema: `{}`,
		valid:   []string{`{}`, `[1,"a",null]`, `"x"`, `-0.5e+10`, `true`, `{"a": {"b": [ ]}}`},
		invalid: []string{`{`, `[1,]`, `01`, `nul`, `"\x"`}},
	{name: "exotic formats", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"format":"date"},{"format":"uuid"}]}`,
		valid:   []string{`[]`, `["2020-01-31"]`, `["2020-01-31","123e4567-e89b-12d3-a456-426614174000"]`, `["2020-01-31","123e4567-e89b-12d3-a456-426614174000",3]`, `7`},
		invalid: []string{`["x"]`, `["2020-01-31","u"]`}},
	{name: "string", schema: `{"type":"string"}`,
		valid: []string{`""`, `"foo"`, `"a\"b\\c\u00e9"`, `"été"`}, invalid: []string{`foo`, `"a`, `"\q"`, `1`}},
	{name: "string w/ min length 1", schema: `{"type":"string","minLength":1}`,
		valid: []string{`"a"`, `"é"`}, invalid: []string{`""`}},
	{name: "string w/ min length 3", schema: `{"type":"string","minLength":3}`,
		valid: []string{`"abc"`, `"abcd"`}, invalid: []string{`"ab"`}},
	{name: "string w/ max length", schema: `{"type":"string","maxLength":3}`,
		valid: []string{`""`, `"abc"`, `"\n\té"`}, invalid: []string{`"abcd"`}},
	{name: "string w/ min & max length", schema: `{"type":"string","minLength":1,"maxLength":4}`,
		valid: []string{`"a"`, `"abcd"`}, invalid: []string{`""`, `"abcde"`}},
	{name: "boolean", schema: `{"type":"boolean"}`, valid: []string{`true`, `false`}, invalid: []string{`1`, `"true"`, `null`}},
	{name: "integer", schema: `{"type":"integer"}`,
		valid: []string{`0`, `-1`, `1234567890123456`}, invalid: []string{`01`, `1.5`, `-`, `12345678901234567`}},
	{name: "string const", schema: `{"const":"foo"}`, valid: []string{`"foo"`}, invalid: []string{`"fo"`, `"foo "`}},
	{name: "non-string const", schema: `{"const":123}`, valid: []string{`123`}, invalid: []string{`1230`}},
	{name: "non-string enum", schema: `{"enum":["red","amber","green",null,42,["foo"]]}`,
		valid: []string{`"red"`, `null`, `42`, `["foo"]`}, invalid: []string{`"blue"`, `43`}},
	{name: "string array", schema: `{"type":"array","prefixItems":{"type":"string"}}`, refused: `prefixItems must be a non-empty array`},
	{name: "tuple1", schema: `{"prefixItems":[{"type":"string"}]}`,
		valid:   []string{`[]`, `["a"]`, `["a",1,{}]`, `3`, `{"a":1}`},
		invalid: []string{`[1]`, `[1,"a"]`}},
	{name: "tuple closed", schema: `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}`,
		valid:   []string{`[]`, `["a"]`, `["a",1]`, `[ "a" , 2 ]`},
		invalid: []string{`["a",1,2]`, `[1]`, `["a","b"]`, `[,]`, `["a",]`}},
	{name: "tuple minItems within prefix", schema: `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"},{"type":"boolean"}],"items":false,"minItems":2}`,
		valid:   []string{`["a",1]`, `["a",1,true]`},
		invalid: []string{`[]`, `["a"]`, `["a",1,true,null]`, `["a",true]`}},
	{name: "tuple rest schema and bounds", schema: `{"type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"},"minItems":3,"maxItems":4}`,
		valid:   []string{`["a",1,2]`, `["a",1,2,3]`},
		invalid: []string{`["a",1]`, `["a",1,2,3,4]`, `["a",1,"b"]`, `[1,1,2]`}},
	{name: "tuple maxItems inside prefix", schema: `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"},{"type":"boolean"}],"maxItems":1}`,
		valid:   []string{`[]`, `["a"]`},
		invalid: []string{`["a",1]`}},
	{name: "tuple minItems past closed prefix", schema: `{"type":"array","prefixItems":[{"type":"string"}],"items":false,"minItems":2}`, refused: "minItems above the 1 items"},
	{name: "tuple additionalItems false", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"integer"},{"type":"null"}],"additionalItems":false}`,
		valid:   []string{`[]`, `[1]`, `[1,null]`},
		invalid: []string{`[1,null,1]`, `[null]`}},
	{name: "tuple additionalItems schema", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"integer"}],"additionalItems":{"type":"string"},"minItems":1}`,
		valid:   []string{`[1]`, `[1,"a","b"]`},
		invalid: []string{`[]`, `[1,2]`, `["a"]`}},
	{name: "additionalItems alone is vacuous", schema: `{"enum":[[1,2],3],"additionalItems":false}`,
		valid: []string{`[1,2]`, `3`}, invalid: []string{`[1]`}},
	{name: "tuple empty items array", schema: `{"type":"array","items":[]}`, refused: "items as an array must not be empty"},
	{name: "prefixItems under draft-07", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","prefixItems":[{"type":"string"}],"items":{"type":"integer"}}`, refused: `"prefixItems" under a draft before 2020-12`},
	{name: "items array under 2020-12", schema: `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"array","items":[{"type":"string"}]}`, refused: "items as an array under draft 2020-12"},
	{name: "prefixItems beside additionalItems", schema: `{"type":"array","prefixItems":[{"type":"string"}],"additionalItems":false}`, refused: `"additionalItems" beside "prefixItems"`},
	{name: "tuple in allOf with items", schema: `{"allOf":[{"prefixItems":[{"type":"string"}]},{"items":{"type":"string"}}]}`, refused: `"allOf" whose branches set tuple items`},
	{name: "array with empty items", schema: `{"type":"array","items":{}}`,
		valid: []string{`[]`, `[1, "a", {}]`, `[ ]`}, invalid: []string{`[1,]`, `[,]`}},
	{name: "number", schema: `{"type":"number"}`,
		valid: []string{`0`, `-1.25`, `3e10`, `1.5E-7`}, invalid: []string{`.5`, `1.`, `+1`, `1e`}},
	{name: "minItems", schema: `{"items":{"type":"boolean"},"minItems":2}`,
		valid: []string{`[true,false]`, `[true, true, false]`}, invalid: []string{`[]`, `[true]`}},
	{name: "maxItems 0", schema: `{"items":{"type":"boolean"},"maxItems":0}`, valid: []string{`[]`}, invalid: []string{`[true]`}},
	{name: "maxItems 1", schema: `{"items":{"type":"boolean"},"maxItems":1}`,
		valid: []string{`[]`, `[false]`}, invalid: []string{`[true,true]`}},
	{name: "maxItems 2", schema: `{"items":{"type":"boolean"},"maxItems":2}`,
		valid: []string{`[]`, `[false, true]`}, invalid: []string{`[true,true,true]`}},
	{name: "min + maxItems", schema: `{"items":{"type":["number","integer"]},"minItems":3,"maxItems":5}`,
		valid: []string{`[1,2,3]`, `[1.5,2,3,4,5]`}, invalid: []string{`[1,2]`, `[1,2,3,4,5,6]`}},
	{name: "min + max items with min + max values", schema: `{"items":{"type":"integer","minimum":12,"maximum":207},"minItems":3,"maxItems":5}`,
		valid: []string{`[12,100,207]`, `[13,99,200,150,12]`}, invalid: []string{`[11,100,207]`, `[12,100,208]`, `[12,13]`}},
	{name: "simple regexp", schema: `{"type":"string","pattern":"^abc?d*efg+(hij)?kl$"}`,
		valid: []string{`"abefgkl"`, `"abcddefgghijkl"`}, invalid: []string{`"abefkl"`, `"xabefgkl"`, `"abefgklx"`}},
	{name: "required props in any order", schema: `{"type":"object","properties":{"b":{"type":"string"},"c":{"type":"string"},"a":{"type":"string"}},"required":["a","b","c"],"additionalProperties":false,"definitions":{}}`,
		valid: []string{`{"b":"x","c":"y","a":"z"}`, `{ "b": "", "c": "", "a": "" }`, `{"a":"z","b":"x","c":"y"}`}, invalid: []string{`{"b":"x","c":"y"}`, `{"a":"z","b":"x","c":"y","a":"w"}`}},
	{name: "1 optional prop", schema: `{"properties":{"a":{"type":"string"}},"additionalProperties":false}`,
		valid: []string{`{}`, `{"a":"x"}`}, invalid: []string{`{"b":"x"}`, `{"a":1}`}},
	{name: "N optional props", schema: `{"properties":{"a":{"type":"string"},"b":{"type":"string"},"c":{"type":"string"}},"additionalProperties":false}`,
		valid: []string{`{}`, `{"a":"x","c":"z"}`, `{"b":"y"}`, `{"a":"x","b":"y","c":"z"}`, `{"c":"z","a":"x"}`}, invalid: []string{`{"a":"x","a":"y"}`, `{"a":"x",}`, `{,"b":"y"}`}},
	{name: "required + optional props each in original order", schema: `{"properties":{"b":{"type":"string"},"a":{"type":"string"},"d":{"type":"string"},"c":{"type":"string"}},"required":["a","b"],"additionalProperties":false}`,
		valid: []string{`{"b":"1","a":"2"}`, `{"b":"1","a":"2","c":"4"}`}, invalid: []string{`{"a":"2"}`, `{"b":"1","c":"4"}`}},
	{name: "additional props", schema: `{"type":"object","additionalProperties":{"type":"array","items":{"type":"number"}}}`,
		valid: []string{`{}`, `{"x":[1,2],"y":[]}`}, invalid: []string{`{"x":1}`}},
	{name: "additional props (true)", schema: `{"type":"object","additionalProperties":true}`,
		valid: []string{`{}`, `{"x":{"y":null}}`}, invalid: []string{`[]`}},
	{name: "additional props (implicit)", schema: `{"type":"object"}`, valid: []string{`{"a":1}`}, invalid: []string{`1`}},
	{name: "empty w/o additional props", schema: `{"type":"object","additionalProperties":false}`,
		valid: []string{`{}`, `{ }`}, invalid: []string{`{"a":1}`}},
	// With properties, only declared properties are produced, whatever
	// additionalProperties allows: still valid.
	{name: "required + additional props", schema: `{"type":"object","properties":{"a":{"type":"number"}},"required":["a"],"additionalProperties":{"type":"string"}}`,
		valid: []string{`{"a":1}`, `{"a":1,"b":"x"}`, `{"b":"x","a":1}`}, invalid: []string{`{}`, `{"a":1,"b":2}`, `{"a":"x"}`}},
	{name: "optional props with empty name", schema: `{"properties":{"":{"type":"integer"},"a":{"type":"integer"}},"additionalProperties":{"type":"integer"}}`,
		valid: []string{`{}`, `{"":1,"a":2}`, `{"a":2}`}},
	{name: "optional props with common prefix", schema: `{"properties":{"ab":{"type":"integer"},"ac":{"type":"integer"}},"additionalProperties":{"type":"integer"}}`,
		valid: []string{`{"ab":1,"ac":2}`, `{"ac":2}`, `{"ac":2,"ab":1}`}, invalid: []string{`{"ac":2,"ab":1,"ab":3}`, `{"ab":"x"}`}},
	{name: "top-level $ref", schema: `{"$ref":"#/definitions/foo","definitions":{"foo":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}}}`,
		valid: []string{`{"a":"x"}`}, invalid: []string{`{}`}},
	{name: "anyOf", schema: `{"anyOf":[{"$ref":"#/definitions/foo"},{"$ref":"#/definitions/bar"}],"definitions":{"foo":{"properties":{"a":{"type":"number"}}},"bar":{"properties":{"b":{"type":"number"}}}},"type":"object"}`,
		valid: []string{`{}`, `{"a":1}`, `{"b":2}`}, invalid: []string{`[]`, `1`}},
	{name: "anyOf without siblings", schema: `{"anyOf":[{"$ref":"#/definitions/foo"},{"$ref":"#/definitions/bar"}],"definitions":{"foo":{"properties":{"a":{"type":"number"}}},"bar":{"properties":{"b":{"type":"number"}}}}}`,
		valid: []string{`{"a":1}`, `{"b":2}`, `{}`, `{"a":"x"}`}, invalid: []string{`{"a":"x","b":"y"}`}},
	{name: "anyOf $ref", schema: `{"properties":{"a":{"anyOf":[{"type":"string"},{"type":"number"}]},"b":{"anyOf":[{"$ref":"#/properties/a/anyOf/0"},{"type":"boolean"}]}},"type":"object"}`,
		valid: []string{`{"a":"x","b":"y"}`, `{"b":true}`}, invalid: []string{`{"b":1}`}},
	{name: "mix of allOf, anyOf and $ref", schema: `{"allOf":[{"$ref":"#/definitions/foo"}],"definitions":{"foo":{"properties":{"a":{"type":"number"}}}},"type":"object"}`,
		valid: []string{`{}`, `{"a":1.5}`, `{"b":"x"}`}, invalid: []string{`{"a":"x"}`, `[]`}},
	{name: "conflicting names", schema: `{"type":"object","properties":{"number":{"type":"object","properties":{"number":{"type":"object","properties":{"root":{"type":"number"}},"required":["root"],"additionalProperties":false}},"required":["number"],"additionalProperties":false}},"required":["number"],"additionalProperties":false,"definitions":{}}`,
		valid: []string{`{"number":{"number":{"root":1.5}}}`}, invalid: []string{`{"number":{"number":{}}}`}},
	{name: "description only (no type) treated as unconstrained", schema: `{"description":"The 0-based index"}`,
		valid: []string{`1`, `"x"`, `[]`}},
	{name: "literal string with escapes", schema: `{"properties":{"code":{"const":" \r \n \" \\ ","description":"Generated code","title":"Code","type":"string"}},"required":["code"],"title":"DecoderResponse","type":"object"}`,
		valid: []string{`{"code":" \r \n \" \\ "}`}, invalid: []string{`{"code":" "}`}},
	{name: "regexp with unbalanced parentheses", schema: `{"type":"string","pattern":"^(a$"}`, refused: `"pattern"`},
	{name: "unsupported regexp in a property", schema: `{"type":"object","properties":{"a":{"type":"string","pattern":"^(?=a)a$"}},"required":["a"],"additionalProperties":false}`,
		refused: `"pattern" with a lookahead at #/properties/a`},
	// Beyond llama.cpp's cases: the OpenAI strict subset's recursion and
	// nullable types, and what this package refuses.
	{name: "recursive $ref to the root", schema: `{"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["name","children"],"additionalProperties":false}`,
		valid: []string{`{"name":"a","children":[{"name":"b","children":[]}]}`}, invalid: []string{`{"name":"a","children":[{}]}`}},
	{name: "recursive $defs", schema: `{"$defs":{"node":{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["next"],"additionalProperties":false}},"$ref":"#/$defs/node"}`,
		valid: []string{`{"next":null}`, `{"next":{"next":null}}`}, invalid: []string{`{"next":{}}`}},
	{name: "nullable type list", schema: `{"type":["string","null"]}`, valid: []string{`"a"`, `null`}, invalid: []string{`1`}},
	{name: "enum with type", schema: `{"type":"string","enum":["a","b",1]}`, valid: []string{`"a"`, `"b"`}, invalid: []string{`1`}},
	{name: "left-recursive $ref", schema: `{"$ref":"#"}`, refused: "cycle"},
	{name: "oneOf", schema: `{"oneOf":[{"type":"string"},{"type":"number"}]}`,
		valid: []string{`"x"`, `1.5`}, invalid: []string{`null`, `[]`}},
	{name: "oneOf overlapping", schema: `{"oneOf":[{"type":"integer"},{"type":"number"}]}`, refused: `"oneOf" with branches whose types overlap at #`},
	{name: "not type", schema: `{"not":{"type":"string"}}`,
		valid: []string{`1`, `{}`, `[]`, `null`, `true`}, invalid: []string{`"a"`}},
	{name: "not pattern", schema: `{"not":{"pattern":"^a"}}`, refused: `keyword "not" at #`},
	{name: "false schema", schema: `false`, refused: "admits no value"},
	{name: "remote $ref", schema: `{"$ref":"https://example.com/s.json"}`, refused: "only #"},
	{name: "required but undefined", schema: `{"type":"object","properties":{"a":{"type":"string"}},"required":["b"]}`, refused: `required property "b"`},
	{name: "tuple items", schema: `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"string"}]}`,
		valid: []string{`[]`, `["a"]`, `["a",1]`}, invalid: []string{`[1]`}},
	{name: "not json", schema: `{"type":`, refused: "not JSON"},
	{name: "propertyNames string", schema: `{"type":"object","additionalProperties":{"type":"integer"},"propertyNames":{"type":"string"}}`,
		valid: []string{`{}`, `{"a":1,"b c":2}`}, invalid: []string{`{"a":"x"}`, `[]`}},
	{name: "propertyNames true", schema: `{"type":"object","propertyNames":true,"additionalProperties":{"type":"boolean"}}`,
		valid: []string{`{"x":true}`}, invalid: []string{`{"x":1}`}},
	{name: "propertyNames empty and vacuous keywords", schema: `{"type":"object","propertyNames":{"title":"k","minimum":3,"type":["string","null"]},"additionalProperties":{"type":"null"}}`,
		valid: []string{`{"k":null}`}, invalid: []string{`{"k":0}`}},
	{name: "propertyNames in allOf", schema: `{"allOf":[{"type":"object","propertyNames":{}},{"additionalProperties":{"type":"null"}}]}`,
		valid: []string{`{"k":null}`}, invalid: []string{`{"k":0}`}},
	{name: "propertyNames pattern", schema: `{"type":"object","propertyNames":{"pattern":"^a"}}`,
		valid: []string{`{}`, `{"ab":1}`, `{"a":{"b":2}}`}, invalid: []string{`{"b":1}`, `{"ab":1,"b":2}`}},
	{name: "propertyNames enum", schema: `{"type":"object","propertyNames":{"enum":["a"]}}`,
		valid: []string{`{}`, `{"a":[1]}`}, invalid: []string{`{"b":1}`, `{"a":1,"b":1}`}},
	{name: "propertyNames integer", schema: `{"type":"object","propertyNames":{"type":"integer"}}`,
		valid: []string{`{}`}, invalid: []string{`{"1":1}`}},
	{name: "propertyNames false", schema: `{"type":"object","propertyNames":false}`,
		valid: []string{`{}`}, invalid: []string{`{"a":1}`}},
	{name: "propertyNames ref", schema: `{"type":"object","$defs":{"k":{"type":"string"}},"propertyNames":{"$ref":"#/$defs/k"}}`,
		valid: []string{`{}`, `{"a":1}`}, invalid: []string{`[]`}},
	{name: "propertyNames not", schema: `{"type":"object","propertyNames":{"not":{"const":"a"}}}`, refused: `keyword "propertyNames" at #`},
	{name: "minLength too large", schema: `{"type":"string","minLength":100000}`, refused: "minLength above"},
	{name: "maxLength above the bound", schema: `{"type":"string","maxLength":100000}`,
		valid: []string{`""`, `"abc"`}, invalid: []string{`1`}},
}

func TestSchemaCases(t *testing.T) {
	for _, tc := range schemaCases {
		t.Run(tc.name, func(t *testing.T) {
			g, err := FromSchema([]byte(tc.schema))
			if tc.refused != "" {
				if err == nil {
					t.Fatalf("compiled, want refusal naming %q", tc.refused)
				}
				if !errors.Is(err, ErrUnsupportedSchema) && !errors.Is(err, ErrBadSchema) {
					t.Fatalf("got %v, want ErrUnsupportedSchema or ErrBadSchema", err)
				}
				if !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("got %q, want it to name %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			oracle := validator(t, tc.schema)
			for _, v := range tc.valid {
				if !g.Match([]byte(v)) {
					t.Errorf("grammar refuses %s, want accepted", v)
				}
				if err := validates(oracle, v); err != nil {
					t.Errorf("test data: oracle refuses %s: %v", v, err)
				}
			}
			for _, v := range tc.invalid {
				if g.Match([]byte(v)) {
					t.Errorf("grammar accepts %s, want refused", v)
				}
			}
		})
	}
}

func TestJSONObject(t *testing.T) {
	g := JSONObject()
	for _, v := range []string{`{}`, `{"a":[1,{"b":null}]}`, "{\n  \"a\": 1\n}"} {
		if !g.Match([]byte(v)) {
			t.Errorf("refuses %s", v)
		}
	}
	for _, v := range []string{`[]`, `1`, `"x"`, `{"a"}`, ` {}`, `{} `} {
		if g.Match([]byte(v)) {
			t.Errorf("accepts %q", v)
		}
	}
}

func TestParts(t *testing.T) {
	call := Seq(Literal("<tool_call>"), Schema([]byte(`{"type":"object","properties":{"name":{"const":"f"}},"required":["name"],"additionalProperties":false}`)), Literal("</tool_call>"))
	g, err := Compile(Repeat(call, "\n", 1, 2))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`<tool_call>{"name":"f"}</tool_call>`, true},
		{"<tool_call>{\"name\":\"f\"}</tool_call>\n<tool_call>{ \"name\": \"f\" }</tool_call>", true},
		{"<tool_call>{\"name\":\"f\"}</tool_call>\n<tool_call>{\"name\":\"f\"}</tool_call>\n<tool_call>{\"name\":\"f\"}</tool_call>", false},
		{`<tool_call>{"name":"g"}</tool_call>`, false},
		{``, false},
	} {
		if got := g.Match([]byte(tc.in)); got != tc.want {
			t.Errorf("Match(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if _, err := Compile(Seq(Literal("x"), Schema([]byte(`{"type":"string","format":"uri-reference"}`)))); !errors.Is(err, ErrUnsupportedSchema) {
		t.Errorf("got %v, want ErrUnsupportedSchema", err)
	}
}
