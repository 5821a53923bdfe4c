package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Lark, the subset that OpenAI's custom-tool grammars (and LLGuidance) take:
// definitions `name: expansions` (rules are lowercase names, terminals
// uppercase; a leading ? or ! and a terminal's .priority are read and
// change nothing here), alternatives separated by | (a line that begins
// with | continues the definition), string literals "…" (Python escapes;
// the i flag for case-insensitive), ranges "a".."z", regular expressions
// /…/ (ECMAScript's dialect, as a regex constraint; no flags), grouping
// ( ), optional [ ], the repetitions ?, *, +, ~ n, ~ n..m and {n}, {n,m};
// an alias -> name is read and changes nothing; // comments. %import
// common.NAME (or common (A, B), or -> ALIAS) takes the terminals of Lark's
// common.lark (DIGIT, HEXDIGIT, INT, SIGNED_INT, DECIMAL, FLOAT,
// SIGNED_FLOAT, NUMBER, SIGNED_NUMBER, ESCAPED_STRING, LETTER, WORD, CNAME,
// WS, WS_INLINE, NEWLINE, CR, LF, …). %ignore X lets X's text stand
// between any two items of a rule (not of a terminal), between its
// repetitions, and before and after the whole text. The start rule is
// start.
//
// The grammar is matched over characters, without a lexer: a terminal is
// the language of its definition, so text a Lark lexer would split in
// another way (two adjacent terminals whose text one terminal also
// matches) is accepted as the grammar's rules read it. Refused by name:
// other directives (%declare, %override, %extend, imports from other
// modules), templates, special tokens <|…|>, regex flags.

type larkTok struct {
	kind byte // 'n' name, 's' string, 'r' regex, 'd' number, '%' directive, '\n' newline, else the punctuation's first byte
	text string
	flag string // a string's flags (i)
	pos  int
}

func larkErr(src string, pos int, format string, args ...any) error {
	line := 1 + strings.Count(src[:pos], "\n")
	col := pos - strings.LastIndexByte(src[:pos], '\n')
	return ErrBadGrammar.Withf("lark: line %d, column %d: %s", line, col, fmt.Sprintf(format, args...))
}

// larkLex splits src into tokens; newlines inside brackets and before a
// | are dropped (the definition goes on).
func larkLex(src string) ([]larkTok, error) {
	var out []larkTok
	depth := 0
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\f':
			i++
		case c == '\n':
			if depth == 0 && (len(out) == 0 || out[len(out)-1].kind != '\n') {
				out = append(out, larkTok{kind: '\n', pos: i})
			}
			i++
		case strings.HasPrefix(src[i:], "//"):
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '"':
			start := i
			i++
			var b strings.Builder
			for {
				if i >= len(src) || src[i] == '\n' {
					return nil, larkErr(src, start, "an unterminated string")
				}
				if src[i] == '"' {
					i++
					break
				}
				if src[i] == '\\' {
					r, n, err := larkEscape(src[i:])
					if err != nil {
						return nil, larkErr(src, i, "%v", err)
					}
					b.WriteRune(r)
					i += n
					continue
				}
				r, n := utf8.DecodeRuneInString(src[i:])
				b.WriteRune(r)
				i += n
			}
			t := larkTok{kind: 's', text: b.String(), pos: start}
			for i < len(src) && (src[i] >= 'a' && src[i] <= 'z') {
				t.flag += string(src[i])
				i++
			}
			out = append(out, t)
		case c == '/':
			start := i
			i++
			var b strings.Builder
			for {
				if i >= len(src) || src[i] == '\n' {
					return nil, larkErr(src, start, "an unterminated regular expression")
				}
				if src[i] == '/' {
					i++
					break
				}
				if src[i] == '\\' && i+1 < len(src) {
					if src[i+1] == '/' {
						b.WriteByte('/')
					} else {
						b.WriteString(src[i : i+2])
					}
					i += 2
					continue
				}
				b.WriteByte(src[i])
				i++
			}
			t := larkTok{kind: 'r', text: b.String(), pos: start}
			for i < len(src) && (src[i] >= 'a' && src[i] <= 'z') {
				t.flag += string(src[i])
				i++
			}
			out = append(out, t)
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			start := i
			for i < len(src) && (src[i] == '_' || src[i] >= 'a' && src[i] <= 'z' || src[i] >= 'A' && src[i] <= 'Z' || src[i] >= '0' && src[i] <= '9') {
				i++
			}
			out = append(out, larkTok{kind: 'n', text: src[start:i], pos: start})
		case c >= '0' && c <= '9' || c == '-' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			start := i
			i++
			for i < len(src) && src[i] >= '0' && src[i] <= '9' {
				i++
			}
			out = append(out, larkTok{kind: 'd', text: src[start:i], pos: start})
		case c == '%':
			start := i
			i++
			for i < len(src) && (src[i] >= 'a' && src[i] <= 'z' || src[i] == '_') {
				i++
			}
			out = append(out, larkTok{kind: '%', text: src[start:i], pos: start})
		case strings.HasPrefix(src[i:], ".."):
			out = append(out, larkTok{kind: ':', text: "..", pos: i})
			i += 2
		case strings.HasPrefix(src[i:], "->"):
			out = append(out, larkTok{kind: '>', text: "->", pos: i})
			i += 2
		case strings.HasPrefix(src[i:], "<|"):
			return nil, ErrUnsupportedGrammar.Withf("lark: special tokens <|…|>")
		case strings.ContainsRune(":|()[]?*+~{},.", rune(c)):
			switch c {
			case '(', '[', '{':
				depth++
			case ')', ']', '}':
				depth = max(depth-1, 0)
			case '|':
				// a line that begins with | continues the definition
				if n := len(out); n > 0 && out[n-1].kind == '\n' {
					out = out[:n-1]
				}
			}
			out = append(out, larkTok{kind: c, text: string(c), pos: i})
			i++
		default:
			return nil, larkErr(src, i, "unexpected %q", firstRune(src[i:]))
		}
	}
	return out, nil
}

// larkEscape decodes one backslash escape of a string literal (Python's,
// which keeps an unknown escape as written).
func larkEscape(s string) (rune, int, error) {
	if len(s) < 2 {
		return 0, 0, fmt.Errorf("a trailing backslash")
	}
	switch s[1] {
	case 'n':
		return '\n', 2, nil
	case 't':
		return '\t', 2, nil
	case 'r':
		return '\r', 2, nil
	case 'f':
		return '\f', 2, nil
	case 'v':
		return '\v', 2, nil
	case '0':
		return 0, 2, nil
	case '\\', '"', '\'':
		return rune(s[1]), 2, nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[s[1]]
		if len(s) < 2+n {
			return 0, 0, fmt.Errorf("an escape \\%c without %d hex digits", s[1], n)
		}
		v, err := strconv.ParseUint(s[2:2+n], 16, 32)
		if err != nil || v > utf8.MaxRune || v >= 0xD800 && v <= 0xDFFF {
			return 0, 0, fmt.Errorf("an escape \\%c that is not a Unicode scalar value", s[1])
		}
		return rune(v), 2 + n, nil
	}
	// unknown: the backslash stands for itself, the next character is read next
	return '\\', 1, nil
}

type larkParser struct {
	src     string
	toks    []larkTok
	i       int
	defs    *gdefs
	ignores []*gnode
	rule    bool // parsing a rule's body (not a terminal's)
}

func isTerminal(name string) bool {
	n := strings.TrimLeft(name, "_")
	return n != "" && n[0] >= 'A' && n[0] <= 'Z'
}

// parseLark reads a Lark grammar. Errors: ErrBadGrammar,
// ErrUnsupportedGrammar.
func parseLark(src string) (*gdefs, error) {
	toks, err := larkLex(src)
	if err != nil {
		return nil, err
	}
	p := &larkParser{src: src, toks: toks, defs: &gdefs{rules: map[string]*gnode{}, root: "start"}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	if _, ok := p.defs.rules["start"]; !ok {
		return nil, ErrBadGrammar.Withf("lark: no start rule")
	}
	if len(p.ignores) > 0 {
		p.defs.rules["%ignore"] = altNode(p.ignores...)
		for name, n := range p.defs.rules {
			if !isTerminal(name) && !strings.HasPrefix(name, "%") && !strings.HasPrefix(name, "common.") {
				markIgnore(n)
			}
		}
		p.defs.rules["%start"] = &gnode{op: gSeq, ignore: true, subs: []*gnode{{op: gLit}, {op: gRef, text: "start"}, {op: gLit}}}
		p.defs.root = "%start"
	}
	// every reference defined; terminals never reference rules
	for name, n := range p.defs.rules {
		if err := checkLarkRefs(p.defs, name, n); err != nil {
			return nil, err
		}
	}
	return p.defs, nil
}

func markIgnore(n *gnode) {
	if n.op == gSeq || n.op == gRep {
		n.ignore = true
	}
	for _, s := range n.subs {
		markIgnore(s)
	}
}

func checkLarkRefs(d *gdefs, in string, n *gnode) error {
	if n.op == gRef {
		if _, ok := d.rules[n.text]; !ok {
			return ErrBadGrammar.Withf("lark: undefined name %s", strings.TrimPrefix(n.text, "common."))
		}
		if isTerminal(in) && !isTerminal(strings.TrimPrefix(n.text, "common.")) {
			return ErrBadGrammar.Withf("lark: terminal %s refers to rule %s", strings.TrimPrefix(in, "common."), n.text)
		}
	}
	for _, s := range n.subs {
		if err := checkLarkRefs(d, in, s); err != nil {
			return err
		}
	}
	return nil
}

func (p *larkParser) peek() larkTok {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return larkTok{kind: 0, pos: len(p.src)}
}

func (p *larkParser) errf(format string, args ...any) error {
	return larkErr(p.src, p.peek().pos, format, args...)
}

func (p *larkParser) expect(kind byte, what string) (larkTok, error) {
	t := p.peek()
	if t.kind != kind {
		return t, p.errf("expecting %s", what)
	}
	p.i++
	return t, nil
}

func (p *larkParser) parse() error {
	for p.i < len(p.toks) {
		t := p.peek()
		switch t.kind {
		case '\n':
			p.i++
			continue
		case '%':
			if err := p.directive(); err != nil {
				return err
			}
		case '?', '!', 'n':
			if err := p.definition(); err != nil {
				return err
			}
		default:
			return p.errf("expecting a definition")
		}
		if k := p.peek().kind; k != '\n' && k != 0 {
			return p.errf("expecting the end of the line")
		}
	}
	return nil
}

func (p *larkParser) define(name string, n *gnode) error {
	if _, dup := p.defs.rules[name]; dup {
		return p.errf("%s defined twice", name)
	}
	p.defs.rules[name] = n
	p.defs.order = append(p.defs.order, name)
	return nil
}

func (p *larkParser) definition() error {
	if k := p.peek().kind; k == '?' || k == '!' {
		p.i++
	}
	name, err := p.expect('n', "a name")
	if err != nil {
		return err
	}
	if p.peek().kind == '.' { // priority
		p.i++
		if _, err := p.expect('d', "a priority"); err != nil {
			return err
		}
	}
	if p.peek().kind == '{' {
		return ErrUnsupportedGrammar.Withf("lark: templates (%s{…})", name.text)
	}
	if _, err := p.expect(':', "':'"); err != nil {
		return err
	}
	p.rule = !isTerminal(name.text)
	body, err := p.expansions(0)
	if err != nil {
		return err
	}
	return p.define(name.text, body)
}

// maxLarkDepth bounds the nesting of brackets.
const maxLarkDepth = 100

func (p *larkParser) expansions(depth int) (*gnode, error) {
	if depth > maxLarkDepth {
		return nil, p.errf("brackets nested deeper than %d", maxLarkDepth)
	}
	var alts []*gnode
	for {
		var items []*gnode
		for {
			it, ok, err := p.item(depth)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			items = append(items, it)
		}
		if p.peek().kind == '>' { // alias
			p.i++
			if _, err := p.expect('n', "an alias name"); err != nil {
				return nil, err
			}
		}
		alts = append(alts, seqOrEmpty(items))
		if p.peek().kind != '|' {
			return altNode(alts...), nil
		}
		p.i++
	}
}

// item reads an atom and its repetition; ok false where none begins.
func (p *larkParser) item(depth int) (*gnode, bool, error) {
	t := p.peek()
	var n *gnode
	switch t.kind {
	case 's':
		p.i++
		if p.peek().kind == ':' && p.peek().text == ".." {
			p.i++
			hi, err := p.expect('s', "a string after ..")
			if err != nil {
				return nil, false, err
			}
			if utf8.RuneCountInString(t.text) != 1 || utf8.RuneCountInString(hi.text) != 1 || t.flag != "" || hi.flag != "" {
				return nil, false, larkErr(p.src, t.pos, "a range of other than two single characters")
			}
			lo, _ := utf8.DecodeRuneInString(t.text)
			h, _ := utf8.DecodeRuneInString(hi.text)
			if h < lo {
				return nil, false, larkErr(p.src, t.pos, "an empty range")
			}
			n = classNode([]rune{lo, h}, false)
			break
		}
		switch t.flag {
		case "":
			n = &gnode{op: gLit, text: t.text}
		case "i":
			n = foldLiteral(t.text)
		default:
			return nil, false, ErrUnsupportedGrammar.Withf("lark: the string flag %q", t.flag)
		}
	case 'r':
		p.i++
		if t.flag != "" {
			return nil, false, ErrUnsupportedGrammar.Withf("lark: regular expression flags (%q)", t.flag)
		}
		re, err := regexNode(t.text)
		if err != nil {
			return nil, false, err
		}
		n = re
	case 'n':
		// a name followed by ':' (or '.' priority ':') begins the next
		// definition: only after a newline, which ended this one.
		p.i++
		n = &gnode{op: gRef, text: t.text}
		if !p.rule && !isTerminal(t.text) {
			return nil, false, larkErr(p.src, t.pos, "a terminal refers to rule %s", t.text)
		}
	case '(', '[':
		p.i++
		body, err := p.expansions(depth + 1)
		if err != nil {
			return nil, false, err
		}
		closing := byte(')')
		if t.kind == '[' {
			closing = ']'
		}
		if _, err := p.expect(closing, fmt.Sprintf("'%c'", closing)); err != nil {
			return nil, false, err
		}
		n = body
		if t.kind == '[' {
			n = &gnode{op: gRep, subs: []*gnode{body}, min: 0, max: 1}
		}
	default:
		return nil, false, nil
	}
	for {
		lo, hi := 0, -1
		switch p.peek().kind {
		case '?':
			hi = 1
		case '*':
		case '+':
			lo = 1
		case '~':
			p.i++
			a, err := p.count()
			if err != nil {
				return nil, false, err
			}
			lo, hi = a, a
			if p.peek().kind == ':' && p.peek().text == ".." {
				p.i++
				if hi, err = p.count(); err != nil {
					return nil, false, err
				}
			}
			p.i--
		case '{':
			p.i++
			a, err := p.count()
			if err != nil {
				return nil, false, err
			}
			lo, hi = a, a
			if p.peek().kind == ',' {
				p.i++
				if p.peek().kind == '}' {
					hi = -1
				} else if hi, err = p.count(); err != nil {
					return nil, false, err
				}
			}
			if p.peek().kind != '}' {
				return nil, false, p.errf("expecting '}'")
			}
		default:
			return n, true, nil
		}
		p.i++
		if hi >= 0 && hi < lo {
			return nil, false, p.errf("a repetition of %d to %d", lo, hi)
		}
		n = &gnode{op: gRep, subs: []*gnode{n}, min: lo, max: hi}
	}
}

func (p *larkParser) count() (int, error) {
	t, err := p.expect('d', "a number")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(t.text)
	if err != nil || n < 0 || n > maxRepeat {
		return 0, ErrUnsupportedGrammar.Withf("lark: a repetition count outside 0..%d", maxRepeat)
	}
	return n, nil
}

// foldLiteral is s matched without regard to case (Unicode simple folding).
func foldLiteral(s string) *gnode {
	var subs []*gnode
	for _, r := range s {
		rs := []rune{r, r}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			rs = append(rs, f, f)
		}
		if len(rs) == 2 {
			subs = append(subs, &gnode{op: gLit, text: string(r)})
		} else {
			subs = append(subs, classNode(rs, false))
		}
	}
	return seqOrEmpty(subs)
}

func (p *larkParser) directive() error {
	t := p.peek()
	p.i++
	switch t.text {
	case "%ignore":
		save := p.rule
		p.rule = false
		n, err := p.expansions(0)
		p.rule = save
		if err != nil {
			return err
		}
		p.ignores = append(p.ignores, n)
		return nil
	case "%import":
		return p.importCommon()
	}
	return ErrUnsupportedGrammar.Withf("lark: the directive %s", t.text)
}

// importCommon reads %import common.NAME [-> ALIAS] or %import common
// (A, B, …).
func (p *larkParser) importCommon() error {
	mod, err := p.expect('n', "a module name")
	if err != nil {
		return err
	}
	if mod.text != "common" {
		return ErrUnsupportedGrammar.Withf("lark: imports from %s (only common)", mod.text)
	}
	var names [][2]string // imported, as
	switch p.peek().kind {
	case '.':
		p.i++
		n, err := p.expect('n', "a name")
		if err != nil {
			return err
		}
		as := n.text
		if p.peek().kind == '>' {
			p.i++
			a, err := p.expect('n', "an alias")
			if err != nil {
				return err
			}
			as = a.text
		}
		names = append(names, [2]string{n.text, as})
	case '(':
		p.i++
		for {
			n, err := p.expect('n', "a name")
			if err != nil {
				return err
			}
			names = append(names, [2]string{n.text, n.text})
			if p.peek().kind != ',' {
				break
			}
			p.i++
		}
		if _, err := p.expect(')', "')'"); err != nil {
			return err
		}
	default:
		return p.errf("expecting .NAME or (NAMES)")
	}
	common, err := larkCommon()
	if err != nil {
		return err
	}
	for _, n := range names {
		if _, ok := common[n[0]]; !ok {
			return ErrUnsupportedGrammar.Withf("lark: common.%s is not among the common terminals taken", n[0])
		}
		if isTerminal(n[0]) != isTerminal(n[1]) {
			return p.errf("an alias of another kind than %s", n[0])
		}
		if err := p.define(n[1], &gnode{op: gRef, text: "common." + n[0]}); err != nil {
			return err
		}
	}
	for name, n := range common {
		if _, ok := p.defs.rules["common."+name]; !ok {
			p.defs.rules["common."+name] = n
		}
	}
	return nil
}

// commonLark is the part of Lark's common.lark that %import common takes,
// in the subset above (ESCAPED_STRING: Lark's lazy regular expression
// written as the language it matches).
const commonLark = `
DIGIT: "0".."9"
HEXDIGIT: "a".."f"|"A".."F"|DIGIT
INT: DIGIT+
SIGNED_INT: ["+"|"-"] INT
DECIMAL: INT "." INT? | "." INT
_EXP: ("e"|"E") SIGNED_INT
FLOAT: INT _EXP | DECIMAL _EXP?
SIGNED_FLOAT: ["+"|"-"] FLOAT
NUMBER: FLOAT | INT
SIGNED_NUMBER: ["+"|"-"] NUMBER
ESCAPED_STRING: /"([^"\\\n]|\\[^\n])*"/
LCASE_LETTER: "a".."z"
UCASE_LETTER: "A".."Z"
LETTER: UCASE_LETTER | LCASE_LETTER
WORD: LETTER+
CNAME: ("_"|LETTER) ("_"|LETTER|DIGIT)*
WS_INLINE: (" "|/\t/)+
WS: /[ \t\f\r\n]/+
CR: /\r/
LF: /\n/
NEWLINE: (CR? LF)+
SH_COMMENT: /#[^\n]*/
CPP_COMMENT: /\/\/[^\n]*/
C_COMMENT: "/*" /([^*]|\*+[^*\/])*/ /\*+/ "/"
`

// larkCommon parses commonLark, its names prefixed "common.".
func larkCommon() (map[string]*gnode, error) {
	toks, err := larkLex(commonLark)
	if err != nil {
		return nil, err
	}
	p := &larkParser{src: commonLark, toks: toks, defs: &gdefs{rules: map[string]*gnode{}}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	var prefix func(n *gnode)
	prefix = func(n *gnode) {
		if n.op == gRef {
			n.text = "common." + n.text
		}
		for _, s := range n.subs {
			prefix(s)
		}
	}
	for _, n := range p.defs.rules {
		prefix(n)
	}
	return p.defs.rules, nil
}
