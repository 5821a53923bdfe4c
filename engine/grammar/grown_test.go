package grammar

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// genManyPropsSchema: an object of 9 to 12 declared properties (more than
// a rule per subset could afford), some required, maybe dependentRequired,
// not-required and maxProperties, with or without undeclared members.
func genManyPropsSchema(t *rapid.T) (string, []string) {
	n := rapid.IntRange(9, 12).Draw(t, "n")
	var props, req, names []string
	for i := range n {
		name := string(rune('a' + i))
		names = append(names, name)
		props = append(props, fmt.Sprintf("%q:{\"type\":\"integer\",\"maximum\":%d}", name, i))
		if rapid.IntRange(0, 3).Draw(t, "req"+name) == 0 {
			req = append(req, strconv.Quote(name))
		}
	}
	s := `{"type":"object","properties":{` + strings.Join(props, ",") + `}`
	if len(req) > 0 {
		s += `,"required":[` + strings.Join(req, ",") + `]`
	}
	if rapid.Bool().Draw(t, "closed") {
		s += `,"additionalProperties":false`
	}
	// two distinct names
	pair := func(label string) (string, string) {
		i := rapid.IntRange(0, n-1).Draw(t, label)
		return names[i], names[(i+1+rapid.IntRange(0, n-2).Draw(t, label+"+"))%n]
	}
	if rapid.Bool().Draw(t, "deps") {
		a, b := pair("d1")
		c, d := pair("d2")
		y := names[rapid.IntRange(0, n-1).Draw(t, "y")]
		s += fmt.Sprintf(`,"dependentRequired":{%q:[%q,%q],%q:[%q]}`, a, c, d, b, y)
	}
	if rapid.Bool().Draw(t, "not") {
		a, b := pair("n")
		s += fmt.Sprintf(`,"not":{"required":[%q,%q]}`, a, b)
	}
	if rapid.Bool().Draw(t, "maxP") {
		s += fmt.Sprintf(`,"maxProperties":%d`, rapid.IntRange(len(req), n+1).Draw(t, "max"))
	}
	return s + "}", names
}

// TestAnyOrderExact: for objects of many properties, the grammar accepts
// an instance without repeated keys exactly when the reference validator
// does (any order, required ones present, maxProperties counting every
// member), and never one that repeats a declared key. (Undeclared keys may
// repeat: the grammar cannot track them all.)
func TestAnyOrderExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		schema, names := genManyPropsSchema(rt)
		g, err := FromSchema([]byte(schema))
		var u unsatisfiable
		if errors.As(err, &u) {
			return // e.g. not-required of a required property
		}
		if err != nil {
			rt.Fatalf("schema %s: %v", schema, err)
		}
		oracle := validator(t, schema)
		for i := 0; i < 10; i++ {
			keys := rapid.SliceOfN(rapid.SampledFrom(append(names, "z", "zz")), 0, 14).Draw(rt, "keys")
			var members []string
			seen, dup, extraDup := map[string]bool{}, false, false
			for _, k := range keys {
				if k != "z" && k != "zz" {
					dup = dup || seen[k]
				} else {
					extraDup = extraDup || seen[k]
				}
				seen[k] = true
				members = append(members, fmt.Sprintf("%q:%d", k, rapid.IntRange(-1, 12).Draw(rt, "v")))
			}
			inst := "{" + strings.Join(members, ",") + "}"
			got := g.Match([]byte(inst))
			if dup {
				if got {
					rt.Fatalf("schema %s: grammar accepts %s, whose keys repeat", schema, inst)
				}
				continue
			}
			if extraDup {
				if got && validates(oracle, inst) != nil {
					rt.Fatalf("schema %s: grammar accepts %s, validator refuses", schema, inst)
				}
				continue
			}
			if want := validates(oracle, inst) == nil; got != want {
				rt.Fatalf("schema %s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
		}
	})
}

// TestBoundedPatternExact: a pattern beside minLength and maxLength it
// does not imply accepts a string exactly when the reference validator
// does (ASCII strings).
func TestBoundedPatternExact(t *testing.T) {
	patterns := []string{`^(?:\\S+\\s+){0,2}\\S+$`, `[0-9]`, `^a+(b|cd)*$`, `x$`, `^[a-c]*d`, `^$`, `(ab|ba)+`}
	rapid.Check(t, func(rt *rapid.T) {
		p := rapid.SampledFrom(patterns).Draw(rt, "pattern")
		lo := rapid.IntRange(0, 4).Draw(rt, "lo")
		hi := rapid.IntRange(lo, 9).Draw(rt, "hi")
		schema := fmt.Sprintf(`{"type":"string","pattern":%q,"minLength":%d,"maxLength":%d}`, strings.ReplaceAll(p, `\\`, `\`), lo, hi)
		g, err := FromSchema([]byte(schema))
		if err != nil {
			if strings.Contains(err.Error(), "no string of the lengths") {
				return
			}
			rt.Fatalf("schema %s: %v", schema, err)
		}
		oracle := validator(t, schema)
		for i := 0; i < 30; i++ {
			s := rapid.StringOfN(rapid.RuneFrom([]rune("abcdx01 ")), 0, 11, -1).Draw(rt, "s")
			inst := strconv.Quote(s)
			if got, want := g.Match([]byte(inst)), validates(oracle, inst) == nil; got != want {
				rt.Fatalf("schema %s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
		}
	})
}

// TestGrownMaskMatchesBruteForce: along random walks through grammars
// with grown rules (objects of many properties, bounded patterns), the
// mask equals trying every token with the reference recognizer, and some
// token is always allowed until the text is complete (no dead end).
func TestGrownMaskMatchesBruteForce(t *testing.T) {
	var pieces [][]byte
	for b := 0x20; b < 0x7F; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`",`, `":`, `"}`, `{"`, `"a":`, `"b":1`, `,"c":`, `1}`, `ab`, `a b`, ` x`, "0\"", "\n"} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // end of generation
	eos := int32(len(pieces) - 1)
	v := NewVocab(pieces, []int32{eos})
	rapid.Check(t, func(rt *rapid.T) {
		var schema string
		if rapid.Bool().Draw(rt, "object") {
			schema, _ = genManyPropsSchema(rt)
			if _, err := FromSchema([]byte(schema)); err != nil {
				var u unsatisfiable
				if errors.As(err, &u) {
					return
				}
			}
		} else {
			schema = fmt.Sprintf(`{"type":"string","pattern":%q,"minLength":%d,"maxLength":%d}`,
				rapid.SampledFrom([]string{`^(?:\S+\s+){0,2}\S+$`, `[0-9]`, `^a+(b|cd)*$`, `x$`}).Draw(rt, "p"),
				rapid.IntRange(0, 2).Draw(rt, "lo"), rapid.IntRange(3, 8).Draw(rt, "hi"))
		}
		walkAgainstBruteForce(rt, schema, v, pieces, eos, 40)
	})
}

// TestFormatSentencesValid: random sentences of each format's grammar
// (and of bounded patterns) are valid for the reference validator with
// formats asserted: the grammar generates a subset of the format.
func TestFormatSentencesValid(t *testing.T) {
	schemas := []string{`{"type":"string","pattern":"^(?:\\S+\\s+){0,2}\\S+$","maxLength":9}`}
	for name := range formats {
		schemas = append(schemas, fmt.Sprintf(`{"type":"string","format":%q}`, name),
			fmt.Sprintf(`{"type":"string","format":%q,"maxLength":24}`, name))
	}
	for _, schema := range schemas {
		g, err := FromSchema([]byte(schema))
		if err != nil {
			if strings.Contains(err.Error(), "no string of the lengths") {
				continue
			}
			t.Fatalf("%s: %v", schema, err)
		}
		oracle := formatOracle(t, schema)
		rng := rand.New(rand.NewPCG(1, uint64(len(schema))))
		for range 25 {
			st := NaiveStart(g)
			var text []byte
			for len(text) < 80 {
				if NaiveComplete(st) && rng.IntN(4) == 0 {
					break
				}
				var next []byte
				for c := byte(0x20); c < 0x7F; c++ {
					if NaiveAdvance(g, st, []byte{c}) != nil {
						next = append(next, c)
					}
				}
				if len(next) == 0 {
					break
				}
				c := next[rng.IntN(len(next))]
				text = append(text, c)
				st = NaiveAdvance(g, st, []byte{c})
			}
			if NaiveComplete(st) && !oracle(string(text)) {
				t.Fatalf("%s: the grammar generates %s, which the validator refuses", schema, text)
			}
		}
	}
}

// TestMultipleOfExact: an integer is accepted under a whole multipleOf
// exactly when the reference validator accepts it.
func TestMultipleOfExact(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		k := rapid.IntRange(1, 60).Draw(rt, "k")
		schema := fmt.Sprintf(`{"type":"integer","multipleOf":%d}`, k)
		g, err := FromSchema([]byte(schema))
		if err != nil {
			rt.Fatal(err)
		}
		oracle := validator(t, schema)
		for i := 0; i < 8; i++ {
			n := rapid.Int64Range(-9999999999999999, 9999999999999999).Draw(rt, "n")
			if rapid.Bool().Draw(rt, "small") {
				n = int64(rapid.IntRange(-3000, 3000).Draw(rt, "m"))
			}
			inst := strconv.FormatInt(n, 10)
			if got, want := g.Match([]byte(inst)), validates(oracle, inst) == nil; got != want {
				rt.Fatalf("%s: grammar accepts %s: %v, validator: %v", schema, inst, got, want)
			}
		}
	})
}

// TestPatternsApart: two patterns are told apart only when both are
// anchored at the start, match no empty string, and begin differently.
func TestPatternsApart(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{`^/`, `^[^/]`, true},
		{`^contexts_.*`, `^unstruct_event_.*`, true},
		{`^ab|^c`, `^d`, true},
		{`^a`, `a`, false},   // the second may match later in the key
		{`^a*`, `^b`, false}, // the first matches the empty string
		{`^a`, `^[a-c]`, false},
		{`^(?:a|$)`, `^b`, false},
	} {
		if got := patternsApart(c.a, c.b); got != c.want {
			t.Errorf("patternsApart(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}

// TestEscapedNamesSound: beside declared names that JSON must escape, an
// undeclared member never spells one (whatever escapes the key uses), so
// whatever the grammar accepts the validator accepts.
func TestEscapedNamesSound(t *testing.T) {
	schema := `{"type":"object","properties":{"a\"b":{"type":"string"},"a\\b":{"type":"string"},"t\tx":{"type":"string"},"ab":{"type":"string"}},"additionalProperties":{"type":"integer"}}`
	g, err := FromSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	oracle := validator(t, schema)
	keys := []string{`"a\"b"`, `"a\u0022b"`, `"a\\b"`, `"a\u005cb"`, `"a\u005Cb"`, `"t\tx"`, `"t\u0009x"`, `"ab"`, `"a\u0062"`, `"a"`, `"abc"`, `"a/b"`, `"a\/b"`, `"é"`}
	rapid.Check(t, func(rt *rapid.T) {
		var members []string
		for _, k := range rapid.SliceOfN(rapid.SampledFrom(keys), 0, 3).Draw(rt, "keys") {
			members = append(members, k+":"+rapid.SampledFrom([]string{`1`, `"s"`}).Draw(rt, "v"))
		}
		inst := "{" + strings.Join(members, ",") + "}"
		if g.Match([]byte(inst)) {
			if err := validates(oracle, inst); err != nil {
				rt.Fatalf("grammar accepts %s, validator refuses: %v", inst, err)
			}
		}
	})
}

// TestGrownConcurrent: matchers sharing one grammar grow its rules from
// several goroutines (with Bytes read meanwhile); each sees its own
// order accepted (run with -race).
func TestGrownConcurrent(t *testing.T) {
	var props []string
	for i := range 12 {
		props = append(props, fmt.Sprintf(`"p%d":{"type":"integer"}`, i))
	}
	g, err := FromSchema([]byte(`{"type":"object","properties":{` + strings.Join(props, ",") + `},"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	var pieces [][]byte
	for b := 0x20; b < 0x7F; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	v := NewVocab(pieces, nil)
	done := make(chan string, 4)
	for w := range 4 {
		go func() {
			text := "{"
			for i := range 12 {
				if i > 0 {
					text += ","
				}
				text += fmt.Sprintf(`"p%d":%d`, (i*5+w*7)%12, i)
			}
			text += "}"
			m := NewMatcher(g, v)
			for _, c := range []byte(text) {
				if _, err := m.Allowed(); err != nil {
					done <- err.Error()
					return
				}
				if err := m.Accept(int32(c - 0x20)); err != nil {
					done <- fmt.Sprintf("%s at %q: %v", text, c, err)
					return
				}
				_ = g.Bytes()
			}
			if !m.Complete() {
				done <- text + ": not complete"
				return
			}
			done <- ""
		}()
	}
	for range 4 {
		if msg := <-done; msg != "" {
			t.Error(msg)
		}
	}
}
