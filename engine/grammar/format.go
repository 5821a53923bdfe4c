package grammar

import (
	"errors"
	"regexp"
	"regexp/syntax"
	"slices"
	"unicode/utf8"
)

// formats are the string formats enforced, each as a regular expression
// (Go syntax, whole string) whose language is a subset of what the
// format's RFC allows: a grammar may generate less than a format admits,
// never more. date, time and date-time are RFC 3339's (days per month and
// leap years exact, no leap second, offset required, upper-case T and Z);
// duration is RFC 3339 appendix A's; email a dot-atom local part of at
// most 62 characters at a host name; hostname RFC 1123 labels of up to 31
// characters without consecutive hyphens, at most 7 labels (223
// characters); uri an RFC 3986 URI: a scheme, then an authority (a
// registered name, maybe empty, and an optional port) and an absolute
// path, or an absolute, rootless or empty path, then query and fragment.
var formats = func() map[string]string {
	year := `\d{4}`
	leap := `(?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)`
	date := `(?:` + year + `-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))|` + leap + `-02-29)`
	offset := `(?:Z|[+-](?:[01]\d|2[0-3]):[0-5]\d)`
	tm := `(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?` + offset
	durTime := `T(?:\d{1,9}H(?:\d{1,9}M(?:\d{1,9}S)?)?|\d{1,9}M(?:\d{1,9}S)?|\d{1,9}S)`
	durDate := `(?:\d{1,9}D|\d{1,9}M(?:\d{1,9}D)?|\d{1,9}Y(?:\d{1,9}M(?:\d{1,9}D)?)?)`
	label := `[A-Za-z0-9](?:-?[A-Za-z0-9]){0,30}`
	host := label + `(?:\.` + label + `){0,6}`
	h := `[0-9a-fA-F]{1,4}`
	pchar := `(?:[A-Za-z0-9._~!$&'()*+,;=:@-]|%[0-9A-Fa-f]{2})`
	regName := `(?:[A-Za-z0-9._~!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*`
	return map[string]string{
		"date":      date,
		"time":      tm,
		"date-time": date + `T` + tm,
		"duration":  `P(?:` + durDate + `(?:` + durTime + `)?|` + durTime + `|\d{1,9}W)`,
		"uuid":      `[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`,
		"ipv4":      `(?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)`,
		"ipv6": `(?:(?:` + h + `:){7}` + h + `|(?:` + h + `:){1,7}:|(?:` + h + `:){1,6}:` + h +
			`|(?:` + h + `:){1,5}(?::` + h + `){1,2}|(?:` + h + `:){1,4}(?::` + h + `){1,3}|(?:` + h + `:){1,3}(?::` + h + `){1,4}` +
			`|(?:` + h + `:){1,2}(?::` + h + `){1,5}|` + h + `:(?::` + h + `){1,6}|:(?:(?::` + h + `){1,7}|:))`,
		"hostname": host,
		"email":    `[A-Za-z0-9_%+-]{1,20}(?:\.[A-Za-z0-9_%+-]{1,20}){0,2}@` + label + `(?:\.` + label + `){0,5}`,
		"uri": `[A-Za-z][A-Za-z0-9+.-]*:(?://` + regName + `(?::\d{1,5})?(?:/` + pchar + `*)*|/(?:` + pchar + `+(?:/` + pchar + `*)*)?|` + pchar + `+(?:/` + pchar + `*)*)?` +
			`(?:\?(?:` + pchar + `|[/?])*)?(?:#(?:` + pchar + `|[/?])*)?`,
	}
}()

// refusedFormats are the formats of JSON Schema's drafts that are not
// enforced: refused by name. Any other format name is no draft's and
// asserts nothing (validators ignore formats they do not know).
var refusedFormats = map[string]bool{
	"uri-reference": true, "iri": true, "iri-reference": true, "uri-template": true,
	"idn-email": true, "idn-hostname": true, "json-pointer": true,
	"relative-json-pointer": true, "regex": true, "host-name": false,
	"ip-address": true, "color": false, "utc-millisec": true, "phone": false,
}

// stringConstraint is what a string schema's pattern, format, minLength
// and maxLength say: a regexp for each (Go syntax, the same language as
// the grammar) and the length bounds.
type stringConstraint struct {
	goPattern, pattern string // translated and original pattern ("" none)
	format             string // enforced format name ("" none)
	lo, hi             int
	exclude            []string // values not admitted (a not beside them)
}

func (c *schemaCompiler) readString(s object, path string) (*stringConstraint, error) {
	sc := &stringConstraint{}
	var err error
	if sc.lo, sc.hi, err = boundsUpTo(s, path, "minLength", "maxLength", -1); err != nil {
		return nil, err
	}
	if p, ok := s.get("pattern"); ok {
		src, ok := p.(string)
		if !ok {
			return nil, bad(path, "pattern must be a string")
		}
		if len(src) > maxPatternLen {
			return nil, unsupported(path, "keyword %q longer than %d bytes", "pattern", maxPatternLen)
		}
		g, err := ecmaToGo(src)
		if err != nil {
			return nil, unsupported(path, "keyword %q with %v", "pattern", err)
		}
		if _, err := syntax.Parse(g, syntax.Perl); err != nil {
			return nil, unsupported(path, "keyword %q that Go's regexp/syntax cannot read", "pattern")
		}
		sc.goPattern, sc.pattern = g, src
	}
	sc.exclude = notStrings(s)
	if f, ok := s.get("format"); ok {
		name, ok := f.(string)
		if !ok {
			return nil, bad(path, "format must be a string")
		}
		if _, known := formats[name]; known {
			sc.format = name
		} else if refusedFormats[name] {
			return nil, unsupported(path, "keyword %q %q", "format", name)
		}
	}
	return sc, nil
}

// stringType: the rule of a string schema.
func (c *schemaCompiler) stringType(s object, path string) (int, error) {
	sc, err := c.readString(s, path)
	if err != nil {
		return 0, err
	}
	if len(sc.exclude) > 0 {
		// Every string but those: the product of the expressions'
		// automata and the exclusion's, run beside the count.
		var srcs []string
		if sc.goPattern != "" {
			srcs = append(srcs, sc.goPattern)
		}
		if sc.format != "" {
			srcs = append(srcs, `^(?:`+formats[sc.format]+`)$`)
		}
		r, err := c.b.boundedRegexString("not:"+sc.format+"&"+sc.goPattern, srcs, sc.lo, sc.hi, sc.exclude...)
		if errors.Is(err, errNoString) {
			return 0, unsatisfiable{bad(path, "no string of the keywords beside not is left")}
		}
		if err != nil {
			return 0, unsupported(path, "keyword %q with %v", "not", err)
		}
		return r, nil
	}
	if sc.goPattern == "" && sc.format == "" {
		if sc.lo > maxRepeat {
			return 0, unsupported(path, "minLength above %d", maxRepeat)
		}
		// A maxLength above the bound admits every string of at most
		// maxRepeat characters: those are generated.
		return c.b.str(sc.lo, min(sc.hi, maxRepeat)), nil
	}
	if sc.goPattern != "" && sc.format != "" {
		// Both: the product of the two automata, strings both admit.
		fsrc := `^(?:` + formats[sc.format] + `)$`
		r, err := c.b.boundedRegexString("format:"+sc.format+"&pattern:"+sc.goPattern, []string{fsrc, sc.goPattern}, sc.lo, sc.hi)
		if errors.Is(err, errNoString) {
			return 0, unsatisfiable{bad(path, "no string of the format %q matches the pattern at an allowed length", sc.format)}
		}
		if err != nil {
			return 0, unsupported(path, "keyword %q beside pattern with %v", "format", err)
		}
		return r, nil
	}
	key, src, search := "pattern:"+sc.goPattern, sc.goPattern, true
	if sc.format != "" {
		key, src, search = "format:"+sc.format, `^(?:`+formats[sc.format]+`)$`, false
	}
	re, err := syntax.Parse(src, syntax.Perl)
	if err != nil {
		return 0, unsupported(path, "keyword %q that Go's regexp/syntax cannot read", "pattern")
	}
	// Where the length keywords follow from the expression (every string
	// it admits has an allowed length) the expression is the grammar;
	// otherwise the expression runs as an automaton beside a count of
	// the characters (boundedRegexString): exact either way.
	what := "pattern"
	if sc.format != "" {
		what = "format"
	}
	padded := search && !anchoredBoth(re)
	lo, hi := reLen(re, -1)
	if padded {
		hi = -1
	}
	if sc.lo > lo || sc.hi >= 0 && (hi < 0 || hi > sc.hi) {
		r, err := c.b.boundedRegexString(key, []string{src}, sc.lo, sc.hi)
		if errors.Is(err, errNoString) {
			return 0, unsatisfiable{bad(path, "no string of the lengths minLength and maxLength allow matches the %s", what)}
		}
		if err != nil {
			return 0, unsupported(path, "keyword %q with %v", what, err)
		}
		return r, nil
	}
	r, err := c.b.regexString(key, src, -1)
	if err != nil {
		kw := "pattern"
		if sc.format != "" {
			kw = "format"
		}
		return 0, unsupported(path, "keyword %q with %v", kw, err)
	}
	return r, nil
}

// admits reports whether string value v satisfies the constraint (for
// enum and const values beside pattern, format and the length keywords).
// A value outside the Basic Multilingual Plane is refused where a pattern
// is present (ECMAScript reads it as two code units).
func (sc *stringConstraint) admits(v string) bool {
	if slices.Contains(sc.exclude, v) {
		return false
	}
	n := utf8.RuneCountInString(v)
	if n < sc.lo || sc.hi >= 0 && n > sc.hi {
		return false
	}
	if sc.goPattern != "" {
		for _, r := range v {
			if r > 0xFFFF {
				return false
			}
		}
		re, err := regexp.Compile(sc.goPattern)
		if err != nil || !re.MatchString(v) {
			return false
		}
	}
	if sc.format != "" {
		re, err := regexp.Compile(`^(?:` + formats[sc.format] + `)$`)
		if err != nil || !re.MatchString(v) {
			return false
		}
	}
	return true
}

func anchoredBoth(re *syntax.Regexp) bool {
	for re.Op == syntax.OpCapture && len(re.Sub) == 1 {
		re = re.Sub[0]
	}
	branches := []*syntax.Regexp{re}
	if re.Op == syntax.OpAlternate {
		branches = re.Sub
	}
	for _, br := range branches {
		for br.Op == syntax.OpCapture && len(br.Sub) == 1 {
			br = br.Sub[0]
		}
		if br.Op != syntax.OpConcat || len(br.Sub) < 2 || br.Sub[0].Op != syntax.OpBeginText || br.Sub[len(br.Sub)-1].Op != syntax.OpEndText {
			return false
		}
	}
	return true
}

// reLen: the least and most characters a match of re has (-1: no bound),
// its unbounded repetitions taken at most limit times (limit < 0: as they
// are).
func reLen(re *syntax.Regexp, limit int) (int, int) {
	add := func(a, b int) int {
		if a < 0 || b < 0 {
			return -1
		}
		return a + b
	}
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune), len(re.Rune)
	case syntax.OpCharClass, syntax.OpAnyChar, syntax.OpAnyCharNotNL:
		return 1, 1
	case syntax.OpCapture:
		return reLen(re.Sub[0], limit)
	case syntax.OpConcat:
		lo, hi := 0, 0
		for _, s := range re.Sub {
			l, h := reLen(s, limit)
			lo, hi = lo+l, add(hi, h)
		}
		return lo, hi
	case syntax.OpAlternate:
		lo, hi := -1, 0
		for _, s := range re.Sub {
			l, h := reLen(s, limit)
			if lo < 0 || l < lo {
				lo = l
			}
			if hi >= 0 && (h < 0 || h > hi) {
				hi = h
			}
		}
		return max(lo, 0), hi
	case syntax.OpStar, syntax.OpPlus:
		l, h := reLen(re.Sub[0], limit)
		if re.Op == syntax.OpStar {
			l = 0
		}
		if limit < 0 || h < 0 {
			return l, -1
		}
		return l, h * max(limit, 1)
	case syntax.OpQuest:
		_, h := reLen(re.Sub[0], limit)
		return 0, h
	case syntax.OpRepeat:
		l, h := reLen(re.Sub[0], limit)
		n := re.Max
		if n < 0 && limit >= 0 {
			n = max(limit, re.Min, 1)
		}
		hi := -1
		if n >= 0 && h >= 0 {
			hi = h * n
		}
		return l * re.Min, hi
	}
	return 0, 0 // empty-width
}

// enumString: whether enum or const value x passes the string keywords
// beside it (true for values that are not strings).
func enumString(sc *stringConstraint, x any) bool {
	s, ok := x.(string)
	return !ok || sc == nil || sc.admits(s)
}
