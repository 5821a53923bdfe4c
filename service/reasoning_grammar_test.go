package service

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/grammar"
	"pgregory.net/rapid"
)

// TestConstraintAfterReasoning: a constraint compiled with After
// (PrepareChat sets it where the prompt opens the reasoning) lets the
// reasoning run free, any tokens, control tokens included, and holds the
// answer to the schema from the byte after </think>, whether the model
// writes the tag as its control token, as text, or split across tokens; and
// the ReasoningStream splits the output at the same tag: its content is
// the constrained answer, whole.
func TestConstraintAfterReasoning(t *testing.T) {
	const schema = `{"type":"object","properties":{"n":{"type":"integer","minimum":0,"maximum":9}},"required":["n"],"additionalProperties":false}`
	s := &Requests{shared: &shared{grammars: grammar.NewCache(1 << 24)}}
	g, err := s.compile("t", Constraint{Schema: []byte(schema), After: thinkClose})
	if err != nil {
		t.Fatal(err)
	}
	var pieces, special [][]byte
	for b := range 128 {
		pieces, special = append(pieces, []byte{byte(b)}), append(special, nil)
	}
	for _, p := range []string{"</", "think>", "</think>", "</think>{", "think>\n\n{\"n\": ", "{\"n\": 3}", "Add them", "{\"n\": 12}"} {
		pieces, special = append(pieces, []byte(p)), append(special, nil)
	}
	for _, c := range []string{thinkOpen, thinkClose, "<|eot|>"} {
		pieces, special = append(pieces, nil), append(special, []byte(c))
	}
	eog := int32(len(pieces) - 1)
	text := func(tok int32) string {
		if s := special[tok]; string(s) == thinkOpen || string(s) == thinkClose {
			return string(s)
		}
		return string(pieces[tok])
	}
	v := grammar.NewVocabControls(pieces, special, []int32{eog})
	has := func(mask []uint64, t int32) bool { return mask[t>>6]&(1<<(t&63)) != 0 }
	completed := 0
	rapid.Check(t, func(rt *rapid.T) {
		m := grammar.NewMatcher(g, v)
		var out strings.Builder
		// Free reasoning: any tokens but a close tag, each allowed.
		for _, tok := range rapid.SliceOfN(rapid.Int32Range(0, eog-2), 0, 12).Draw(rt, "reasoning") {
			if strings.Contains(out.String()+text(tok), thinkClose) || strings.HasSuffix(out.String(), "<") || strings.HasSuffix(out.String(), "</") {
				continue
			}
			if mask, _ := m.Allowed(); !has(mask, tok) {
				rt.Fatalf("reasoning token %q refused after %q", text(tok), out.String())
			}
			if err := m.Accept(tok); err != nil {
				rt.Fatal(err)
			}
			out.WriteString(text(tok))
		}
		// Then the answer, each token drawn from the mask.
		for step := 0; step < 40; step++ {
			mask, err := m.Allowed()
			if err != nil {
				rt.Fatal(err)
			}
			var allowed []int32
			for tok := range int32(len(pieces)) {
				if has(mask, tok) && (m.Triggered() || strings.Contains(text(tok), "</") || strings.HasPrefix(text(tok), "think>") || tok == eog-1) {
					allowed = append(allowed, tok)
				}
			}
			if len(allowed) == 0 {
				break
			}
			tok := rapid.SampledFrom(allowed).Draw(rt, "tok")
			if err := m.Accept(tok); err != nil {
				rt.Fatal(err)
			}
			if tok == eog {
				break
			}
			out.WriteString(text(tok))
		}
		if !m.Triggered() || !m.Complete() {
			return
		}
		completed++
		r := NewReasoningStream(ThinkTags, true)
		reasoning, content := r.Feed(out.String(), true)
		var ans struct {
			N *int `json:"n"`
		}
		dec := json.NewDecoder(strings.NewReader(content))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ans); err != nil || ans.N == nil || *ans.N < 0 || *ans.N > 9 {
			rt.Fatalf("output %q: content %q does not hold the schema (%v)", out.String(), content, err)
		}
		if strings.Contains(reasoning, thinkClose) {
			rt.Fatalf("reasoning %q holds the close tag", reasoning)
		}
	})
	if completed == 0 {
		t.Errorf("no walk completed an answer")
	}
	// The answer is held from the first byte after the tag.
	for _, bad := range []string{"</think>x", `</think>{"n": 12}`} {
		if g.Match([]byte("reasoning" + bad)) {
			t.Errorf("%q accepted", bad)
		}
	}
	if !g.Match([]byte(`<think>{"x"</think>{"n": 3}`)) || !g.Match([]byte("cut off while reasoning")) {
		t.Errorf("free reasoning refused")
	}
}
