package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// GBNF, llama.cpp's grammar format (its grammars/README.md), read as
// llama.cpp's parser reads it: rules `name ::= alternatives`, one per line
// (a newline ends a rule except inside parentheses and after |); names of
// letters, digits and '-'; string literals "…" and character classes
// […] and [^…] (ranges a-z) with the escapes \x.., \u...., \U........, \t,
// \r, \n, \\, \", \[, \], \-; '.' any character; grouping ( ); the
// repetitions *, +, ? and {m}, {m,}, {m,n}; # comments. The start rule is
// root. Token references (<[id]>, <token>, !<…>) depend on a vocabulary and
// are refused; a rule defined twice is refused (llama.cpp keeps the last).

type gbnfParser struct {
	src  string
	pos  int
	defs *gdefs
}

// parseGBNF reads a GBNF grammar. Errors: ErrBadGrammar (where: line and
// column), ErrUnsupportedGrammar (token references).
func parseGBNF(src string) (*gdefs, error) {
	p := &gbnfParser{src: src, defs: &gdefs{rules: map[string]*gnode{}, root: "root"}}
	p.space(true)
	for p.pos < len(p.src) {
		if err := p.rule(); err != nil {
			return nil, err
		}
	}
	for _, name := range p.defs.order {
		if err := p.checkRefs(p.defs.rules[name]); err != nil {
			return nil, err
		}
	}
	return p.defs, nil
}

func (p *gbnfParser) errf(format string, args ...any) error {
	line := 1 + strings.Count(p.src[:p.pos], "\n")
	col := p.pos - strings.LastIndexByte(p.src[:p.pos], '\n')
	return ErrBadGrammar.Withf("gbnf: line %d, column %d: %s", line, col, strings.TrimSpace(fmt.Sprintf(format, args...)))
}

func (p *gbnfParser) checkRefs(n *gnode) error {
	if n.op == gRef {
		if _, ok := p.defs.rules[n.text]; !ok {
			return ErrBadGrammar.Withf("gbnf: undefined rule %s", n.text)
		}
	}
	for _, s := range n.subs {
		if err := p.checkRefs(s); err != nil {
			return err
		}
	}
	return nil
}

func (p *gbnfParser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// space skips blanks and comments, and newlines where newlineOK.
func (p *gbnfParser) space(newlineOK bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\r' && p.src[p.pos] != '\n' {
				p.pos++
			}
		case newlineOK && (c == '\r' || c == '\n'):
			p.pos++
		default:
			return
		}
	}
}

func gbnfWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-'
}

func (p *gbnfParser) name() (string, error) {
	start := p.pos
	for p.pos < len(p.src) && gbnfWordChar(p.src[p.pos]) {
		p.pos++
	}
	if p.pos == start {
		return "", p.errf("expecting a rule name")
	}
	return p.src[start:p.pos], nil
}

func (p *gbnfParser) rule() error {
	name, err := p.name()
	if err != nil {
		return err
	}
	p.space(false)
	if !strings.HasPrefix(p.src[p.pos:], "::=") {
		return p.errf("expecting ::=")
	}
	p.pos += 3
	p.space(true)
	body, err := p.alternates(false, 0)
	if err != nil {
		return err
	}
	switch p.peek() {
	case '\r':
		p.pos++
		if p.peek() == '\n' {
			p.pos++
		}
	case '\n':
		p.pos++
	case 0:
		if p.pos < len(p.src) {
			return p.errf("expecting a newline or the end")
		}
	default:
		return p.errf("expecting a newline or the end")
	}
	p.space(true)
	if _, dup := p.defs.rules[name]; dup {
		return ErrBadGrammar.Withf("gbnf: rule %s defined twice", name)
	}
	p.defs.rules[name] = body
	p.defs.order = append(p.defs.order, name)
	return nil
}

// maxGBNFDepth bounds the nesting of parentheses.
const maxGBNFDepth = 100

func (p *gbnfParser) alternates(nested bool, depth int) (*gnode, error) {
	if depth > maxGBNFDepth {
		return nil, p.errf("parentheses nested deeper than %d", maxGBNFDepth)
	}
	var alts []*gnode
	for {
		s, err := p.sequence(nested, depth)
		if err != nil {
			return nil, err
		}
		alts = append(alts, s)
		if p.peek() != '|' {
			return altNode(alts...), nil
		}
		p.pos++
		p.space(true)
	}
}

func (p *gbnfParser) sequence(nested bool, depth int) (*gnode, error) {
	var items []*gnode
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		switch {
		case c == '"':
			p.pos++
			var b strings.Builder
			for p.peek() != '"' {
				if p.pos >= len(p.src) {
					return nil, p.errf("unexpected end of input in a string")
				}
				r, err := p.char()
				if err != nil {
					return nil, err
				}
				b.WriteRune(r)
			}
			p.pos++
			items = append(items, &gnode{op: gLit, text: b.String()})
		case c == '[':
			p.pos++
			negate := false
			if p.peek() == '^' {
				negate = true
				p.pos++
			}
			var ranges []rune
			for p.peek() != ']' {
				if p.pos >= len(p.src) {
					return nil, p.errf("unexpected end of input in a class")
				}
				lo, err := p.char()
				if err != nil {
					return nil, err
				}
				hi := lo
				if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
					p.pos++
					if hi, err = p.char(); err != nil {
						return nil, err
					}
				}
				ranges = append(ranges, lo, hi)
			}
			p.pos++
			items = append(items, classNode(ranges, negate))
		case c == '<' || c == '!':
			return nil, ErrUnsupportedGrammar.Withf("gbnf: token references (<…>, !<…>)")
		case gbnfWordChar(c):
			name, _ := p.name()
			items = append(items, &gnode{op: gRef, text: name})
		case c == '(':
			p.pos++
			p.space(true)
			n, err := p.alternates(true, depth+1)
			if err != nil {
				return nil, err
			}
			if p.peek() != ')' {
				return nil, p.errf("expecting ')'")
			}
			p.pos++
			items = append(items, n)
		case c == '.':
			p.pos++
			items = append(items, classNode([]rune{0, utf8.MaxRune}, false))
		case c == '*' || c == '+' || c == '?' || c == '{':
			if len(items) == 0 {
				return nil, p.errf("expecting an item before %q", string(c))
			}
			lo, hi := 0, -1
			p.pos++
			switch c {
			case '+':
				lo = 1
			case '?':
				hi = 1
			case '{':
				p.space(nested)
				var err error
				if lo, err = p.int(); err != nil {
					return nil, err
				}
				p.space(nested)
				switch p.peek() {
				case '}':
					hi = lo
				case ',':
					p.pos++
					p.space(nested)
					if d := p.peek(); d >= '0' && d <= '9' {
						if hi, err = p.int(); err != nil {
							return nil, err
						}
						p.space(nested)
					}
					if p.peek() != '}' {
						return nil, p.errf("expecting '}'")
					}
				default:
					return nil, p.errf("expecting ',' or '}'")
				}
				p.pos++
				if hi >= 0 && hi < lo {
					return nil, p.errf("a repetition {%d,%d}", lo, hi)
				}
			}
			last := items[len(items)-1]
			items[len(items)-1] = &gnode{op: gRep, subs: []*gnode{last}, min: lo, max: hi}
		default:
			return seqOrEmpty(items), nil
		}
		p.space(nested)
	}
	return seqOrEmpty(items), nil
}

func seqOrEmpty(items []*gnode) *gnode {
	if len(items) == 0 {
		return &gnode{op: gLit}
	}
	return seqNode(items...)
}

func (p *gbnfParser) int() (int, error) {
	start := p.pos
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		p.pos++
	}
	if p.pos == start {
		return 0, p.errf("expecting an integer")
	}
	n, err := strconv.Atoi(p.src[start:p.pos])
	if err != nil || n > maxRepeat {
		return 0, ErrUnsupportedGrammar.Withf("gbnf: a repetition above %d", maxRepeat)
	}
	return n, nil
}

// char reads one character of a literal or class, escapes decoded.
func (p *gbnfParser) char() (rune, error) {
	if p.peek() != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += n
		return r, nil
	}
	if p.pos+1 >= len(p.src) {
		return 0, p.errf("unexpected end of input after \\")
	}
	e := p.src[p.pos+1]
	p.pos += 2
	digits := 0
	switch e {
	case 'x':
		digits = 2
	case 'u':
		digits = 4
	case 'U':
		digits = 8
	case 't':
		return '\t', nil
	case 'r':
		return '\r', nil
	case 'n':
		return '\n', nil
	case '\\', '"', '[', ']', '-':
		return rune(e), nil
	default:
		p.pos -= 2
		return 0, p.errf("unknown escape \\%c", e)
	}
	if p.pos+digits > len(p.src) {
		return 0, p.errf("expecting %d hex digits", digits)
	}
	v, err := strconv.ParseUint(p.src[p.pos:p.pos+digits], 16, 32)
	if err != nil {
		return 0, p.errf("expecting %d hex digits", digits)
	}
	p.pos += digits
	if v > utf8.MaxRune || v >= 0xD800 && v <= 0xDFFF {
		return 0, p.errf("the escape of U+%X, not a Unicode scalar value", v)
	}
	return rune(v), nil
}
