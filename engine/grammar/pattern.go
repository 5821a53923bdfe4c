package grammar

import (
	"fmt"
	"regexp/syntax"
	"sort"
	"strings"
	"unicode/utf8"
)

// ECMAScript regular expressions (JSON Schema's pattern and format) as
// grammar rules over a JSON string's bytes.
//
// A pattern is translated to Go's regexp/syntax dialect, construct by
// construct, where the two mean the same; what differs or cannot be an
// automaton is refused by name (backreferences, lookaround, word
// boundaries, inline flags, \p without the u flag, …). Three ECMAScript
// readings are made explicit: "." excludes every line terminator (\n, \r,
// U+2028, U+2029); \s and \S are ECMAScript's whitespace set; a character
// class matches only characters of the Basic Multilingual Plane, where a
// UTF-16 code unit (what a pattern without the u flag counts) and a code
// point are the same, so that a class never admits a character that a
// UTF-16 reading would see as two. A pattern is a search: unanchored, any
// characters may stand before and after the match; ^ and $ anchor it at
// the start and end of a top-level branch only (elsewhere refused).

// ecmaSpace is ECMAScript's WhiteSpace and LineTerminator set (\s).
const ecmaSpace = `\t\n\x{0B}\f\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}`

// ecmaToGo rewrites an ECMAScript pattern (no flags) as Go regexp/syntax
// source with the same meaning, or names the construct it cannot.
func ecmaToGo(src string) (string, error) {
	for _, r := range src {
		if r > 0xFFFF {
			return "", fmt.Errorf("a character outside the Basic Multilingual Plane")
		}
	}
	var w strings.Builder
	inClass := false
	classStart := false
	for i := 0; i < len(src); i++ {
		c := src[i]
		if classStart {
			classStart = false
			if c == ']' {
				return "", fmt.Errorf("an empty class []")
			}
			if c == '^' && i+1 < len(src) && src[i+1] == ']' {
				return "", fmt.Errorf("the class [^]")
			}
		}
		switch c {
		case '\\':
			if i+1 >= len(src) {
				return "", fmt.Errorf("a trailing backslash")
			}
			i++
			e := src[i]
			switch {
			case e == 'd' || e == 'D' || e == 'w' || e == 'W' || e == 't' || e == 'n' || e == 'r' || e == 'f' || e == 'v':
				w.WriteByte('\\')
				w.WriteByte(e)
			case e == 's':
				if inClass {
					w.WriteString(ecmaSpace)
				} else {
					w.WriteString("[" + ecmaSpace + "]")
				}
			case e == 'S':
				if inClass {
					return "", fmt.Errorf(`\S inside a class`)
				}
				w.WriteString("[^" + ecmaSpace + "]")
			case e == 'b':
				if !inClass {
					return "", fmt.Errorf(`a word boundary \b`)
				}
				w.WriteString(`\x08`)
			case e == 'B':
				return "", fmt.Errorf(`a word boundary \B`)
			case e == '0' && (i+1 >= len(src) || src[i+1] < '0' || src[i+1] > '9'):
				w.WriteString(`\x00`)
			case e >= '1' && e <= '9':
				if inClass {
					return "", fmt.Errorf(`an octal escape \%c`, e)
				}
				return "", fmt.Errorf(`a backreference \%c`, e)
			case e == 'k':
				return "", fmt.Errorf(`a backreference \k`)
			case e == 'x':
				if i+2 >= len(src) || !isHex(src[i+1]) || !isHex(src[i+2]) {
					return "", fmt.Errorf(`a malformed \x escape`)
				}
				w.WriteString(`\x{` + src[i+1:i+3] + `}`)
				i += 2
			case e == 'u':
				if i+4 >= len(src) || !isHex(src[i+1]) || !isHex(src[i+2]) || !isHex(src[i+3]) || !isHex(src[i+4]) {
					return "", fmt.Errorf(`a \u escape without four hex digits`)
				}
				h := src[i+1 : i+5]
				var r rune
				fmt.Sscanf(h, "%x", &r)
				if r >= 0xD800 && r <= 0xDFFF {
					return "", fmt.Errorf(`a surrogate \u%s`, h)
				}
				w.WriteString(`\x{` + h + `}`)
				i += 4
			case e < utf8.RuneSelf && !isAlnum(e):
				// an escaped punctuation or space character is itself
				if e == ' ' || e == '_' {
					w.WriteByte(e)
				} else {
					w.WriteByte('\\')
					w.WriteByte(e)
				}
			default:
				return "", fmt.Errorf(`the escape \%c`, e)
			}
		case '[':
			if inClass {
				w.WriteString(`\[`) // a literal [ inside a class
				continue
			}
			inClass, classStart = true, true
			w.WriteByte('[')
			if i+1 < len(src) && src[i+1] == '^' {
				w.WriteByte('^')
				i++
				classStart = true
			}
		case ']':
			if inClass {
				inClass = false
				w.WriteByte(']')
			} else {
				w.WriteString(`\]`)
			}
		case '.':
			if inClass {
				w.WriteByte('.')
			} else {
				w.WriteString(`[^\n\r\x{2028}\x{2029}]`)
			}
		case '(':
			if inClass {
				w.WriteString(`\(`)
				continue
			}
			if i+1 < len(src) && src[i+1] == '?' {
				rest := src[i+2:]
				switch {
				case strings.HasPrefix(rest, ":"):
					w.WriteString("(?:")
					i += 2
				case strings.HasPrefix(rest, "=") || strings.HasPrefix(rest, "!"):
					return "", fmt.Errorf("a lookahead")
				case strings.HasPrefix(rest, "<=") || strings.HasPrefix(rest, "<!"):
					return "", fmt.Errorf("a lookbehind")
				case strings.HasPrefix(rest, "<"):
					w.WriteString("(?P<")
					i += 2
				default:
					return "", fmt.Errorf("a group (?%s", firstRune(rest))
				}
				continue
			}
			w.WriteByte('(')
		case '{':
			if inClass {
				w.WriteString(`\{`)
				continue
			}
			// A quantifier {n}, {n,} or {n,m}; otherwise a literal brace,
			// as ECMAScript reads it without the u flag.
			j := i + 1
			for j < len(src) && (src[j] >= '0' && src[j] <= '9' || src[j] == ',') {
				j++
			}
			body := src[i+1 : j]
			if j < len(src) && src[j] == '}' && body != "" && body[0] != ',' && strings.Count(body, ",") <= 1 {
				w.WriteString(src[i : j+1])
				if j+1 < len(src) && src[j+1] == '?' {
					j++ // lazy: the same language
				}
				i = j
				continue
			}
			w.WriteString(`\{`)
		case '}':
			w.WriteString(`\}`)
		case '*', '+', '?':
			w.WriteByte(c)
			if !inClass && i+1 < len(src) && src[i+1] == '?' {
				i++ // lazy: the same language
			}
		default:
			w.WriteByte(c)
		}
	}
	if inClass {
		return "", fmt.Errorf("an unterminated class")
	}
	return w.String(), nil
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func firstRune(s string) string {
	if s == "" {
		return ""
	}
	r, _ := utf8.DecodeRuneInString(s)
	return string(r)
}

// maxPatternLen bounds the source of a pattern compiled to rules.
const maxPatternLen = 4096

// regexString returns a rule for a JSON string whose value a regular
// expression (Go syntax, already translated) matches; search: unanchored
// branches get any characters before or after. key names the rule (the
// same key shares rules).
// limit ≥ 0 takes unbounded repetitions at most limit times.
func (b *builder) regexString(key, goSrc string, limit int) (int, error) {
	if r, ok := b.shared["re:"+key]; ok {
		return r, nil
	}
	re, err := syntax.Parse(goSrc, syntax.Perl)
	if err != nil {
		return 0, fmt.Errorf("a pattern Go's regexp/syntax cannot read (%v)", err)
	}
	rc := &reCompiler{b: b, name: "re:" + key, limit: limit}
	// Top-level branches, each maybe anchored at either end.
	branches := []*syntax.Regexp{re}
	for len(branches) == 1 && (branches[0].Op == syntax.OpCapture || branches[0].Op == syntax.OpAlternate) {
		if branches[0].Op == syntax.OpCapture {
			branches = branches[0].Sub
		} else {
			branches = branches[0].Sub
		}
	}
	var anyChars int
	if limit >= 0 {
		anyChars = b.repeat(fmt.Sprintf("any-chars{0,%d}", limit), one(ref(b.char())), nil, 0, limit)
	} else {
		anyChars = b.repeat("any-chars", one(ref(b.char())), nil, 0, -1)
	}
	var alts [][]elem
	for _, br := range branches {
		parts := []*syntax.Regexp{br}
		if br.Op == syntax.OpConcat {
			parts = br.Sub
		}
		start, end := false, false
		for len(parts) > 0 && parts[0].Op == syntax.OpBeginText {
			start, parts = true, parts[1:]
		}
		for len(parts) > 0 && parts[len(parts)-1].Op == syntax.OpEndText {
			end, parts = true, parts[:len(parts)-1]
		}
		var seq []elem
		if !start {
			seq = append(seq, ref(anyChars))
		}
		for _, p := range parts {
			e, err := rc.elems(p)
			if err != nil {
				return 0, err
			}
			seq = append(seq, e...)
		}
		if !end {
			seq = append(seq, ref(anyChars))
		}
		alts = append(alts, seq)
	}
	if b.tooBig {
		return 0, fmt.Errorf("a pattern whose automaton is too large")
	}
	body := b.add(rc.name+"-body", alts...)
	r := b.add(rc.name, cat(lit(`"`), one(ref(body)), lit(`"`)))
	b.rules[r].leaf = true
	b.shared["re:"+key] = r
	return r, nil
}

type reCompiler struct {
	b     *builder
	name  string
	n     int
	limit int // ≥ 0: unbounded repetitions taken at most this many times
}

func (rc *reCompiler) rule(alts ...[]elem) int {
	rc.n++
	return rc.b.add(fmt.Sprintf("%s-%d", rc.name, rc.n), alts...)
}

// elems: the grammar of one regexp node, as elements of an alternative.
func (rc *reCompiler) elems(re *syntax.Regexp) ([]elem, error) {
	if rc.b.tooBig {
		return nil, fmt.Errorf("a pattern whose automaton is too large")
	}
	if re.Flags&syntax.FoldCase != 0 && (re.Op == syntax.OpLiteral || re.Op == syntax.OpCharClass) {
		return nil, fmt.Errorf("case folding")
	}
	switch re.Op {
	case syntax.OpEmptyMatch:
		return nil, nil
	case syntax.OpNoMatch:
		return one(ref(rc.rule())), nil
	case syntax.OpLiteral:
		var out []elem
		for _, r := range re.Rune {
			out = append(out, ref(rc.class([]rune{r, r}, false)))
		}
		return out, nil
	case syntax.OpCharClass:
		return one(ref(rc.class(re.Rune, true))), nil
	case syntax.OpAnyCharNotNL:
		return one(ref(rc.class([]rune{0, '\n' - 1, '\n' + 1, utf8.MaxRune}, true))), nil
	case syntax.OpAnyChar:
		return one(ref(rc.class([]rune{0, utf8.MaxRune}, true))), nil
	case syntax.OpCapture:
		return rc.elems(re.Sub[0])
	case syntax.OpConcat:
		var out []elem
		for _, s := range re.Sub {
			e, err := rc.elems(s)
			if err != nil {
				return nil, err
			}
			out = append(out, e...)
		}
		return out, nil
	case syntax.OpAlternate:
		var alts [][]elem
		for _, s := range re.Sub {
			e, err := rc.elems(s)
			if err != nil {
				return nil, err
			}
			alts = append(alts, e)
		}
		return one(ref(rc.rule(alts...))), nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		unbounded := re.Op == syntax.OpStar || re.Op == syntax.OpPlus || re.Op == syntax.OpRepeat && re.Max < 0
		if lo, _ := reLen(re.Sub[0], -1); unbounded && lo == 0 {
			// An unbounded repetition of what may be empty: (Y*)*, (Y+)*,
			// (Y?)* and their + forms are Y*; other shapes are refused
			// (as a grammar they loop without consuming).
			in := re.Sub[0]
			for in.Op == syntax.OpCapture {
				in = in.Sub[0]
			}
			if in.Op != syntax.OpStar && in.Op != syntax.OpPlus && in.Op != syntax.OpQuest {
				return nil, fmt.Errorf("an unbounded repetition of something that may be empty")
			}
			if l, _ := reLen(in.Sub[0], -1); l == 0 {
				return nil, fmt.Errorf("an unbounded repetition of something that may be empty")
			}
			return rc.elems(&syntax.Regexp{Op: syntax.OpStar, Flags: re.Flags, Sub: []*syntax.Regexp{in.Sub[0]}})
		}
		item, err := rc.elems(re.Sub[0])
		if err != nil {
			return nil, err
		}
		if len(item) == 0 {
			return nil, nil
		}
		lo, hi := 0, -1
		switch re.Op {
		case syntax.OpPlus:
			lo = 1
		case syntax.OpQuest:
			hi = 1
		case syntax.OpRepeat:
			lo, hi = re.Min, re.Max
		}
		if hi < 0 && rc.limit >= 0 {
			hi = max(rc.limit, lo, 1)
		}
		if lo > maxRepeat || hi > maxRepeat {
			return nil, fmt.Errorf("a repetition above %d", maxRepeat)
		}
		rc.n++
		return one(ref(rc.b.repeat(fmt.Sprintf("%s-rep%d", rc.name, rc.n), item, nil, lo, hi))), nil
	case syntax.OpBeginText, syntax.OpEndText, syntax.OpBeginLine, syntax.OpEndLine:
		return nil, fmt.Errorf("an anchor (^ or $) inside the pattern")
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return nil, fmt.Errorf("a word boundary")
	}
	return nil, fmt.Errorf("the construct %v", re.Op)
}

// class returns a rule for one JSON string character whose code point is
// in ranges (pairs lo, hi); bmp limits it to the Basic Multilingual Plane.
// A character is written raw where JSON allows (UTF-8), '"' and '\' as
// their escapes, control characters as short or \u00XX escapes, and every
// character below U+0100 may also be written \u00XX (either case of hex).
func (rc *reCompiler) class(ranges []rune, bmp bool) int {
	var rs [][2]rune
	for i := 0; i+1 < len(ranges); i += 2 {
		lo, hi := ranges[i], ranges[i+1]
		if bmp && hi > 0xFFFF {
			hi = 0xFFFF
		}
		// no surrogates
		if lo <= 0xDFFF && hi >= 0xD800 {
			if lo < 0xD800 {
				rs = append(rs, [2]rune{lo, 0xD7FF})
			}
			lo = 0xE000
		}
		if lo <= hi {
			rs = append(rs, [2]rune{lo, hi})
		}
	}
	sort.Slice(rs, func(i, j int) bool { return rs[i][0] < rs[j][0] })
	var key strings.Builder
	for _, r := range rs {
		fmt.Fprintf(&key, "%x-%x,", r[0], r[1])
	}
	return rc.b.once("class:"+key.String(), false, func(int) [][]elem {
		var alts [][]elem
		var ascii [256]bool // code points below 256 in the set
		for _, r := range rs {
			for c := r[0]; c <= r[1] && c < 256; c++ {
				ascii[c] = true
			}
			lo := max(r[0], 128)
			if lo <= r[1] {
				utf8Ranges(lo, r[1], func(seq [][2]byte) {
					var e []elem
					for _, p := range seq {
						e = append(e, terms(int(p[0]), int(p[1])))
					}
					alts = append(alts, e)
				})
			}
		}
		var raw []int
		short := map[rune]byte{'"': '"', '\\': '\\', '/': '/', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}
		var esc []int
		for c := rune(0); c < 128; c++ {
			if !ascii[c] {
				continue
			}
			if c >= 0x20 && c != '"' && c != '\\' {
				raw = append(raw, int(c), int(c))
			}
			if s, ok := short[c]; ok {
				esc = append(esc, int(s), int(s))
			}
		}
		if len(raw) > 0 {
			alts = append(alts, one(terms(raw...)))
		}
		if len(esc) > 0 {
			alts = append(alts, []elem{terms('\\', '\\'), terms(esc...)})
		}
		// \u00XX: per high nibble, the low nibbles in the set
		for hi := 0; hi < 16; hi++ {
			var lows []int
			for lo := 0; lo < 16; lo++ {
				if ascii[hi*16+lo] {
					d := "0123456789abcdef"[lo]
					lows = append(lows, int(d), int(d))
					if lo >= 10 {
						u := "0123456789ABCDEF"[lo]
						lows = append(lows, int(u), int(u))
					}
				}
			}
			if len(lows) > 0 {
				hd, hu := int("0123456789abcdef"[hi]), int("0123456789ABCDEF"[hi])
				alts = append(alts, cat(lit(`\u00`), []elem{terms(hd, hd, hu, hu), terms(lows...)}))
			}
		}
		return alts
	})
}

// utf8Ranges calls emit with byte-range sequences whose UTF-8 sequences
// are exactly those of the code points lo..hi (no surrogates inside).
func utf8Ranges(lo, hi rune, emit func([][2]byte)) {
	for _, edge := range []rune{0x7F, 0x7FF, 0xFFFF} {
		if lo <= edge && hi > edge {
			utf8Ranges(lo, edge, emit)
			utf8Ranges(edge+1, hi, emit)
			return
		}
	}
	n := utf8.RuneLen(lo)
	for i := 1; i < n; i++ {
		m := rune(1)<<(6*i) - 1
		if lo&^m != hi&^m {
			if lo&m != 0 {
				utf8Ranges(lo, lo|m, emit)
				utf8Ranges((lo|m)+1, hi, emit)
				return
			}
			if hi&m != m {
				utf8Ranges(lo, (hi&^m)-1, emit)
				utf8Ranges(hi&^m, hi, emit)
				return
			}
		}
	}
	a := utf8.AppendRune(nil, lo)
	z := utf8.AppendRune(nil, hi)
	seq := make([][2]byte, len(a))
	for i := range a {
		seq[i] = [2]byte{a[i], z[i]}
	}
	emit(seq)
}
