package grammar

import "strings"

// More ways two oneOf branches are told apart (beside disjoint types and a
// string discriminator, schema.go's disjoint): both are finite sets of
// values (const, enum) sharing none; or, on objects, one requires a
// property that the other forbids (its additionalProperties false, its
// properties not declaring it, no patternProperties), their types
// overlapping on objects only.
func (c *schemaCompiler) apart(a, b any) bool {
	return c.valuesApart(a, b) || c.requiredApart(a, b) || c.requiredApart(b, a)
}

// scalarValues: a branch's const or enum values as canonical JSON, when
// all are strings, booleans or null (numbers have many spellings of one
// value); nil otherwise.
func (c *schemaCompiler) scalarValues(x any) map[string]bool {
	vals := c.finiteValues(x)
	if len(vals) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, v := range vals {
		switch v.(type) {
		case string, bool, nil:
		default:
			return nil
		}
		var w strings.Builder
		encodeJSON(&w, v)
		out[w.String()] = true
	}
	return out
}

func (c *schemaCompiler) valuesApart(a, b any) bool {
	va, vb := c.scalarValues(a), c.scalarValues(b)
	if va == nil || vb == nil {
		return false
	}
	for v := range va {
		if vb[v] {
			return false
		}
	}
	return true
}

func (c *schemaCompiler) requiredApart(a, b any) bool {
	ta, tb := c.impliedTypes(a, 0), c.impliedTypes(b, 0)
	if ta == nil || tb == nil {
		return false
	}
	for n := range ta {
		if n != "object" && !typesDisjoint(map[string]bool{n: true}, tb) {
			return false // they may share a value of another type
		}
	}
	oa, ob := c.deref(a), c.deref(b)
	if oa == nil || ob == nil {
		return false
	}
	if addl, ok := ob.get("additionalProperties"); !ok || addl != false {
		return false
	}
	if _, ok := ob.get("patternProperties"); ok {
		return false
	}
	pb, _ := ob.get("properties")
	propsB, _ := pb.(object)
	for name := range requiredSet(oa) {
		if _, declared := propsB.get(name); !declared {
			return true
		}
	}
	return false
}
