package grammar

// A walk from the trie's root reaches each first byte of the vocabulary
// in some state; below it, what the walk finds depends on that state's
// language alone. Many walks reach a first byte in a state of the same
// language: an undeclared key's every trie state, past a byte that leaves
// the trie of declared names, is in the rest of a plain key, whichever
// object and grammar it belongs to. So the walk below a first byte is
// memoized on the Vocab by (langKey of the state, node): the tokens it
// allows there and its exits, kept as lists (the subtree's tokens only).

// subKey names the walk below a first byte's node from a state language.
type subKey struct {
	lang string
	node int32
}

// subWalk is what a walk below one node allows: its tokens (as a list,
// or, when they outnumber the words of a bitset of the vocabulary divided
// by subBitsAt, as such a bitset, whose OR costs less than setting them
// one by one: below a space lies nearly half of a 128k vocabulary) and
// its exits.
type subWalk struct {
	toks, exits []int32
	bits        []uint64
}

// subBitsAt: a sub-walk of more tokens than a bitset has words, divided
// by this, keeps a bitset (ORing a word costs a fraction of setting one
// token's bit).
const subBitsAt = 4

// maxSubTokens bounds the tokens Vocab.subs holds (4 bytes each, a bitset
// counting its words twice); when full it is emptied.
const maxSubTokens = 1 << 22

// stateLang returns langKey of state st, memoized per Grammar ("" when it
// has none). g.mu must be held.
func (g *Grammar) stateLang(st int32) string {
	if k, ok := g.langs[st]; ok {
		return k
	}
	k, ok := g.langKey(st)
	if !ok {
		k = ""
	}
	if g.langs == nil {
		g.langs = map[int32]string{}
	}
	g.langs[st] = k
	return k
}

// walkBelow is walk(v, st, c, …) for a child c of the root, through the
// Vocab's memo of such walks. Only a walk from the root calls it, whose
// bitset is fresh: no token below c is set yet.
func (g *Grammar) walkBelow(v *Vocab, st, c int32, bits []uint64, exits *[]int32) {
	lang := g.stateLang(st)
	if lang == "" {
		g.walk(v, st, c, bits, exits)
		return
	}
	k := subKey{lang, c}
	v.mu.Lock()
	w := v.subs[k]
	v.mu.Unlock()
	if w == nil {
		// bits holds none of the subtree's tokens yet (a walk from the
		// root fills a fresh bitset): walk into it, then read them back
		w = &subWalk{}
		g.walk(v, st, c, bits, &w.exits)
		for _, t := range v.ttok[v.tfirst[c+1]:v.tfirst[v.tend[c]]] {
			if bits[t>>6]&(1<<(t&63)) != 0 {
				w.toks = append(w.toks, t)
			}
		}
		if exits != nil {
			*exits = append(*exits, w.exits...)
		}
		size := len(w.toks)
		if len(w.toks) > v.words/subBitsAt {
			w.bits = make([]uint64, v.words)
			for _, t := range w.toks {
				w.bits[t>>6] |= 1 << (t & 63)
			}
			w.toks = nil
			size = 2 * v.words
		}
		v.mu.Lock()
		if v.subs == nil || v.subTokens+size > maxSubTokens {
			v.subs, v.subTokens = map[subKey]*subWalk{}, 0
		}
		v.subs[k] = w
		v.subTokens += size
		v.mu.Unlock()
		return
	}
	if w.bits != nil {
		bits = bits[:len(w.bits)]
		for i, x := range w.bits {
			bits[i] |= x
		}
	}
	for _, t := range w.toks {
		bits[t>>6] |= 1 << (t & 63)
	}
	if exits != nil {
		*exits = append(*exits, w.exits...)
	}
}
