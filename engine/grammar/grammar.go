package grammar

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"math/bits"
	"slices"
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
	// count, on the rules of a length-bounded string's characters
	// (builder.str), says how many characters they still admit, so that
	// its masks derive from one count-free walk (counted.go).
	count *strCount
	// grow, when set, makes the rule's alternatives on its first use
	// (firstOf): a family of rules too large to write out whole (an
	// object's properties in any order, a rule per set of them written)
	// is made only where a parse goes. Its alternatives never begin
	// without consuming a byte in a way that reaches another rule (no
	// left recursion through it).
	grow grower
}

// grower makes a grown rule's alternatives; add makes further grown rules
// (the builder's at compile time, the Grammar's once built).
type grower func(add func(name string, grow grower) int) [][]elem

// maxGrown bounds the rules one Grammar grows as matchers explore it; past
// it a grown rule has no alternative, so the parse fails closed.
const maxGrown = 1 << 16

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

	// The parse automaton, built lazily as matchers explore it, and the
	// mask cache; all guarded by mu. They memoize pure functions of the
	// grammar: sharing them changes speed, never a result.
	mu      sync.Mutex
	frames  map[frameKey]*frame
	states  []*state
	stateIx map[string]int32
	cache   map[cacheKey]*local  // leaf-chunk masks per Vocab
	langs   map[int32]string     // langKey per state, for walkBelow ("" none)
	cuts    map[*frame]*stackCut // cut per stack, for Allowed
	// langKey's scratch: a position's number where its stamp is langGen,
	// the positions met, the key being written
	langIDs, langStamp []uint32
	langGen            uint32
	langQueue          []int32
	langBuf            []byte
	// scratch of stateOf's key and of trans's stacks
	keyBuf []byte
	outBuf []*frame

	grown int // rules grown so far (guarded by mu)

	// lazy, if set, makes this a lazy grammar (CompileLazy): free text
	// until a trigger, then the trigger's body; rules, pos and the
	// automaton are then empty.
	lazy *lazy
}

// build flattens rules into positions and checks that no rule can reach
// itself without consuming a byte (left recursion would loop forever).
func build(rules []rule, root int) (*Grammar, error) {
	g := &Grammar{rules: rules, root: root, first: make([][]int32, len(rules)), cache: map[cacheKey]*local{},
		frames: map[frameKey]*frame{}, stateIx: map[string]int32{}}
	for ri, r := range rules {
		if r.grow != nil {
			continue // made on first use
		}
		if len(r.alts) == 0 {
			return nil, fmt.Errorf("grammar: rule %s has no alternative", r.name)
		}
		g.flatten(ri)
	}
	if err := g.checkLeftRecursion(); err != nil {
		return nil, err
	}
	return g, nil
}

// flatten appends the positions of rule ri's alternatives.
func (g *Grammar) flatten(ri int) {
	for _, a := range g.rules[ri].alts {
		g.first[ri] = append(g.first[ri], int32(len(g.pos)))
		for _, e := range a {
			p := pos{rule: int32(ri), next: int32(len(g.pos) + 1)}
			if e.ref >= 0 {
				p.kind, p.ref = kRef, int32(e.ref)
			} else {
				p.kind, p.term = kTerm, e.term
			}
			g.pos = append(g.pos, p)
		}
		g.pos = append(g.pos, pos{kind: kEnd, rule: int32(ri)})
	}
}

// firstOf returns the first position of each alternative of rule r,
// growing r first if it is a grown rule not yet made. Called with mu held
// (or before g is shared).
func (g *Grammar) firstOf(r int32) []int32 {
	grow := g.rules[r].grow
	if grow == nil {
		return g.first[r]
	}
	g.rules[r].grow = nil
	if g.grown >= maxGrown {
		return nil // fail closed: no alternative
	}
	g.grown++
	g.rules[r].alts = grow(g.addGrown)
	g.flatten(int(r))
	return g.first[r]
}

// addGrown adds a grown rule, made on its first use.
func (g *Grammar) addGrown(name string, grow grower) int {
	g.rules = append(g.rules, rule{name: name, grow: grow})
	g.first = append(g.first, nil)
	return len(g.rules) - 1
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
			if r.grow != nil {
				// counted nullable (the safe side); it starts with no
				// rule that could lead back without a byte
				nullable[ri], changed = true, true
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
// the frame below (nil: the bottom). Frames are interned per Grammar (one
// frame per (pos, next)), so equal stacks are the same pointer.
type frame struct {
	pos  int32
	id   int32
	next *frame
}

// frameKey is a frame's pos and its next frame's id (-1: none), as one
// word: the frames map hashes it as an integer.
type frameKey uint64

func frameKeyOf(pos int32, next *frame) frameKey {
	id := int32(-1)
	if next != nil {
		id = next.id
	}
	return frameKey(uint64(uint32(pos))<<32 | uint64(uint32(id)))
}

// state is an interned set of expanded stacks (a parse state), with its
// transitions filled in as they are first taken.
type state struct {
	stacks []*frame // sorted by frame id; nil (the bottom) first if present
	bottom bool     // nil is among stacks: everything matched
	live   int32    // the state without nil (-1: none; itself if !bottom)
	next   [256]int32
}

// transition encodings in state.next.
const (
	tUnknown = 0
	tDead    = 1 // ids are stored +2
)

// interned frame.
func (g *Grammar) frame(pos int32, next *frame) *frame {
	k := frameKeyOf(pos, next)
	if f := g.frames[k]; f != nil {
		return f
	}
	f := &frame{pos: pos, id: int32(len(g.frames)), next: next}
	g.frames[k] = f
	return f
}

func addStack(out []*frame, s *frame) []*frame {
	for _, o := range out {
		if o == s {
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
			cont = g.frame(p.next, s.next)
		}
		for _, f := range g.firstOf(p.ref) {
			out = g.expand(g.frame(f, cont), out)
		}
		return out
	}
	return addStack(out, nil)
}

// stateOf interns a set of expanded stacks; -1 for the empty set.
func (g *Grammar) stateOf(stacks []*frame) int32 {
	if len(stacks) == 0 {
		return -1
	}
	ids := func(f *frame) int32 {
		if f == nil {
			return -1
		}
		return f.id
	}
	slices.SortFunc(stacks, func(a, b *frame) int { return cmp.Compare(ids(a), ids(b)) })
	key := g.keyBuf[:0]
	for _, f := range stacks {
		key = binary.LittleEndian.AppendUint32(key, uint32(ids(f)))
	}
	g.keyBuf = key
	if id, ok := g.stateIx[string(key)]; ok {
		return id
	}
	id := int32(len(g.states))
	st := &state{stacks: slices.Clone(stacks), bottom: stacks[0] == nil, live: id}
	g.states = append(g.states, st)
	g.stateIx[string(key)] = id
	if st.bottom {
		st.live = g.stateOf(slices.Clone(stacks[1:]))
	}
	return id
}

// trans returns the state after byte b from state st (-1: dead). Sets
// larger than maxStacks are treated as dead: the text is refused, never
// let through unchecked.
func (g *Grammar) trans(st int32, b byte) int32 {
	s := g.states[st]
	if t := s.next[b]; t != tUnknown {
		return t - 2
	}
	// same: the bytes that the same stacks accept as b (each stack's
	// byte set or its complement, intersected), whose next state is b's;
	// out is scratch (stateOf keeps a copy)
	out := g.outBuf[:0]
	same := byteSet{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
	for _, f := range s.stacks {
		if f == nil {
			continue
		}
		p := &g.pos[f.pos]
		if p.term.has(b) {
			out = g.expand(g.frame(p.next, f.next), out)
			for i, w := range p.term {
				same[i] &= w
			}
		} else {
			for i, w := range p.term {
				same[i] &^= w
			}
		}
	}
	ns := int32(-1)
	if len(out) <= maxStacks {
		ns = g.stateOf(out)
	}
	g.outBuf = out[:0]
	next := &g.states[st].next
	for i, w := range same {
		for w != 0 {
			c := i<<6 | bits.TrailingZeros64(w)
			w &= w - 1
			next[c] = ns + 2
		}
	}
	return ns
}

// start returns the state of the root rule.
func (g *Grammar) start() int32 {
	var out []*frame
	for _, f := range g.firstOf(int32(g.root)) {
		out = g.expand(g.frame(f, nil), out)
	}
	return g.stateOf(out)
}

// run follows b from the start; -1 if the grammar refuses a byte. Not for
// lazy grammars.
func (g *Grammar) run(b []byte) int32 {
	g.mu.Lock()
	defer g.mu.Unlock()
	st := g.start()
	for _, c := range b {
		if st = g.trans(st, c); st < 0 {
			return -1
		}
	}
	return st
}

// Match reports whether the grammar accepts exactly b (for tests and for
// callers that check text already produced).
func (g *Grammar) Match(b []byte) bool {
	if g.lazy != nil {
		body, st, free := g.lazy.match(b)
		if free || st < 0 {
			return free
		}
		g = body
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.states[st].bottom
	}
	st := g.run(b)
	if st < 0 {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.states[st].bottom
}

// MatchPrefix reports whether b can be continued into a sentence of the
// grammar.
func (g *Grammar) MatchPrefix(b []byte) bool {
	if g.lazy != nil {
		_, st, free := g.lazy.match(b)
		return free || st >= 0
	}
	return g.run(b) >= 0
}
