package grammar

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// zodPatterns are the patterns zod 4's z.toJSONSchema writes beside a
// format (z.email(), z.uuid(), z.guid(), z.uuidv4(), z.iso.datetime(),
// z.iso.date(), z.ipv4(), z.ipv6()), as JSON Schema text.
var zodPatterns = map[string][]string{
	"email":     {`^(?:[A-Za-z0-9_'+\-]+\.)*[A-Za-z0-9_'+\-]*[A-Za-z0-9_+-]@(?:[A-Za-z0-9][A-Za-z0-9\-]*\.)+[A-Za-z]{2,}$`},
	"uuid":      {`^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[1-8][0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12}|00000000-0000-0000-0000-000000000000|ffffffff-ffff-ffff-ffff-ffffffffffff)$`, `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})$`, `^([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-4[0-9a-fA-F]{3}-[89abAB][0-9a-fA-F]{3}-[0-9a-fA-F]{12})$`},
	"date-time": {`^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z|([+-](?:[01]\d|2[0-3]):[0-5]\d)))$`, `^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))T(?:(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d+)?(?:Z))$`},
	"date":      {`^(?:(?:\d\d[2468][048]|\d\d[13579][26]|\d\d0[48]|[02468][048]00|[13579][26]00)-02-29|\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|(?:02)-(?:0[1-9]|1\d|2[0-8])))$`},
	"ipv4":      {`^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9][0-9]|[0-9])$`},
	"ipv6":      {`^(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:))$`},
}

// genericPatterns narrow any format: searches, anchored prefixes and
// suffixes, a class over the whole string.
var genericPatterns = []string{`\d`, `^[0-9a-f]`, `[a-z]$`, `^[^.]*$`, `2`, `^.{0,12}$`, `-`, `^[A-Za-z0-9.:@-]+$`}

// walkString draws a sentence of g (a JSON string, its bytes printable
// ASCII) byte by byte with the naive recognizer, stopping where it is
// complete with some chance; "" if it reaches no end within 80 bytes.
func walkString(rt *rapid.T, g *Grammar, label string) string {
	st := NaiveStart(g)
	var text []byte
	for len(text) < 80 {
		if NaiveComplete(st) && rapid.IntRange(0, 3).Draw(rt, label+"-stop") == 0 {
			return string(text)
		}
		var next []byte
		for c := byte(0x20); c < 0x7F; c++ {
			if NaiveAdvance(g, st, []byte{c}) != nil {
				next = append(next, c)
			}
		}
		if len(next) == 0 {
			break
		}
		c := rapid.SampledFrom(next).Draw(rt, label)
		text = append(text, c)
		st = NaiveAdvance(g, st, []byte{c})
	}
	if NaiveComplete(st) {
		return string(text)
	}
	return ""
}

// TestFormatBesidePatternExact: a format beside a pattern (and maybe
// length bounds) is the intersection of the two languages. Every sentence
// the grammar generates satisfies both for the reference validator
// (formats asserted); and a string, drawn from the format's own grammar
// and mutated, is accepted exactly when the format's expression and the
// validator (pattern and lengths) both accept it.
func TestFormatBesidePatternExact(t *testing.T) {
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range formats {
			if !yield(n) {
				return
			}
		}
	})
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.SampledFrom(names).Draw(rt, "format")
		pat := rapid.SampledFrom(append(slices.Clone(zodPatterns[name]), genericPatterns...)).Draw(rt, "pattern")
		lengths := ""
		if rapid.IntRange(0, 2).Draw(rt, "bounded") == 0 {
			lo := rapid.IntRange(0, 12).Draw(rt, "lo")
			lengths = fmt.Sprintf(`,"minLength":%d,"maxLength":%d`, lo, lo+rapid.IntRange(0, 30).Draw(rt, "span"))
		}
		pj, _ := json.Marshal(pat)
		schema := fmt.Sprintf(`{"type":"string","format":%q,"pattern":%s%s}`, name, pj, lengths)
		g, err := FromSchema([]byte(schema))
		var u unsatisfiable
		if errors.As(err, &u) {
			return // no string of both at an allowed length
		}
		if err != nil {
			rt.Fatalf("%s: %v", schema, err)
		}
		full := formatOracle(t, schema)                                                    // format, pattern, lengths
		rest := validator(t, fmt.Sprintf(`{"type":"string","pattern":%s%s}`, pj, lengths)) // pattern, lengths
		fre := regexp.MustCompile(`^(?:` + formats[name] + `)$`)                           // the format as enforced
		plain, err := FromSchema([]byte(fmt.Sprintf(`{"type":"string","format":%q}`, name)))
		if err != nil {
			rt.Fatal(err)
		}
		for i := range 3 {
			if s := walkString(rt, g, fmt.Sprintf("gen%d", i)); s != "" && !full(s) {
				rt.Fatalf("%s: the grammar generates %s, which the validator refuses", schema, s)
			}
			s := walkString(rt, plain, fmt.Sprintf("fmt%d", i))
			if s == "" {
				continue
			}
			v, _ := strconv.Unquote(s)
			if rapid.Bool().Draw(rt, "mutate") && len(v) > 0 {
				j := rapid.IntRange(0, len(v)-1).Draw(rt, "at")
				c := rapid.SampledFrom([]byte("0a.-:@TZ9f")).Draw(rt, "c")
				if rapid.Bool().Draw(rt, "delete") {
					v = v[:j] + v[j+1:]
				} else {
					v = v[:j] + string(c) + v[j+1:]
				}
			}
			inst := strconv.Quote(v)
			want := fre.MatchString(v) && validates(rest, inst) == nil
			if got := g.Match([]byte(inst)); got != want {
				rt.Fatalf("%s: grammar accepts %s: %v, want %v", schema, inst, got, want)
			}
		}
	})
}

// TestFormatBesidePatternMaskMatchesBruteForce: along random walks through
// format-and-pattern grammars, alone and as an object's property, the mask
// equals trying every token with the reference recognizer, and some token
// is always allowed until the text is complete.
func TestFormatBesidePatternMaskMatchesBruteForce(t *testing.T) {
	var pieces [][]byte
	for b := 0x20; b < 0x7F; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`",`, `"}`, `{"`, `"a":`, `ab`, `00`, `-0`, `:00`, `T1`, `Z"`, `.com"`, `@a`, `ff`, "2024-", "é"} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // end of generation
	eos := int32(len(pieces) - 1)
	v := NewVocab(pieces, []int32{eos})
	names := []string{"date", "date-time", "email", "hostname", "ipv4", "ipv6", "time", "uuid", "uri", "duration"}
	rapid.Check(t, func(rt *rapid.T) {
		name := rapid.SampledFrom(names).Draw(rt, "format")
		pat := rapid.SampledFrom(append(slices.Clone(zodPatterns[name]), genericPatterns...)).Draw(rt, "pattern")
		pj, _ := json.Marshal(pat)
		inner := fmt.Sprintf(`{"type":"string","format":%q,"pattern":%s}`, name, pj)
		if rapid.Bool().Draw(rt, "bounded") {
			inner = fmt.Sprintf(`{"type":"string","format":%q,"pattern":%s,"maxLength":%d}`, name, pj, rapid.IntRange(8, 40).Draw(rt, "hi"))
		}
		if _, err := FromSchema([]byte(inner)); err != nil {
			var u unsatisfiable
			if errors.As(err, &u) {
				return
			}
			rt.Fatalf("%s: %v", inner, err)
		}
		schema := inner
		if rapid.Bool().Draw(rt, "wrapped") {
			schema = fmt.Sprintf(`{"type":"object","properties":{"a":%s},"required":["a"],"additionalProperties":false}`, inner)
		}
		walkAgainstBruteForce(rt, schema, v, pieces, eos, 50)
	})
}

// TestFormatBesidePatternZod: zod 4's shapes through the grammar, with
// instances labelled by the validator.
func TestFormatBesidePatternZod(t *testing.T) {
	cases := []struct {
		format         string
		valid, invalid []string
	}{
		{"email", []string{`"joe@example.com"`, `"a.b+c@x.org"`}, []string{`"joe@x.o"`, `"joe@localhost"`, `"a'b@x.org"`, `".a@x.org"`}},
		{"uuid", []string{`"123e4567-e89b-12d3-a456-426614174000"`, `"00000000-0000-0000-0000-000000000000"`}, []string{`"123e4567-e89b-02d3-a456-426614174000"`, `"123e4567-e89b-12d3-c456-426614174000"`}},
		{"date-time", []string{`"2024-02-29T03:04:05Z"`, `"2023-01-02T03:04:05.123456789+05:30"`}, []string{`"2023-02-29T03:04:05Z"`, `"2023-01-02T03:04:05.1234567890Z"`, `"2023-01-02T03:04:05"`}},
	}
	for _, tc := range cases {
		pj, _ := json.Marshal(zodPatterns[tc.format][0])
		schema := fmt.Sprintf(`{"type":"object","properties":{"v":{"type":"string","format":%q,"pattern":%s}},"required":["v"],"additionalProperties":false}`, tc.format, pj)
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatalf("%s: %v", tc.format, err)
		}
		oracle := formatOracle(t, schema)
		for _, v := range tc.valid {
			inst := `{"v":` + v + `}`
			if !oracle(inst) || !g.Match([]byte(inst)) {
				t.Errorf("%s: %s: validator %v, grammar %v; want both true", tc.format, v, oracle(inst), g.Match([]byte(inst)))
			}
		}
		for _, v := range tc.invalid {
			if inst := `{"v":` + v + `}`; g.Match([]byte(inst)) {
				t.Errorf("%s: invalid %s accepted", tc.format, v)
			}
		}
	}
	_, err := FromSchema([]byte(`{"type":"string","format":"date","pattern":"^x"}`))
	var u unsatisfiable
	if !errors.As(err, &u) || !errors.Is(err, ErrBadSchema) || !strings.Contains(err.Error(), `format "date"`) {
		t.Errorf("a format and pattern with no common string: got %v, want a bad schema naming the format", err)
	}
}
