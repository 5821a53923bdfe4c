package grammar_test

import (
	"fmt"
	"math/bits"
	"slices"
	"sync"
	"testing"

	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/grammar/grammartest"
	"pgregory.net/rapid"
)

// testVocab holds every single byte (so that any text can be spelled),
// tokens that cross JSON structure (a string's closing quote with what
// follows it, numbers with separators, partial UTF-8), an empty control
// token and an end-of-generation token (the last two ids).
func testVocab() ([][]byte, *grammar.Vocab) {
	var pieces [][]byte
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`",`, `":`, `"}`, `"]`, `{"`, `["`, `, "`, `": "`, `":"`, `}}`, `]}`, `},{`, `null`, `true`, `false`,
		`true,`, `12`, `0.`, `.5`, `e+`, `-1`, `\n`, `\"`, `\u`, "\xc3", "\xc3\xa9", "é\"", "ab", "abc", "name", `"name"`, `id`, " ", "  ", "\n  ",
		`"a":`, `1}`, `"}]`, `v0`, "fixed", `null}`, `[]`, `{}`} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // a control token without text
	pieces = append(pieces, nil) // end of generation
	eog := []int32{int32(len(pieces) - 1)}
	return pieces, grammar.NewVocab(pieces, eog)
}

func has(mask []uint64, t int) bool { return mask[t>>6]&(1<<(t&63)) != 0 }

// TestMaskMatchesBruteForce: at every step of a random walk through the
// grammar of a random schema, the mask (the interned automaton, cached per
// leaf chunk, exits resolved by the rest of the stack) equals trying every
// token's bytes with a plain reference recognizer (NaiveRun), and the
// walk's text, once complete, is what the reference accepts.
func TestMaskMatchesBruteForce(t *testing.T) {
	pieces, v := testVocab()
	eos := int32(len(pieces) - 1)
	rapid.Check(t, func(t *rapid.T) {
		schema := grammartest.Schema(t)
		g, err := grammar.FromSchema([]byte(schema))
		if err != nil {
			t.Fatalf("schema %s: %v", schema, err)
		}
		m := grammar.NewMatcher(g, v)
		var text []byte
		ref := grammar.NaiveStart(g)
		for step := 0; step < 60; step++ {
			mask, err := m.Allowed()
			if err != nil {
				t.Fatal(err)
			}
			var allowed []int32
			for id, p := range pieces {
				want := false
				switch {
				case int32(id) == eos:
					want = grammar.NaiveComplete(ref)
					if m.Complete() != want {
						t.Fatalf("schema %s after %q: Complete() = %v, want %v", schema, text, m.Complete(), want)
					}
				case len(p) > 0:
					want = grammar.NaiveAdvance(g, ref, p) != nil
				}
				if got := has(mask, id); got != want {
					t.Fatalf("schema %s after %q: token %q allowed=%v, want %v", schema, text, p, got, want)
				}
				if want {
					allowed = append(allowed, int32(id))
				}
			}
			if len(allowed) == 0 {
				t.Fatalf("schema %s after %q: no token allowed", schema, text)
			}
			tok := rapid.SampledFrom(allowed).Draw(t, "tok")
			if err := m.Accept(tok); err != nil {
				t.Fatal(err)
			}
			if tok == eos {
				if !grammar.NaiveComplete(ref) {
					t.Fatalf("schema %s: ended on %q, which the grammar refuses", schema, text)
				}
				return
			}
			text = append(text, pieces[tok]...)
			ref = grammar.NaiveAdvance(g, ref, pieces[tok])
			if m.Closed() {
				if !grammar.NaiveComplete(ref) {
					t.Fatalf("schema %s: closed on %q, which the grammar refuses", schema, text)
				}
				return
			}
		}
	})
}

func TestAcceptRefuses(t *testing.T) {
	pieces, v := testVocab()
	g, err := grammar.FromSchema([]byte(`{"type":"object","properties":{"a":{"type":"boolean"}},"required":["a"],"additionalProperties":false}`))
	if err != nil {
		t.Fatal(err)
	}
	m := grammar.NewMatcher(g, v)
	ctl, eos := int32(len(pieces)-2), int32(len(pieces)-1)
	for _, tok := range []int32{'x', ctl, eos, -1, int32(len(pieces))} {
		if err := m.Accept(tok); err == nil {
			t.Errorf("Accept(%d) at the start: got nil, want ErrNotAllowed", tok)
		}
	}
	for _, b := range []byte(`{"a":true}`) {
		if err := m.Accept(int32(b)); err != nil {
			t.Fatalf("Accept(%q): %v", b, err)
		}
	}
	if !m.Closed() {
		t.Fatal("complete object: want Closed")
	}
	mask, _ := m.Allowed()
	n := 0
	for _, w := range mask {
		n += bits.OnesCount64(w)
	}
	if n != 1 || !has(mask, int(eos)) {
		t.Errorf("after the object %d tokens allowed, want only end of generation", n)
	}
}

// BenchmarkAllowed measures one mask over a 32k vocabulary in the middle of
// a string (cached after the first) and after a structural token.
func BenchmarkAllowed(b *testing.B) {
	pieces, _ := testVocab()
	for i := 0; len(pieces) < 32000; i++ {
		pieces = append(pieces, fmt.Appendf(nil, "w%dx", i))
	}
	v := grammar.NewVocab(pieces, nil)
	g, err := grammar.FromSchema([]byte(`{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"array","items":{"type":"integer"}}},"required":["a","b"],"additionalProperties":false}`))
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, prefix string }{{"in-string", `{"a":"xy`}, {"after-bracket", `{"a":"xy","b":[`}} {
		b.Run(tc.name, func(b *testing.B) {
			m := grammar.NewMatcher(g, v)
			for _, c := range []byte(tc.prefix) {
				if err := m.Accept(int32(c)); err != nil {
					b.Fatal(err)
				}
			}
			for b.Loop() {
				if _, err := m.Allowed(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkAllowedCold measures the first mask of a state inside a string
// over a 32k vocabulary: the full trie walk that the cache then saves (a
// fresh Vocab each time, as grammars of one Vocab share the walk).
func BenchmarkAllowedCold(b *testing.B) {
	pieces, _ := testVocab()
	for i := 0; len(pieces) < 32000; i++ {
		pieces = append(pieces, fmt.Appendf(nil, "w%dx", i))
	}
	for b.Loop() {
		b.StopTimer()
		v := grammar.NewVocab(pieces, nil)
		b.StartTimer()
		g, err := grammar.FromSchema([]byte(`{"type":"string"}`))
		if err != nil {
			b.Fatal(err)
		}
		m := grammar.NewMatcher(g, v)
		if err := m.Accept('"'); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Allowed(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestSharedWalkConcurrent: grammars of several schemas over one Vocab
// (sharing their string walks), stepped concurrently, give at every step
// the mask that the same grammar gives over a Vocab of its own.
func TestSharedWalkConcurrent(t *testing.T) {
	pieces, shared := testVocab()
	schemas := []string{`{"type":"string"}`, `{"type":"string","maxLength":3}`, `{"type":"string","pattern":"^a+$"}`,
		`{"type":"object","properties":{"name":{"type":"string"},"id":{"type":"string","maxLength":2}}}`}
	texts := []string{`"name"`, `"ab"`, `"aaa"`, `{"name":"abc","id":"v0"}`}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			k := i % len(schemas)
			own := grammar.NewVocab(pieces, []int32{int32(len(pieces) - 1)})
			gs, err1 := grammar.FromSchema([]byte(schemas[k]))
			go1, err2 := grammar.FromSchema([]byte(schemas[k]))
			if err1 != nil || err2 != nil {
				t.Errorf("schema %s: %v %v", schemas[k], err1, err2)
				return
			}
			ms, mo := grammar.NewMatcher(gs, shared), grammar.NewMatcher(go1, own)
			for _, c := range []byte(texts[k]) {
				a, _ := ms.Allowed()
				b, _ := mo.Allowed()
				if !slices.Equal(a, b) {
					t.Errorf("schema %s before %q: the shared Vocab's mask differs from the Vocab's own", schemas[k], c)
					return
				}
				if err := ms.Accept(int32(c)); err != nil {
					t.Errorf("schema %s: %q refused: %v", schemas[k], c, err)
					return
				}
				if err := mo.Accept(int32(c)); err != nil {
					t.Errorf("schema %s: %q refused: %v", schemas[k], c, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
