package grammar

import (
	"fmt"
	"testing"

	"pgregory.net/rapid"
)

// TestBoundedStringMaskMatchesBruteForce: strings whose length is bounded
// (maxLength, alone or beside a pattern, or a counted pattern), with bounds
// below, at and above the longest token, over one Vocab whose walks the
// grammars share: at every step the mask equals trying every token with
// the reference recognizer. Any sharing of walks across counts must keep
// a count below the longest token apart.
func TestBoundedStringMaskMatchesBruteForce(t *testing.T) {
	var pieces [][]byte
	for b := 0x20; b < 0x7F; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`",`, `"}`, `ab`, `abc`, `abcd"`, `aaaaaa`, `a"`, `aa"`, `\n`, `\u00`, "é", "éé\"", `12`, `1234`, `x"}`, `",a`} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // end of generation
	eos := int32(len(pieces) - 1)
	v := NewVocab(pieces, []int32{eos}) // one Vocab for every schema: walks are shared
	// Counts down from above the longest token (6 bytes) to none left, in
	// single characters, longest bounds first: a walk shared across counts
	// that let the count pass would allow a long token where too few
	// characters are left.
	for hi := 14; hi >= 1; hi-- {
		for _, schema := range []string{fmt.Sprintf(`{"type":"string","maxLength":%d}`, hi),
			fmt.Sprintf(`{"type":"string","pattern":"^a+$","maxLength":%d}`, hi),
			fmt.Sprintf(`{"type":"string","pattern":"^a{0,%d}$"}`, hi)} {
			g, err := FromSchema([]byte(schema))
			if err != nil {
				t.Fatalf("schema %s: %v", schema, err)
			}
			m, ref, text := NewMatcher(g, v), NaiveStart(g), []byte{}
			for k := 0; k <= hi+1; k++ {
				mask, _ := m.Allowed()
				for id, p := range pieces {
					want := NaiveComplete(ref)
					if int32(id) != eos {
						want = NaiveAdvance(g, ref, p) != nil
					}
					if got := mask[id>>6]&(1<<(id&63)) != 0; got != want {
						t.Fatalf("schema %s after %q: token %q allowed=%v, want %v", schema, text, p, got, want)
					}
				}
				c := []byte("a")
				if k == 0 {
					c = []byte(`"`)
				}
				if m.Accept(int32(c[0]-0x20)) != nil {
					break
				}
				text = append(text, c...)
				ref = NaiveAdvance(g, ref, c)
			}
		}
	}
	rapid.Check(t, func(rt *rapid.T) {
		lo := rapid.IntRange(0, 3).Draw(rt, "lo")
		hi := rapid.IntRange(lo+1, 14).Draw(rt, "hi")
		var inner string
		switch rapid.IntRange(0, 3).Draw(rt, "kind") {
		case 0:
			inner = fmt.Sprintf(`{"type":"string","minLength":%d,"maxLength":%d}`, lo, hi)
		case 1:
			inner = fmt.Sprintf(`{"type":"string","pattern":%q,"minLength":%d,"maxLength":%d}`,
				rapid.SampledFrom([]string{`^a+$`, `^[a-z0-9]*$`, `^(ab|c)*d?$`, `\d`, `^[^x]*$`}).Draw(rt, "p"), lo, hi)
		case 2:
			inner = fmt.Sprintf(`{"type":"string","pattern":"^[a-c1-4]{%d,%d}$"}`, lo, hi)
		default:
			inner = fmt.Sprintf(`{"type":"string","maxLength":%d}`, hi)
		}
		schema := inner
		if rapid.Bool().Draw(rt, "wrapped") {
			schema = fmt.Sprintf(`{"type":"object","properties":{"a":%s},"required":["a"],"additionalProperties":false}`, inner)
		}
		walkAgainstBruteForce(rt, schema, v, pieces, eos, 30)
	})
}

// walkAgainstBruteForce generates from schema for at most steps tokens, a
// token drawn among the allowed ones each step, and checks every step's
// mask over v against the naive recognizer token by token: exactly the
// tokens it advances on (EOS where it is complete) are allowed.
func walkAgainstBruteForce(rt *rapid.T, schema string, v *Vocab, pieces [][]byte, eos int32, steps int) {
	g, err := FromSchema([]byte(schema))
	if err != nil {
		rt.Fatalf("schema %s: %v", schema, err)
	}
	m := NewMatcher(g, v)
	ref := NaiveStart(g)
	var text []byte
	for step := 0; step < steps; step++ {
		mask, err := m.Allowed()
		if err != nil {
			rt.Fatal(err)
		}
		var allowed []int32
		for id, p := range pieces {
			want := NaiveComplete(ref)
			if int32(id) != eos {
				want = NaiveAdvance(g, ref, p) != nil
			}
			if got := mask[id>>6]&(1<<(id&63)) != 0; got != want {
				rt.Fatalf("schema %s after %q: token %q allowed=%v, want %v", schema, text, p, got, want)
			}
			if want {
				allowed = append(allowed, int32(id))
			}
		}
		if len(allowed) == 0 {
			rt.Fatalf("schema %s after %q: no token allowed", schema, text)
		}
		tok := rapid.SampledFrom(allowed).Draw(rt, "tok")
		if tok == eos {
			return
		}
		if err := m.Accept(tok); err != nil {
			rt.Fatal(err)
		}
		text = append(text, pieces[tok]...)
		if ref = NaiveAdvance(g, ref, pieces[tok]); ref == nil {
			rt.Fatalf("schema %s: the reference refuses %q", schema, text)
		}
	}
}
