package grammar

// Object keywords that relate properties to each other, enforced where an
// object's properties are written in any order (anyOrder): the set of
// properties written is known at the object's end.
//
//   - dependentRequired and draft-04..07 dependencies with arrays: when
//     property a is present, properties b… are too;
//   - not with required alone: not all of those properties are present
//     (and the instance is an object: required holds of any other type).
//
// A name that is not declared can only come as an undeclared member: where
// additionalProperties allows those, such a constraint cannot be tracked
// and is refused; where it forbids them the name never appears, and the
// constraint is decided: a dependency on an absent property asks nothing,
// one requiring an absent property forbids its trigger, a not-required
// set holding an absent name always holds.

// objectRules are an object's dependencies and forbidden sets, over the
// indexes of its declared properties.
type objectRules struct {
	present   bool // the schema has such keywords (decided or not)
	deps      []dependency
	forbidden [][]uint64 // sets that must not all be present
}

type dependency struct {
	trigger int
	needs   []uint64
}

// objectAssertion: keyword k with value v is one of these rules in a form
// enforced (then objectType reads it), or multipleOf with a whole divisor
// (multipleof.go).
func objectAssertion(k string, v any) bool {
	switch k {
	case "propertyNames":
		return vacuousOnKeys(v)
	case "multipleOf":
		return wholeDivisor(v) > 0
	case "dependentRequired", "dependencies":
		o, ok := v.(object)
		if !ok {
			return false
		}
		for _, m := range o {
			if _, ok := stringList(m.val); !ok {
				return false // a schema dependency (dependentSchemas)
			}
		}
		return true
	case "not":
		o, ok := v.(object)
		if !ok {
			return false
		}
		if notStrings(object{{"not", o}}) != nil {
			return true // strings excluded (stringType)
		}
		has := false
		for _, m := range o {
			if m.key == "required" {
				if _, ok := stringList(m.val); !ok {
					return false
				}
				has = true
			} else if keywords[m.key] || assertions[m.key] {
				return false
			}
		}
		return has
	}
	return false
}

func stringList(v any) ([]string, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(list))
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			return nil, false
		}
		out = append(out, s)
	}
	return out, true
}

// readObjectRules reads the rules of object schema s, whose declared
// properties are props.
func readObjectRules(s, props object, addl any, path string) (objectRules, error) {
	var r objectRules
	words := (len(props) + 63) / 64
	index := func(name string) int {
		for i, m := range props {
			if m.key == name {
				return i
			}
		}
		return -1
	}
	closed := false
	if a, ok := addl.(bool); ok && !a {
		closed = true
	}
	set := func(names []string) ([]uint64, bool) {
		b := make([]uint64, words)
		for _, n := range names {
			i := index(n)
			if i < 0 {
				return nil, false
			}
			b[i/64] |= 1 << (i % 64)
		}
		return b, true
	}
	for _, kw := range []string{"dependentRequired", "dependencies"} {
		v, ok := s.get(kw)
		if !ok {
			continue
		}
		r.present = true
		for _, m := range v.(object) {
			needs, _ := stringList(m.val)
			t := index(m.key)
			if t < 0 {
				if !closed {
					return r, unsupported(path, "keyword %q on %q, which properties does not declare", kw, m.key)
				}
				continue // never present
			}
			b, ok := set(needs)
			if !ok {
				if !closed {
					return r, unsupported(path, "keyword %q requiring a property that properties does not declare", kw)
				}
				b = make([]uint64, words)
				b[t/64] |= 1 << (t % 64)
				r.forbidden = append(r.forbidden, b) // it needs one that never comes
				continue
			}
			r.deps = append(r.deps, dependency{t, b})
		}
	}
	if v, ok := s.get("not"); ok && notRequiredForm(s) {
		r.present = true
		rv, _ := v.(object).get("required")
		names, _ := stringList(rv)
		b, ok := set(names)
		if !ok {
			if !closed {
				return r, unsupported(path, "keyword %q with a required property that properties does not declare", "not")
			}
			return r, nil // never all present
		}
		if len(names) == 0 {
			return r, unsatisfiable{bad(path, "not with an empty required admits nothing")}
		}
		r.forbidden = append(r.forbidden, b)
	}
	return r, nil
}

// close adds to set what the dependencies of its members require, until
// nothing changes.
func (r *objectRules) close(set []uint64) {
	for changed := true; changed; {
		changed = false
		for _, d := range r.deps {
			if set[d.trigger/64]&(1<<(d.trigger%64)) == 0 {
				continue
			}
			for w := range set {
				if set[w]|d.needs[w] != set[w] {
					set[w] |= d.needs[w]
					changed = true
				}
			}
		}
	}
}

// forbids: set holds all of some forbidden set.
func (r *objectRules) forbids(set []uint64) bool {
	for _, f := range r.forbidden {
		all := true
		for w := range f {
			if set[w]&f[w] != f[w] {
				all = false
			}
		}
		if all {
			return true
		}
	}
	return false
}

// holds: set, as the whole object's properties, satisfies the rules.
func (r *objectRules) holds(set []uint64) bool {
	if r.forbids(set) {
		return false
	}
	for _, d := range r.deps {
		if set[d.trigger/64]&(1<<(d.trigger%64)) == 0 {
			continue
		}
		for w := range set {
			if set[w]&d.needs[w] != d.needs[w] {
				return false
			}
		}
	}
	return true
}

// vacuousOnKeys reports whether propertyNames schema v accepts every
// string, so it asserts nothing about an object's keys: true, {}, or a
// schema whose type admits strings and whose other keywords constrain only
// other types (zod 4's z.record emits {"type": "string"}). Any other
// propertyNames is refused by name.
func vacuousOnKeys(v any) bool {
	switch v := v.(type) {
	case bool:
		return v
	case object:
		for _, m := range v {
			if !keywords[m.key] && !assertions[m.key] {
				continue // asserts nothing
			}
			if m.key == "type" {
				if t := typeSet(m.val); t == nil || !t["string"] {
					return false
				}
				continue
			}
			if t, ok := appliesTo[m.key]; ok && t != "string" {
				continue // vacuous on strings
			}
			return false
		}
		return true
	}
	return false
}

// notRequiredForm reports whether s's not is {"required": […]} (the form
// readObjectRules reads; the other not objectAssertion admits excludes
// strings).
func notRequiredForm(s object) bool {
	v, _ := s.get("not")
	o, ok := v.(object)
	if !ok {
		return false
	}
	_, has := o.get("required")
	return has
}
