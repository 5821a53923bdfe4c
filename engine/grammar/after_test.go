package grammar_test

import (
	"errors"
	"testing"

	"github.com/cloison/cloison/engine/grammar"
)

// A grammar after a marker: free text until </think> (as text, split
// across tokens, or as a control token), then the schema from the next
// byte.
func TestAfterMarker(t *testing.T) {
	g, err := grammar.FromSchema([]byte(`{"enum":["yes","no"]}`))
	if err != nil {
		t.Fatal(err)
	}
	a, err := grammar.After("</think>", g, []string{"</think>"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{`any {"x": reasoning</think>"yes"`, true},
		{`</think>"no"`, true},
		{`"maybe" and more</think>"no"`, true},
		{`still thinking`, true}, // the model may end inside its reasoning
		{`x</think>"maybe"`, false},
		{`x</think> "yes"x`, false},
	} {
		if got := a.Match([]byte(c.text)); got != c.ok {
			t.Errorf("Match(%q) = %v, want %v", c.text, got, c.ok)
		}
	}
	var pieces, special [][]byte
	for b := range 256 {
		pieces = append(pieces, []byte{byte(b)})
		special = append(special, nil)
	}
	add := func(p, s string) int32 {
		pieces, special = append(pieces, []byte(p)), append(special, []byte(s))
		return int32(len(pieces) - 1)
	}
	split, rest := add("</thi", ""), add("nk>\"y", "")
	bad := add("nk>x", "")
	ctl := add("", "</think>")
	eog := add("", "<|eot|>")
	v := grammar.NewVocabControls(pieces, special, []int32{eog})

	m := grammar.NewMatcher(a, v)
	for _, tok := range []int32{'"', 'm', split} { // free: a JSON-looking start is not constrained
		if err := m.Accept(tok); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Accept(bad); !errors.Is(err, grammar.ErrNotAllowed) {
		t.Fatalf("a token completing the marker with bytes the schema refuses: %v", err)
	}
	if err := m.Accept(rest); err != nil || !m.Triggered() {
		t.Fatalf("completing the marker: %v, triggered %v", err, m.Triggered())
	}
	if err := m.Accept('x'); !errors.Is(err, grammar.ErrNotAllowed) {
		t.Fatalf("after the marker the schema holds: %v", err)
	}

	m = grammar.NewMatcher(a, v)
	if err := m.Accept(ctl); err != nil || !m.Triggered() {
		t.Fatalf("the marker as a control token: %v, triggered %v", err, m.Triggered())
	}
	if mask, _ := m.Allowed(); has(mask, int('x')) || !has(mask, int('"')) {
		t.Errorf("mask after the control marker does not follow the schema")
	}

	if _, err := grammar.After("", g, nil); !errors.Is(err, grammar.ErrBadSchema) {
		t.Errorf("empty marker: %v", err)
	}
	if _, err := grammar.After("</think>", a, nil); !errors.Is(err, grammar.ErrBadSchema) {
		t.Errorf("lazy inside: %v", err)
	}
}
