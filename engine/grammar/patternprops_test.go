package grammar

import (
	"strings"
	"testing"
)

// TestPatternProperties: members of keys a pattern matches carry its
// schema; declared properties a pattern matches carry both.
func TestPatternProperties(t *testing.T) {
	cases := []struct {
		schema         string
		valid, invalid []string
	}{
		{`{"type":"object","patternProperties":{"^[a-z]+$":{"type":"integer"}},"additionalProperties":false}`,
			[]string{`{}`, `{"a":1}`, `{"ab":1,"cd":2}`}, []string{`{"a":"x"}`, `{"A":1}`, `{"a1":1}`}},
		{`{"type":"object","properties":{"id":{"type":"integer"}},"required":["id"],"patternProperties":{"^x-":{"type":"string"}},"additionalProperties":false}`,
			[]string{`{"id":1}`, `{"x-a":"s","id":1,"x-b":"t"}`}, []string{`{"x-a":"s"}`, `{"id":1,"x-a":1}`, `{"id":1,"y":"s"}`}},
		// a declared name the pattern matches gets both schemas
		{`{"type":"object","properties":{"ab":{"type":"string"}},"patternProperties":{"^a":{"maxLength":2}},"additionalProperties":false}`,
			[]string{`{"ab":"xy"}`, `{"ac":"x"}`}, []string{`{"ab":"xyz"}`, `{"ab":1}`, `{"b":"x"}`}},
		// undeclared keys (no additionalProperties): any key, value fits every pattern's schema
		{`{"type":"object","patternProperties":{"^n_":{"type":"number"}}}`,
			[]string{`{"n_a":1}`}, []string{`{"n_a":"x"}`}},
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
	if _, err := FromSchema([]byte(`{"type":"object","patternProperties":{"(?=a)":{}}}`)); err == nil || !containsAll(err.Error(), `"patternProperties"`, "lookahead", "at #") {
		t.Errorf("got %v, want a refusal naming patternProperties and the lookahead", err)
	}
}

func containsAll(s string, subs ...string) bool {
	for _, x := range subs {
		if !strings.Contains(s, x) {
			return false
		}
	}
	return true
}
