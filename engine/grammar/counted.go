package grammar

// A length-bounded JSON string (minLength, maxLength) has a parse state per
// count of characters written, each a language of its own, so a walk of
// the vocabulary per count. Instead its masks derive from one walk of the
// count-free string (string{0,-1}, shared on the Vocab by every grammar)
// that records, for every token, how many characters it begins before the
// closing quote or its end: at a character boundary with at most r and at
// least m characters still to write, a token that stays inside the string
// is allowed when it begins at most r characters, one that closes it when
// it begins m to r before the quote (the rest of the stack then decides
// its remaining bytes, as for any chunk's exits). Exact: the bounded
// string's language is the count-free one's with the count in range, and
// every prefix with at most r characters can still reach the minimum.

// strCount marks the rules of a bounded string's characters (builder.str):
// the body (the first min characters, then a tail) or a tail rule of k
// characters more (k < 0: unbounded).
type strCount struct {
	str, free, char int32 // the string rule, string{0,-1}, the character rule
	min, max        int
	body            bool
	k               int
}

// countedWalk is a count-free string chunk's walk with characters
// counted.
type countedWalk struct {
	// tokens that stay inside the string, by the characters they begin:
	// toks[first[c]:first[c+1]] begin c; all is every one of them
	toks, first []int32
	all         []uint64
	// tokens that end at the closing quote, and trie nodes at it, with
	// the characters begun before it
	closeTok, closeC []int32
	exits, exitC     []int32
}

// countedChunk reports whether chunk (one stack) is a bounded string's
// character being entered, at its first byte: then r is the most
// characters still allowed, this one included (-1: any), m the fewest the
// string still needs before its closing quote, and free the same stack in
// the count-free string (string{0,-1}).
func (g *Grammar) countedChunk(chunk int32) (free int32, r, m int, ok bool) {
	stacks := g.states[chunk].stacks
	if len(stacks) != 1 || stacks[0] == nil {
		return 0, 0, 0, false
	}
	s := stacks[0]
	f := s.next // the continuation after the character
	if f == nil || f.next == nil || f.next.next != nil {
		return 0, 0, 0, false
	}
	c := g.rules[g.pos[f.pos].rule].count
	if c == nil || g.pos[s.pos].rule != c.char || !firstPos(g.first[c.char], s.pos) {
		return 0, 0, 0, false
	}
	sf, ff := g.first[c.str], g.first[c.free]
	if len(sf) != 1 || len(ff) != 1 || f.next.pos != sf[0]+2 {
		return 0, 0, 0, false
	}
	rule := g.pos[f.pos].rule
	j := int(f.pos - g.first[rule][0]) // the character entered is the j-th of the first alternative
	if j < 1 || j >= len(g.rules[rule].alts[0]) {
		return 0, 0, 0, false
	}
	switch {
	case !c.body:
		if j != 1 {
			return 0, 0, 0, false
		}
		r = c.k
	case c.min == 0:
		if j != 1 {
			return 0, 0, 0, false
		}
		r = c.max
	default:
		if j > c.min {
			return 0, 0, 0, false
		}
		r = c.max - (j - 1)
		m = c.min - (j - 1)
	}
	if c.max < 0 {
		r = -1
	}
	// the same character entered in string{0,-1}: its body's first
	// character, continuing with its tail, then the closing quote
	fr := g.pos[ff[0]+1]
	if fr.kind != kRef || len(g.first[fr.ref]) == 0 {
		return 0, 0, 0, false
	}
	cont := g.first[fr.ref][0] + 1
	if at := g.pos[cont-1]; at.kind != kRef || at.ref != c.char || g.pos[cont].kind != kRef {
		return 0, 0, 0, false
	}
	free = g.stateOf([]*frame{g.frame(s.pos, g.frame(cont, g.frame(ff[0]+2, nil)))})
	return free, r, m, true
}

func firstPos(first []int32, p int32) bool {
	for _, q := range first {
		if q == p {
			return true
		}
	}
	return false
}

// countedLocal is the walk of a bounded string's chunk (countedChunk),
// derived from the count-free chunk's counted walk.
func (g *Grammar) countedLocal(v *Vocab, free int32, r, m int) *local {
	cw := g.countedWalk(v, free)
	if cw == nil {
		return nil
	}
	l := &local{bits: make([]uint64, v.words)}
	if r < 0 || r >= len(cw.first)-2 {
		copy(l.bits, cw.all)
	} else {
		for _, t := range cw.toks[:cw.first[r+1]] {
			l.bits[t>>6] |= 1 << (t & 63)
		}
	}
	in := func(c int32) bool { return int(c) >= m && (r < 0 || int(c) <= r) }
	for i, t := range cw.closeTok {
		if in(cw.closeC[i]) {
			l.bits[t>>6] |= 1 << (t & 63)
		}
	}
	for i, n := range cw.exits {
		if in(cw.exitC[i]) {
			l.exits = append(l.exits, n)
		}
	}
	return l.index()
}

// countedWalk returns the counted walk of the count-free chunk free,
// shared on v by the grammars whose chunk has the same language.
func (g *Grammar) countedWalk(v *Vocab, free int32) *countedWalk {
	key, ok := g.langKey(free)
	if !ok {
		return nil
	}
	v.mu.Lock()
	cw := v.counted[key]
	v.mu.Unlock()
	if cw != nil {
		return cw
	}
	var byC [][]int32
	cw = &countedWalk{all: make([]uint64, v.words)}
	g.walkCounted(v, free, 0, 0, 0, &byC, cw)
	for _, toks := range byC {
		cw.first = append(cw.first, int32(len(cw.toks)))
		cw.toks = append(cw.toks, toks...)
	}
	cw.first = append(cw.first, int32(len(cw.toks)))
	for _, t := range cw.toks {
		cw.all[t>>6] |= 1 << (t & 63)
	}
	v.mu.Lock()
	if v.counted == nil || len(v.counted) >= maxSharedLocals {
		v.counted = map[string]*countedWalk{}
	}
	v.counted[key] = cw
	v.mu.Unlock()
	return cw
}

// walkCounted is walk from state st below node with the characters begun
// so far (c) counted; esc is -1 right after a backslash, the hex digits
// left of a \u escape, or 0.
func (g *Grammar) walkCounted(v *Vocab, st, node int32, c, esc int, byC *[][]int32, cw *countedWalk) {
	for n, end := node+1, v.tend[node]; n < end; n = v.tend[n] {
		b := v.tb[n]
		ns := g.trans(st, b)
		if ns < 0 {
			continue
		}
		s := g.states[ns]
		toks := v.ttok[v.tfirst[n]:v.tfirst[n+1]]
		if s.bottom { // the closing quote: the chunk ends here
			for _, t := range toks {
				cw.closeTok = append(cw.closeTok, t)
				cw.closeC = append(cw.closeC, int32(c))
			}
			if v.tend[n] > n+1 {
				cw.exits = append(cw.exits, n)
				cw.exitC = append(cw.exitC, int32(c))
			}
			continue
		}
		nc, nesc := c, esc
		switch {
		case esc < 0:
			nesc = 0
			if b == 'u' {
				nesc = 4
			}
		case esc > 0:
			nesc--
		case b < 0x80 || b >= 0xC0: // a character begins
			nc++
			if b == '\\' {
				nesc = -1
			}
		}
		if len(toks) > 0 {
			for len(*byC) <= nc {
				*byC = append(*byC, nil)
			}
			(*byC)[nc] = append((*byC)[nc], toks...)
		}
		if s.live >= 0 && v.tend[n] > n+1 {
			g.walkCounted(v, s.live, n, nc, nesc, byC, cw)
		}
	}
}
