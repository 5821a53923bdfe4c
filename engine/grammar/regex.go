package grammar

import (
	"regexp/syntax"
	"unicode/utf8"
)

// regexNode parses a regular expression that a whole text must match
// (ECMAScript's dialect, as JSON Schema's pattern: ecmaToGo), anchored at
// both ends: a leading ^ and a trailing $ change nothing; anchors
// elsewhere, backreferences, lookaround, word boundaries and inline flags
// are refused by name. Errors: ErrUnsupportedGrammar, ErrBadGrammar.
func regexNode(src string) (*gnode, error) {
	goSrc, err := ecmaToGo(src)
	if err != nil {
		return nil, ErrUnsupportedGrammar.Withf("regex: %v", err)
	}
	re, err := syntax.Parse(goSrc, syntax.Perl)
	if err != nil {
		return nil, ErrBadGrammar.Withf("regex: not a regular expression (%v)", errCode(err))
	}
	// Anchors at the edges of each top-level branch say what whole-text
	// matching means already.
	strip := func(r *syntax.Regexp) *syntax.Regexp {
		if r.Op != syntax.OpConcat {
			if r.Op == syntax.OpBeginText || r.Op == syntax.OpEndText {
				return &syntax.Regexp{Op: syntax.OpEmptyMatch}
			}
			return r
		}
		parts := r.Sub
		for len(parts) > 0 && parts[0].Op == syntax.OpBeginText {
			parts = parts[1:]
		}
		for len(parts) > 0 && parts[len(parts)-1].Op == syntax.OpEndText {
			parts = parts[:len(parts)-1]
		}
		return &syntax.Regexp{Op: syntax.OpConcat, Sub: parts, Flags: r.Flags}
	}
	for re.Op == syntax.OpCapture {
		re = re.Sub[0]
	}
	if re.Op == syntax.OpAlternate {
		subs := make([]*syntax.Regexp, len(re.Sub))
		for i, s := range re.Sub {
			subs[i] = strip(s)
		}
		re = &syntax.Regexp{Op: syntax.OpAlternate, Sub: subs, Flags: re.Flags}
	} else {
		re = strip(re)
	}
	return reNode(re)
}

// errCode is the syntax error's code ("missing closing )", …), without the
// expression's text.
func errCode(err error) string {
	if e, ok := err.(*syntax.Error); ok {
		return string(e.Code)
	}
	return "malformed"
}

// reNode is the gnode of a parsed regular expression.
func reNode(re *syntax.Regexp) (*gnode, error) {
	if re.Flags&syntax.FoldCase != 0 && (re.Op == syntax.OpLiteral || re.Op == syntax.OpCharClass) {
		return nil, ErrUnsupportedGrammar.Withf("regex: case folding")
	}
	switch re.Op {
	case syntax.OpEmptyMatch:
		return &gnode{op: gLit}, nil
	case syntax.OpNoMatch:
		return classNode(nil, false), nil
	case syntax.OpLiteral:
		return &gnode{op: gLit, text: string(re.Rune)}, nil
	case syntax.OpCharClass:
		return classNode(re.Rune, false), nil
	case syntax.OpAnyCharNotNL:
		return classNode([]rune{'\n', '\n'}, true), nil
	case syntax.OpAnyChar:
		return classNode([]rune{0, utf8.MaxRune}, false), nil
	case syntax.OpCapture:
		return reNode(re.Sub[0])
	case syntax.OpConcat, syntax.OpAlternate:
		subs := make([]*gnode, len(re.Sub))
		for i, s := range re.Sub {
			n, err := reNode(s)
			if err != nil {
				return nil, err
			}
			subs[i] = n
		}
		if re.Op == syntax.OpConcat {
			if len(subs) == 0 {
				return &gnode{op: gLit}, nil
			}
			return seqNode(subs...), nil
		}
		return altNode(subs...), nil
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		item, err := reNode(re.Sub[0])
		if err != nil {
			return nil, err
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
		if lo > maxRepeat || hi > maxRepeat {
			return nil, ErrUnsupportedGrammar.Withf("regex: a repetition above %d", maxRepeat)
		}
		return &gnode{op: gRep, subs: []*gnode{item}, min: lo, max: hi}, nil
	case syntax.OpBeginText, syntax.OpEndText, syntax.OpBeginLine, syntax.OpEndLine:
		return nil, ErrUnsupportedGrammar.Withf("regex: an anchor (^ or $) inside the expression")
	case syntax.OpWordBoundary, syntax.OpNoWordBoundary:
		return nil, ErrUnsupportedGrammar.Withf("regex: a word boundary")
	}
	return nil, ErrUnsupportedGrammar.Withf("regex: the construct %v", re.Op)
}
