package grammar

import "strings"

// After is a lazy grammar whose constraint starts after a marker: until
// marker appears in the output every token is allowed (free text, ended by
// an end-of-generation token whenever the model likes); from the byte after
// it the output must be a sentence of g. This is structured output after a
// reasoning model's reasoning (marker "</think>"): the reasoning is free,
// the answer is constrained. The marker may be split across tokens or begin
// inside one; a token that completes it and goes on with bytes g refuses
// is not allowed. Control tokens count as the texts in controls when their
// text is one of them (a vocabulary that holds the marker as a control
// token), as in CompileLazy. g is shared, not copied. Errors: ErrBadSchema
// for an empty or too long marker, or a g that is itself lazy.
func After(marker string, g *Grammar, controls []string) (*Grammar, error) {
	if marker == "" || len(marker) > maxTrigger {
		return nil, ErrBadSchema.Withf("marker: text of 1 to %d bytes", maxTrigger)
	}
	if g.lazy != nil {
		return nil, ErrBadSchema.Withf("a lazy grammar after a marker")
	}
	l := &lazy{controls: map[string]bool{}, masks: map[maskKey][]uint64{}}
	l.trig = []lazyTrigger{{text: marker, body: g, after: g.run(nil)}}
	var key strings.Builder
	key.WriteString(marker) // CompileLazy's key of one trigger: the same scans
	key.WriteByte(0)
	key.WriteByte(1)
	for _, c := range controls {
		l.controls[c] = true
		key.WriteString(c)
		key.WriteByte(0)
	}
	l.key = key.String()
	l.dfa = buildDFA([]string{marker})
	return &Grammar{lazy: l}, nil
}
