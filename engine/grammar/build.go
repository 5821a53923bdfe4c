package grammar

import (
	"fmt"
	"strconv"
)

// builder accumulates rules. Shared rules (whitespace, string, number, any
// value) are made once per grammar.
type builder struct {
	rules  []rule
	shared map[string]int
	lits   map[string]int
	// tooBig is set once the grammar passes maxRules: Compile then fails
	// (a 1 MiB schema of many distinct bounds would otherwise cost
	// gigabytes).
	tooBig bool
	// space is the whitespace allowed between JSON tokens (whitespace.go).
	space Whitespace
}

// maxRules bounds the rules of one grammar.
const maxRules = 200_000

func newBuilder() *builder { return &builder{shared: map[string]int{}, lits: map[string]int{}} }

// reserve adds a rule without alternatives yet (for recursion).
func (b *builder) reserve(name string) int {
	if len(b.rules) >= maxRules {
		b.tooBig = true
	}
	b.rules = append(b.rules, rule{name: name})
	return len(b.rules) - 1
}

func (b *builder) set(r int, alts ...[]elem) { b.rules[r].alts = alts }

func (b *builder) add(name string, alts ...[]elem) int {
	r := b.reserve(name)
	b.set(r, alts...)
	return r
}

// once returns the shared rule called name, making it with mk on first use.
func (b *builder) once(name string, leaf bool, mk func(r int) [][]elem) int {
	if r, ok := b.shared[name]; ok {
		return r
	}
	r := b.reserve(name)
	b.shared[name] = r
	b.rules[r].alts = mk(r)
	b.rules[r].leaf = leaf
	return r
}

// grown adds a rule whose alternatives grow makes on its first use.
func (b *builder) grown(name string, grow grower) int {
	r := b.reserve(name)
	b.rules[r].grow = grow
	return r
}

func ref(r int) elem { return elem{ref: r} }

func terms(ranges ...int) elem {
	e := elem{ref: -1}
	for i := 0; i+1 < len(ranges); i += 2 {
		e.term.addRange(ranges[i], ranges[i+1])
	}
	return e
}

func lit(s string) []elem {
	out := make([]elem, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = terms(int(s[i]), int(s[i]))
	}
	return out
}

func cat(parts ...[]elem) []elem {
	var out []elem
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(e elem) []elem { return []elem{e} }

// literal returns a rule matching exactly s.
func (b *builder) literal(s string) int {
	if r, ok := b.lits[s]; ok {
		return r
	}
	r := b.add("lit"+strconv.Quote(s), lit(s))
	b.lits[s] = r
	return r
}

// repeat returns a rule matching item, min to max times (max < 0:
// unbounded), with sep between items.
func (b *builder) repeat(name string, item []elem, sep []elem, min, max int) int {
	if len(b.rules)+min+max+2 > maxRules {
		b.tooBig = true
		return b.add(name, nil)
	}
	// tail(k): after at least one item, up to k more (k < 0: unbounded).
	var tail func(k int) int
	memo := map[int]int{}
	tail = func(k int) int {
		if r, ok := memo[k]; ok {
			return r
		}
		if k == 0 {
			r := b.add(name+"-end", nil)
			memo[k] = r
			return r
		}
		r := b.reserve(fmt.Sprintf("%s-tail%d", name, k))
		memo[k] = r
		next := r
		if k > 0 {
			next = tail(k - 1)
		}
		b.set(r, cat(sep, item, one(ref(next))), nil)
		return r
	}
	more := max - 1
	if max < 0 {
		more = -1
	}
	// required part: item (sep item){min-1}, then tail(max-min)
	if min == 0 {
		if max == 0 {
			return b.add(name, nil)
		}
		return b.add(name, cat(item, one(ref(tail(more)))), nil)
	}
	seq := item
	for i := 1; i < min; i++ {
		seq = cat(seq, sep, item)
	}
	rest := -1
	if max >= 0 {
		rest = max - min
	}
	return b.add(name, cat(seq, one(ref(tail(rest)))))
}

// ws: optional whitespace between JSON tokens, as b.space allows
// (whitespace.go), bounded so that a model cannot spend its tokens on it.
func (b *builder) ws() int {
	return b.once("ws", false, func(int) [][]elem { return b.space.alts(b) })
}

// char: one JSON string character, as well-formed UTF-8 or an escape.
func (b *builder) char() int {
	return b.once("char", false, func(int) [][]elem {
		hex := terms('0', '9', 'a', 'f', 'A', 'F')
		cont := terms(0x80, 0xBF)
		return [][]elem{
			one(terms(0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7F)),
			{terms('\\', '\\'), terms('"', '"', '\\', '\\', '/', '/', 'b', 'b', 'f', 'f', 'n', 'n', 'r', 'r', 't', 't')},
			{terms('\\', '\\'), terms('u', 'u'), hex, hex, hex, hex},
			{terms(0xC2, 0xDF), cont},
			{terms(0xE0, 0xE0), terms(0xA0, 0xBF), cont},
			{terms(0xE1, 0xEC, 0xEE, 0xEF), cont, cont},
			{terms(0xED, 0xED), terms(0x80, 0x9F), cont},
			{terms(0xF0, 0xF0), terms(0x90, 0xBF), cont, cont},
			{terms(0xF1, 0xF3), cont, cont, cont},
			{terms(0xF4, 0xF4), terms(0x80, 0x8F), cont, cont},
		}
	})
}

// str: a JSON string of min to max characters (max < 0: unbounded).
func (b *builder) str(min, max int) int {
	name := fmt.Sprintf("string{%d,%d}", min, max)
	bounded := min > 0 || max >= 0
	free := -1
	if bounded && max != 0 {
		free = b.str(0, -1) // the count-free string its masks derive from
	}
	return b.once(name, true, func(r int) [][]elem {
		body := b.repeat(name+"-chars", one(ref(b.char())), nil, min, max)
		if free >= 0 {
			b.markCounted(body, &strCount{str: int32(r), free: int32(free), char: int32(b.char()), min: min, max: max, body: true})
		}
		return [][]elem{cat(lit(`"`), one(ref(body)), lit(`"`))}
	})
}

// markCounted sets c on the rules of a bounded string's characters: its
// body (the first rule repeat makes) and the tail rules it reaches, each
// with the characters it still admits.
func (b *builder) markCounted(body int, c *strCount) {
	// the body's first alternative ends with its tail rule; a tail rule's
	// first alternative is a character and the next tail rule (none when
	// the grammar grew too big: it fails to compile)
	if len(b.rules[body].alts) == 0 || len(b.rules[body].alts[0]) == 0 {
		return
	}
	b.rules[body].count = c
	alt := b.rules[body].alts[0]
	t := alt[len(alt)-1].ref
	k := c.max - c.min // tail(max-min) after min characters
	if c.min == 0 {
		k = c.max - 1 // tail(max-1) after the first
	}
	for ; t >= 0 && b.rules[t].count == nil; k-- {
		tc := *c
		tc.body, tc.k = false, k
		if c.max < 0 {
			tc.k = -1
		}
		b.rules[t].count = &tc
		if len(b.rules[t].alts) == 0 || len(b.rules[t].alts[0]) != 2 {
			break // tail(0): no character
		}
		t = b.rules[t].alts[0][1].ref
	}
}

// integer: -?(0|[1-9][0-9]{0,15}); the bound keeps every integer exact in
// a float64 reader's hands and the output finite.
func (b *builder) integer() int {
	return b.once("integer", true, func(int) [][]elem {
		digits := b.repeat("int-digits", one(terms('0', '9')), nil, 0, 15)
		part := b.add("int-part", lit("0"), []elem{terms('1', '9'), ref(digits)})
		return [][]elem{one(ref(part)), cat(lit("-"), one(ref(part)))}
	})
}

// number: integer, optional fraction of 1–16 digits, optional exponent of
// 1–2 digits (so that every number fits a float64).
func (b *builder) number() int {
	return b.once("number", true, func(int) [][]elem {
		in := b.integer()
		frac := b.add("frac", cat(lit("."), one(ref(b.repeat("frac-digits", one(terms('0', '9')), nil, 1, 16)))))
		sign := b.add("exp-sign", nil, lit("-"), lit("+"))
		exp := b.add("exp", []elem{terms('e', 'e', 'E', 'E'), ref(sign), ref(b.repeat("exp-digits", one(terms('0', '9')), nil, 1, 2))})
		return [][]elem{one(ref(in)), {ref(in), ref(frac)}, {ref(in), ref(exp)}, {ref(in), ref(frac), ref(exp)}}
	})
}

// sep is ws "," ws.
func (b *builder) sep() []elem { return []elem{ref(b.ws()), terms(',', ','), ref(b.ws())} }

// array of items (a rule), min to max items.
func (b *builder) array(name string, item int, min, max int) int {
	ws := ref(b.ws())
	if max == 0 {
		return b.add(name, cat(lit("["), one(ws), lit("]")))
	}
	// With no items the array is "[" ws "]"; otherwise "[" ws items ws "]"
	// with at least one item, so that no text has two parses.
	items := b.repeat(name+"-items", one(ref(item)), b.sep(), max1(min), max)
	alts := [][]elem{cat(lit("["), []elem{ws, ref(items), ws}, lit("]"))}
	if min == 0 {
		alts = append(alts, cat(lit("["), one(ws), lit("]")))
	}
	return b.add(name, alts...)
}

// mapOf: an object whose keys are any strings and values are val.
func (b *builder) mapOf(name string, val int) int {
	return b.mapOfKeys(name, b.str(0, -1), val)
}

// mapOfKeys: an object whose members' keys are of rule key (a JSON
// string) and values of rule val.
func (b *builder) mapOfKeys(name string, key, val int) int {
	ws := ref(b.ws())
	member := b.add(name+"-member", []elem{ref(key), ws, terms(':', ':'), ws, ref(val)})
	members := b.repeat(name+"-members", one(ref(member)), b.sep(), 1, -1)
	return b.add(name, cat(lit("{"), one(ws), lit("}")), cat(lit("{"), []elem{ws, ref(members), ws}, lit("}")))
}

// value: any JSON value.
func (b *builder) value() int {
	if r, ok := b.shared["value"]; ok {
		return r
	}
	v := b.reserve("value")
	b.shared["value"] = v
	obj := b.mapOf("object", v)
	b.shared["object"] = obj
	arr := b.array("array", v, 0, -1)
	b.set(v, one(ref(obj)), one(ref(arr)), one(ref(b.str(0, -1))), one(ref(b.number())),
		lit("true"), lit("false"), lit("null"))
	return v
}

// object: any JSON object.
func (b *builder) object() int {
	b.value()
	return b.shared["object"]
}

func max1(n int) int { return max(n, 1) }
