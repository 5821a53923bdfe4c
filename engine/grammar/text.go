package grammar

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/cloison/cloison"
)

// Grammars written as text: a regular expression the whole output must
// match, llama.cpp's GBNF, and the Lark subset of OpenAI's custom-tool
// grammars. Each is parsed into a small tree (gnode) of literals, code-point
// classes, rule references, sequences, alternatives and bounded or unbounded
// repetitions, then compiled into the grammar's rules over bytes (a class
// as the UTF-8 byte ranges of its code points), the same representation
// that JSON schemas compile to.

// Errors of grammars written as text.
var (
	// ErrBadGrammar: the text is not a grammar of its syntax (a parse error,
	// an undefined rule, no root rule); the message says what and where
	// (code invalid_request_error).
	ErrBadGrammar = cloison.NewError(cloison.CodeInvalid, "invalid grammar")
	// ErrUnsupportedGrammar: the grammar uses a construct this package does
	// not enforce (a backreference, lookaround, a token reference, left
	// recursion, …), named in the message (code unsupported).
	ErrUnsupportedGrammar = cloison.NewError(cloison.CodeUnsupported, "unsupported grammar feature")
)

// Syntax is how a grammar is written.
type Syntax string

// The syntaxes FromText reads.
const (
	// Regex: a regular expression (ECMAScript's dialect, as JSON Schema's
	// pattern) that the whole output must match.
	Regex Syntax = "regex"
	// GBNF: llama.cpp's grammar format; the start rule is root.
	GBNF Syntax = "gbnf"
	// Lark: the subset of Lark that OpenAI's custom-tool grammars use; the
	// start rule is start.
	Lark Syntax = "lark"
)

// MaxTextBytes bounds the source of a grammar written as text.
const MaxTextBytes = 64 << 10

// maxTextElems bounds the elements of the rules a grammar written as text
// compiles into (repetitions copy their item).
const maxTextElems = 1 << 20

// FromText compiles a grammar written in syntax. Errors: ErrBadGrammar (not
// a grammar of that syntax, or too long), ErrUnsupportedGrammar (a construct
// named in the message).
func FromText(syntax Syntax, src string) (*Grammar, error) {
	if len(src) > MaxTextBytes {
		return nil, ErrBadGrammar.Withf("a %s grammar of more than %d bytes", syntax, MaxTextBytes)
	}
	if !utf8.ValidString(src) {
		return nil, ErrBadGrammar.Withf("a %s grammar that is not UTF-8", syntax)
	}
	var (
		defs *gdefs
		err  error
	)
	switch syntax {
	case Regex:
		var n *gnode
		if n, err = regexNode(src); err == nil {
			defs = &gdefs{rules: map[string]*gnode{"root": n}, root: "root"}
		}
	case GBNF:
		defs, err = parseGBNF(src)
	case Lark:
		defs, err = parseLark(src)
	case StructuralTag:
		return fromStructTag(src)
	default:
		return nil, ErrBadGrammar.Withf("unknown grammar syntax %q", string(syntax))
	}
	if err != nil {
		return nil, err
	}
	return defs.compile()
}

// gop is a gnode's kind.
type gop uint8

const (
	gLit   gop = iota // text: its bytes
	gClass            // one code point in ranges
	gRef              // the rule called text
	gSeq              // subs one after another
	gAlt              // any one of subs
	gRep              // subs[0] from min to max times (max < 0: unbounded)
)

// gnode is a grammar written as text, parsed.
type gnode struct {
	op       gop
	text     string
	ranges   []rune // gClass: pairs lo, hi, sorted, disjoint, no surrogates
	subs     []*gnode
	min, max int
	// ignore (Lark's %ignore): in a rule, the ignored text may stand
	// between the items of a sequence and between repetitions.
	ignore bool
}

func seqNode(subs ...*gnode) *gnode {
	if len(subs) == 1 {
		return subs[0]
	}
	return &gnode{op: gSeq, subs: subs}
}

func altNode(subs ...*gnode) *gnode {
	if len(subs) == 1 {
		return subs[0]
	}
	return &gnode{op: gAlt, subs: subs}
}

// classNode is a class of the code points in ranges (pairs lo, hi in any
// order), negated or not; surrogates are never in it.
func classNode(ranges []rune, negate bool) *gnode {
	var rs [][2]rune
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if lo > hi {
			continue
		}
		rs = append(rs, [2]rune{lo, hi})
	}
	slices.SortFunc(rs, func(a, b [2]rune) int { return int(a[0] - b[0]) })
	var merged [][2]rune
	for _, r := range rs {
		if n := len(merged); n > 0 && r[0] <= merged[n-1][1]+1 {
			merged[n-1][1] = max(merged[n-1][1], r[1])
			continue
		}
		merged = append(merged, r)
	}
	if negate {
		var inv [][2]rune
		next := rune(0)
		for _, r := range merged {
			if r[0] > next {
				inv = append(inv, [2]rune{next, r[0] - 1})
			}
			next = r[1] + 1
		}
		if next <= utf8.MaxRune {
			inv = append(inv, [2]rune{next, utf8.MaxRune})
		}
		merged = inv
	}
	var out []rune
	for _, r := range merged {
		lo, hi := r[0], min(r[1], utf8.MaxRune)
		if lo <= 0xDFFF && hi >= 0xD800 {
			if lo < 0xD800 {
				out = append(out, lo, 0xD7FF)
			}
			lo = 0xE000
		}
		if lo <= hi {
			out = append(out, lo, hi)
		}
	}
	return &gnode{op: gClass, ranges: out}
}

// nullable reports whether n may match nothing (refs: by the rules' own
// nullability, null).
func (n *gnode) nullable(null map[string]bool) bool {
	switch n.op {
	case gLit:
		return n.text == ""
	case gClass:
		return false
	case gRef:
		return null[n.text]
	case gSeq:
		for _, s := range n.subs {
			if !s.nullable(null) {
				return false
			}
		}
		return true
	case gAlt:
		for _, s := range n.subs {
			if s.nullable(null) {
				return true
			}
		}
		return false
	}
	return n.min == 0 || n.subs[0].nullable(null)
}

// simplify rewrites a repetition n so that it neither loops without
// consuming nor multiplies the parse stacks: X{m,n} of an X that may be
// empty is X'{0,n}, X' being X without the empty text (nonEmpty, where it
// is a rewrite of X's own nodes; else n is left as it is), and (Y+){m,n}
// is Y{m,}, one repetition rather than two that split its text in every
// way. The result may be the empty literal.
func (n *gnode) simplify(null map[string]bool) *gnode {
	sub, lo, hi := n.subs[0], n.min, n.max
	if sub.op == gRep {
		sub = sub.simplify(null)
	}
	if hi != 0 && sub.nullable(null) {
		ne, ok := sub.nonEmpty(null)
		switch {
		case !ok:
			return &gnode{op: gRep, subs: []*gnode{sub}, min: lo, max: hi, ignore: n.ignore}
		case ne == nil:
			return &gnode{op: gLit}
		}
		sub, lo = ne, 0
		if sub.op == gRep {
			sub = sub.simplify(null)
		}
	}
	if sub.op == gRep && sub.max < 0 && sub.min == 1 && hi != 0 && sub.ignore == n.ignore {
		sub, hi = sub.subs[0], -1
	}
	return &gnode{op: gRep, subs: []*gnode{sub}, min: lo, max: hi, ignore: n.ignore}
}

// nonEmpty is n without the empty text, for the shapes where that is a
// rewrite of n's own nodes (nil: nothing is left); ok false where it is
// not (a reference to a rule that may be empty).
func (n *gnode) nonEmpty(null map[string]bool) (*gnode, bool) {
	if !n.nullable(null) {
		return n, true
	}
	switch n.op {
	case gLit:
		return nil, true // the empty literal
	case gRep:
		sub, ok := n.subs[0].nonEmpty(null)
		if !ok || sub == nil || n.max == 0 {
			return nil, ok
		}
		lo := max(n.min, 1)
		if n.subs[0].nullable(null) {
			lo = 1 // each repetition may be empty: one non-empty one suffices
		}
		return &gnode{op: gRep, subs: []*gnode{sub}, min: lo, max: n.max, ignore: n.ignore}, true
	case gAlt:
		var alts []*gnode
		for _, a := range n.subs {
			ne, ok := a.nonEmpty(null)
			if !ok {
				return nil, false
			}
			if ne != nil {
				alts = append(alts, ne)
			}
		}
		if len(alts) == 0 {
			return nil, true
		}
		return altNode(alts...), true
	case gSeq:
		if n.ignore || len(n.subs) == 0 {
			return nil, len(n.subs) == 0
		}
		// AB without the empty text: A' B, or B' (A empty)
		head, ok := n.subs[0].nonEmpty(null)
		if !ok {
			return nil, false
		}
		rest := seqOrEmpty(n.subs[1:])
		tail, ok := rest.nonEmpty(null)
		if !ok {
			return nil, false
		}
		var alts []*gnode
		if head != nil {
			alts = append(alts, seqNode(append([]*gnode{head}, n.subs[1:]...)...))
		}
		if tail != nil {
			alts = append(alts, tail)
		}
		if len(alts) == 0 {
			return nil, true
		}
		return altNode(alts...), true
	}
	return nil, false
}

// gdefs is a parsed grammar: its rules by name and the start rule.
type gdefs struct {
	rules map[string]*gnode
	order []string // definition order, for deterministic compiles
	root  string
}

// compile builds the Grammar of d.
func (d *gdefs) compile() (*Grammar, error) {
	if _, ok := d.rules[d.root]; !ok {
		return nil, ErrBadGrammar.Withf("no %s rule", d.root)
	}
	// nullability of rules, to refuse an unbounded repetition of what may
	// match nothing (it would loop without consuming).
	null := map[string]bool{}
	for changed := true; changed; {
		changed = false
		for name, n := range d.rules {
			if !null[name] && n.nullable(null) {
				null[name], changed = true, true
			}
		}
	}
	tc := &textCompiler{b: newBuilder(), defs: d, null: null, ids: map[string]int{}}
	root, err := tc.ruleOf(d.root)
	if err != nil {
		return nil, err
	}
	if tc.b.tooBig || tc.elems > maxTextElems {
		return nil, ErrUnsupportedGrammar.Withf("a grammar of more than %d rules or %d elements", maxRules, maxTextElems)
	}
	if name, ok := leftRecursive(tc.b.rules); ok {
		return nil, ErrUnsupportedGrammar.Withf("left recursion: rule %s can reach itself without consuming text", name)
	}
	markLeaves(tc.b.rules)
	g, err := build(tc.b.rules, root)
	if err != nil {
		return nil, ErrUnsupportedGrammar.Withf("%v", err)
	}
	return g, nil
}

type textCompiler struct {
	b     *builder
	defs  *gdefs
	null  map[string]bool
	ids   map[string]int // rule name → compiled rule
	n     int
	elems int
}

// ruleOf returns the rule compiled from the definition called name.
func (tc *textCompiler) ruleOf(name string) (int, error) {
	if r, ok := tc.ids[name]; ok {
		return r, nil
	}
	def, ok := tc.defs.rules[name]
	if !ok {
		return 0, ErrBadGrammar.Withf("undefined rule %s", name)
	}
	r := tc.b.reserve(name)
	tc.ids[name] = r
	alts, err := tc.alts(def)
	if err != nil {
		return 0, err
	}
	tc.b.set(r, alts...)
	return r, nil
}

// alts is n as the alternatives of a rule.
func (tc *textCompiler) alts(n *gnode) ([][]elem, error) {
	if n.op != gAlt {
		e, err := tc.seq(n)
		return [][]elem{e}, err
	}
	var out [][]elem
	for _, s := range n.subs {
		e, err := tc.seq(s)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}

// seq is n as one alternative's elements.
func (tc *textCompiler) seq(n *gnode) ([]elem, error) {
	if tc.b.tooBig || tc.elems > maxTextElems {
		return nil, ErrUnsupportedGrammar.Withf("a grammar of more than %d rules or %d elements", maxRules, maxTextElems)
	}
	var (
		out []elem
		err error
	)
	defer func() { tc.elems += len(out) }()
	switch n.op {
	case gLit:
		out = lit(n.text)
	case gClass:
		if len(n.ranges) == 0 {
			out = one(elem{ref: -1}) // no byte matches
			return out, nil
		}
		out = one(tc.class(n.ranges))
	case gRef:
		r, err := tc.ruleOf(n.text)
		if err != nil {
			return nil, err
		}
		out = one(ref(r))
	case gSeq:
		var ign []elem
		if n.ignore {
			if ign, err = tc.ignored(); err != nil {
				return nil, err
			}
		}
		for i, s := range n.subs {
			e, err := tc.seq(s)
			if err != nil {
				return nil, err
			}
			if i > 0 {
				out = append(out, ign...)
			}
			out = append(out, e...)
		}
	case gAlt:
		alts, err := tc.alts(n)
		if err != nil {
			return nil, err
		}
		tc.n++
		out = one(ref(tc.b.add(fmt.Sprintf("alt-%d", tc.n), alts...)))
	case gRep:
		n = n.simplify(tc.null)
		if n.op != gRep {
			return tc.seq(n)
		}
		sub := n.subs[0]
		if n.max < 0 && sub.nullable(tc.null) {
			return nil, ErrUnsupportedGrammar.Withf("an unbounded repetition of something that may match nothing")
		}
		item, err := tc.seq(sub)
		if err != nil {
			return nil, err
		}
		if n.max == 0 || len(item) == 0 {
			return nil, nil
		}
		if len(item) > 1 {
			tc.n++
			item = one(ref(tc.b.add(fmt.Sprintf("item-%d", tc.n), item)))
		}
		var sep []elem
		if n.ignore {
			if sep, err = tc.ignored(); err != nil {
				return nil, err
			}
		}
		if n.min > maxRepeat || n.max > maxRepeat {
			return nil, ErrUnsupportedGrammar.Withf("a repetition above %d", maxRepeat)
		}
		// what repeat writes: min copies, then a rule per further one
		tc.elems += (n.min + max(n.max-n.min, 1)) * (len(item) + len(sep) + 1)
		if tc.elems > maxTextElems {
			return nil, ErrUnsupportedGrammar.Withf("a grammar of more than %d rules or %d elements", maxRules, maxTextElems)
		}
		tc.n++
		out = one(ref(tc.repeat(fmt.Sprintf("rep-%d", tc.n), item, sep, n.min, n.max)))
	}
	return out, nil
}

// repeat is builder.repeat with the min copies written in one slice (a
// repetition's bound may be large: builder.repeat grows its copies one
// at a time).
func (tc *textCompiler) repeat(name string, item, sep []elem, min, max int) int {
	if min <= 1 {
		return tc.b.repeat(name, item, sep, min, max)
	}
	seq := make([]elem, 0, min*(len(item)+len(sep))+1)
	for i := range min {
		if i > 0 {
			seq = append(seq, sep...)
		}
		seq = append(seq, item...)
	}
	if max < 0 || max > min {
		more := -1
		if max >= 0 {
			more = max - min
		}
		seq = append(seq, ref(tc.b.repeat(name+"-more", cat(sep, item), nil, 0, more)))
	}
	return tc.b.add(name, seq)
}

// ignored is the elements of Lark's %ignore: any number of its terminals.
func (tc *textCompiler) ignored() ([]elem, error) {
	if r, ok := tc.ids["%ignore*"]; ok {
		return one(ref(r)), nil
	}
	if tc.null["%ignore"] {
		return nil, ErrUnsupportedGrammar.Withf("%%ignore of something that may match nothing")
	}
	ign, err := tc.ruleOf("%ignore")
	if err != nil {
		return nil, err
	}
	r := tc.b.repeat("%ignore*", one(ref(ign)), nil, 0, -1)
	tc.ids["%ignore*"] = r
	return one(ref(r)), nil
}

// class is one UTF-8 encoded code point in ranges: a byte set when every
// code point is ASCII, else a rule of byte-range sequences (shared by
// equal classes).
func (tc *textCompiler) class(ranges []rune) elem {
	if ranges[len(ranges)-1] < utf8.RuneSelf {
		e := elem{ref: -1}
		for i := 0; i < len(ranges); i += 2 {
			e.term.addRange(int(ranges[i]), int(ranges[i+1]))
		}
		return e
	}
	var key strings.Builder
	for i := 0; i < len(ranges); i += 2 {
		fmt.Fprintf(&key, "%x-%x,", ranges[i], ranges[i+1])
	}
	return ref(tc.b.once("utf8:"+key.String(), false, func(int) [][]elem {
		var alts [][]elem
		var ascii elem
		ascii.ref = -1
		for i := 0; i < len(ranges); i += 2 {
			lo, hi := ranges[i], ranges[i+1]
			if lo < utf8.RuneSelf {
				ascii.term.addRange(int(lo), int(min(hi, utf8.RuneSelf-1)))
				lo = utf8.RuneSelf
			}
			if lo <= hi {
				utf8Ranges(lo, hi, func(seq [][2]byte) {
					e := make([]elem, len(seq))
					for j, p := range seq {
						e[j] = terms(int(p[0]), int(p[1]))
					}
					alts = append(alts, e)
				})
			}
		}
		if ascii.term != (byteSet{}) {
			alts = append(alts, one(ascii))
		}
		return alts
	}))
}

// leftRecursive reports a rule that can reach itself without consuming a
// byte (its name), which the matcher could not expand.
func leftRecursive(rules []rule) (string, bool) {
	nullable := make([]bool, len(rules))
	for changed := true; changed; {
		changed = false
		for ri, r := range rules {
			if nullable[ri] {
				continue
			}
			for _, a := range r.alts {
				if !slices.ContainsFunc(a, func(e elem) bool { return e.ref < 0 || !nullable[e.ref] }) {
					nullable[ri], changed = true, true
					break
				}
			}
		}
	}
	edges := make([][]int, len(rules))
	for ri, r := range rules {
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
	state := make([]uint8, len(rules))
	var visit func(int) (int, bool)
	visit = func(r int) (int, bool) {
		state[r] = 1
		for _, n := range edges[r] {
			switch state[n] {
			case 1:
				return n, true
			case 0:
				if c, ok := visit(n); ok {
					return c, true
				}
			}
		}
		state[r] = 2
		return 0, false
	}
	for r := range rules {
		if state[r] == 0 {
			if c, ok := visit(r); ok {
				return rules[c].name, true
			}
		}
	}
	return "", false
}

// markLeaves marks as leaves (the mask cache's unit, see cut) the rules
// whose parse stacks stay bounded: no rule they reach lies on a cycle
// through a reference that is not the last element of its alternative
// (only such a reference leaves a frame to come back to). A leaf's masks
// are then cached per state of the leaf alone, and there are finitely many.
func markLeaves(rules []rule) {
	n := len(rules)
	// Tarjan's strongly connected components over every reference.
	index, low, comp := make([]int, n), make([]int, n), make([]int, n)
	for i := range index {
		index[i], comp[i] = -1, -1
	}
	var stack []int
	onStack := make([]bool, n)
	next, ncomp := 0, 0
	var strong func(v int)
	strong = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, a := range rules[v].alts {
			for _, e := range a {
				if e.ref < 0 {
					continue
				}
				w := e.ref
				if index[w] < 0 {
					strong(w)
					low[v] = min(low[v], low[w])
				} else if onStack[w] {
					low[v] = min(low[v], index[w])
				}
			}
		}
		if low[v] == index[v] {
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp[w] = ncomp
				if w == v {
					break
				}
			}
			ncomp++
		}
	}
	for v := range n {
		if index[v] < 0 {
			strong(v)
		}
	}
	// A component grows the stack when a reference inside it is not last.
	grows := make([]bool, ncomp)
	for v, r := range rules {
		for _, a := range r.alts {
			for i, e := range a {
				if e.ref >= 0 && comp[e.ref] == comp[v] && i < len(a)-1 {
					grows[comp[v]] = true
				}
			}
		}
	}
	// Tarjan numbers components in reverse topological order: a component
	// references only components numbered lower, so one pass in
	// increasing order sees every callee first.
	bad := slices.Clone(grows)
	members := make([][]int, ncomp)
	for v := range n {
		members[comp[v]] = append(members[comp[v]], v)
	}
	for c := range ncomp {
		for _, v := range members[c] {
			for _, a := range rules[v].alts {
				for _, e := range a {
					if e.ref >= 0 && bad[comp[e.ref]] {
						bad[c] = true
					}
				}
			}
		}
	}
	for v := range n {
		rules[v].leaf = !bad[comp[v]]
	}
}
