package grammar

import (
	"encoding/json"
	"math/big"
	"slices"
)

// The forms of not that reduce exactly to keywords beside it (reduceNot);
// {"not": {"required": […]}} is objectType's (deps.go); any other not is
// refused by name.
//
//   - not false asserts nothing; not true and not {} admit no value.
//   - not {not: X} is X (as an allOf branch).
//   - not {type: T} removes T from the schema's types (all types when it
//     has none); number takes integer with it, integer alone is refused
//     where number stays (the numbers that are not integers are no type).
//   - not {enum: L} or {const: v}: beside enum or const, the values equal
//     (as JSON) to one of L are removed; otherwise values of types the
//     schema excludes are vacuous, null removes the type null, and a
//     boolean beside type boolean alone leaves the other boolean.
//
// The rewritten schema is compiled as any other, so its merges and
// refusals are the usual ones.

var allTypes = []string{"object", "array", "string", "number", "boolean", "null"}

// onlyKeys reports whether every assertion keyword of o is one of allowed.
func onlyKeys(o object, allowed ...string) bool {
	for _, m := range o {
		if (keywords[m.key] || assertions[m.key]) && !slices.Contains(allowed, m.key) {
			return false
		}
	}
	return true
}

func without(s object, keys ...string) object {
	var out object
	for _, m := range s {
		if !slices.Contains(keys, m.key) {
			out = append(out, m)
		}
	}
	return out
}

// reduceNot rewrites schema s without its not where one of the forms above
// applies; s itself where none does (the not is then refused, or read by
// objectType).
func (c *schemaCompiler) reduceNot(s object, path string) (object, error) {
	nv, ok := s.get("not")
	if !ok {
		return s, nil
	}
	switch n := nv.(type) {
	case bool:
		if !n {
			return without(s, "not"), nil
		}
		return nil, unsatisfiable{bad(path, "not true admits no value")}
	case object:
		n = c.derefAll(n)
		if n == nil {
			return s, nil
		}
		switch {
		case onlyKeys(n):
			return nil, unsatisfiable{bad(path, "not {} admits no value")}
		case onlyKeys(n, "not"):
			inner, _ := n.get("not")
			out := without(s, "not", "allOf")
			var list []any
			if a, ok := s.get("allOf"); ok {
				l, ok := a.([]any)
				if !ok {
					return s, nil // a bad allOf: reported where it is read
				}
				list = slices.Clone(l)
			}
			return append(out, member{"allOf", append(list, inner)}), nil
		case onlyKeys(n, "type"):
			t, _ := n.get("type")
			return c.notType(s, typeSet(t), path)
		case onlyKeys(n, "enum", "const"):
			return c.notValues(s, c.finiteValues(n), path)
		}
	}
	return s, nil
}

// derefAll: o with its $ref followed (nil if it cannot be), or o.
func (c *schemaCompiler) derefAll(o object) object {
	if _, ok := o.get("$ref"); !ok {
		return o
	}
	if len(o) != 1 {
		return nil // keywords beside $ref: read as the draft says elsewhere
	}
	return c.deref(o)
}

// schemaTypes: the types s allows, integer standing alone only where
// number does not.
func schemaTypes(s object) []string {
	t, ok := s.get("type")
	if !ok {
		return slices.Clone(allTypes)
	}
	var out []string
	for _, n := range allTypes {
		if typeSet(t)[n] {
			out = append(out, n)
		}
	}
	if set := typeSet(t); set["integer"] && !set["number"] {
		out = append(out, "integer")
	}
	return out
}

func (c *schemaCompiler) notType(s object, drop map[string]bool, path string) (object, error) {
	if drop == nil {
		return s, nil
	}
	if _, ok := s.get("type"); ok && typeSet(mustGet(s, "type")) == nil {
		return s, nil // a bad type: reported where it is read
	}
	var keep []any
	for _, t := range schemaTypes(s) {
		switch {
		case drop[t], t == "integer" && drop["number"]:
			continue
		case t == "number" && drop["integer"]:
			return s, nil // the numbers that are not integers
		}
		keep = append(keep, t)
	}
	if len(keep) == 0 {
		return nil, unsatisfiable{bad(path, "not removes every type the schema allows")}
	}
	return append(without(s, "not", "type"), member{"type", keep}), nil
}

func mustGet(o object, k string) any { v, _ := o.get(k); return v }

func (c *schemaCompiler) notValues(s object, out []any, path string) (object, error) {
	if len(out) == 0 {
		return s, nil
	}
	_, hasConst := s.get("const")
	_, hasEnum := s.get("enum")
	if hasConst || hasEnum {
		var keep []any
		for _, v := range c.finiteValues(s) {
			if !slices.ContainsFunc(out, func(x any) bool { return jsonEqual(x, v) }) {
				keep = append(keep, v)
			}
		}
		if len(keep) == 0 {
			return nil, unsatisfiable{bad(path, "not removes every value enum or const allows")}
		}
		return append(without(s, "not", "const", "enum"), member{"enum", keep}), nil
	}
	types := schemaTypes(s)
	t := append([]any{}, toAny(types)...)
	var left []any // the excluded values of a type the schema allows
	for _, v := range out {
		if typeAdmits(t, v) || v == nil && slices.Contains(types, "null") {
			left = append(left, v)
		}
	}
	if len(left) == 0 {
		return without(s, "not"), nil
	}
	drop := map[string]bool{}
	var bools, strs []any
	for _, v := range left {
		switch v := v.(type) {
		case nil:
			drop["null"] = true
		case bool:
			bools = append(bools, v)
		case string:
			strs = append(strs, v)
		default:
			return s, nil // numbers, objects, arrays: no such form
		}
	}
	if len(strs) > 0 {
		// strings excluded: stringType's (notStrings), vacuous on other
		// types; the other values handled here first
		if len(bools) > 0 || drop["null"] {
			rest, err := c.notValues(without(s, "not"), append(bools, nilIf(drop["null"])...), path)
			if err != nil {
				return nil, err
			}
			if _, ok := rest.get("not"); ok {
				return s, nil
			}
			s = rest
		}
		if len(strs) > maxStacks {
			return s, nil
		}
		return append(without(s, "not"), member{"not", object{{"enum", strs}}}), nil
	}
	if len(bools) > 0 {
		if slices.Contains(bools, true) && slices.Contains(bools, false) {
			drop["boolean"] = true
		} else if !slices.Equal(types, []string{"boolean"}) {
			return s, nil
		} else {
			return append(without(s, "not", "type"), member{"const", bools[0] != true}), nil
		}
	}
	return c.notType(s, drop, path)
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

// jsonEqual: JSON Schema's equality (numbers by value, objects whatever
// their key order).
func jsonEqual(a, b any) bool {
	switch a := a.(type) {
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		x, ok1 := new(big.Rat).SetString(a.String())
		y, ok2 := new(big.Rat).SetString(b.String())
		return ok1 && ok2 && x.Cmp(y) == 0
	case object:
		b, ok := b.(object)
		if !ok || len(a) != len(b) {
			return false
		}
		for _, m := range a {
			v, ok := b.get(m.key)
			if !ok || !jsonEqual(m.val, v) {
				return false
			}
		}
		return true
	case []any:
		b, ok := b.([]any)
		if !ok || len(a) != len(b) {
			return false
		}
		for i := range a {
			if !jsonEqual(a[i], b[i]) {
				return false
			}
		}
		return true
	default:
		return a == b
	}
}

// reduceConstEnum: const beside enum (as a merge of allOf branches makes
// them) is const where enum holds its value, no value otherwise.
func reduceConstEnum(s object, path string) (object, error) {
	cv, ok := s.get("const")
	if !ok {
		return s, nil
	}
	ev, ok := s.get("enum")
	if !ok {
		return s, nil
	}
	list, ok := ev.([]any)
	if !ok {
		return s, nil // a bad enum: reported where it is read
	}
	if !slices.ContainsFunc(list, func(x any) bool { return jsonEqual(x, cv) }) {
		return nil, unsatisfiable{bad(path, "const is not one of enum's values")}
	}
	return without(s, "enum"), nil
}

func nilIf(b bool) []any {
	if b {
		return []any{nil}
	}
	return nil
}

// notStrings: the strings s's not excludes, when it is {"enum": […]} or
// {"const": …} of strings only (reduceNot leaves it so); nil otherwise.
func notStrings(s object) []string {
	v, _ := s.get("not")
	o, ok := v.(object)
	if !ok || !onlyKeys(o, "enum", "const") {
		return nil
	}
	var vals []any
	if cv, ok := o.get("const"); ok {
		vals = []any{cv}
	} else if ev, ok := o.get("enum"); ok {
		vals, _ = ev.([]any)
	}
	var out []string
	for _, x := range vals {
		str, ok := x.(string)
		if !ok {
			return nil
		}
		out = append(out, str)
	}
	return out
}
