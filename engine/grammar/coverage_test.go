package grammar

import (
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

var propNames = []string{"a", "ab", "b", "id", "idx", ""}

// genIntSchema: an integer schema with random bounds, some inclusive, some
// exclusive, some fractional, some beyond what the grammar generates.
func genIntSchema(t *rapid.T, label string) string {
	bound := func(name string) string {
		switch rapid.IntRange(0, 3).Draw(t, label+name+"kind") {
		case 0:
			return strconv.Itoa(rapid.IntRange(-300, 300).Draw(t, label+name))
		case 1:
			return fmt.Sprintf("%d.5", rapid.IntRange(-300, 300).Draw(t, label+name))
		case 2:
			return strconv.FormatInt(rapid.Int64Range(-1e17, 1e17).Draw(t, label+name), 10)
		}
		return "9007199254740991"
	}
	var parts []string
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if rapid.IntRange(0, 2).Draw(t, label+k+"on") == 0 {
			parts = append(parts, fmt.Sprintf("%q:%s", k, bound(k)))
		}
	}
	return `{"type":"integer"` + strings.Join(append([]string{""}, parts...), ",") + `}`
}

func genValueSchema(t *rapid.T, label string, depth int) string {
	n := 5
	if depth > 1 {
		n = 4
	}
	switch rapid.IntRange(0, n).Draw(t, label+"kind") {
	case 0:
		return genIntSchema(t, label)
	case 1:
		return `{"type":"string","maxLength":2,"x-vendor":{"minLength":5}}`
	case 2:
		return `{"type":"boolean","_format":"bool"}`
	case 3:
		return `{"type":"integer","pattern":"^9","readonly":true}`
	case 4:
		return `{"oneOf":[{"type":"string","maxLength":1},{"type":"integer","maximum":3},{"type":"null"}]}`
	}
	return genObjectSchema(t, label+".", depth+1)
}

func genObjectSchema(t *rapid.T, label string, depth int) string {
	names := rapid.SliceOfNDistinct(rapid.SampledFrom(propNames), 0, 3, rapid.ID[string]).Draw(t, label+"names")
	var props, req []string
	for _, n := range names {
		props = append(props, fmt.Sprintf("%q:%s", n, genValueSchema(t, label+n, depth)))
		if rapid.Bool().Draw(t, label+n+"req") {
			req = append(req, strconv.Quote(n))
		}
	}
	s := `{"type":"object","properties":{` + strings.Join(props, ",") + `}`
	if len(req) > 0 {
		s += `,"required":[` + strings.Join(req, ",") + `]`
	}
	switch rapid.IntRange(0, 3).Draw(t, label+"addl") {
	case 1:
		s += `,"additionalProperties":true`
	case 2:
		s += `,"additionalProperties":false`
	case 3:
		s += `,"additionalProperties":{"type":"integer","maximum":5}`
	}
	return s + `,"x-kubernetes-patch-strategy":"merge","id":"thing"}`
}

// genInstance: JSON text near the generated schemas' shapes: their keys,
// keys one character off, escaped spellings of declared keys, integers
// near the bounds and far from them.
func genInstance(t *rapid.T, depth int) string {
	switch rapid.IntRange(0, 5).Draw(t, "vkind") {
	case 0:
		return strconv.Itoa(rapid.IntRange(-310, 310).Draw(t, "int"))
	case 1:
		return strconv.FormatInt(rapid.Int64Range(-9999999999999999, 9999999999999999).Draw(t, "bigint"), 10)
	case 2:
		return rapid.SampledFrom([]string{`""`, `"x"`, `"xyz"`, `true`, `false`, `null`, `1.5`, `[]`, `-0`}).Draw(t, "lit")
	}
	if depth > 2 {
		return `{}`
	}
	keys := rapid.SliceOfN(rapid.SampledFrom([]string{
		`"a"`, `"ab"`, `"b"`, `"id"`, `"idx"`, `""`, `"abc"`, `"i"`, `"c"`, `"\u0061"`, `"a\u0062"`, `"\/"`, `"é"`,
	}), 0, 4).Draw(t, "keys")
	var members []string
	for _, k := range keys {
		members = append(members, k+":"+genInstance(t, depth+1))
	}
	return "{" + strings.Join(members, ",") + "}"
}

// TestSchemaSoundnessProperty: whatever instance the grammar of a
// generated schema accepts, the reference validator accepts too (0
// invalidation errors), for schemas mixing ignored keywords, undeclared
// properties and integer bounds.
func TestSchemaSoundnessProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		schema := genObjectSchema(rt, "", 0)
		g, err := FromSchema([]byte(schema))
		if err != nil {
			if strings.Contains(err.Error(), "admitting no integer") {
				return // an empty integer range is refused, not compiled
			}
			rt.Fatalf("schema %s: %v", schema, err)
		}
		oracle := validator(t, schema)
		for i := 0; i < 20; i++ {
			inst := genInstance(rt, 0)
			if g.Match([]byte(inst)) {
				if err := validates(oracle, inst); err != nil {
					rt.Fatalf("schema %s: grammar accepts %s, validator refuses: %v", schema, inst, err)
				}
			}
		}
	})
}

// TestIntegerRangeExact: for integer bounds, the grammar accepts a
// canonical integer exactly when the reference validator does.
func TestIntegerRangeExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		schema := genIntSchema(rt, "")
		g, err := FromSchema([]byte(schema))
		if err != nil {
			if strings.Contains(err.Error(), "admitting no integer") {
				return
			}
			rt.Fatalf("schema %s: %v", schema, err)
		}
		oracle := validator(t, schema)
		for i := 0; i < 50; i++ {
			var n *big.Int
			if rapid.Bool().Draw(rt, "near") {
				n = big.NewInt(int64(rapid.IntRange(-320, 320).Draw(rt, "n")))
			} else {
				n = big.NewInt(rapid.Int64Range(-9999999999999999, 9999999999999999).Draw(rt, "n"))
			}
			inst := n.String()
			want := validates(oracle, inst) == nil
			if got := g.Match([]byte(inst)); got != want {
				rt.Fatalf("schema %s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
		}
	})
}

// TestNumberRangeExact: for whole inclusive bounds on a number, the
// grammar accepts a plain decimal (no exponent) exactly when the reference
// validator does.
func TestNumberRangeExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var parts []string
		for _, k := range []string{"minimum", "maximum"} {
			if rapid.Bool().Draw(rt, k+"on") {
				parts = append(parts, fmt.Sprintf("%q:%d", k, rapid.IntRange(-30, 30).Draw(rt, k)))
			}
		}
		schema := `{"type":"number"` + strings.Join(append([]string{""}, parts...), ",") + `}`
		g, err := FromSchema([]byte(schema))
		if err != nil {
			if strings.Contains(err.Error(), "admitting no number") {
				return
			}
			rt.Fatalf("schema %s: %v", schema, err)
		}
		oracle := validator(t, schema)
		for i := 0; i < 50; i++ {
			inst := strconv.Itoa(rapid.IntRange(-32, 32).Draw(rt, "int"))
			if rapid.Bool().Draw(rt, "frac") {
				if inst == "0" && rapid.Bool().Draw(rt, "negzero") {
					inst = "-0"
				}
				inst += "." + rapid.SampledFrom([]string{"0", "00", "5", "05", "001", "9"}).Draw(rt, "f")
			}
			want := validates(oracle, inst) == nil
			if got := g.Match([]byte(inst)); got != want && !(inst == "-0" || strings.HasPrefix(inst, "-0.0")) {
				rt.Fatalf("schema %s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			} else if got && !want {
				rt.Fatalf("schema %s: grammar accepts %s, validator refuses", schema, inst)
			}
		}
	})
}

// TestTupleExact: for random tuples (prefixItems with items false, a
// schema or absent; minItems and maxItems), the grammar accepts a random
// array exactly when the reference validator does.
func TestTupleExact(t *testing.T) {
	elems := []string{`{"type":"integer"}`, `{"type":"string"}`, `{"type":"boolean"}`, `{"type":"null"}`}
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 4).Draw(rt, "n")
		var prefix []string
		for i := 0; i < n; i++ {
			prefix = append(prefix, rapid.SampledFrom(elems).Draw(rt, "p"))
		}
		schema := `{"type":"array","prefixItems":[` + strings.Join(prefix, ",") + `]`
		switch rapid.IntRange(0, 2).Draw(rt, "rest") {
		case 0:
			schema += `,"items":false`
		case 1:
			schema += `,"items":` + rapid.SampledFrom(elems).Draw(rt, "r")
		}
		lo := -1
		if rapid.Bool().Draw(rt, "minOn") {
			lo = rapid.IntRange(0, 6).Draw(rt, "min")
			schema += fmt.Sprintf(`,"minItems":%d`, lo)
		}
		if rapid.Bool().Draw(rt, "maxOn") {
			schema += fmt.Sprintf(`,"maxItems":%d`, rapid.IntRange(max(lo, 0), 6).Draw(rt, "max"))
		}
		schema += "}"
		g, err := FromSchema([]byte(schema))
		if err != nil {
			if strings.Contains(err.Error(), "minItems above") {
				return
			}
			rt.Fatalf("schema %s: %v", schema, err)
		}
		oracle := validator(t, schema)
		vals := []string{`1`, `"a"`, `true`, `null`}
		for i := 0; i < 40; i++ {
			items := rapid.SliceOfN(rapid.SampledFrom(vals), 0, 7).Draw(rt, "items")
			inst := "[" + strings.Join(items, ",") + "]"
			want := validates(oracle, inst) == nil
			if got := g.Match([]byte(inst)); got != want {
				rt.Fatalf("schema %s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
		}
	})
}

// TestFractionalNumberRangeExact: for fractional, inclusive and exclusive
// bounds on a number, the grammar accepts a plain decimal exactly when the
// reference validator does (0 spelled with a "-" aside, which is
// accepted only where a negative number is: 0 has its spelling "0").
func TestFractionalNumberRangeExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var parts []string
		for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if rapid.IntRange(0, 2).Draw(rt, k+"on") == 0 {
				x := rapid.IntRange(-300, 300).Draw(rt, k)
				v := strconv.Itoa(x)
				if rapid.Bool().Draw(rt, k+"frac") {
					v = new(big.Rat).SetFrac64(int64(x), 100).FloatString(2)
				}
				parts = append(parts, fmt.Sprintf("%q:%s", k, v))
			}
		}
		schema := `{"type":"number"` + strings.Join(append([]string{""}, parts...), ",") + `}`
		g, err := FromSchema([]byte(schema))
		if err != nil {
			if strings.Contains(err.Error(), "admitting no number") {
				return
			}
			rt.Fatalf("schema %s: %v", schema, err)
		}
		oracle := validator(t, schema)
		for i := 0; i < 50; i++ {
			inst := strconv.Itoa(rapid.IntRange(-4, 4).Draw(rt, "int"))
			if rapid.Bool().Draw(rt, "frac") {
				inst += "." + rapid.SampledFrom([]string{"0", "00", "5", "05", "001", "9", "99", "01", "1", "10", "9999999999999999"}).Draw(rt, "f")
			}
			if inst[0] != '-' && rapid.Bool().Draw(rt, "neg") {
				inst = "-" + inst
			}
			want := validates(oracle, inst) == nil
			negZero := strings.HasPrefix(inst, "-") && strings.Trim(inst, "-0.") == ""
			if got := g.Match([]byte(inst)); got != want && !(negZero && !got) {
				rt.Fatalf("schema %s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
		}
	})
}
