package grammar

import (
	"errors"
	"fmt"
	"regexp"
)

// patternObject compiles an object schema with patternProperties. A
// declared property whose name a pattern matches gets that pattern's
// schema too (allOf). Members of other keys are of two kinds: a key that a
// pattern generates (its regexp as the key's grammar), whose value must
// satisfy every pattern's schema that its key may also match (all but
// patterns that no string matches together with it: both anchored at the
// start, their first characters apart) and every declared property's
// schema whose name the pattern matches (a generated key may match them
// too);
// and, where additionalProperties allows undeclared keys, a key that
// spells no declared name, whose value must satisfy additionalProperties
// and every pattern's schema (such a key may match any pattern). Either
// kind whose value no value satisfies is left out; one whose merge cannot
// be enforced is refused.
//
// With kn (propertyNames of a regular language) every generated key is
// also of that language: a pattern's key is the product of both automata,
// an undeclared key the product of the language's and one of every string
// but the declared names.
func (c *schemaCompiler) patternObject(s, props object, required map[string]bool, path string, kn *keyNames) (int, error) {
	ppv, _ := s.get("patternProperties")
	pp, ok := ppv.(object)
	if !ok {
		return 0, bad(path, "patternProperties must be an object")
	}
	type pat struct {
		src, goSrc string
		re         *regexp.Regexp
		schema     any
	}
	var pats []pat
	for _, m := range pp {
		g, err := ecmaToGo(m.key)
		if err != nil {
			return 0, unsupported(path, "keyword %q with %v in %q", "patternProperties", err, m.key)
		}
		re, err := regexp.Compile(g)
		if err != nil {
			return 0, unsupported(path, "keyword %q with a pattern Go's regexp cannot read (%q)", "patternProperties", m.key)
		}
		pats = append(pats, pat{m.key, g, re, m.val})
	}
	matches := func(p pat, name string) (bool, error) {
		for _, r := range name {
			if r > 0xFFFF {
				return false, unsupported(path, "keyword %q beside a property name outside the Basic Multilingual Plane", "patternProperties")
			}
		}
		return p.re.MatchString(name), nil
	}
	// declared properties with the schemas of the patterns they match
	var declared object
	for _, m := range props {
		list := []any{m.val}
		for _, p := range pats {
			ok, err := matches(p, m.key)
			if err != nil {
				return 0, err
			}
			if ok {
				list = append(list, p.schema)
			}
		}
		v := m.val
		if len(list) > 1 {
			v = object{{"allOf", list}}
		}
		declared = append(declared, member{m.key, v})
	}
	var all []any
	for _, p := range pats {
		all = append(all, p.schema)
	}
	// try compiles a merged schema, leaving the member out (-1) where it
	// cannot be expressed or admits nothing.
	try := func(list []any, where string) (int, error) {
		r, err := c.node(object{{"allOf", list}}, where)
		var u unsatisfiable
		if c.textBytes > maxMergeText || c.nodes > maxNodes || c.b.tooBig {
			return -1, err // the document is too large: no more merging
		}
		if errors.As(err, &u) {
			return -1, nil // no value: no such member
		}
		return r, err
	}
	ws := ref(c.b.ws())
	var members [][]elem
	for i, p := range pats {
		// its value: the schemas of the patterns its key may also match
		// (all but those no string matches together with it)
		var list []any
		for j, q := range pats {
			if j == i || !patternsApart(p.goSrc, q.goSrc) {
				list = append(list, q.schema)
			}
		}
		for _, m := range props {
			if ok, _ := matches(p, m.key); ok {
				list = append(list, m.val)
			}
		}
		v, err := try(list, fmt.Sprintf("%s/patternProperties/%d", path, i))
		if err != nil {
			return 0, err
		}
		if v < 0 {
			continue
		}
		var key int
		if kn != nil {
			if key, err = c.keyRule(kn, p.goSrc, path); err != nil {
				return 0, err
			}
			if key < 0 {
				continue // no key of both
			}
		} else if key, err = c.b.regexString("key:"+p.goSrc, p.goSrc, -1); err != nil {
			continue // a key grammar too large: no such members
		}
		members = append(members, []elem{ref(key), ws, terms(':', ':'), ws, ref(v)})
	}
	addl, hasAddl := s.get("additionalProperties")
	switch addl.(type) {
	case bool, object, nil:
	default:
		return 0, bad(path, "additionalProperties must be a boolean or a schema")
	}
	if a, isBool := addl.(bool); !hasAddl || !isBool || a {
		list := append([]any{}, all...)
		if _, isObj := addl.(object); isObj {
			list = append(list, addl)
		}
		v, err := try(list, path+"/additionalProperties")
		if err != nil {
			return 0, err
		}
		if v >= 0 {
			anyKey := c.b.str(0, -1)
			if kn != nil {
				// a key of the language that spells no declared name
				if anyKey, err = c.keyRule(kn, "", path, names(props)...); err != nil {
					return 0, err
				}
			}
			if anyKey < 0 {
				// no undeclared key
			} else if len(props) == 0 || kn != nil {
				members = append(members, []elem{ref(anyKey), ws, terms(':', ':'), ws, ref(v)})
			} else if x := c.extraMember(path, props, v); x >= 0 {
				members = append(members, one(ref(x)))
			}
		}
	}
	extra := -1
	if len(members) > 0 {
		extra = c.b.add(path+"/pattern-member", members...)
	}
	if len(declared) == 0 {
		if extra < 0 {
			return c.b.add(path, cat(lit("{"), one(ws), lit("}"))), nil
		}
		more := c.b.repeat(path+"/pattern-members", one(ref(extra)), c.b.sep(), 1, -1)
		return c.b.add(path, cat(lit("{"), one(ws), lit("}")), cat(lit("{"), []elem{ws, ref(more), ws}, lit("}"))), nil
	}
	return c.declaredObject(declared, required, path, extra, 0, -1, objectRules{})
}
