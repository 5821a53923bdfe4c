package grammar

import (
	"encoding/binary"
	"fmt"
	"sync"

	"github.com/cloison/cloison/engine/tokenizer"
)

// Vocab is a model's vocabulary as the grammar sees it: each token's bytes
// in a trie, and the end-of-generation tokens. Tokens without bytes
// (control tokens) are never allowed, except end-of-generation tokens when
// the grammar is complete. A Vocab is immutable, except for the memo of
// lazy grammars' trigger scans and of the walks grammars share (guarded by
// mu), and safe for concurrent use.
type Vocab struct {
	n       int
	words   int
	pieces  [][]byte
	special [][]byte // control tokens' text (lazy grammars' triggers)
	// The trie, flattened in depth-first order (node 0 is the root): node
	// i's byte is tb[i], its subtree is nodes i to tend[i]-1 (its first
	// child is i+1, the next sibling of a child c is tend[c]), and the
	// tokens whose bytes end at it are ttok[tfirst[i]:tfirst[i+1]]. A walk
	// reads these arrays in order and skips a dead subtree in one step.
	tb     []byte
	tend   []int32
	tfirst []int32
	ttok   []int32
	eog    []int32

	mu    sync.Mutex
	scans map[vocabScanKey][]hit // lazy grammars' trigger hits, per trigger set and state; guarded by mu
	// The chunks' walks shared by grammars, per chunk language (langKey),
	// in two generations: locals the recent ones, old the previous; a hit
	// in old moves the walk into locals. Guarded by mu.
	locals, old map[string]*local
	// counted walks of count-free strings (counted.go), per chunk
	// language; guarded by mu
	counted map[string]*countedWalk
	// walks below the root's children, per state language (subwalk.go);
	// subTokens counts the tokens they hold. Guarded by mu.
	subs      map[subKey]*subWalk
	subTokens int
}

// maxSharedLocals bounds each generation of Vocab's shared walks (each
// holds a bitset of the vocabulary: 16 KiB at 128k tokens). When locals is
// full it becomes old and the older generation is dropped, so a walk used
// since the last flush survives the next one: walks used once (a bounded
// pattern's counts) cannot push out the walks every schema uses.
const maxSharedLocals = 512

// sharedLocal returns the shared walk of the chunk language key, or nil.
func (v *Vocab) sharedLocal(key string) *local {
	v.mu.Lock()
	defer v.mu.Unlock()
	if l := v.locals[key]; l != nil {
		return l
	}
	l := v.old[key]
	if l != nil {
		v.putLocal(key, l)
	}
	return l
}

// putLocal stores the shared walk of the chunk language key. v.mu must be
// held.
func (v *Vocab) putLocal(key string, l *local) {
	if v.locals == nil || len(v.locals) >= maxSharedLocals {
		v.old, v.locals = v.locals, map[string]*local{}
	}
	v.locals[key] = l
}

type vocabScanKey struct {
	triggers string
	st       scanState
}

type tnode struct {
	b     byte
	child []int32 // sorted by byte
	toks  []int32 // tokens whose bytes end here
}

// NewVocab returns the Vocab of tokens with the given bytes; eog lists the
// end-of-generation token ids.
func NewVocab(pieces [][]byte, eog []int32) *Vocab { return NewVocabControls(pieces, nil, eog) }

// NewVocabControls is NewVocab with the text of the control tokens
// (special[id], for tokens without bytes): a lazy grammar reads a control
// token whose text is one of its controls (CompileLazy) as that text.
func NewVocabControls(pieces, special [][]byte, eog []int32) *Vocab {
	v := &Vocab{n: len(pieces), words: (len(pieces) + 63) / 64, pieces: make([][]byte, len(pieces)), special: make([][]byte, len(pieces))}
	t := &trieBuild{nodes: []tnode{{}}}
	for id, s := range special {
		if id < len(pieces) && len(pieces[id]) == 0 {
			v.special[id] = append([]byte(nil), s...)
		}
	}
	for id, p := range pieces {
		v.pieces[id] = append([]byte(nil), p...)
		if len(p) == 0 {
			continue
		}
		n := int32(0)
		for _, c := range p {
			n = t.childOf(n, c)
		}
		t.nodes[n].toks = append(t.nodes[n].toks, int32(id))
	}
	t.flatten(v, 0)
	v.tfirst = append(v.tfirst, int32(len(v.ttok)))
	for _, e := range eog {
		if e >= 0 && int(e) < len(pieces) {
			v.eog = append(v.eog, e)
		}
	}
	return v
}

// trieBuild is the trie while NewVocabControls fills it, before flatten.
type trieBuild struct {
	nodes []tnode // nodes[0] is the root
}

func (t *trieBuild) childOf(n int32, c byte) int32 {
	ch := t.nodes[n].child
	i := 0
	for i < len(ch) && t.nodes[ch[i]].b < c {
		i++
	}
	if i < len(ch) && t.nodes[ch[i]].b == c {
		return ch[i]
	}
	id := int32(len(t.nodes))
	t.nodes = append(t.nodes, tnode{b: c})
	ch = append(ch, 0)
	copy(ch[i+1:], ch[i:])
	ch[i] = id
	t.nodes[n].child = ch
	return id
}

// flatten appends node n's subtree to v's arrays in depth-first order.
func (t *trieBuild) flatten(v *Vocab, n int32) {
	i := len(v.tb)
	v.tb = append(v.tb, t.nodes[n].b)
	v.tend = append(v.tend, 0)
	v.tfirst = append(v.tfirst, int32(len(v.ttok)))
	v.ttok = append(v.ttok, t.nodes[n].toks...)
	for _, c := range t.nodes[n].child {
		t.flatten(v, c)
	}
	v.tend[i] = int32(len(v.tb))
}

// VocabFrom returns the Vocab of a tokenizer: each token's bytes as the
// engine emits them (Piece without specials), and the control tokens' text
// (Piece with specials).
func VocabFrom(t *tokenizer.Tokenizer) *Vocab {
	pieces := make([][]byte, t.Len())
	special := make([][]byte, t.Len())
	var eog []int32
	for id := range pieces {
		pieces[id] = t.Piece(int32(id), false)
		if len(pieces[id]) == 0 {
			special[id] = t.Piece(int32(id), true)
		}
		if t.IsEOG(int32(id)) {
			eog = append(eog, int32(id))
		}
	}
	return NewVocabControls(pieces, special, eog)
}

// Len is the number of tokens.
func (v *Vocab) Len() int { return v.n }

// local is what one cut of a stack (see cut) allows, computed once per
// Grammar and Vocab: the tokens it allows by itself, and the trie nodes
// where it ends, whose subtrees the rest of the stack decides.
type local struct {
	bits  []uint64
	exits []int32
	// nz lists the words of bits that are not zero, when they are few
	// (sparse: at most words/sparseAt), so that a mask ORs only those;
	// nil otherwise. Set before the local is shared.
	nz []int32
}

// sparseAt: a local whose nonzero words are at most 1/sparseAt of its
// bitset lists them.
const sparseAt = 4

// index sets l.nz where l.bits is sparse.
func (l *local) index() *local {
	n := 0
	for _, w := range l.bits {
		if w != 0 {
			n++
		}
	}
	if n > len(l.bits)/sparseAt {
		return l
	}
	l.nz = make([]int32, 0, n)
	for i, w := range l.bits {
		if w != 0 {
			l.nz = append(l.nz, int32(i))
		}
	}
	return l
}

// or ORs what l allows by itself into mask.
func (l *local) or(mask []uint64) {
	if l.nz != nil {
		for _, i := range l.nz {
			mask[i] |= l.bits[i]
		}
		return
	}
	mask = mask[:len(l.bits)]
	for i, w := range l.bits {
		mask[i] |= w
	}
}

// stackCut is cut's result for a stack, and the state of the rest
// expanded (rs; -2 until first needed, -1 if nothing can follow),
// memoized per stack (Grammar.cuts).
type stackCut struct {
	chunk int32
	rest  *frame
	rs    int32
}

// cutOf is cut(s), memoized.
func (g *Grammar) cutOf(s *frame) *stackCut {
	if c := g.cuts[s]; c != nil {
		return c
	}
	chunk, rest := g.cut(s)
	c := &stackCut{chunk: chunk, rest: rest, rs: -2}
	if g.cuts == nil {
		g.cuts = map[*frame]*stackCut{}
	}
	g.cuts[s] = c
	return c
}

type cacheKey struct {
	v     *Vocab
	chunk int32 // the state of the cut part alone
}

// cut splits an expanded stack: chunk is its top down to the lowest frame
// of a leaf rule (a string or number; or the top frame alone if there is
// none), as a state of its own over the bottom; rest is what lies below.
// What chunk allows depends on chunk alone, so it is cached: a state inside
// a string is the same state wherever the string stands.
func (g *Grammar) cut(s *frame) (chunk int32, rest *frame) {
	last, i := 0, 0
	for f := s; f != nil; f = f.next {
		if g.rules[g.pos[f.pos].rule].leaf {
			last = i
		}
		i++
	}
	var pos []int32
	f := s
	for j := 0; j <= last; j++ {
		pos = append(pos, f.pos)
		f = f.next
	}
	var c *frame
	for j := len(pos) - 1; j >= 0; j-- {
		c = g.frame(pos[j], c)
	}
	return g.stateOf([]*frame{c}), f
}

func (g *Grammar) local(v *Vocab, chunk int32) *local {
	ck := cacheKey{v, chunk}
	if l := g.cache[ck]; l != nil {
		return l
	}
	if free, r, m, ok := g.countedChunk(chunk); ok {
		if l := g.countedLocal(v, free, r, m); l != nil {
			g.cache[ck] = l
			return l
		}
	}
	key, shared := g.langKey(chunk)
	if shared {
		if l := v.sharedLocal(key); l != nil {
			g.cache[ck] = l
			return l
		}
	}
	l := &local{bits: make([]uint64, v.words)}
	g.walk(v, chunk, 0, l.bits, &l.exits)
	l.index()
	g.cache[ck] = l
	if shared {
		v.mu.Lock()
		v.putLocal(key, l)
		v.mu.Unlock()
	}
	return l
}

// maxLangPositions bounds the grammar positions langKey describes.
const maxLangPositions = 256

// langKey describes exactly what a walk from state chunk depends on: its
// stacks, and every grammar position they reach (kind, byte set, the
// position after it, the first positions of the rule it refers to), with
// positions numbered in the order they are met. Two chunks of any
// grammars with the same key accept the same byte strings from the same
// states up to renaming, so they have the same walk (local) over a Vocab.
// ok is false (the walk is not shared) when the chunk reaches a grown rule
// not yet made or more than maxLangPositions positions.
func (g *Grammar) langKey(chunk int32) (key string, ok bool) {
	// positions are numbered through g.langIDs, valid where g.langStamp
	// holds this call's generation (no map per call)
	g.langGen++
	if g.langGen == 0 {
		clear(g.langStamp)
		g.langGen = 1
	}
	if n := len(g.pos); len(g.langStamp) < n {
		g.langStamp = append(g.langStamp, make([]uint32, n-len(g.langStamp))...)
		g.langIDs = append(g.langIDs, make([]uint32, n-len(g.langIDs))...)
	}
	gen, stamp, ids := g.langGen, g.langStamp, g.langIDs
	queue := g.langQueue[:0]
	defer func() { g.langQueue = queue[:0] }()
	id := func(p int32) uint32 {
		if stamp[p] == gen {
			return ids[p]
		}
		i := uint32(len(queue))
		stamp[p], ids[p] = gen, i
		queue = append(queue, p)
		return i
	}
	stacks := g.states[chunk].stacks
	b := binary.LittleEndian.AppendUint32(g.langBuf[:0], uint32(len(stacks)))
	defer func() { g.langBuf = b[:0] }()
	for _, f := range stacks {
		n := 0
		for s := f; s != nil; s = s.next {
			n++
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(n))
		for ; f != nil; f = f.next {
			b = binary.LittleEndian.AppendUint32(b, id(f.pos))
		}
	}
	for i := 0; i < len(queue); i++ {
		if len(queue) > maxLangPositions {
			return "", false
		}
		p := &g.pos[queue[i]]
		b = append(b, 'p', p.kind)
		switch p.kind {
		case kTerm:
			for _, w := range p.term {
				b = binary.LittleEndian.AppendUint64(b, w)
			}
			b = binary.LittleEndian.AppendUint32(b, id(p.next))
		case kRef:
			if g.rules[p.ref].grow != nil {
				return "", false
			}
			b = binary.LittleEndian.AppendUint32(b, id(p.next))
			first := g.first[p.ref]
			b = binary.LittleEndian.AppendUint32(b, uint32(len(first)))
			for _, f := range first {
				b = binary.LittleEndian.AppendUint32(b, id(f))
			}
		}
	}
	return string(b), true
}

// walk visits the trie below node from state st, setting the bit of every
// token whose bytes the state accepts; where a stack reaches its bottom, the
// node is appended to exits (if not nil) and that stack stops there.
func (g *Grammar) walk(v *Vocab, st int32, node int32, bits []uint64, exits *[]int32) {
	from := g.states[st] // trans fills in from.next, never moves it
	for c, end := node+1, v.tend[node]; c < end; c = v.tend[c] {
		ns := from.next[v.tb[c]] - 2
		if ns == tUnknown-2 {
			ns = g.trans(st, v.tb[c])
		}
		if ns < 0 {
			continue
		}
		for _, t := range v.ttok[v.tfirst[c]:v.tfirst[c+1]] {
			bits[t>>6] |= 1 << (t & 63)
		}
		s := g.states[ns]
		if s.bottom && exits != nil && v.tend[c] > c+1 {
			*exits = append(*exits, c)
		}
		if s.live >= 0 && v.tend[c] > c+1 {
			if node == 0 {
				g.walkBelow(v, s.live, c, bits, exits)
			} else {
				g.walk(v, s.live, c, bits, exits)
			}
		}
	}
}

// Matcher follows one sequence's tokens through a grammar and says which
// tokens may come next. It depends only on the grammar and on the tokens
// it accepted: never on other sequences, the batch or the time (what makes
// constrained decoding deterministic and batch-invariant). It is not safe
// for concurrent use; the engine owns one per request. Matchers of one
// Grammar may run concurrently (the Grammar locks its automaton).
type Matcher struct {
	g     *Grammar
	v     *Vocab
	state int32 // parse state; -1 once an end-of-generation token was accepted
	mask  []uint64
	// free is set in a lazy grammar's free phase (scan is then its
	// scanner's state); once a trigger fires, g is the trigger's body.
	free *lazy
	scan scanState
}

// NewMatcher returns a Matcher at the start of g, over vocabulary v.
func NewMatcher(g *Grammar, v *Vocab) *Matcher {
	if g.lazy != nil {
		return &Matcher{g: g, v: v, free: g.lazy, scan: g.lazy.initial(), mask: make([]uint64, v.words)}
	}
	g.mu.Lock()
	st := g.start()
	g.mu.Unlock()
	return &Matcher{g: g, v: v, state: st, mask: make([]uint64, v.words)}
}

// Complete reports whether the tokens so far form a whole sentence of the
// grammar (an end-of-generation token is allowed).
func (m *Matcher) Complete() bool {
	if m.state < 0 || m.free != nil {
		return true
	}
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	return m.g.states[m.state].bottom
}

// Closed reports whether the grammar is complete and nothing may follow:
// generation ends here.
func (m *Matcher) Closed() bool {
	if m.state < 0 {
		return true
	}
	if m.free != nil {
		return false
	}
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	s := m.g.states[m.state]
	return s.bottom && s.live < 0
}

// Allowed returns the tokens that may come next, as a bitset (bit t%64 of
// word t/64); the slice is reused by the next call. End-of-generation
// tokens are in it only when the grammar is complete.
func (m *Matcher) Allowed() ([]uint64, error) {
	if m.free != nil && m.state >= 0 {
		copy(m.mask, m.free.mask(m.v, m.scan))
		return m.mask, nil
	}
	clear(m.mask)
	if m.state < 0 {
		return m.mask, nil
	}
	g := m.g
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, s := range g.states[m.state].stacks {
		if s == nil {
			for _, t := range m.v.eog {
				m.mask[t>>6] |= 1 << (t & 63)
			}
			continue
		}
		c := g.cutOf(s)
		chunk := c.chunk
		l := g.local(m.v, chunk)
		l.or(m.mask)
		if c.rest == nil || len(l.exits) == 0 {
			continue
		}
		// Tokens that run past the chunk: the rest of the stack decides
		// their remaining bytes (few tokens: a string's closing quote and
		// what follows it in one token).
		if c.rs == -2 {
			c.rs = g.stateOf(g.expand(c.rest, nil))
		}
		rs := c.rs
		if rs < 0 {
			continue // nothing below can follow (fail closed)
		}
		if live := g.states[rs].live; live >= 0 {
			for _, n := range l.exits {
				g.walk(m.v, live, n, m.mask, nil)
			}
		}
	}
	return m.mask, nil
}

// Accept advances past token tok. Errors: ErrNotAllowed if the grammar does
// not allow tok here (the matcher is then unchanged).
func (m *Matcher) Accept(tok int32) error {
	if m.state < 0 {
		return ErrNotAllowed.Withf("token %d after the end", tok)
	}
	if tok < 0 || int(tok) >= m.v.n {
		return ErrNotAllowed.Withf("token %d outside the vocabulary", tok)
	}
	for _, e := range m.v.eog {
		if e == tok {
			if !m.Complete() {
				return ErrNotAllowed.Withf("end of generation before the grammar is complete")
			}
			m.state = -1
			return nil
		}
	}
	if m.free != nil {
		return m.acceptFree(tok)
	}
	piece := m.v.pieces[tok]
	if len(piece) == 0 {
		return ErrNotAllowed.Withf("token %d has no text", tok)
	}
	m.g.mu.Lock()
	defer m.g.mu.Unlock()
	st := m.state
	for _, c := range piece {
		if st = m.g.trans(st, c); st < 0 {
			return ErrNotAllowed.Withf("token %d", tok)
		}
	}
	m.state = st
	return nil
}

// acceptFree advances the free phase past tok: the scanner, or, when tok
// completes a trigger, into the trigger's body (tok is refused if the body
// refuses the rest of its text).
func (m *Matcher) acceptFree(tok int32) error {
	l := m.free
	b := l.text(m.v, tok)
	s := m.scan
	trig, end := l.scan(&s, b)
	if trig < 0 {
		m.scan = s
		return nil
	}
	t := &l.trig[trig]
	st := t.enter(b[end:])
	if st < 0 {
		return ErrNotAllowed.Withf("token %d after trigger %q", tok, t.text)
	}
	m.g, m.state, m.free = t.body, st, nil
	return nil
}

// Triggered reports whether a lazy grammar's trigger has fired (always
// true for other grammars): the output is constrained from there on.
func (m *Matcher) Triggered() bool { return m.free == nil }

// String describes the matcher state (for test failures).
func (m *Matcher) String() string {
	return fmt.Sprintf("matcher{state %d, complete=%v}", m.state, m.Complete())
}
