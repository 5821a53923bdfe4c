package grammar

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A pattern or format beside minLength and maxLength that its expression
// does not imply: the expression as a deterministic automaton over
// characters, run beside a count of the characters written. Its states are
// made at compile time (bounded by maxDFAStates); the rules of the
// product, one per (automaton state, count), are grown where a parse
// reaches them, so a maxLength of 500 costs rules for the strings written,
// not 500 times the automaton. A transition is kept only where some
// accepted string of an allowed length still follows, so every prefix the
// grammar admits can be completed.

// maxDFAStates bounds the automaton of one bounded pattern.
const maxDFAStates = 2000

type dfaEdge struct {
	class  int    // rule of one JSON string character in the edge's ranges
	ranges []rune // the code points, flat lo, hi pairs, sorted
	to     int
}

type dfaState struct {
	accept bool
	edges  []dfaEdge
}

// boundedRegexString returns a rule for a JSON string of lo to hi
// characters (hi < 0: no bound) that every one of srcs (Go syntax,
// translated; each a search: unanchored unless ^ or $ anchor it) matches:
// the product of their automata, so a format beside a pattern admits
// exactly the strings both admit.
//
// exclude lists strings (decoded values) that are not admitted: their
// automaton (excludeDFA) is one more factor of the product.
func (b *builder) boundedRegexString(key string, srcs []string, lo, hi int, exclude ...string) (int, error) {
	key = fmt.Sprintf("re-len:%s/%d/%d/%q", key, lo, hi, exclude)
	if r, ok := b.shared[key]; ok {
		return r, nil
	}
	if lo > maxRepeat {
		return 0, fmt.Errorf("a minLength above %d", maxRepeat)
	}
	capped := hi > maxRepeat
	if capped {
		hi = maxRepeat // as for plain strings: those of at most maxRepeat characters
	}
	rc := &reCompiler{b: b, name: key}
	var states []dfaState
	var dfas [][]dfaState
	for _, src := range srcs {
		d, err := regexDFA(src, rc)
		if err != nil {
			return 0, err
		}
		dfas = append(dfas, d)
	}
	if len(exclude) > 0 {
		dfas = append(dfas, excludeDFA(exclude, rc))
	}
	for i, d := range dfas {
		var err error
		if i == 0 {
			states = d
		} else if states, err = intersectDFA(states, d, rc); err != nil {
			return 0, err
		}
	}
	// acc[s] holds bit l when an accepted string follows state s in
	// exactly l more characters, for l up to span: with no maxLength, a
	// string of at least the needed length is accepted if one is within
	// len(states) more than it (a longer one repeats a state).
	span := hi
	if hi < 0 {
		span = lo + len(states) + 1
		if lo == 0 {
			span = 0 // no bound at all: live is coreachable
		}
	}
	words := span/64 + 1
	acc := make([][]uint64, len(states))
	for s := range states {
		acc[s] = make([]uint64, words)
		if states[s].accept {
			acc[s][0] = 1
		}
	}
	for l := 1; l <= span; l++ {
		for s, st := range states {
			for _, e := range st.edges {
				if acc[e.to][(l-1)/64]&(1<<((l-1)%64)) != 0 {
					acc[s][l/64] |= 1 << (l % 64)
					break
				}
			}
		}
	}
	// live: from state s with n characters written, an accepted string
	// of lo..hi characters follows.
	reach := coreachable(states)
	live := func(s, n int) bool {
		if lo == 0 && hi < 0 {
			return reach[s]
		}
		from := max(lo-n, 0)
		to := span
		if hi >= 0 {
			to = hi - n
		}
		for l := from; l <= to; l++ {
			if acc[s][l/64]&(1<<(l%64)) != 0 {
				return true
			}
		}
		return false
	}
	if !live(0, 0) {
		if capped {
			return 0, fmt.Errorf("no match of at most %d characters", maxRepeat)
		}
		return 0, errNoString
	}
	type key2 struct{ s, n int }
	memo := map[key2]int{}
	name := key + "-body"
	quote := terms('"', '"')
	var body func(add func(string, grower) int, s, n int) int
	body = func(add func(string, grower) int, s, n int) int {
		k := key2{s, n}
		if r, ok := memo[k]; ok {
			return r
		}
		r := add(name, func(add func(string, grower) int) [][]elem {
			var alts [][]elem
			if states[s].accept && n >= lo {
				alts = append(alts, nil) // the closing quote follows
			}
			if hi >= 0 && n >= hi {
				return alts
			}
			next := n + 1
			if hi < 0 {
				next = min(next, lo) // past minLength only the state matters
			}
			for _, e := range states[s].edges {
				if live(e.to, next) {
					alts = append(alts, []elem{ref(e.class), ref(body(add, e.to, next))})
				}
			}
			return alts
		})
		memo[k] = r
		return r
	}
	// The closing quote stands in this rule, after the body, so that its
	// frame stays below the body's while a parse is inside the string: a
	// leaf frame, the string is one chunk (cut), not a chunk per
	// character with the rest of the stack walked below each.
	r := b.add(key, []elem{quote, ref(body(b.grown, 0, 0)), quote})
	b.rules[r].leaf = true
	b.shared[key] = r
	return r, nil
}

// regexDFA: the automaton of goSrc (Go syntax) read as a search.
func regexDFA(goSrc string, rc *reCompiler) ([]dfaState, error) {
	re, err := syntax.Parse(goSrc, syntax.Perl)
	if err != nil {
		return nil, fmt.Errorf("a pattern Go's regexp/syntax cannot read (%v)", err)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, fmt.Errorf("a pattern Go's regexp/syntax cannot compile (%v)", err)
	}
	for _, in := range prog.Inst {
		switch in.Op {
		case syntax.InstRune, syntax.InstRune1:
			if syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
				return nil, fmt.Errorf("case folding")
			}
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(in.Arg)&^(syntax.EmptyBeginText|syntax.EmptyEndText) != 0 {
				return nil, fmt.Errorf("an anchor (^ or $) inside the pattern")
			}
		}
	}
	return determinize(prog, rc)
}

// intersectDFA: the product automaton of a and b (state 0 each's start),
// accepting where both do; a pair is made only where each side can still
// reach an accepting state, so no dead pair multiplies the states.
func intersectDFA(a, b []dfaState, rc *reCompiler) ([]dfaState, error) {
	liveA, liveB := coreachable(a), coreachable(b)
	type pair struct{ x, y int }
	index := map[pair]int{}
	var pairs []pair
	var out []dfaState
	add := func(p pair) int {
		if i, ok := index[p]; ok {
			return i
		}
		index[p] = len(pairs)
		pairs = append(pairs, p)
		out = append(out, dfaState{accept: a[p.x].accept && b[p.y].accept})
		return len(pairs) - 1
	}
	add(pair{0, 0})
	for i := 0; i < len(pairs); i++ {
		if len(pairs) > maxDFAStates {
			return nil, fmt.Errorf("a pattern and format whose joint automaton is too large")
		}
		p := pairs[i]
		targets := map[int][]rune{}
		var order []int
		for _, ea := range a[p.x].edges {
			if !liveA[ea.to] {
				continue
			}
			for _, eb := range b[p.y].edges {
				if !liveB[eb.to] {
					continue
				}
				r := intersectRanges(ea.ranges, eb.ranges)
				if len(r) == 0 {
					continue
				}
				t := add(pair{ea.to, eb.to})
				if _, ok := targets[t]; !ok {
					order = append(order, t)
				}
				targets[t] = append(targets[t], r...)
			}
		}
		sort.Ints(order)
		for _, t := range order {
			rs := mergeRanges(targets[t])
			out[i].edges = append(out[i].edges, dfaEdge{rc.class(rs, false), rs, t})
		}
		if rc.b.tooBig {
			return nil, fmt.Errorf("a pattern and format whose joint automaton is too large")
		}
	}
	return out, nil
}

// excludeDFA: the automaton of every string but words: a trie of the
// words, each node accepting unless a word ends there, every other
// character leading to a state that accepts whatever follows.
func excludeDFA(words []string, rc *reCompiler) []dfaState {
	type node struct {
		kids map[rune]int
		end  bool
	}
	nodes := []node{{kids: map[rune]int{}}}
	for _, w := range words {
		n := 0
		for _, r := range w {
			k, ok := nodes[n].kids[r]
			if !ok {
				k = len(nodes)
				nodes = append(nodes, node{kids: map[rune]int{}})
				nodes[n].kids[r] = k
			}
			n = k
		}
		nodes[n].end = true
	}
	sink := len(nodes)
	out := make([]dfaState, len(nodes)+1)
	all := []rune{0, utf8.MaxRune}
	out[sink] = dfaState{accept: true, edges: []dfaEdge{{rc.class(all, false), all, sink}}}
	for i, n := range nodes {
		out[i].accept = !n.end
		chars := make([]rune, 0, len(n.kids))
		for r := range n.kids {
			chars = append(chars, r)
		}
		slices.Sort(chars)
		var rest []rune // the characters no word continues with
		next := rune(0)
		for _, r := range chars {
			one := []rune{r, r}
			out[i].edges = append(out[i].edges, dfaEdge{rc.class(one, false), one, n.kids[r]})
			if r > next {
				rest = append(rest, next, r-1)
			}
			next = r + 1
		}
		if next <= utf8.MaxRune {
			rest = append(rest, next, utf8.MaxRune)
		}
		if len(rest) > 0 {
			out[i].edges = append(out[i].edges, dfaEdge{rc.class(rest, false), rest, sink})
		}
	}
	return out
}

// coreachable: the states from which an accepting state can be reached.
func coreachable(d []dfaState) []bool {
	live := make([]bool, len(d))
	for s := range d {
		live[s] = d[s].accept
	}
	for changed := true; changed; {
		changed = false
		for s := range d {
			if live[s] {
				continue
			}
			for _, e := range d[s].edges {
				if live[e.to] {
					live[s], changed = true, true
					break
				}
			}
		}
	}
	return live
}

// intersectRanges: the code points in both flat range lists (lo, hi
// pairs, each sorted and disjoint), as such a list.
func intersectRanges(a, b []rune) []rune {
	var out []rune
	for i := 0; i+1 < len(a); i += 2 {
		for j := 0; j+1 < len(b); j += 2 {
			lo, hi := max(a[i], b[j]), min(a[i+1], b[j+1])
			if lo <= hi {
				out = append(out, lo, hi)
			}
		}
	}
	return out
}

// mergeRanges sorts a flat range list and joins overlapping or adjacent
// ranges.
func mergeRanges(rs []rune) []rune {
	type rg struct{ lo, hi rune }
	var list []rg
	for i := 0; i+1 < len(rs); i += 2 {
		list = append(list, rg{rs[i], rs[i+1]})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].lo < list[j].lo })
	var out []rune
	for _, r := range list {
		if n := len(out); n > 0 && r.lo <= out[n-1]+1 {
			out[n-1] = max(out[n-1], r.hi)
			continue
		}
		out = append(out, r.lo, r.hi)
	}
	return out
}

// errNoString: no string of an allowed length matches.
var errNoString = fmt.Errorf("no string of an allowed length that the expression matches")

// determinize builds the automaton of prog read as a search: the match may
// begin after any characters (unless ^ anchors it) and, once it ended
// (unless $ anchors it), any characters may follow. State 0 is the start.
// A class of the expression matches Basic Multilingual Plane characters
// only (as pattern.go's classes do), free characters before and after a
// match any character.
func determinize(prog *syntax.Prog, rc *reCompiler) ([]dfaState, error) {
	// closure adds to set the rune instructions reachable from pc without
	// consuming; matched reports a Match reachable, matchedAtEnd one
	// reachable when the text ends here.
	type set struct {
		pcs                   []uint32
		matched, matchedAtEnd bool
		atEnd                 bool // the closure where the text ends: $ holds
	}
	var closure func(pc uint32, atStart bool, seen map[uint32]bool, out *set)
	closure = func(pc uint32, atStart bool, seen map[uint32]bool, out *set) {
		for !seen[pc] {
			seen[pc] = true
			in := &prog.Inst[pc]
			switch in.Op {
			case syntax.InstAlt, syntax.InstAltMatch:
				closure(in.Out, atStart, seen, out)
				pc = in.Arg
				continue
			case syntax.InstCapture, syntax.InstNop:
				pc = in.Out
				continue
			case syntax.InstEmptyWidth:
				op := syntax.EmptyOp(in.Arg)
				if op&syntax.EmptyBeginText != 0 && !atStart {
					return
				}
				if op&syntax.EmptyEndText != 0 && out.atEnd {
					pc = in.Out // the text ends here: $ holds (one seen set, so $+ ends)
					continue
				}
				if op&syntax.EmptyEndText != 0 {
					// only where the text ends: a match there
					end := set{atEnd: true}
					closure(in.Out, atStart, map[uint32]bool{}, &end)
					if end.matched || end.matchedAtEnd {
						out.matchedAtEnd = true
					}
					return
				}
				pc = in.Out
				continue
			case syntax.InstMatch:
				out.matched = true
				return
			case syntax.InstFail:
				return
			default: // rune instructions
				out.pcs = append(out.pcs, pc)
				return
			}
		}
	}
	// A state: the rune instructions alive, or done (a match ended: any
	// characters may follow).
	type dstate struct {
		pcs  []uint32
		done bool
		end  bool // accepted if the text ends here
	}
	keyOf := func(d dstate) string {
		if d.done {
			return "done"
		}
		var k strings.Builder
		for _, pc := range d.pcs {
			k.WriteString(strconv.FormatUint(uint64(pc), 36))
			k.WriteByte(',')
		}
		if d.end {
			k.WriteByte('$')
		}
		return k.String()
	}
	restart := set{}
	closure(uint32(prog.Start), false, map[uint32]bool{}, &restart)
	mk := func(s set) dstate {
		if s.matched {
			return dstate{done: true}
		}
		pcs := slices.Clone(s.pcs)
		pcs = append(pcs, restart.pcs...)
		slices.Sort(pcs)
		pcs = slices.Compact(pcs)
		return dstate{pcs: pcs, end: s.matchedAtEnd || restart.matchedAtEnd}
	}
	var first set
	closure(uint32(prog.Start), true, map[uint32]bool{}, &first)
	var ds []dstate
	index := map[string]int{}
	var out []dfaState
	add := func(d dstate) int {
		k := keyOf(d)
		if i, ok := index[k]; ok {
			return i
		}
		index[k] = len(ds)
		ds = append(ds, d)
		out = append(out, dfaState{accept: d.done || d.end})
		return len(ds) - 1
	}
	add(mk(first))
	anyChar := rc.class([]rune{0, utf8.MaxRune}, false)
	for i := 0; i < len(ds); i++ {
		if len(ds) > maxDFAStates {
			return nil, fmt.Errorf("a pattern whose automaton is too large beside minLength or maxLength")
		}
		d := ds[i]
		if d.done {
			out[i].edges = []dfaEdge{{anyChar, []rune{0, utf8.MaxRune}, i}}
			continue
		}
		// Partition the characters by the instructions that match them.
		cuts := []rune{0, 0x10000, utf8.MaxRune + 1}
		for _, pc := range d.pcs {
			for _, r := range instRanges(&prog.Inst[pc]) {
				cuts = append(cuts, r[0], r[1]+1)
			}
		}
		slices.Sort(cuts)
		cuts = slices.Compact(cuts)
		targets := map[int][]rune{} // state → ranges
		var order []int
		for j := 0; j+1 < len(cuts); j++ {
			lo, hi := cuts[j], cuts[j+1]-1
			var s set
			if lo <= 0xFFFF {
				for _, pc := range d.pcs {
					in := &prog.Inst[pc]
					if in.MatchRune(lo) {
						closure(in.Out, false, map[uint32]bool{}, &s)
					}
				}
			}
			t := add(mk(s))
			if _, ok := targets[t]; !ok {
				order = append(order, t)
			}
			rs := targets[t]
			if n := len(rs); n > 0 && rs[n-1] == lo-1 {
				rs[n-1] = hi
			} else {
				rs = append(rs, lo, hi)
			}
			targets[t] = rs
		}
		sort.Ints(order)
		for _, t := range order {
			out[i].edges = append(out[i].edges, dfaEdge{rc.class(targets[t], false), targets[t], t})
		}
		if rc.b.tooBig {
			return nil, fmt.Errorf("a pattern whose automaton is too large")
		}
	}
	return out, nil
}

// instRanges: the code point ranges a rune instruction matches.
func instRanges(in *syntax.Inst) [][2]rune {
	switch in.Op {
	case syntax.InstRune1:
		return [][2]rune{{in.Rune[0], in.Rune[0]}}
	case syntax.InstRuneAny:
		return [][2]rune{{0, utf8.MaxRune}}
	case syntax.InstRuneAnyNotNL:
		return [][2]rune{{0, '\n' - 1}, {'\n' + 1, utf8.MaxRune}}
	case syntax.InstRune:
		if len(in.Rune) == 1 {
			return [][2]rune{{in.Rune[0], in.Rune[0]}}
		}
		var out [][2]rune
		for i := 0; i+1 < len(in.Rune); i += 2 {
			out = append(out, [2]rune{in.Rune[i], in.Rune[i+1]})
		}
		return out
	}
	return nil
}

// firstChars: when every match of goSrc (Go syntax) begins at the start of
// the string (^) and has at least one character, the ranges its first
// character lies in; ok false otherwise.
func firstChars(goSrc string) (ranges [][2]rune, ok bool) {
	re, err := syntax.Parse(goSrc, syntax.Perl)
	if err != nil {
		return nil, false
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, false
	}
	// walk the instructions reachable without consuming; atStart says
	// whether ^ holds
	var walk func(pc uint32, atStart bool, seen map[uint32]bool) bool
	walk = func(pc uint32, atStart bool, seen map[uint32]bool) bool {
		for !seen[pc] {
			seen[pc] = true
			in := &prog.Inst[pc]
			switch in.Op {
			case syntax.InstAlt, syntax.InstAltMatch:
				if !walk(in.Out, atStart, seen) {
					return false
				}
				pc = in.Arg
			case syntax.InstCapture, syntax.InstNop:
				pc = in.Out
			case syntax.InstEmptyWidth:
				op := syntax.EmptyOp(in.Arg)
				if op&syntax.EmptyBeginText != 0 && !atStart {
					return true // no match here
				}
				if op&^syntax.EmptyBeginText != 0 {
					return false // $ or another assertion: not read here
				}
				pc = in.Out
			case syntax.InstMatch:
				return false // an empty match
			case syntax.InstFail:
				return true
			default:
				if !atStart {
					return false // a match may begin later
				}
				if in.Op == syntax.InstRune && len(in.Rune) == 1 || (in.Op == syntax.InstRune || in.Op == syntax.InstRune1) && syntax.Flags(in.Arg)&syntax.FoldCase != 0 {
					return false
				}
				ranges = append(ranges, instRanges(in)...)
				return true
			}
		}
		return true
	}
	if !walk(uint32(prog.Start), true, map[uint32]bool{}) || !walk(uint32(prog.Start), false, map[uint32]bool{}) {
		return nil, false
	}
	return ranges, true
}

// patternsApart: no string matches both patterns (Go syntax): both are
// anchored at the start, match no empty string, and their first
// characters share none.
func patternsApart(a, b string) bool {
	ra, ok := firstChars(a)
	if !ok {
		return false
	}
	rb, ok := firstChars(b)
	if !ok {
		return false
	}
	for _, x := range ra {
		for _, y := range rb {
			if x[0] <= y[1] && y[0] <= x[1] {
				return false
			}
		}
	}
	return true
}
