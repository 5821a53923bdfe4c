package grammar

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// formatOracle: the reference validator, formats asserted.
func formatOracle(t *testing.T, schema string) func(string) bool {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return func(v string) bool {
		x, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(v)))
		return err == nil && sch.Validate(x) == nil
	}
}

// TestPatternFormatKeywords: each string keyword's valid and invalid
// instances through the grammar (Match) and the reference validator, and
// the constructs refused by name.
func TestPatternFormatKeywords(t *testing.T) {
	cases := []struct {
		schema         string
		valid, invalid []string
	}{
		{`{"type":"string","pattern":"^[a-z]+$"}`, []string{`"abc"`, `"\u0061"`}, []string{`""`, `"aB"`, `"a1"`, `1`}},
		{`{"type":"string","pattern":"ab"}`, []string{`"ab"`, `"xxabyy"`, `"é ab \"q\""`}, []string{`"a"`, `"ba"`, `"a\nb"`}},
		{`{"type":"string","pattern":"^\\d{3}-\\d{2}$"}`, []string{`"123-45"`}, []string{`"12-345"`, `"123-456"`, `"١٢٣-45"`}},
		{`{"type":"string","pattern":"^a.c$"}`, []string{`"abc"`, `"a c"`, `"aéc"`}, []string{`"a\nc"`, `"a\rc"`, `"a\u2028c"`, `"ac"`}},
		{`{"type":"string","pattern":"^\\S+$"}`, []string{`"x"`, `"\u00e9"`}, []string{`"a b"`, `"a\u00a0b"`, `"\u000b"`, `"\ufeff"`}},
		{`{"type":"string","pattern":"^(?:foo|bar)?$|^x{2,3}$"}`, []string{`""`, `"foo"`, `"bar"`, `"xx"`, `"xxx"`}, []string{`"fo"`, `"x"`, `"xxxx"`, `"foox"`}},
		{`{"type":"string","pattern":"^[^\"\\\\]*$"}`, []string{`"abc"`, `"é"`}, []string{`"a\"b"`, `"a\\b"`}},
		{`{"type":"string","pattern":"^[\"/]$"}`, []string{`"\""`, `"/"`, `"\/"`, `"\u0022"`}, []string{`"a"`}},
		{`{"type":"string","pattern":"^.$"}`, []string{`"a"`, `"é"`}, []string{`"😀"`}},
		{`{"type":"string","pattern":"^[a-z]{2}$","minLength":2,"maxLength":2}`, []string{`"ab"`}, []string{`"a"`, `"abc"`}},
		{`{"type":"string","pattern":"b","minLength":1}`, []string{`"b"`, `"abc"`}, []string{`""`, `"a"`}},
		{`{"type":"string","pattern":"^[a-z]+$","maxLength":3}`, []string{`"a"`, `"abc"`}, []string{`""`, `"abcd"`}},
		{`{"type":"string","pattern":"^a+(b|cd)*$","maxLength":5,"minLength":1}`, []string{`"a"`, `"ab"`, `"acd"`, `"acdcd"`, `"aaaab"`}, []string{`"aaaaaa"`, `"abbbbb"`, `"acdc"`, `"cd"`, `""`}},
		{`{"type":"string","pattern":"^a*$","minLength":2}`, []string{`"aa"`, `"aaaa"`}, []string{`"a"`, `""`, `"ab"`}},
		{`{"type":"string","pattern":"^(?:\\S+\\s+){0,2}\\S+$","maxLength":8}`, []string{`"a b c"`, `"abcdefgh"`, `"a  b"`}, []string{`"abcdefghi"`, `" a"`, `"a b c d"`, `"a "`}},
		{`{"type":"string","pattern":"\\d","minLength":3,"maxLength":4}`, []string{`"1ab"`, `"ab1"`, `"a1bc"`}, []string{`"1a"`, `"abc"`, `"1abcd"`}},
		{`{"type":"string","format":"date","minLength":1,"maxLength":10}`, []string{`"2024-02-29"`}, []string{`"2023-02-29"`, `"24-02-29"`}},
		{`{"type":"string","pattern":"x","maxLength":4}`, []string{`"x"`, `"axb"`}, []string{`"aaaax"`, `"a"`}},
		{`{"enum":["a1","b2","c"],"pattern":"\\d"}`, []string{`"a1"`, `"b2"`}, []string{`"c"`, `"d1"`}},
		{`{"type":"string","maxLength":5000}`, []string{`"abc"`}, []string{`1`}},
		{`{"type":"string","format":"date"}`, []string{`"2024-02-29"`, `"2000-02-29"`, `"1999-12-31"`}, []string{`"1900-02-29"`, `"2023-02-29"`, `"2023-04-31"`, `"2023-13-01"`, `"23-01-01"`}},
		{`{"type":"string","format":"date-time"}`, []string{`"2023-01-02T03:04:05Z"`, `"2023-01-02T03:04:05.123+05:30"`}, []string{`"2023-01-02 03:04:05Z"`, `"2023-01-02T24:00:00Z"`, `"2023-01-02T03:04:05"`}},
		{`{"type":"string","format":"time"}`, []string{`"23:59:59Z"`}, []string{`"23:60:00Z"`, `"1:00:00Z"`}},
		{`{"type":"string","format":"duration"}`, []string{`"P1D"`, `"PT1H30M"`, `"P1Y2M3DT4H5M6S"`, `"P2W"`}, []string{`"P"`, `"PT"`, `"1D"`, `"P1H"`}},
		{`{"type":"string","format":"uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567e89b12d3a456426614174000"`, `"g23e4567-e89b-12d3-a456-426614174000"`}},
		{`{"type":"string","format":"ipv4"}`, []string{`"192.168.0.1"`, `"0.0.0.0"`}, []string{`"256.1.1.1"`, `"01.1.1.1"`, `"1.1.1"`}},
		{`{"type":"string","format":"ipv6"}`, []string{`"::1"`, `"::"`, `"2001:db8::8a2e:370:7334"`, `"1:2:3:4:5:6:7:8"`}, []string{`"1:2:3:4:5:6:7:8:9"`, `"1::2::3"`, `"12345::"`, `":1"`}},
		{`{"type":"string","format":"hostname"}`, []string{`"example.com"`, `"a-b.c"`}, []string{`"-a.com"`, `"a-.com"`, `"a..b"`, `"a_b"`}},
		{`{"type":"string","format":"email"}`, []string{`"joe@example.com"`, `"a.b+c@x.org"`, `"contact@gadgets-widgets.com"`}, []string{`"joe"`, `"@x.org"`, `"a@b@c"`, `".a@x.org"`}},
		{`{"type":"string","format":"uri"}`, []string{`"https://example.com/a/b?q=1#f"`, `"http://localhost:8080"`, `"file:///path/to/file.js"`, `"urn:isbn:0451450523"`, `"ecdsa-koblitz-pubkey:14RZvYazz9H2DC2skBfpPVxax54g4yabxe"`, `"mailto:a@b.c"`}, []string{`"example.com"`, `"/a/b"`, `"http://exa mple.com"`}},
		{`{"type":"string","format":"x-unknown"}`, []string{`"anything"`}, []string{`1`}},
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
			if g.Match([]byte(v)) {
				t.Errorf("%s: invalid %s accepted", tc.schema, v)
			}
		}
	}
}

// TestPatternLengthUnsatisfiable: a pattern no string of the allowed
// lengths matches is a bad schema, not a grammar of nothing.
func TestPatternLengthUnsatisfiable(t *testing.T) {
	_, err := FromSchema([]byte(`{"type":"string","pattern":"^abcd$","maxLength":3}`))
	if !errors.Is(err, ErrBadSchema) || !strings.Contains(err.Error(), "maxLength") {
		t.Errorf("got %v, want a bad schema naming maxLength", err)
	}
}

func TestPatternRefusedByName(t *testing.T) {
	for schema, want := range map[string]string{
		`{"type":"string","pattern":"(a)\\1"}`:                  "backreference",
		`{"type":"string","pattern":"^(?=a)"}`:                  "lookahead",
		`{"type":"string","pattern":"(?<!a)b"}`:                 "lookbehind",
		`{"type":"string","pattern":"\\bword\\b"}`:              "word boundary",
		`{"type":"string","pattern":"(?i)abc"}`:                 "group (?i",
		`{"type":"string","pattern":"\\p{L}"}`:                  `escape \p`,
		`{"type":"string","pattern":"a(^b)"}`:                   "anchor",
		`{"type":"string","format":"uri-reference"}`:            `"format" "uri-reference"`,
		`{"properties":{"a":{"type":"string","pattern":"[]"}}}`: "#/properties/a",
	} {
		_, err := FromSchema([]byte(schema))
		if !errors.Is(err, ErrUnsupportedSchema) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want a refusal naming %q", schema, err, want)
		}
	}
}

// TestPatternNullableRepetition: (Y*)* is Y*; other unbounded repetitions
// of what may be empty are refused by name.
func TestPatternNullableRepetition(t *testing.T) {
	g, err := FromSchema([]byte(`{"type":"string","pattern":"^a([b-c ]*)*$"}`))
	if err != nil {
		t.Fatal(err)
	}
	for v, want := range map[string]bool{`"a"`: true, `"abcb c"`: true, `"ad"`: false} {
		if g.Match([]byte(v)) != want {
			t.Errorf("%s: got %v, want %v", v, !want, want)
		}
	}
	_, err = FromSchema([]byte(`{"type":"string","pattern":"^(a?b?)*$"}`))
	if !errors.Is(err, ErrUnsupportedSchema) || !strings.Contains(err.Error(), "may be empty") {
		t.Errorf("got %v, want a refusal naming the empty repetition", err)
	}
}

// TestPatternRepeatedAnchor: an end anchor under a repetition ($+, ($)*)
// beside length bounds compiles to the same language Go's regexp reads
// (it once recursed without end in the automaton's construction, a stack
// overflow that no recover catches).
func TestPatternRepeatedAnchor(t *testing.T) {
	for _, tc := range []struct {
		pattern        string
		valid, invalid []string
	}{
		{`^00-1$+@`, nil, []string{`"00-1"`, `"00-1@"`}},
		{`^ab$+`, []string{`"ab"`}, []string{`"abc"`, `"a"`}},
		{`^a(?:$|b)+`, []string{`"a"`, `"ab"`, `"abbx"`}, []string{`"b"`}},
	} {
		schema := fmt.Sprintf(`{"type":"string","pattern":%q,"maxLength":12}`, tc.pattern)
		g, err := FromSchema([]byte(schema))
		if err != nil {
			var u unsatisfiable
			if errors.As(err, &u) && len(tc.valid) == 0 {
				continue // no string matches
			}
			t.Fatalf("%s: %v", schema, err)
		}
		oracle := validator(t, schema)
		for _, v := range tc.valid {
			if !g.Match([]byte(v)) || validates(oracle, v) != nil {
				t.Errorf("%s: %s: grammar %v, validator %v; want both to accept", schema, v, g.Match([]byte(v)), validates(oracle, v))
			}
		}
		for _, v := range tc.invalid {
			if g.Match([]byte(v)) || validates(oracle, v) == nil {
				t.Errorf("%s: %s: grammar %v, validator %v; want both to refuse", schema, v, g.Match([]byte(v)), validates(oracle, v))
			}
		}
	}
}
