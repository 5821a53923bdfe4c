package grammar

import (
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"
)

// Trigger opens the constrained phase of a lazy grammar (CompileLazy):
// once the generated text contains Text, the output from Text on must be a
// sentence of Body (whose sentences begin with Text).
type Trigger struct {
	Text string
	// AtStart: Text opens the constrained phase only as the first text of
	// the output after whitespace (unicode.IsSpace, as Llama 3's bare JSON
	// call); elsewhere it is free text. Text must then begin with a
	// printable ASCII byte.
	AtStart bool
	Body    Part
}

// maxTrigger bounds a trigger's text.
const maxTrigger = 64

// lazy is the free phase of a lazy grammar: the triggers, a scanner (a
// DFA over the text triggers, and the at-start matcher) and the masks of
// its states. The scanner's state is a pure function of the text so far,
// so the masks are cached per Vocab and state.
type lazy struct {
	trig     []lazyTrigger
	controls map[string]bool // control tokens whose text counts (markers)
	key      string          // the triggers and controls, for Vocab's scan cache
	// DFA over the non-AtStart triggers: state = the longest suffix of the
	// text that is a proper prefix of one of them; dfa[s*256+b] is the next
	// state, or -(k+1) when trigger k completes there.
	dfa    []int32
	starts []int // indexes of the AtStart triggers

	mu    sync.Mutex
	masks map[maskKey][]uint64 // guarded by mu
}

type lazyTrigger struct {
	text    string
	atStart bool
	body    *Grammar
	after   int32 // body's state after text
}

type maskKey struct {
	v  *Vocab
	st scanState
}

// scanState is the free phase's state: the DFA state, and the at-start
// matcher (on: the text so far is whitespace, then head, a proper prefix of
// an AtStart trigger; pend: an incomplete UTF-8 sequence inside the
// whitespace).
type scanState struct {
	dfa  int32
	on   bool
	head string
	pend string
}

// hit: scanning a token's text from a state, trigger trig completes at
// byte end (exclusive) of the text.
type hit struct {
	tok  int32
	trig int32
	end  int32
}

// CompileLazy builds a lazy (triggered) grammar: until a trigger's text
// appears in the output every token is allowed (free text, ended by an
// end-of-generation token whenever the model likes); from the trigger on
// the output must be a sentence of its Body. A trigger's text may be split
// across tokens or begin inside one; a token whose text completes a
// trigger and goes on with bytes its body refuses is not allowed. Control
// tokens (no text) count as the texts in controls when their text is one
// of them (the markers a tool-call parser reads from control tokens, such
// as Mistral's [TOOL_CALLS]), and as nothing otherwise. Errors: as Compile;
// ErrBadSchema for no trigger, an empty or too long text, or a body that
// does not begin with its text.
func CompileLazy(triggers []Trigger, controls []string) (*Grammar, error) {
	if len(triggers) == 0 {
		return nil, ErrBadSchema.Withf("a lazy grammar of no trigger")
	}
	l := &lazy{controls: map[string]bool{}, masks: map[maskKey][]uint64{}}
	var key strings.Builder
	var texts []string
	for i, t := range triggers {
		if t.Text == "" || len(t.Text) > maxTrigger {
			return nil, ErrBadSchema.Withf("trigger %d: text of 1 to %d bytes", i, maxTrigger)
		}
		if t.AtStart && (t.Text[0] <= ' ' || t.Text[0] >= 0x7f) {
			return nil, ErrBadSchema.Withf("trigger %d: an at-start text must begin with a printable ASCII byte", i)
		}
		body, err := Compile(t.Body)
		if err != nil {
			return nil, err
		}
		after := body.run([]byte(t.Text))
		if after < 0 {
			return nil, ErrBadSchema.Withf("trigger %d: the body does not begin with the text %q", i, t.Text)
		}
		l.trig = append(l.trig, lazyTrigger{text: t.Text, atStart: t.AtStart, body: body, after: after})
		if t.AtStart {
			l.starts = append(l.starts, i)
			key.WriteString("^")
			texts = append(texts, "")
		} else {
			texts = append(texts, t.Text)
		}
		key.WriteString(t.Text)
		key.WriteByte(0)
	}
	key.WriteByte(1)
	for _, c := range controls {
		l.controls[c] = true
		key.WriteString(c)
		key.WriteByte(0)
	}
	l.key = key.String()
	l.dfa = buildDFA(texts)
	return &Grammar{lazy: l}, nil
}

// buildDFA builds the scanner over texts ("" entries are skipped): its
// states are the proper prefixes of the texts (state 0: the empty one).
func buildDFA(texts []string) []int32 {
	ids := map[string]int32{"": 0}
	prefixes := []string{""}
	for _, t := range texts {
		for i := 1; i < len(t); i++ {
			if _, ok := ids[t[:i]]; !ok {
				ids[t[:i]] = int32(len(prefixes))
				prefixes = append(prefixes, t[:i])
			}
		}
	}
	dfa := make([]int32, len(prefixes)*256)
	for s, p := range prefixes {
		for b := 0; b < 256; b++ {
			text := p + string([]byte{byte(b)})
			next := int32(0)
			fired := false
			// The first trigger (in order) that text ends with fires.
			for k, t := range texts {
				if t != "" && strings.HasSuffix(text, t) {
					next, fired = int32(-(k + 1)), true
					break
				}
			}
			if !fired {
				for i := 0; i < len(text); i++ {
					if id, ok := ids[text[i:]]; ok {
						next = id
						break
					}
				}
			}
			dfa[s*256+b] = next
		}
	}
	return dfa
}

// step advances st over byte c; it returns the trigger that completes at
// c, or -1.
func (l *lazy) step(st *scanState, c byte) int {
	fired := -1
	if st.on {
		fired = l.stepStart(st, c)
	}
	n := l.dfa[int(st.dfa)*256+int(c)]
	if n < 0 {
		if fired < 0 {
			fired = int(-n - 1)
		}
		n = 0
	}
	st.dfa = n
	return fired
}

// stepStart advances the at-start matcher.
func (l *lazy) stepStart(st *scanState, c byte) int {
	if st.head == "" && (st.pend != "" || c >= utf8.RuneSelf || asciiSpace(c)) {
		p := st.pend + string([]byte{c})
		if !utf8.FullRuneInString(p) {
			st.pend = p
			return -1
		}
		r, size := utf8.DecodeRuneInString(p)
		if size == len(p) && r != utf8.RuneError && unicode.IsSpace(r) {
			st.pend = ""
			return -1
		}
		st.on, st.pend = false, ""
		return -1
	}
	h := st.head + string([]byte{c})
	prefix := false
	for _, k := range l.starts {
		t := l.trig[k].text
		if t == h {
			st.on, st.head = false, ""
			return k
		}
		if strings.HasPrefix(t, h) {
			prefix = true
		}
	}
	if prefix {
		st.head = h
	} else {
		st.on, st.head = false, ""
	}
	return -1
}

func asciiSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// initial is the state at the start of the output.
func (l *lazy) initial() scanState { return scanState{on: len(l.starts) > 0} }

// scan follows text from st: the trigger that completes first and the end
// of its text in text (-1, 0 if none); st is left after text, or at the
// trigger.
func (l *lazy) scan(st *scanState, text []byte) (trig, end int) {
	for i, c := range text {
		if k := l.step(st, c); k >= 0 {
			return k, i + 1
		}
	}
	return -1, 0
}

// text is what token tok contributes to the scanned text: its bytes, or a
// control token's text when it is one of the controls.
func (l *lazy) text(v *Vocab, tok int32) []byte {
	if p := v.pieces[tok]; len(p) > 0 {
		return p
	}
	if s := v.special[tok]; len(s) > 0 && l.controls[string(s)] {
		return s
	}
	return nil
}

// hits are the tokens that complete a trigger from st (cached on v per
// trigger set and state: they do not depend on the bodies).
func (l *lazy) hits(v *Vocab, st scanState) []hit {
	k := vocabScanKey{l.key, st}
	v.mu.Lock()
	defer v.mu.Unlock()
	if h, ok := v.scans[k]; ok {
		return h
	}
	hs := []hit{} // not nil: cached even when empty
	for tok := range v.n {
		b := l.text(v, int32(tok))
		if len(b) == 0 {
			continue
		}
		s := st
		if trig, end := l.scan(&s, b); trig >= 0 {
			hs = append(hs, hit{tok: int32(tok), trig: int32(trig), end: int32(end)})
		}
	}
	if v.scans == nil {
		v.scans = map[vocabScanKey][]hit{}
	}
	v.scans[k] = hs
	return hs
}

// enter returns the body's state after trigger trig's text and rest (-1:
// the body refuses rest).
func (t *lazyTrigger) enter(rest []byte) int32 {
	g := t.body
	g.mu.Lock()
	defer g.mu.Unlock()
	st := t.after
	for _, c := range rest {
		if st = g.trans(st, c); st < 0 {
			return -1
		}
	}
	return st
}

// mask is the free phase's mask at st: every token, except those that
// complete a trigger and go on with bytes its body refuses.
func (l *lazy) mask(v *Vocab, st scanState) []uint64 {
	k := maskKey{v, st}
	l.mu.Lock()
	m, ok := l.masks[k]
	l.mu.Unlock()
	if ok {
		return m
	}
	m = make([]uint64, v.words)
	for i := range m {
		m[i] = ^uint64(0)
	}
	if r := v.n % 64; r != 0 {
		m[len(m)-1] = 1<<r - 1
	}
	for _, h := range l.hits(v, st) {
		rest := l.text(v, h.tok)[h.end:]
		if l.trig[h.trig].enter(rest) < 0 {
			m[h.tok>>6] &^= 1 << (h.tok & 63)
		}
	}
	l.mu.Lock()
	l.masks[k] = m
	l.mu.Unlock()
	return m
}

// match runs a lazy grammar over b: the body's state when a trigger fired
// (-1: refused), or ok and free when none did.
func (l *lazy) match(b []byte) (body *Grammar, st int32, free bool) {
	s := l.initial()
	trig, end := l.scan(&s, b)
	if trig < 0 {
		return nil, 0, true
	}
	t := &l.trig[trig]
	return t.body, t.enter(b[end:]), false
}
