package grammar

import (
	"encoding/json"
	"math/big"
	"strconv"
	"strings"
)

// allOf is merged into one schema where the merge is exact: keywords of
// different branches side by side, and where two branches set the same
// keyword, a value that means both (types intersected, required names
// united, properties of the same name as allOf of both schemas, the
// tighter of two bounds, enum values in both). additionalProperties of a
// branch constrains the properties other branches declare and it does
// not: their schema gains it (false removes an optional one). A $ref
// branch is its target (with its siblings from 2019-09 on). What cannot be
// merged so is refused by name: two different patterns, two anyOf, a
// branch with patternProperties beside additionalProperties, and so on.

// unsatisfiable marks a merge that no value can satisfy (an ErrBadSchema):
// as an anyOf branch it is dropped.
type unsatisfiable struct{ error }

func (u unsatisfiable) Unwrap() error { return u.error }

// maxAllOfDepth bounds nested allOf and $ref chains followed in a merge.
const maxAllOfDepth = 16

// mergeAllOf returns s with its allOf (and, from 2019-09, a $ref beside
// it) merged in.
func (c *schemaCompiler) mergeAllOf(s object, path string) (object, error) {
	if c.textBytes > maxMergeText {
		return nil, unsupported(path, "keyword %q whose merges exceed %d bytes of schema", "allOf", maxMergeText)
	}
	var parts []object
	if err := c.flatten(s, path, 0, &parts); err != nil {
		return nil, err
	}
	merged := object{}
	for _, p := range parts {
		if tupleConflict(merged, p) || tupleConflict(p, merged) {
			return nil, unsupported(path, "keyword %q whose branches set tuple items (prefixItems, additionalItems, items as an array) and other items keywords together", "allOf")
		}
		for _, m := range p {
			if err := c.mergeKeyword(&merged, m, path); err != nil {
				return nil, err
			}
		}
	}
	if c.textBytes > maxMergeText {
		return nil, unsupported(path, "keyword %q whose merges exceed %d bytes of schema", "allOf", maxMergeText)
	}
	return c.closeProperties(merged, parts, path)
}

// flatten appends the parts whose conjunction s is: s without allOf and
// $ref, each allOf branch flattened, a $ref's target flattened.
func (c *schemaCompiler) flatten(s object, path string, depth int, parts *[]object) error {
	if depth > maxAllOfDepth {
		return unsupported(path, "keyword %q nested deeper than %d", "allOf", maxAllOfDepth)
	}
	var own object
	var branches []any
	for _, m := range s {
		switch m.key {
		case "allOf":
			list, ok := m.val.([]any)
			if !ok || len(list) == 0 {
				return bad(path, "allOf must be a non-empty array")
			}
			branches = append(branches, list...)
		case "$ref":
			rs, ok := m.val.(string)
			if !ok {
				return bad(path, "$ref must be a string")
			}
			if c.refSiblingsIgnored() {
				// the siblings are ignored: the target alone
				t := c.resolve(rs)
				if t == nil {
					return unsupported(path, "$ref %q inside allOf that does not resolve in this document", rs)
				}
				return c.flattenAny(t, path, depth+1, parts)
			}
			branches = append(branches, c.resolve(rs))
			if branches[len(branches)-1] == nil {
				return unsupported(path, "$ref %q inside allOf that does not resolve in this document", rs)
			}
		case "$id", "id":
			if id, ok := m.val.(string); ok && depth > 0 && !strings.HasPrefix(id, "#") {
				return unsupported(path, "keyword %q with an $id in a branch", "allOf")
			}
		case "$defs", "definitions", "$schema", "$anchor":
		default:
			own = append(own, m)
		}
	}
	*parts = append(*parts, own)
	for _, b := range branches {
		if err := c.flattenAny(b, path, depth+1, parts); err != nil {
			return err
		}
	}
	return nil
}

func (c *schemaCompiler) flattenAny(b any, path string, depth int, parts *[]object) error {
	switch b := b.(type) {
	case bool:
		if !b {
			return bad(path, "an allOf branch false admits no value")
		}
		return nil
	case object:
		return c.flatten(b, path, depth, parts)
	}
	return bad(path, "an allOf branch must be a schema")
}

// text is jsonText, counted against maxMergeText.
func (c *schemaCompiler) text(v any) string {
	t := appendText(nil, v, max(maxMergeText-c.textBytes+1, 0))
	c.textBytes += len(t)
	return string(t)
}

// appendText appends v's text to b, stopping once b is longer than limit
// (limit < 0: no limit).
func appendText(b []byte, v any, limit int) []byte {
	if limit >= 0 && len(b) > limit {
		return b
	}
	switch v := v.(type) {
	case object:
		b = append(b, '{')
		for _, m := range v {
			b = strconv.AppendQuote(b, m.key)
			b = append(b, ':')
			b = appendText(b, m.val, limit)
			b = append(b, ',')
		}
		return append(b, '}')
	case []any:
		b = append(b, '[')
		for _, x := range v {
			b = appendText(b, x, limit)
			b = append(b, ',')
		}
		return append(b, ']')
	case string:
		return strconv.AppendQuote(b, v)
	case json.Number:
		return append(b, v...)
	case bool:
		return strconv.AppendBool(b, v)
	}
	return append(b, "null"...)
}

// tupleConflict: a has tuple keywords (prefixItems, additionalItems,
// items as an array) and b any keyword about items; their meaning together
// is not one of them, so such a merge is refused.
func tupleConflict(a, b object) bool {
	_, p := a.get("prefixItems")
	_, ai := a.get("additionalItems")
	it, _ := a.get("items")
	_, list := it.([]any)
	if !p && !ai && !list {
		return false
	}
	for _, k := range []string{"prefixItems", "additionalItems", "items"} {
		if _, ok := b.get(k); ok {
			return true
		}
	}
	return false
}

// mergeKeyword adds keyword m to merged, meaning both where merged has it.
func (c *schemaCompiler) mergeKeyword(merged *object, m member, path string) error {
	if !keywords[m.key] && !assertions[m.key] {
		return nil // asserts nothing
	}
	i := -1
	for j, x := range *merged {
		if x.key == m.key {
			i = j
		}
	}
	if i < 0 {
		*merged = append(*merged, m)
		return nil
	}
	old := (*merged)[i].val
	if c.text(old) == c.text(m.val) {
		return nil
	}
	set := func(v any) { (*merged)[i].val = v }
	switch m.key {
	case "type":
		a, b := typeSet(old), typeSet(m.val)
		if a == nil || b == nil {
			return bad(path, "type must be a string or an array of strings")
		}
		var out []any
		for _, n := range []string{"null", "boolean", "object", "array", "string"} {
			if a[n] && b[n] {
				out = append(out, n)
			}
		}
		// "number" includes the integers
		switch {
		case a["number"] && b["number"]:
			out = append(out, "number")
		case (a["number"] || a["integer"]) && (b["number"] || b["integer"]):
			out = append(out, "integer")
		}
		if len(out) == 0 {
			return unsatisfiable{bad(path, "allOf branches whose types share none")}
		}
		set(out)
	case "required":
		a, _ := old.([]any)
		b, _ := m.val.([]any)
		seen := map[string]bool{}
		var out []any
		for _, x := range append(append([]any{}, a...), b...) {
			if s, ok := x.(string); ok && !seen[s] {
				seen[s] = true
				out = append(out, s)
			}
		}
		set(out)
	case "properties":
		a, ok1 := old.(object)
		b, ok2 := m.val.(object)
		if !ok1 || !ok2 {
			return bad(path, "properties must be an object")
		}
		out := append(object{}, a...)
		for _, p := range b {
			found := false
			for j := range out {
				if out[j].key == p.key {
					found = true
					if c.text(out[j].val) != c.text(p.val) {
						out[j].val = object{{"allOf", []any{out[j].val, p.val}}}
					}
				}
			}
			if !found {
				out = append(out, p)
			}
		}
		set(out)
	case "items", "additionalProperties":
		if _, isList := old.([]any); isList {
			return unsupported(path, "keyword %q set differently by allOf branches", m.key)
		}
		if _, isList := m.val.([]any); isList {
			return unsupported(path, "keyword %q set differently by allOf branches", m.key)
		}
		if a, ok := old.(bool); ok && !a {
			return nil
		}
		if b, ok := m.val.(bool); ok && !b {
			set(false)
			return nil
		}
		if a, ok := old.(bool); ok && a {
			set(m.val)
			return nil
		}
		if b, ok := m.val.(bool); ok && b {
			return nil
		}
		set(object{{"allOf", []any{old, m.val}}})
	case "minimum", "minLength", "minItems", "maximum", "maxLength", "maxItems":
		a, ok1 := old.(json.Number)
		b, ok2 := m.val.(json.Number)
		x, okx := new(big.Rat).SetString(string(a))
		y, oky := new(big.Rat).SetString(string(b))
		if !ok1 || !ok2 || !okx || !oky {
			return bad(path, "%s must be a number", m.key)
		}
		lower := strings.HasPrefix(m.key, "min")
		if (x.Cmp(y) < 0) == lower {
			set(b)
		}
	case "enum":
		a, ok1 := old.([]any)
		b, ok2 := m.val.([]any)
		if !ok1 || !ok2 {
			return bad(path, "enum must be a non-empty array")
		}
		in := map[string]bool{}
		for _, x := range b {
			in[c.text(x)] = true
		}
		var out []any
		for _, x := range a {
			if in[c.text(x)] {
				out = append(out, x)
			}
		}
		if len(out) == 0 {
			return unsatisfiable{bad(path, "allOf branches whose enums share no value")}
		}
		set(out)
	default:
		return unsupported(path, "keyword %q set differently by allOf branches", m.key)
	}
	return nil
}

func typeSet(t any) map[string]bool {
	out := map[string]bool{}
	switch t := t.(type) {
	case string:
		out[t] = true
	case []any:
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return nil
			}
			out[s] = true
		}
	default:
		return nil
	}
	return out
}

// closeProperties applies each part's additionalProperties to the
// properties that other parts declare and it does not.
func (c *schemaCompiler) closeProperties(merged object, parts []object, path string) (object, error) {
	pv, _ := merged.get("properties")
	props, _ := pv.(object)
	if len(props) == 0 {
		return merged, nil
	}
	required := map[string]bool{}
	if r, ok := merged.get("required"); ok {
		list, _ := r.([]any)
		for _, x := range list {
			if s, ok := x.(string); ok {
				required[s] = true
			}
		}
	}
	out := append(object{}, props...)
	for _, p := range parts {
		addl, ok := p.get("additionalProperties")
		if !ok {
			continue
		}
		if a, isBool := addl.(bool); isBool && a {
			continue
		}
		if _, ok := p.get("patternProperties"); ok {
			return nil, unsupported(path, "keyword %q beside additionalProperties in an allOf branch", "patternProperties")
		}
		own := map[string]bool{}
		if v, ok := p.get("properties"); ok {
			o, _ := v.(object)
			for _, m := range o {
				own[m.key] = true
			}
		}
		kept := out[:0:0]
		for _, m := range out {
			if own[m.key] {
				kept = append(kept, m)
				continue
			}
			if a, isBool := addl.(bool); isBool && !a {
				if required[m.key] {
					return nil, unsatisfiable{bad(path, "allOf requires %q, which a branch's additionalProperties forbids", m.key)}
				}
				continue // it may not appear
			}
			kept = append(kept, member{m.key, object{{"allOf", []any{m.val, addl}}}})
		}
		out = kept
	}
	res := append(object{}, merged...)
	for i := range res {
		if res[i].key == "properties" {
			res[i].val = out
		}
	}
	return res, nil
}
