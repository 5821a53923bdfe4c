package grammar

import (
	"errors"
	"regexp"
	"unicode/utf8"
)

// propertyNames: the keys of an object must be valid for a schema. Two
// forms are enforced exactly; any other is refused by name.
//
// A finite set (enum or const, their string values kept where the string
// keywords beside them admit them; or a type that admits no string, or
// false: no key at all) turns the object into one of declared properties
// only: each admitted key is a property whose value carries what the key
// would carry (its properties schema and the schemas of the patterns that
// match it; an undeclared key that no pattern matches,
// additionalProperties, and no member where that is false), so
// minProperties and maxProperties count exactly.
//
// A regular language (pattern, format, minLength, maxLength: a string
// schema's grammar) keeps the declared properties whose names it admits
// and makes it the grammar of every other key: a map's keys; the keys a
// patternProperties pattern generates, as the product of both automata;
// undeclared keys beside declared properties, as the product with the
// automaton of every string but the declared names (excludeDFA).

// keyNames is a propertyNames read: finite (values the keys admitted) or
// regular (sc their language, schema the string schema of it).
type keyNames struct {
	finite bool
	values []string
	sc     *stringConstraint
	schema object
}

// readKeyNames reads propertyNames v; nil when it admits every key.
func (c *schemaCompiler) readKeyNames(v any, path string) (*keyNames, error) {
	if b, ok := v.(bool); ok {
		if b {
			return nil, nil
		}
		return &keyNames{finite: true}, nil
	}
	if vacuousOnKeys(v) {
		return nil, nil
	}
	refuse := unsupported(path, "keyword %q", "propertyNames")
	o := c.deref(v)
	if o == nil {
		return nil, refuse
	}
	admitsString := true
	keySchema := object{{"type", "string"}}
	for _, m := range o {
		switch m.key {
		case "type":
			t := typeSet(m.val)
			if t == nil {
				return nil, bad(path, "propertyNames has a bad type")
			}
			admitsString = t["string"]
		case "enum", "const":
		case "pattern", "format", "minLength", "maxLength":
			keySchema = append(keySchema, m)
		case "$defs", "definitions":
		default:
			if !keywords[m.key] && !assertions[m.key] {
				continue // asserts nothing
			}
			if t, ok := appliesTo[m.key]; ok && t != "string" {
				continue // vacuous on strings
			}
			return nil, refuse
		}
	}
	if !admitsString {
		return &keyNames{finite: true}, nil
	}
	sc, err := c.readString(o, path+"/propertyNames")
	if err != nil {
		return nil, err
	}
	if _, hasEnum := o.get("enum"); hasEnum || func() bool { _, ok := o.get("const"); return ok }() {
		kn := &keyNames{finite: true}
		seen := map[string]bool{}
		for _, x := range c.finiteValues(o) {
			s, ok := x.(string)
			if ok && !seen[s] && sc.admits(s) {
				seen[s] = true
				kn.values = append(kn.values, s)
			}
		}
		if len(kn.values) > maxRepeat {
			return nil, unsupported(path, "keyword %q with more than %d names", "propertyNames", maxRepeat)
		}
		return kn, nil
	}
	if sc.goPattern == "" && sc.format == "" && sc.lo == 0 && sc.hi < 0 {
		return nil, nil
	}
	return &keyNames{sc: sc, schema: keySchema}, nil
}

// finiteKeyObject: object schema s whose keys are names only, rewritten
// as declared properties only (additionalProperties false) and compiled.
func (c *schemaCompiler) finiteKeyObject(s, props object, names []string, path string, used map[string]bool) (int, error) {
	type pat struct {
		re     *regexp.Regexp
		schema any
	}
	var pats []pat
	if ppv, ok := s.get("patternProperties"); ok {
		pp, ok := ppv.(object)
		if !ok {
			return 0, bad(path, "patternProperties must be an object")
		}
		for _, m := range pp {
			g, err := ecmaToGo(m.key)
			if err != nil {
				return 0, unsupported(path, "keyword %q with %v in %q", "patternProperties", err, m.key)
			}
			re, err := regexp.Compile(g)
			if err != nil {
				return 0, unsupported(path, "keyword %q with a pattern Go's regexp cannot read (%q)", "patternProperties", m.key)
			}
			pats = append(pats, pat{re, m.val})
		}
	}
	addl, _ := s.get("additionalProperties")
	var np object
	for _, k := range names {
		var list []any
		v, declared := props.get(k)
		if declared {
			list = append(list, v)
		}
		matched := false
		for _, p := range pats {
			if !utf8.ValidString(k) || hasAstral(k) {
				return 0, unsupported(path, "keyword %q beside a property name outside the Basic Multilingual Plane", "patternProperties")
			}
			if p.re.MatchString(k) {
				list, matched = append(list, p.schema), true
			}
		}
		if !declared && !matched {
			switch a := addl.(type) {
			case bool:
				if !a {
					continue // no such member
				}
			case object:
				list = append(list, a)
			}
		}
		var schema any = object{}
		switch len(list) {
		case 0:
		case 1:
			schema = list[0]
		default:
			schema = object{{"allOf", list}}
			// a key whose schemas admit no value together never comes
			var u unsatisfiable
			if _, err := c.node(schema, path+"/properties/"+k); errors.As(err, &u) {
				continue
			}
		}
		np = append(np, member{k, schema})
	}
	if r, ok := s.get("required"); ok {
		list, _ := r.([]any)
		for _, x := range list {
			if name, ok := x.(string); ok {
				if _, ok := np.get(name); !ok {
					return 0, unsatisfiable{bad(path, "required property %q that propertyNames or additionalProperties excludes", name)}
				}
			}
		}
	}
	var s2 object
	for _, m := range s {
		switch m.key {
		case "propertyNames", "patternProperties", "properties", "additionalProperties":
		default:
			s2 = append(s2, m)
		}
	}
	s2 = append(s2, member{"properties", np}, member{"additionalProperties", false})
	return c.objectType(s2, path, used)
}

func hasAstral(s string) bool {
	for _, r := range s {
		if r > 0xFFFF {
			return true
		}
	}
	return false
}

// admitsName: whether the regular key language admits name.
func (kn *keyNames) admitsName(name string) bool {
	return !hasAstral(name) && kn.sc.admits(name)
}

// keyRule: the rule of a key of the regular language, narrowed by goSrc
// (a pattern, Go syntax; "" none) and spelling none of exclude (declared
// names: an undeclared key); -1 when no key is left.
func (c *schemaCompiler) keyRule(kn *keyNames, goSrc, path string, exclude ...string) (int, error) {
	if goSrc == "" && len(exclude) == 0 {
		r, err := c.stringType(kn.schema, path+"/propertyNames")
		var u unsatisfiable
		if errors.As(err, &u) {
			return -1, nil
		}
		return r, err
	}
	var srcs []string
	if goSrc != "" {
		srcs = append(srcs, goSrc)
	}
	if kn.sc.goPattern != "" {
		srcs = append(srcs, kn.sc.goPattern)
	}
	if kn.sc.format != "" {
		srcs = append(srcs, `^(?:`+formats[kn.sc.format]+`)$`)
	}
	r, err := c.b.boundedRegexString("key:"+goSrc+"&"+kn.sc.format+"&"+kn.sc.goPattern, srcs, kn.sc.lo, kn.sc.hi, exclude...)
	if errors.Is(err, errNoString) {
		return -1, nil
	}
	if err != nil {
		return 0, unsupported(path, "keyword %q with %v", "propertyNames", err)
	}
	return r, nil
}

// names: the declared property names.
func names(props object) []string {
	out := make([]string, len(props))
	for i, m := range props {
		out[i] = m.key
	}
	return out
}
