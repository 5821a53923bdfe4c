// Package grammartest draws random JSON schemas from the subset that
// engine/grammar enforces, for property tests.
package grammartest

import (
	"encoding/json"
	"fmt"
	"strings"

	"pgregory.net/rapid"
)

// names are property names, some that need escaping in JSON.
var names = []string{"a", "b", "id", "name", "value", "x y", "q\"uote", "back\\slash", "été", "n1", ""}

// Schema draws a schema document (as JSON text).
func Schema(t *rapid.T) string {
	var defs map[string]any
	if rapid.Bool().Draw(t, "defs") {
		defs = map[string]any{"d": node(t, 2, nil)}
	}
	root := node(t, 3, defs)
	if defs != nil {
		if m, ok := root.(map[string]any); ok && m["$ref"] == nil {
			m["$defs"] = defs
		} else {
			root = map[string]any{"$defs": defs, "anyOf": []any{root, map[string]any{"type": "null"}}}
		}
	}
	b, err := json.Marshal(root)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func node(t *rapid.T, depth int, defs map[string]any) any {
	kinds := []string{"string", "integer", "number", "boolean", "null", "enum", "const", "nullable"}
	if depth > 0 {
		kinds = append(kinds, "object", "object", "array", "anyOf")
	}
	if defs != nil {
		kinds = append(kinds, "ref")
	}
	switch k := rapid.SampledFrom(kinds).Draw(t, "kind"); k {
	case "string":
		s := map[string]any{"type": "string"}
		if rapid.Bool().Draw(t, "minLength") {
			s["minLength"] = rapid.IntRange(0, 3).Draw(t, "min")
		}
		if rapid.Bool().Draw(t, "maxLength") {
			s["maxLength"] = rapid.IntRange(3, 8).Draw(t, "max")
		}
		return s
	case "integer", "number", "boolean", "null":
		return map[string]any{"type": k, "description": "a " + k}
	case "nullable":
		return map[string]any{"type": []string{rapid.SampledFrom([]string{"string", "integer", "boolean"}).Draw(t, "t"), "null"}}
	case "enum":
		n := rapid.IntRange(1, 4).Draw(t, "n")
		var vals []any
		for i := range n {
			if rapid.Bool().Draw(t, "str") {
				vals = append(vals, fmt.Sprintf("v%d%s", i, strings.Repeat("é", i)))
			} else {
				vals = append(vals, i*7-3)
			}
		}
		return map[string]any{"enum": vals}
	case "const":
		return map[string]any{"const": rapid.SampledFrom([]any{"fixed", 42, true, nil, []any{1, "two"}, map[string]any{"k": "v"}}).Draw(t, "c")}
	case "object":
		n := rapid.IntRange(0, 4).Draw(t, "props")
		props := map[string]any{}
		var req []string
		for range n {
			name := rapid.SampledFrom(names).Draw(t, "name")
			if _, dup := props[name]; dup {
				continue
			}
			props[name] = node(t, depth-1, defs)
			if rapid.Bool().Draw(t, "required") {
				req = append(req, name)
			}
		}
		s := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
		if req != nil {
			s["required"] = req
		}
		return s
	case "array":
		s := map[string]any{"type": "array", "items": node(t, depth-1, defs)}
		if rapid.Bool().Draw(t, "minItems") {
			s["minItems"] = rapid.IntRange(0, 2).Draw(t, "min")
		}
		if rapid.Bool().Draw(t, "maxItems") {
			s["maxItems"] = rapid.IntRange(2, 4).Draw(t, "max")
		}
		return s
	case "anyOf":
		n := rapid.IntRange(1, 3).Draw(t, "n")
		var alts []any
		for range n {
			alts = append(alts, node(t, depth-1, defs))
		}
		return map[string]any{"anyOf": alts}
	case "ref":
		return map[string]any{"$ref": "#/$defs/d"}
	}
	panic("unreachable")
}
