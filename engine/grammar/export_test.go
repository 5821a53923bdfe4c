package grammar

// A reference recognizer for tests, independent of the interned automaton
// (frames, states, transitions) that Matcher and Match use: plain stacks,
// expanded and advanced afresh for every byte.

type naiveFrame struct {
	pos  int32
	next *naiveFrame
}

func sameNaive(a, b *naiveFrame) bool {
	for a != nil && b != nil {
		if a.pos != b.pos {
			return false
		}
		a, b = a.next, b.next
	}
	return a == b
}

func (g *Grammar) naiveExpand(s *naiveFrame, out []*naiveFrame) []*naiveFrame {
	for s != nil {
		p := &g.pos[s.pos]
		switch p.kind {
		case kTerm:
			for _, o := range out {
				if sameNaive(o, s) {
					return out
				}
			}
			return append(out, s)
		case kEnd:
			s = s.next
			continue
		}
		cont := s.next
		if g.pos[p.next].kind != kEnd {
			cont = &naiveFrame{p.next, s.next}
		}
		for _, f := range g.firstOf(p.ref) {
			out = g.naiveExpand(&naiveFrame{f, cont}, out)
		}
		return out
	}
	for _, o := range out {
		if o == nil {
			return out
		}
	}
	return append(out, nil)
}

// NaiveState is a parse state of the reference recognizer (nil: dead).
type NaiveState []*naiveFrame

// NaiveStart is the reference's start state.
func NaiveStart(g *Grammar) NaiveState {
	g.mu.Lock() // grown rules are made on first use
	defer g.mu.Unlock()
	var st []*naiveFrame
	for _, f := range g.firstOf(int32(g.root)) {
		st = g.naiveExpand(&naiveFrame{f, nil}, st)
	}
	return st
}

// NaiveAdvance follows b from st.
func NaiveAdvance(g *Grammar, st NaiveState, b []byte) NaiveState {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range b {
		var next []*naiveFrame
		for _, s := range st {
			if s != nil && g.pos[s.pos].term.has(c) {
				next = g.naiveExpand(&naiveFrame{g.pos[s.pos].next, s.next}, next)
			}
		}
		if st = next; len(st) == 0 {
			return nil
		}
	}
	return st
}

// NaiveComplete reports whether st is a whole sentence.
func NaiveComplete(st NaiveState) bool {
	for _, s := range st {
		if s == nil {
			return true
		}
	}
	return false
}
