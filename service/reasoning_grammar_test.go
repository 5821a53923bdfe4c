package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/sample"
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

// TestConstraintAfterThroughEngine runs Constraint.After through the
// engine with the context bag (it repeats its context's commonest token,
// so the marker here is two of that token, not </think>): the first token
// is free text the schema refuses, the second completes the marker, and
// the rest is exactly the schema's sentence; without After the schema
// holds from the first token.
func TestConstraintAfterThroughEngine(t *testing.T) {
	s := newEngineRequests(t, &fakeLedger{}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prompt := make([]int32, 24)
	for i := range prompt {
		prompt[i] = 40
	}
	run := func(id string, c Constraint) string {
		var out strings.Builder
		q := Request{ID: cloison.RequestID(id), Model: "context-bag", Prompt: prompt, MaxTokens: 12, Sampling: sample.Params{Temperature: 0}, Constraint: c}
		if _, err := s.Generate(ctx, acme("context-bag"), q, Sink{Token: func(_ int, tok engine.Token) { out.WriteString(tok.Text) }}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	free := run("req-after-free", Constraint{})
	if len(free) < 2 || strings.Count(free, free[:1]) != len(free) || free[:1] == "7" {
		t.Fatalf("unconstrained output %q: the bag does not repeat one byte", free)
	}
	marker := free[:2]
	schema := []byte(`{"enum":[7]}`)
	if got := run("req-after", Constraint{Schema: schema, After: marker}); got != marker+"7" {
		t.Errorf("after %q: got %q, want the marker free, then exactly 7", marker, got)
	}
	if got := run("req-after-none", Constraint{Schema: schema}); got != "7" {
		t.Errorf("from the first token: got %q, want 7", got)
	}
}
