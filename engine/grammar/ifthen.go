package grammar

// if/then/else is (if and then) or (not if and else), then and else true
// when absent. reduceIf rewrites it so where not if is itself a union of
// schemas this package compiles (negate): the branches become an anyOf
// beside the other keywords, which are distributed over them as anyOf's
// are. A condition whose negation is not one of these forms, or an
// if/then/else beside anyOf or oneOf, is refused by name (keyword "if").

// reduceIf rewrites schema s without if, then and else; s itself when it
// has no if (then and else alone assert nothing).
func (c *schemaCompiler) reduceIf(s object, path string) (object, error) {
	ifv, ok := s.get("if")
	if !ok {
		_, t := s.get("then")
		_, e := s.get("else")
		if t || e {
			return without(s, "then", "else"), nil
		}
		return s, nil
	}
	var thenv, elsev any = true, true
	if v, ok := s.get("then"); ok {
		thenv = v
	}
	if v, ok := s.get("else"); ok {
		elsev = v
	}
	rest := without(s, "if", "then", "else")
	if b, ok := ifv.(bool); ok {
		if b {
			return append(rest, member{"allOf", appendAllOf(rest, thenv)}), nil
		}
		return append(rest, member{"allOf", appendAllOf(rest, elsev)}), nil
	}
	refuse := unsupported(path, "keyword %q", "if")
	if _, ok := s.get("anyOf"); ok {
		return nil, refuse
	}
	if _, ok := s.get("oneOf"); ok {
		return nil, refuse
	}
	cond, ok := ifv.(object)
	if !ok {
		return nil, bad(path, "if must be a schema")
	}
	negs, ok := c.negate(cond)
	if !ok {
		return nil, refuse
	}
	var branches []any // then or else false: no branch
	if thenv != false {
		branches = append(branches, object{{"allOf", []any{cond, thenv}}})
	}
	if elsev != false {
		for _, n := range negs {
			branches = append(branches, object{{"allOf", []any{n, elsev}}})
		}
	}
	if len(branches) == 0 {
		return nil, unsatisfiable{bad(path, "if/then/else admits no value")}
	}
	return append(rest, member{"anyOf", branches}), nil
}

// appendAllOf: s's allOf list (a copy) with x after it.
func appendAllOf(s object, x any) []any {
	var list []any
	if a, ok := s.get("allOf"); ok {
		l, _ := a.([]any)
		list = append(list, l...)
	}
	return append(list, x)
}

// negate: schemas whose union is not cond, when cond is a form whose
// negation this package compiles: no assertion (nothing), a type, enum
// or const, not (reduceNot reads {"not": cond}); or a discriminator:
// type object (or none), properties each with only const or enum,
// required. Its negation: not an object (where cond says type object),
// an object without a required property, or an object with a
// discriminating property whose value is none of its values.
func (c *schemaCompiler) negate(cond object) ([]any, bool) {
	cond = c.derefAll(cond)
	if cond == nil {
		return nil, false
	}
	switch {
	case onlyKeys(cond):
		return nil, true
	case onlyKeys(cond, "type"), onlyKeys(cond, "enum", "const"), onlyKeys(cond, "not"):
		return []any{object{{"not", cond}}}, true
	case !onlyKeys(cond, "type", "properties", "required"):
		return nil, false
	}
	var out []any
	if t, ok := cond.get("type"); ok {
		if t != "object" {
			return nil, false
		}
		out = append(out, object{{"not", object{{"type", "object"}}}})
	}
	if r, ok := cond.get("required"); ok {
		names, ok := stringList(r)
		if !ok {
			return nil, false
		}
		for _, n := range names {
			out = append(out, object{{"type", "object"}, {"not", object{{"required", []any{n}}}}})
		}
	}
	if p, ok := cond.get("properties"); ok {
		props, ok := p.(object)
		if !ok {
			return nil, false
		}
		for _, m := range props {
			ps, ok := m.val.(object)
			if !ok || !onlyKeys(ps, "enum", "const") {
				return nil, false
			}
			out = append(out, object{{"type", "object"}, {"required", []any{m.key}},
				{"properties", object{{m.key, object{{"not", ps}}}}}})
		}
	}
	return out, true
}
