package grammar_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/grammar"
	"pgregory.net/rapid"
)

const weatherArgs = `{"type":"object","properties":{"location":{"type":"string","maxLength":8}},"required":["location"],"additionalProperties":false}`

// tagCase is a structural tag and, for the independent reference, its
// triggers and each trigger's tags (the begin after the trigger, the
// value's grammar alone, the end), in the form the object states them.
type tagCase struct {
	src    string
	accept []string
	refuse []string
}

var tagCases = []tagCase{
	{ // vLLM's example: legacy form, one trigger, two functions
		`{"type":"structural_tag","structures":[` +
			`{"begin":"<function=get_weather>","schema":` + weatherArgs + `,"end":"</function>"},` +
			`{"begin":"<function=get_time>","schema":{"type":"object","properties":{"tz":{"enum":["utc","cet"]}}},"end":"</function>"}],` +
			`"triggers":["<function="]}`,
		[]string{"", "hello", "<function", "Let me look.<function=get_weather>{\"location\": \"Paris\"}</function> done",
			"<function=get_time>{}</function><function=get_weather>{\"location\":\"x\"}</function>", "a<functio<function=get_time>{\"tz\":\"utc\"}</function>"},
		[]string{"<function=", "<function=get_weather>", "<function=other>{}</function>", "<function=get_weather>{}</function>",
			"<function=get_weather>{\"location\": \"Paris\"}", "<function=get_time>{\"tz\":\"pst\"}</function>", "x<function=get_weather>{\"location\":\"toolongname\"}</function>"},
	},
	{ // the format form: at least one tag, nothing after the first
		`{"type":"structural_tag","format":{"type":"triggered_tags","triggers":["<tool>","[["],"tags":[` +
			`{"type":"tag","begin":"<tool>","content":{"type":"json_schema","json_schema":{"type":"integer","minimum":0,"maximum":99}},"end":"</tool>"},` +
			`{"begin":"[[yes","content":{"type":"const_string","value":"!"},"end":"]]"}],"at_least_one":true,"stop_after_first":true}}`,
		[]string{"<tool>7</tool>", "well [[yes!]]", "[<tool>42</tool>", "x[[yes!]]"},
		[]string{"", "just text", "[[<tool>42</tool>", "<tool>7</tool>more", "<tool>100</tool>", "[[no!]]", "[[yes!]][[yes!]]"},
	},
	{ // a begin that is the trigger itself, the JSON right after it; an empty end
		`{"type":"structural_tag","structures":[{"begin":"@","schema":{"type":"boolean"},"end":""}],"triggers":["@"]}`,
		[]string{"a@true b@false", "@true@false", "x"},
		[]string{"@", "@tru", "a@1", "@ true"},
	},
}

// tagVocab: every byte, and tokens that split a trigger, hold one in the
// middle, run from free text into a tag's JSON or from a tag's end into
// free text (and into the next trigger).
func tagVocab() ([][]byte, *grammar.Vocab) {
	var pieces [][]byte
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{"<function=", "<fun", "ction=", "get_weather>", "get_time>", "<function=get_weather>{\"", "ok<function=get_time>{}",
		"}</function>", "</function>", ">\n", "}</function>Hi", "}</function><function=", "\"location\"", "\": \"", "Paris\"}", "{}", "{\"tz\":\"",
		"utc\"}", "<tool>", "</tool>", "<tool>7</tool>", "7</tool>x", "[[", "[[yes", "yes!]]", "!]]", "]]x", "@true", "true@", "false", "@tr", "ue", " ", "\n"} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // a control token without text
	pieces = append(pieces, nil) // end of generation
	return pieces, grammar.NewVocab(pieces, []int32{int32(len(pieces) - 1)})
}

// refTag is the reference recognizer of a structural tag, written from
// its definition: a set of configurations, each free text since the last
// tag (a trigger completes where that text ends with it, the first listed
// winning) or inside a tag (the reference recognizer of the tag's body
// alone: the begin after its trigger, the value, the end).
type refTag struct {
	triggers       []string
	bodies         [][]*grammar.Grammar // per trigger
	atLeastOne     bool
	stopAfterFirst bool
}

type refConf struct {
	free   bool
	text   string // free: the text since the last tag
	tags   int    // tags completed so far
	trig   int
	body   int
	st     grammar.NaiveState
	closed bool // stop_after_first: nothing may follow
}

func newRefTag(t testing.TB, src string) *refTag {
	var obj struct {
		Structures []struct {
			Begin, End string
			Schema     json.RawMessage
		}
		Triggers []string
		Format   struct {
			Triggers []string
			Tags     []struct {
				Begin, End string
				Content    struct {
					Type       string
					JSONSchema json.RawMessage `json:"json_schema"`
					Value      string
				}
			}
			AtLeastOne     bool `json:"at_least_one"`
			StopAfterFirst bool `json:"stop_after_first"`
		}
	}
	if err := json.Unmarshal([]byte(src), &obj); err != nil {
		t.Fatal(err)
	}
	r := &refTag{triggers: obj.Triggers, atLeastOne: obj.Format.AtLeastOne, stopAfterFirst: obj.Format.StopAfterFirst}
	type tag struct {
		begin, end string
		value      grammar.Part
	}
	var tags []tag
	for _, s := range obj.Structures {
		tags = append(tags, tag{s.Begin, s.End, grammar.Schema(s.Schema)})
	}
	if len(obj.Format.Triggers) > 0 {
		r.triggers = obj.Format.Triggers
		for _, s := range obj.Format.Tags {
			v := grammar.Literal(s.Content.Value)
			if s.Content.Type == "json_schema" {
				v = grammar.Schema(s.Content.JSONSchema)
			}
			tags = append(tags, tag{s.Begin, s.End, v})
		}
	}
	r.bodies = make([][]*grammar.Grammar, len(r.triggers))
	for _, tg := range tags {
		for k, tr := range r.triggers {
			if strings.HasPrefix(tg.begin, tr) {
				g, err := grammar.Compile(grammar.Seq(grammar.Literal(tg.begin[len(tr):]), tg.value, grammar.Literal(tg.end)))
				if err != nil {
					t.Fatal(err)
				}
				r.bodies[k] = append(r.bodies[k], g)
				break
			}
		}
	}
	return r
}

func (r *refTag) start() []refConf { return []refConf{{free: true}} }

// enter: the configurations at the start of trigger k's bodies.
func (r *refTag) enter(k, tags int) []refConf {
	var out []refConf
	for i, g := range r.bodies[k] {
		st := grammar.NaiveStart(g)
		out = append(out, r.settle(refConf{trig: k, body: i, st: st, tags: tags})...)
	}
	return out
}

// settle adds, for a body that is complete, the free text after it.
func (r *refTag) settle(c refConf) []refConf {
	out := []refConf{c}
	if !c.free && grammar.NaiveComplete(c.st) {
		if r.stopAfterFirst {
			out = append(out, refConf{free: true, closed: true, tags: c.tags + 1})
		} else {
			out = append(out, refConf{free: true, tags: c.tags + 1})
		}
	}
	return out
}

func (r *refTag) advance(cs []refConf, b []byte) []refConf {
	for _, c := range b {
		var next []refConf
		for _, x := range cs {
			if x.free {
				if x.closed {
					continue
				}
				text := x.text + string([]byte{c})
				fired := -1
				for k, tr := range r.triggers {
					if strings.HasSuffix(text, tr) {
						fired = k
						break
					}
				}
				if fired < 0 {
					next = append(next, refConf{free: true, text: text, tags: x.tags})
				} else {
					next = append(next, r.enter(fired, x.tags)...)
				}
				continue
			}
			if st := grammar.NaiveAdvance(r.bodies[x.trig][x.body], x.st, []byte{c}); st != nil {
				y := x
				y.st = st
				next = append(next, r.settle(y)...)
			}
		}
		cs = next
	}
	return cs
}

func (r *refTag) complete(cs []refConf) bool {
	for _, c := range cs {
		if c.free && (!r.atLeastOne || c.tags > 0) {
			return true
		}
	}
	return false
}

func TestStructuralTagCases(t *testing.T) {
	for i, tc := range tagCases {
		g, err := grammar.FromText(grammar.StructuralTag, tc.src)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		ref := newRefTag(t, tc.src)
		for _, s := range tc.accept {
			if !g.Match([]byte(s)) {
				t.Errorf("case %d: %q refused, want accepted", i, s)
			}
			if !ref.complete(ref.advance(ref.start(), []byte(s))) {
				t.Errorf("case %d: the reference refuses %q", i, s)
			}
		}
		for _, s := range tc.refuse {
			if g.Match([]byte(s)) {
				t.Errorf("case %d: %q accepted, want refused", i, s)
			}
			if ref.complete(ref.advance(ref.start(), []byte(s))) {
				t.Errorf("case %d: the reference accepts %q", i, s)
			}
		}
	}
}

// TestStructuralTagMaskMatchesBruteForce: at every step of a random walk,
// the mask equals trying every token's bytes with the reference recognizer
// written from the definition (refTag), so every token the mask allows is
// accepted and every other is refused by Accept; a walk that ends is a
// whole sentence.
func TestStructuralTagMaskMatchesBruteForce(t *testing.T) {
	pieces, v := tagVocab()
	eos := int32(len(pieces) - 1)
	var grammars []*grammar.Grammar
	var refs []*refTag
	for _, tc := range tagCases {
		g, err := grammar.FromText(grammar.StructuralTag, tc.src)
		if err != nil {
			t.Fatal(err)
		}
		grammars = append(grammars, g)
		refs = append(refs, newRefTag(t, tc.src))
	}
	rapid.Check(t, func(t *rapid.T) {
		i := rapid.IntRange(0, len(grammars)-1).Draw(t, "case")
		g, ref := grammars[i], refs[i]
		m := grammar.NewMatcher(g, v)
		cs := ref.start()
		var text []byte
		for step := 0; step < 50; step++ {
			mask, err := m.Allowed()
			if err != nil {
				t.Fatal(err)
			}
			var allowed []int32
			for id, p := range pieces {
				want := false
				switch {
				case int32(id) == eos:
					want = ref.complete(cs)
				case len(p) > 0:
					want = len(ref.advance(cs, p)) > 0
				}
				if got := has(mask, id); got != want {
					t.Fatalf("case %d after %q: token %q allowed=%v, want %v", i, text, p, got, want)
				}
				if want {
					allowed = append(allowed, int32(id))
				} else if m.Accept(int32(id)) == nil {
					t.Fatalf("case %d after %q: Accept took refused token %q", i, text, p)
				}
			}
			if len(allowed) == 0 {
				t.Fatalf("case %d after %q: no token allowed", i, text)
			}
			tok := rapid.SampledFrom(allowed).Draw(t, "tok")
			if err := m.Accept(tok); err != nil {
				t.Fatalf("case %d after %q: %v", i, text, err)
			}
			if tok == eos {
				if !g.Match(text) {
					t.Fatalf("case %d ended on %q, which it refuses", i, text)
				}
				return
			}
			if m.Closed() {
				text = append(text, pieces[tok]...)
				if !g.Match(text) || !ref.complete(ref.advance(ref.start(), text)) {
					t.Fatalf("case %d closed on %q, not a sentence", i, text)
				}
				return
			}
			text = append(text, pieces[tok]...)
			cs = ref.advance(cs, pieces[tok])
		}
	})
}

// TestStructuralTagProperties: for random trigger and tag texts, every
// text built as free text (holding no trigger) and tags in their syntax is
// accepted, and the same text with a tag's end cut off is refused.
func TestStructuralTagProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		word := rapid.StringMatching(`[a-z<>=\[\]]{1,6}`)
		trigger := rapid.StringMatching(`[<\[][a-z]{1,4}`).Draw(t, "trigger")
		var structures []map[string]any
		var begins []string
		n := rapid.IntRange(1, 3).Draw(t, "tags")
		for i := range n {
			b := trigger + word.Draw(t, "begin")
			if i == 0 {
				b = trigger
			}
			begins = append(begins, b)
			structures = append(structures, map[string]any{"begin": b, "schema": map[string]any{"type": "integer"}, "end": "</" + trigger[1:] + ">"})
		}
		src, _ := json.Marshal(map[string]any{"type": "structural_tag", "structures": structures, "triggers": []string{trigger}})
		g, err := grammar.FromText(grammar.StructuralTag, string(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		// Free text never holds a trigger's first byte, so the tags are
		// where the triggers are.
		var text, cut strings.Builder
		parts := rapid.IntRange(0, 4).Draw(t, "parts")
		for p := range parts {
			free := rapid.StringMatching(`[a-z ]{0,8}`).Draw(t, "free")
			text.WriteString(free)
			cut.WriteString(free)
			i := rapid.IntRange(0, n-1).Draw(t, "tag")
			tag := begins[i] + itoa(rapid.IntRange(-99, 999).Draw(t, "value")) + "</" + trigger[1:] + ">"
			text.WriteString(tag)
			if p == parts-1 {
				tag = tag[:len(tag)-1]
			}
			cut.WriteString(tag)
		}
		text.WriteString(rapid.StringMatching(`[a-z ]{0,8}`).Draw(t, "tail"))
		if !g.Match([]byte(text.String())) {
			t.Fatalf("%s: refused %q", src, text.String())
		}
		if parts > 0 && g.Match([]byte(cut.String())) {
			t.Fatalf("%s: accepted %q, a tag without its end", src, cut.String())
		}
	})
}

// TestStructuralTagWhitespace: the whitespace policy holds between the
// JSON tokens of a tag's value (compact: none), through the cache too.
func TestStructuralTagWhitespace(t *testing.T) {
	spaced := []byte(`x<function=get_time>{ "tz": "utc" }</function>`)
	tight := []byte(`x<function=get_time>{"tz":"utc"}</function> y`)
	c := grammar.NewCache(1 << 20)
	for _, ws := range []grammar.Whitespace{grammar.Indent, grammar.Compact} {
		direct, err := grammar.StructuralTagWith(tagCases[0].src, ws)
		if err != nil {
			t.Fatal(err)
		}
		cached, err := c.StructuralTagWith("o", tagCases[0].src, ws)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range []*grammar.Grammar{direct, cached} {
			if !g.Match(tight) || g.Match(spaced) != (ws == grammar.Indent) {
				t.Fatalf("%v: tight %v, spaced %v", ws, g.Match(tight), g.Match(spaced))
			}
		}
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func TestStructuralTagRefusals(t *testing.T) {
	legacy := func(structures, triggers string) string {
		return `{"type":"structural_tag","structures":` + structures + `,"triggers":` + triggers + `}`
	}
	w := `{"begin":"<f=a>","schema":{},"end":"</f>"}`
	for _, tc := range []struct {
		src  string
		want error
		says string
	}{
		{`[]`, grammar.ErrBadGrammar, "must be a JSON object"},
		{`{"type":"json_schema","structures":[` + w + `],"triggers":["<f="]}`, grammar.ErrBadGrammar, `type must be "structural_tag"`},
		{legacy(`[]`, `["<f="]`), grammar.ErrBadGrammar, "1 to 64 structures"},
		{`{"type":"structural_tag","triggers":["<f="]}`, grammar.ErrBadGrammar, "structures is required"},
		{legacy(`[`+w+`]`, `[]`), grammar.ErrBadGrammar, "1 to 16 triggers"},
		{legacy(`[`+w+`]`, `[""]`), grammar.ErrBadGrammar, "triggers[0]"},
		{legacy(`[`+w+`]`, `["<f=","<g="]`), grammar.ErrBadGrammar, `trigger "<g=" opens no tag`},
		{legacy(`[`+w+`]`, `["<g="]`), grammar.ErrBadGrammar, "does not start with a trigger"},
		{legacy(`[`+w+`]`, `["<f","<f="]`), grammar.ErrBadGrammar, `trigger "<f=" opens no tag`},
		{legacy(`[{"begin":"<f=a>","schema":{},"end":"</f>","extra":1}]`, `["<f="]`), grammar.ErrBadGrammar, `unknown key "extra"`},
		{legacy(`[{"begin":"<f=a>","end":"</f>"}]`, `["<f="]`), grammar.ErrBadGrammar, "structures[0].schema is required"},
		{legacy(`[{"begin":"<f=a>","schema":{}}]`, `["<f="]`), grammar.ErrBadGrammar, "structures[0].end is required"},
		{legacy(`[{"begin":1,"schema":{},"end":""}]`, `["<f="]`), grammar.ErrBadGrammar, "begin must be a string"},
		{legacy(`[{"begin":"<f=a>","schema":{"not":{"minimum":3}},"end":""}]`, `["<f="]`), grammar.ErrUnsupportedSchema, "not"},
		{`{"type":"structural_tag","structures":[` + w + `],"triggers":["<f="],"mode":1}`, grammar.ErrBadGrammar, `unknown key "mode"`},
		{`{"type":"structural_tag","structures":[` + w + `],"format":{}}`, grammar.ErrBadGrammar, "either format or"},
		{`{"type":"structural_tag","format":{"type":"sequence","elements":[]}}`, grammar.ErrBadGrammar, `unknown key "elements"`},
		{`{"type":"structural_tag","format":{"type":"json_schema"}}`, grammar.ErrUnsupportedGrammar, `format type "json_schema"`},
		{`{"type":"structural_tag","format":{"type":"triggered_tags","triggers":["<f="],"tags":[{"begin":"<f=a>","content":{"type":"any_text"},"end":""}]}}`,
			grammar.ErrUnsupportedGrammar, `content.type "any_text"`},
		{`{"type":"structural_tag","format":{"type":"triggered_tags","triggers":["<f="],"tags":[{"begin":"<f=a>","end":""}]}}`,
			grammar.ErrBadGrammar, "content is required"},
		{`{"type":"structural_tag","format":{"type":"triggered_tags","triggers":["<f="],"tags":[{"begin":"<f=a>","content":{"type":"const_string","value":"x"},"end":""}],"at_least_one":"yes"}}`,
			grammar.ErrBadGrammar, "at_least_one must be a boolean"},
	} {
		_, err := grammar.FromText(grammar.StructuralTag, tc.src)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%.90s: got %v, want %v saying %q", tc.src, err, tc.want, tc.says)
		}
	}
}

// FuzzStructuralTag: reading any structural tag object never panics; it
// fails with a documented error or gives a grammar whose matcher runs.
func FuzzStructuralTag(f *testing.F) {
	for _, tc := range tagCases {
		f.Add(tc.src)
	}
	f.Add(`{"type":"structural_tag","structures":[{"begin":"<a","schema":{},"end":""}],"triggers":["<a","<"]}`)
	f.Fuzz(func(t *testing.T, src string) {
		g, err := grammar.FromText(grammar.StructuralTag, src)
		if err != nil {
			if !errors.Is(err, grammar.ErrBadGrammar) && !errors.Is(err, grammar.ErrUnsupportedGrammar) &&
				!errors.Is(err, grammar.ErrBadSchema) && !errors.Is(err, grammar.ErrUnsupportedSchema) {
				t.Fatalf("undocumented error %v", err)
			}
			return
		}
		g.Match([]byte("abc<a{}"))
		_, v := tagVocab()
		m := grammar.NewMatcher(g, v)
		if _, err := m.Allowed(); err != nil {
			t.Fatal(err)
		}
	})
}

// benchVocab: 32k tokens, each ending with the first byte of "<function=".
func benchVocab() [][]byte {
	var pieces [][]byte
	for i := range 32000 {
		pieces = append(pieces, []byte("w"+itoa(i)+"x<"))
	}
	return pieces
}

// BenchmarkStructuralTagFreeStep: one free-text step of a structural tag
// (Allowed, then Accept of a token that does not trigger) over a 32k-token
// vocabulary, its masks warm (as after a request's first steps), beside
// the lazy grammar's (BenchmarkLazyFreeStep).
func BenchmarkStructuralTagFreeStep(b *testing.B) {
	v := grammar.NewVocab(benchVocab(), nil)
	g, err := grammar.FromText(grammar.StructuralTag, tagCases[0].src)
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

// BenchmarkStructuralTagFirstMask: compiling a structural tag and its
// first two masks (the start and the state after a partial trigger) on a
// fresh 32k-token Vocab: the walks of the whole vocabulary a new grammar
// pays once.
func BenchmarkStructuralTagFirstMask(b *testing.B) {
	pieces := benchVocab()
	for b.Loop() {
		b.StopTimer()
		v := grammar.NewVocab(pieces, nil)
		b.StartTimer()
		g, err := grammar.FromText(grammar.StructuralTag, tagCases[0].src)
		if err != nil {
			b.Fatal(err)
		}
		m := grammar.NewMatcher(g, v)
		if _, err := m.Allowed(); err != nil {
			b.Fatal(err)
		}
		if err := m.Accept(7); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Allowed(); err != nil {
			b.Fatal(err)
		}
	}
}
