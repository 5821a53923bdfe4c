package grammar_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/cloison/cloison/engine/grammar"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"
)

const lazyArgs = `{"type":"object","properties":{"unit":{"enum":["c","f"]},"n":{"type":"integer"}},"required":["unit"],"additionalProperties":false}`

// lazyCase is a lazy grammar and the same triggers for the reference.
type lazyCase struct {
	name     string
	triggers []grammar.Trigger
	controls []string
}

func hermesCall() grammar.Part {
	return grammar.Seq(grammar.Literal("<tool_call>\n{\"name\": \"f\", \"arguments\": "), grammar.Schema([]byte(lazyArgs)), grammar.Literal("}\n</tool_call>"))
}

func lazyCases() []lazyCase {
	llama := grammar.Seq(grammar.Literal(`{"name": "f", "parameters": `), grammar.Schema([]byte(lazyArgs)), grammar.Literal("}"))
	return []lazyCase{
		{"hermes", []grammar.Trigger{{Text: "<tool_call>", Body: grammar.Repeat(hermesCall(), "\n", 1, 2)}}, []string{"<tool_call>", "</tool_call>"}},
		{"llama3", []grammar.Trigger{
			{Text: "{", AtStart: true, Body: llama},
			{Text: "<|python_tag|>", Body: grammar.Seq(grammar.Literal("<|python_tag|>"), llama)},
		}, []string{"<|python_tag|>"}},
		{"mistral", []grammar.Trigger{{Text: "[TOOL_CALLS]", Body: grammar.Seq(grammar.Literal("[TOOL_CALLS]f[ARGS]"), grammar.Schema([]byte(lazyArgs)))}}, []string{"[TOOL_CALLS]", "[ARGS]"}},
	}
}

// lazyVocab: every byte, tokens that split the triggers or hold them
// mid-token followed by good or bad grammar bytes, Unicode spaces, control
// tokens for the markers, one unknown control token and an
// end-of-generation token (the last).
func lazyVocab() (pieces, special [][]byte, v *grammar.Vocab) {
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{"<tool", "_call", "call>", "l>", ">\n{", ">\n{\"", ">x", "ok<tool_call>\n", "ok<tool_call>x", "<tool_call>\n{\"name\": \"f\"",
		"<tool_call>\n{\"name\": \"g\"", "\n</tool_call>", "}\n</tool_call>", "</tool_call>\n<tool_call>", "<|python", "_tag|>", "_tag|>{", "_tag|>x", "|>{\"name\"",
		" {", " {\"", "{\"name\": \"f\"", "{x", "\u00a0", "\xc2", "\xa0{", "\u3000{", "\xe3\x80", "\x80{", "hi", "hi {", "[TOOL", "_CALLS]", "_CALLS]f[ARGS]",
		"_CALLS]g", "]f", "[ARGS]{\"unit\"", "{\"unit\": \"c\"}", "\"c\"", "\"f\"", ", \"n\": 1", "}", "x[TOOL_CALLS]f", "[TOOL_CALLS][TOOL_CALLS]"} {
		pieces = append(pieces, []byte(s))
	}
	special = make([][]byte, len(pieces))
	for _, c := range []string{"<tool_call>", "</tool_call>", "<|python_tag|>", "[TOOL_CALLS]", "[ARGS]", "<|other|>", "<|eot|>"} {
		pieces = append(pieces, nil)
		special = append(special, []byte(c))
	}
	return pieces, special, grammar.NewVocabControls(pieces, special, []int32{int32(len(pieces) - 1)})
}

// refLazy is the reference: the whole text is scanned afresh with
// strings.Index for each trigger (the earliest end wins; an at-start
// trigger first on a tie), and the body checked with its own grammar.
type refLazy struct {
	c      lazyCase
	bodies []*grammar.Grammar
}

func newRef(t testing.TB, c lazyCase) *refLazy {
	r := &refLazy{c: c}
	for _, tr := range c.triggers {
		g, err := grammar.Compile(tr.Body)
		if err != nil {
			t.Fatal(err)
		}
		r.bodies = append(r.bodies, g)
	}
	return r
}

// fire returns the trigger that fires first in text and where its text
// starts, or -1.
func (r *refLazy) fire(text string) (int, int) {
	best, at, end := -1, 0, 0
	for k, tr := range r.c.triggers {
		i := -1
		if tr.AtStart {
			trimmed := strings.TrimLeftFunc(text, unicode.IsSpace)
			if strings.HasPrefix(trimmed, tr.Text) {
				i = len(text) - len(trimmed)
			}
		} else {
			i = strings.Index(text, tr.Text)
		}
		if i < 0 {
			continue
		}
		e := i + len(tr.Text)
		if best < 0 || e < end || (e == end && tr.AtStart && !r.c.triggers[best].AtStart) {
			best, at, end = k, i, e
		}
	}
	return best, at
}

// ok reports whether text is a prefix of an output of the lazy grammar.
func (r *refLazy) ok(text string) bool {
	k, at := r.fire(text)
	return k < 0 || r.bodies[k].MatchPrefix([]byte(text[at:]))
}

func scanText(pieces, special [][]byte, controls []string, tok int) string {
	if len(pieces[tok]) > 0 {
		return string(pieces[tok])
	}
	for _, c := range controls {
		if string(special[tok]) == c {
			return c
		}
	}
	return ""
}

// TestLazyMaskMatchesReference: along random walks (each token drawn from
// the mask), the mask of the free phase and then of the body is exactly
// the tokens whose text keeps the output valid by the reference, whatever
// the tokens' boundaries: triggers split across tokens, begun mid-token,
// followed in the same token by good or bad body bytes, as control tokens.
func TestLazyMaskMatchesReference(t *testing.T) {
	pieces, special, v := lazyVocab()
	eog := len(pieces) - 1
	for _, c := range lazyCases() {
		t.Run(c.name, func(t *testing.T) {
			g, err := grammar.CompileLazy(c.triggers, c.controls)
			if err != nil {
				t.Fatal(err)
			}
			ref := newRef(t, c)
			fired := 0
			rapid.Check(t, func(rt *rapid.T) {
				m := grammar.NewMatcher(g, v)
				text := ""
				for step := 0; step < 40; step++ {
					mask, err := m.Allowed()
					if err != nil {
						rt.Fatal(err)
					}
					k, _ := ref.fire(text)
					var allowed []int
					for tok := range pieces {
						want := false
						switch {
						case tok == eog:
							want = k < 0 || m.Complete()
						case k < 0: // free: any text that keeps a trigger's body valid
							want = ref.ok(text + scanText(pieces, special, c.controls, tok))
						default: // constrained: bytes only (control tokens have none)
							want = len(pieces[tok]) > 0 && ref.ok(text+string(pieces[tok]))
						}
						if got := has(mask, tok); got != want {
							rt.Fatalf("after %q: token %d %q (control %q): mask %v, reference %v", text, tok, pieces[tok], special[tok], got, want)
						}
						if want {
							allowed = append(allowed, tok)
						}
					}
					if len(allowed) == 0 {
						rt.Fatalf("after %q: no token allowed", text)
					}
					// Draw mostly tokens near the triggers, so that walks reach them.
					tok := rapid.SampledFrom(allowed).Draw(rt, "tok")
					if tok < 256 && rapid.IntRange(0, 3).Draw(rt, "bytes") > 0 && len(allowed) > 1 {
						tok = allowed[len(allowed)-1-rapid.IntRange(0, min(60, len(allowed)-1)).Draw(rt, "near")]
					}
					if err := m.Accept(int32(tok)); err != nil {
						rt.Fatalf("after %q: Accept(%d %q): %v", text, tok, pieces[tok], err)
					}
					if tok == eog {
						break
					}
					if k < 0 {
						text += scanText(pieces, special, c.controls, tok)
					} else {
						text += string(pieces[tok])
					}
					if kk, _ := ref.fire(text); (kk >= 0) != m.Triggered() {
						rt.Fatalf("after %q: Triggered %v, reference fired %d", text, m.Triggered(), kk)
					}
					if m.Triggered() {
						fired++
					}
					if m.Closed() {
						break
					}
				}
				if !g.MatchPrefix([]byte(text)) {
					rt.Fatalf("MatchPrefix(%q) false for a walk's text", text)
				}
			})
			if fired == 0 {
				t.Errorf("no walk fired a trigger")
			}
		})
	}
}

// TestLazyTriggers: hand-picked token sequences (trigger split across
// tokens, mid-token, as a control token, none) and what follows.
func TestLazyTriggers(t *testing.T) {
	pieces, special, v := lazyVocab()
	id := func(s string) int32 {
		for i, p := range pieces {
			if string(p) == s && s != "" {
				return int32(i)
			}
		}
		for i, p := range special {
			if len(pieces[i]) == 0 && string(p) == s {
				return int32(i)
			}
		}
		t.Fatalf("no token %q", s)
		return -1
	}
	spell := func(s string) []string {
		var out []string
		for i := range len(s) {
			out = append(out, s[i:i+1])
		}
		return out
	}
	cases := lazyCases()
	hermes, llama, mistral := cases[0], cases[1], cases[2]
	tests := []struct {
		name      string
		c         lazyCase
		toks      []string
		refused   string // the last token is refused ("" none)
		triggered bool
	}{
		{"no trigger is free text", hermes, spell("It is <tool sunny> {\"name\""), "", false},
		{"split across tokens", hermes, []string{"<tool", "_call", ">\n{\""}, "", true},
		{"split, bad byte after", hermes, []string{"<tool", "_call", ">x"}, ">x", false},
		{"mid-token, good continuation", hermes, []string{"ok<tool_call>\n", "{\"name\": \"f\""}, "", true},
		{"mid-token, bad continuation", hermes, []string{"ok<tool_call>x"}, "ok<tool_call>x", false},
		{"a whole call's opening in one token", hermes, []string{"hi", "<tool_call>\n{\"name\": \"f\""}, "", true},
		{"an unknown function after the trigger", hermes, []string{"<tool_call>\n{\"name\": \"g\""}, "<tool_call>\n{\"name\": \"g\"", false},
		{"control token trigger", hermes, []string{"<tool_call>", "\n", "{\"name\": \"f\""}, "", true},
		{"control token then a bad byte", hermes, []string{"<tool_call>", "x"}, "x", true},
		{"llama leading brace", llama, []string{" {\"", "n"}, "", true},
		{"llama leading brace, bad body", llama, []string{"{x"}, "{x", false},
		{"llama unicode space then brace", llama, []string{"\u00a0", "{\"name\": \"f\""}, "", true},
		{"llama space split in two tokens", llama, []string{"\xc2", "\xa0{", "\""}, "", true},
		{"llama brace after text is free", llama, []string{"hi {", "x"}, "", false},
		{"llama brace after an invalid byte is free", llama, []string{"\xe3\x80", "{", "x"}, "", false},
		{"llama ideographic space split in two tokens", llama, []string{"\xe3\x80", "\x80{", "\""}, "", true},
		{"llama python tag split", llama, []string{"hi", "<|python", "_tag|>{"}, "", true},
		{"llama python tag, bad byte", llama, []string{"<|python", "_tag|>x"}, "_tag|>x", false},
		{"llama python tag control", llama, []string{"<|python_tag|>", "{\"name\": \"f\""}, "", true},
		{"mistral control token", mistral, []string{"[TOOL_CALLS]", "]f"}, "]f", true},
		{"mistral control token then name", mistral, []string{"[TOOL_CALLS]", "f", "[ARGS]{\"unit\""}, "", true},
		{"mistral spelled", mistral, []string{"x[TOOL_CALLS]f", "[ARGS]{\"unit\""}, "", true},
		{"mistral split", mistral, []string{"[TOOL", "_CALLS]f[ARGS]", "{\"unit\": \"c\"}"}, "", true},
		{"mistral wrong name", mistral, []string{"[TOOL", "_CALLS]g"}, "_CALLS]g", false},
		{"mistral twice in one token", mistral, []string{"[TOOL_CALLS][TOOL_CALLS]"}, "[TOOL_CALLS][TOOL_CALLS]", false},
		{"unknown control token is nothing", hermes, []string{"<tool", "<|other|>", "_call", ">\n{"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, err := grammar.CompileLazy(tt.c.triggers, tt.c.controls)
			if err != nil {
				t.Fatal(err)
			}
			m := grammar.NewMatcher(g, v)
			for i, s := range tt.toks {
				tok := id(s)
				mask, _ := m.Allowed()
				err := m.Accept(tok)
				last := i == len(tt.toks)-1
				if last && tt.refused != "" {
					if !errors.Is(err, grammar.ErrNotAllowed) || has(mask, int(tok)) {
						t.Fatalf("token %q: Accept %v, in mask %v; want refused", s, err, has(mask, int(tok)))
					}
					break
				}
				if err != nil || !has(mask, int(tok)) {
					t.Fatalf("token %q: Accept %v, in mask %v; want allowed", s, err, has(mask, int(tok)))
				}
			}
			if m.Triggered() != tt.triggered {
				t.Fatalf("Triggered %v, want %v", m.Triggered(), tt.triggered)
			}
			if !tt.triggered && (!m.Complete() || m.Closed()) {
				t.Fatalf("free text: Complete %v Closed %v, want complete and open", m.Complete(), m.Closed())
			}
		})
	}
}

// TestLazyOutputValid: after the trigger only the body's sentences: a
// walk that completes gives a call whose arguments validate against the
// schema (oracle: santhosh-tekuri/jsonschema).
func TestLazyOutputValid(t *testing.T) {
	pieces, _, v := lazyVocab()
	eog := int32(len(pieces) - 1)
	c := lazyCases()[0]
	g, err := grammar.CompileLazy(c.triggers, c.controls)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(lazyArgs))
	if err != nil {
		t.Fatal(err)
	}
	jc := jsonschema.NewCompiler()
	if err := jc.AddResource("args.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := jc.Compile("args.json")
	if err != nil {
		t.Fatal(err)
	}
	done := 0
	rapid.Check(t, func(rt *rapid.T) {
		m := grammar.NewMatcher(g, v)
		text := "ok<tool_call>\n"
		if err := m.Accept(int32(256 + 7)); err != nil { // "ok<tool_call>\n"
			rt.Fatal(err)
		}
		for step := 0; step < 200 && !m.Closed(); step++ {
			mask, _ := m.Allowed()
			var allowed []int32
			for tok := range pieces {
				if has(mask, tok) {
					allowed = append(allowed, int32(tok))
				}
			}
			tok := rapid.SampledFrom(allowed).Draw(rt, "tok")
			if err := m.Accept(tok); err != nil {
				rt.Fatal(err)
			}
			if tok == eog {
				break
			}
			text += string(pieces[tok])
		}
		if !m.Complete() {
			return // cut: the reference test checks prefixes
		}
		done++
		body := strings.TrimPrefix(text, "ok")
		for _, call := range strings.Split(body, "</tool_call>\n") {
			call = strings.TrimSuffix(strings.TrimPrefix(call, "<tool_call>\n"), "\n</tool_call>")
			var c struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}
			if err := json.Unmarshal([]byte(call), &c); err != nil || c.Name != "f" {
				rt.Fatalf("call %q: %v", call, err)
			}
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(string(c.Arguments)))
			if err != nil {
				rt.Fatalf("arguments %s: %v", c.Arguments, err)
			}
			if err := sch.Validate(inst); err != nil {
				rt.Fatalf("arguments %s: %v", c.Arguments, err)
			}
		}
	})
	if done == 0 {
		t.Errorf("no walk completed a call")
	}
}

func TestCompileLazyRefuses(t *testing.T) {
	for _, tt := range []struct {
		name string
		tr   []grammar.Trigger
		want error
	}{
		{"none", nil, grammar.ErrBadSchema},
		{"empty text", []grammar.Trigger{{Text: "", Body: grammar.Literal("x")}}, grammar.ErrBadSchema},
		{"body without the text", []grammar.Trigger{{Text: "<a>", Body: grammar.Literal("<b>")}}, grammar.ErrBadSchema},
		{"at-start space", []grammar.Trigger{{Text: " {", AtStart: true, Body: grammar.Literal(" {")}}, grammar.ErrBadSchema},
		{"unsupported schema", []grammar.Trigger{{Text: "<a>", Body: grammar.Seq(grammar.Literal("<a>"), grammar.Schema([]byte(`{"type":"string","pattern":"(?=x)"}`)))}}, grammar.ErrUnsupportedSchema},
	} {
		if _, err := grammar.CompileLazy(tt.tr, nil); !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
}

// FuzzLazyScanner: for any output text split into any tokens, the
// matcher's phase and MatchPrefix agree with the reference scanner, and a
// token is accepted exactly when its mask bit is set.
func FuzzLazyScanner(f *testing.F) {
	f.Add("hi <tool_call>\n{\"name\": \"f\", \"arguments\": {\"unit\": \"c\"}}\n</tool_call>", []byte{3, 5, 1, 9}, uint8(0))
	f.Add(" \u00a0{\"name\": \"f\", \"parameters\": {}}", []byte{1, 2, 2}, uint8(1))
	f.Add("x<|python_tag|>{\"name\"", []byte{4, 1}, uint8(1))
	f.Add("[TOOL_CALLS]f[ARGS]{\"unit\":\"f\"}", []byte{12, 1}, uint8(2))
	f.Add("<tool_cal<tool_call>x", []byte{1}, uint8(0))
	cases := lazyCases()
	var grams []*grammar.Grammar
	var refs []*refLazy
	for _, c := range cases {
		g, err := grammar.CompileLazy(c.triggers, c.controls)
		if err != nil {
			f.Fatal(err)
		}
		grams, refs = append(grams, g), append(refs, newRef(f, c))
	}
	f.Fuzz(func(t *testing.T, text string, cuts []byte, which uint8) {
		if len(text) > 512 {
			return
		}
		k := int(which) % len(cases)
		g, ref := grams[k], refs[k]
		// Tokens: the text cut at the given lengths, as a vocabulary.
		var pieces [][]byte
		rest := text
		for _, c := range cuts {
			if rest == "" {
				break
			}
			n := min(int(c)%16+1, len(rest))
			pieces, rest = append(pieces, []byte(rest[:n])), rest[n:]
		}
		if rest != "" {
			pieces = append(pieces, []byte(rest))
		}
		v := grammar.NewVocab(pieces, nil)
		m := grammar.NewMatcher(g, v)
		done := ""
		for i, p := range pieces {
			mask, err := m.Allowed()
			if err != nil {
				t.Fatal(err)
			}
			want := ref.ok(done + string(p))
			if has(mask, i) != want {
				t.Fatalf("after %q: token %q in mask %v, reference %v", done, p, has(mask, i), want)
			}
			err = m.Accept(int32(i))
			if (err == nil) != want {
				t.Fatalf("after %q: Accept(%q) = %v, reference %v", done, p, err, want)
			}
			if err != nil {
				return
			}
			done += string(p)
			if kk, _ := ref.fire(done); (kk >= 0) != m.Triggered() {
				t.Fatalf("after %q: Triggered %v, reference %d", done, m.Triggered(), kk)
			}
		}
		if g.MatchPrefix([]byte(text)) != ref.ok(text) {
			t.Fatalf("MatchPrefix(%q) = %v, reference %v", text, !ref.ok(text), ref.ok(text))
		}
	})
}

// BenchmarkLazyFreeStep: one free-phase step (Allowed, then Accept of a
// token that does not trigger) over a 32k-token vocabulary, the scanner's
// masks warm (as after a request's first steps).
func BenchmarkLazyFreeStep(b *testing.B) {
	var pieces [][]byte
	for i := range 32000 {
		pieces = append(pieces, []byte(fmt.Sprintf("w%dx<", i)))
	}
	v := grammar.NewVocab(pieces, nil)
	g, err := grammar.CompileLazy([]grammar.Trigger{{Text: "<tool_call>", Body: hermesCall()}}, nil)
	if err != nil {
		b.Fatal(err)
	}
	m := grammar.NewMatcher(g, v)
	for b.Loop() {
		if _, err := m.Allowed(); err != nil {
			b.Fatal(err)
		}
		if err := m.Accept(7); err != nil {
			b.Fatal(err)
		}
	}
}

// TestLazyConcurrent: matchers of one lazy grammar over one Vocab, run
// from several goroutines (the masks and the Vocab's scan memo are shared),
// give each the same masks as a matcher run alone (run with -race).
func TestLazyConcurrent(t *testing.T) {
	pieces, _, v := lazyVocab()
	c := lazyCases()[0]
	walk := func(g *grammar.Grammar, v *grammar.Vocab) []uint64 {
		m := grammar.NewMatcher(g, v)
		var sum []uint64
		for _, s := range []string{"hi", "<tool", "_call", ">\n{\"", "n", "a", "m", "e"} {
			mask, _ := m.Allowed()
			sum = append(sum, mask...)
			for id, p := range pieces {
				if string(p) == s {
					if err := m.Accept(int32(id)); err != nil {
						t.Error(err)
					}
					break
				}
			}
		}
		return sum
	}
	alone, err := grammar.CompileLazy(c.triggers, c.controls)
	if err != nil {
		t.Fatal(err)
	}
	_, _, fresh := lazyVocab()
	want := walk(alone, fresh)
	shared, _ := grammar.CompileLazy(c.triggers, c.controls)
	done := make(chan []uint64)
	for range 8 {
		go func() { done <- walk(shared, v) }()
	}
	for range 8 {
		if got := <-done; !slices.Equal(got, want) {
			t.Fatal("a concurrent walk's masks differ from a walk alone")
		}
	}
}
