package grammar

import (
	"encoding/json"
	"fmt"
	"math/big"
	"math/bits"
	"slices"
	"strings"
)

// uniqueItems true is enforced where it is a grammar: an array of at most
// one item (vacuous), or items drawn from a finite set of at most
// maxUniqueValues scalar values (an enum or const, maybe behind a $ref and
// filtered by the type and string keywords beside it; or type boolean or
// null). Such an array is a sequence of distinct values, its rules grown
// per set of values written (as an object's properties are), so it costs
// rules for the sequences written, never 2^n. Any other uniqueItems true
// is refused by name; uniqueItems false asserts nothing.

// maxUniqueValues bounds the values of a unique array's items.
const maxUniqueValues = 64

// uniqueValues: the JSON spellings of each value items admits (one per
// enum entry: 1 and 1.0 are one value of two spellings), when they are a
// finite set of scalars; ok false otherwise.
func (c *schemaCompiler) uniqueValues(items any, path string) (vals [][]string, ok bool, err error) {
	o := c.deref(items)
	if o == nil {
		return nil, false, nil
	}
	for _, m := range o {
		switch m.key {
		case "type", "enum", "const", "$defs", "definitions":
		default:
			if stringKeyword[m.key] {
				continue
			}
			if keywords[m.key] || assertions[m.key] {
				return nil, false, nil
			}
		}
	}
	var list []any
	t, hasType := o.get("type")
	if cv, ok := o.get("const"); ok {
		list = []any{cv}
	} else if ev, ok := o.get("enum"); ok {
		list, _ = ev.([]any)
	} else if ts := typeSet(t); hasType && ts != nil {
		for name := range ts {
			switch name {
			case "boolean":
				list = append(list, true, false)
			case "null":
				list = append(list, nil)
			default:
				return nil, false, nil
			}
		}
	} else {
		return nil, false, nil
	}
	sc, err := c.readString(o, path+"/items")
	if err != nil {
		return nil, false, err
	}
	seen := map[string]int{}
	for _, x := range list {
		if hasType && !typeAdmits(t, x) || !enumString(sc, x) {
			continue // not a value of the items
		}
		var k string
		switch x := x.(type) {
		case json.Number:
			r, ok := new(big.Rat).SetString(x.String())
			if !ok {
				return nil, false, nil
			}
			k = "n:" + r.String() // 1 and 1.0 are one value
		case string, bool, nil:
			var w strings.Builder
			encodeJSON(&w, x)
			k = w.String()
		default:
			return nil, false, nil // objects and arrays: equal under other spellings
		}
		var w strings.Builder
		encodeJSON(&w, x)
		if i, ok := seen[k]; ok {
			if !slices.Contains(vals[i], w.String()) {
				vals[i] = append(vals[i], w.String())
			}
			continue
		}
		seen[k] = len(vals)
		vals = append(vals, []string{w.String()})
	}
	if len(vals) > maxUniqueValues {
		return nil, false, nil
	}
	return vals, true, nil
}

// uniqueArray: an array of lo to hi (hi < 0: any) distinct values of vals
// (each its JSON spellings).
func (c *schemaCompiler) uniqueArray(path string, vals [][]string, lo, hi int) (int, error) {
	n := len(vals)
	if lo > n {
		return 0, unsatisfiable{bad(path, "minItems above the %d distinct values items admits", n)}
	}
	ws := ref(c.b.ws())
	if hi == 0 || n == 0 {
		return c.b.add(path, cat(lit("["), one(ws), lit("]"))), nil
	}
	item := make([]int, n)
	for i, v := range vals {
		var alts [][]elem
		for _, sp := range v {
			alts = append(alts, lit(sp))
		}
		item[i] = c.b.add(fmt.Sprintf("%s/unique-value-%d", path, i), alts...)
	}
	sep := c.b.sep()
	memo := map[uint64]int{}
	name := path + "/unique"
	// set(used): the rest of the array once the values in used were
	// written (at least one: the empty array is its own alternative).
	var set func(add func(string, grower) int, used uint64) int
	set = func(add func(string, grower) int, used uint64) int {
		if r, ok := memo[used]; ok {
			return r
		}
		r := add(name, func(add func(string, grower) int) [][]elem {
			count := bits.OnesCount64(used)
			var alts [][]elem
			if used != 0 && count >= lo {
				alts = append(alts, nil)
			}
			if hi >= 0 && count >= hi {
				return alts
			}
			for i := range n {
				if used&(1<<i) != 0 {
					continue
				}
				var lead []elem
				if used != 0 {
					lead = sep
				}
				alts = append(alts, cat(lead, []elem{ref(item[i]), ref(set(add, used|1<<i))}))
			}
			return alts
		})
		memo[used] = r
		return r
	}
	alts := [][]elem{cat(lit("["), []elem{ws, ref(set(c.b.grown, 0)), ws}, lit("]"))}
	if lo == 0 {
		alts = append(alts, cat(lit("["), one(ws), lit("]")))
	}
	return c.b.add(path, alts...), nil
}
