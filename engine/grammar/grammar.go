package grammar

import (
	"fmt"
	"sync"

	"github.com/cloison/cloison"
)

// Errors of the package.
var (
	// ErrUnsupportedSchema: the schema uses a feature this package does not
	// enforce; the message names the feature and where (code unsupported).
	ErrUnsupportedSchema = cloison.NewError(cloison.CodeUnsupported, "unsupported JSON schema feature")
	// ErrBadSchema: the schema is not a valid JSON schema document (code
	// invalid_request_error).
	ErrBadSchema = cloison.NewError(cloison.CodeInvalid, "invalid JSON schema")
	// ErrNotAllowed: a token the grammar does not allow was accepted, or the
	// grammar left no token to choose (code internal_error: the sampler
	// only ever picks an allowed token).
	ErrNotAllowed = cloison.NewError(cloison.CodeInternal, "grammar: token not allowed")
)

// maxStacks bounds how many parse stacks an ambiguous grammar may keep alive
// at once; beyond it the matcher fails closed with ErrNotAllowed.
const maxStacks = 4096

// byteSet is a set of bytes.
type byteSet [4]uint64

func (s *byteSet) add(b byte)      { s[b>>6] |= 1 << (b & 63) }
func (s *byteSet) has(b byte) bool { return s[b>>6]&(1<<(b&63)) != 0 }
func (s *byteSet) addRange(lo, hi int) {
	for b := lo; b <= hi; b++ {
		s.add(byte(b))
	}
}

// elem is one element of an alternative: a byte-set terminal, or a
// reference to a rule.
type elem struct {
	ref  int // rule index; -1 for a terminal
	term byteSet
}

type rule struct {
	name string
	alts [][]elem
	// leaf rules (string, number) are the unit of the mask cache: a
	// state inside one is the same whatever surrounds it.
	leaf bool
}

// position kinds.
const (
	kTerm = iota
	kRef
	kEnd
)

// pos is one (rule, alternative, index) position, flattened.
type pos struct {
	kind uint8
	term byteSet
	ref  int32 // rule, for kRef
	next int32 // the position after this one (for kTerm and kRef)
	rule int32
}

// Grammar is a compiled context-free grammar over bytes. A Grammar is
// immutable once built, except for its mask cache (guarded by mu), and safe
// for concurrent use; Matchers of many requests may share one.
type Grammar struct {
	rules []rule
	root  int
	pos   []pos
	first [][]int32 // rule → first position of each alternative

	mu    sync.Mutex
	cache map[cacheKey]*local // guarded by mu: leaf-chunk masks per Vocab
}

// build flattens rules into positions and checks that no rule can reach
// itself without consuming a byte (left recursion would loop forever).
func build(rules []rule, root int) (*Grammar, error) {
	g := &Grammar{rules: rules, root: root, first: make([][]int32, len(rules)), cache: map[cacheKey]*local{}}
	for ri, r := range rules {
		if len(r.alts) == 0 {
			return nil, fmt.Errorf("grammar: rule %s has no alternative", r.name)
		}
		for _, a := range r.alts {
			g.first[ri] = append(g.first[ri], int32(len(g.pos)))
			for i, e := range a {
				p := pos{rule: int32(ri), next: int32(len(g.pos) + 1)}
				if e.ref >= 0 {
					p.kind, p.ref = kRef, int32(e.ref)
				} else {
					p.kind, p.term = kTerm, e.term
				}
				_ = i
				g.pos = append(g.pos, p)
			}
			g.pos = append(g.pos, pos{kind: kEnd, rule: int32(ri)})
		}
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return g, nil
}

func (g *Grammar) checkLeftRecursion() error {
	// nullable fixpoint
	nullable := make([]bool, len(g.rules))
	for changed := true; changed; {
		changed = false
		for ri, r := range g.rules {
			if nullable[ri] {
				continue
			}
			for _, a := range r.alts {
				all := true
				for _, e := range a {
					if e.ref < 0 || !nullable[e.ref] {
						all = false
						break
					}
				}
				if all {
					nullable[ri], changed = true, true
					break
				}
			}
		}
	}
	// left edges: rule → rules it may start with without consuming
	edges := make([][]int, len(g.rules))
	for ri, r := range g.rules {
		for _, a := range r.alts {
			for _, e := range a {
				if e.ref < 0 {
					break
				}
				edges[ri] = append(edges[ri], e.ref)
				if !nullable[e.ref] {
					break
				}
			}
		}
	}
	state := make([]uint8, len(g.rules)) // 0 new, 1 on path, 2 done
	var visit func(int) error
	visit = func(r int) error {
		state[r] = 1
		for _, n := range edges[r] {
			switch state[n] {
			case 1:
				return ErrUnsupportedSchema.Withf("a $ref cycle that consumes nothing (%s)", g.rules[n].name)
			case 0:
				if err := visit(n); err != nil {
					return err
				}
			}
		}
		state[r] = 2
		return nil
	}
	for r := range g.rules {
		if state[r] == 0 {
			if err := visit(r); err != nil {
				return err
			}
		}
	}
	return nil
}

// frame is one entry of a parse stack: the position to match next; next is
// the frame below (nil: the bottom). Frames are immutable and shared.
type frame struct {
	pos  int32
	next *frame
}

// stack equality by content.
func sameStack(a, b *frame) bool {
	for a != nil && b != nil {
		if a == b {
			return true
		}
		if a.pos != b.pos {
			return false
		}
		a, b = a.next, b.next
	}
	return a == b
}

func addStack(out []*frame, s *frame) []*frame {
	for _, o := range out {
		if sameStack(o, s) {
			return out
		}
	}
	return append(out, s)
}

// expand appends to out the expanded forms of s: stacks whose top is a
// terminal, or nil (the bottom reached: everything below s matched).
func (g *Grammar) expand(s *frame, out []*frame) []*frame {
	for s != nil {
		p := &g.pos[s.pos]
		switch p.kind {
		case kTerm:
			return addStack(out, s)
		case kEnd:
			s = s.next
			continue
		}
		cont := s.next
		if g.pos[p.next].kind != kEnd {
			cont = &frame{pos: p.next, next: s.next}
		}
		for _, f := range g.first[p.ref] {
			out = g.expand(&frame{pos: f, next: cont}, out)
		}
		return out
	}
	return addStack(out, nil)
}

// advance returns the expanded stacks after byte b, from expanded stacks.
func (g *Grammar) advance(stacks []*frame, b byte, out []*frame) []*frame {
	for _, s := range stacks {
		if s == nil {
			continue
		}
		p := &g.pos[s.pos]
		if p.term.has(b) {
			out = g.expand(&frame{pos: p.next, next: s.next}, out)
		}
	}
	return out
}

// start returns the expanded stacks of the root rule.
func (g *Grammar) start() []*frame {
	var out []*frame
	for _, f := range g.first[g.root] {
		out = g.expand(&frame{pos: f}, out)
	}
	return out
}

// Match reports whether the grammar accepts exactly b (for tests and for
// callers that check text already produced).
func (g *Grammar) Match(b []byte) bool {
	st := g.start()
	for _, c := range b {
		st = g.advance(st, c, nil)
		if len(st) == 0 {
			return false
		}
	}
	for _, s := range st {
		if s == nil {
			return true
		}
	}
	return false
}

// MatchPrefix reports whether b can be continued into a sentence of the
// grammar.
func (g *Grammar) MatchPrefix(b []byte) bool {
	st := g.start()
	for _, c := range b {
		st = g.advance(st, c, nil)
		if len(st) == 0 {
			return false
		}
	}
	return true
}
