package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Canonicalize returns the RFC 8785 (JSON Canonicalization Scheme) form of
// the JSON text in. It is strict where RFC 8785 builds on I-JSON (RFC 7493):
// invalid UTF-8, lone surrogates, duplicate object keys, numbers outside the
// IEEE 754 double range and trailing data are refused with ErrNotCanonical.
//
// The output sorts object members by the UTF-16 code units of their names,
// writes no insignificant whitespace, escapes only what JSON requires (with
// lowercase \u00xx for other control characters) and formats numbers as
// ECMAScript's Number.prototype.toString does.
func Canonicalize(in []byte) ([]byte, error) {
	p := parser{in: in}
	p.skipWS()
	v, err := p.value(0)
	if err != nil {
		return nil, err
	}
	p.skipWS()
	if p.pos != len(p.in) {
		return nil, p.errf("trailing data")
	}
	var out bytes.Buffer
	out.Grow(len(in))
	writeValue(&out, v)
	return out.Bytes(), nil
}

// IsCanonical reports whether b is exactly its own canonical form.
func IsCanonical(b []byte) bool {
	c, err := Canonicalize(b)
	return err == nil && bytes.Equal(c, b)
}

// MarshalCanonical encodes v with encoding/json and canonicalizes the result.
func MarshalCanonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotCanonical, err)
	}
	return Canonicalize(b)
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 256

type kind uint8

const (
	kNull kind = iota
	kTrue
	kFalse
	kNumber
	kString
	kArray
	kObject
)

type member struct {
	name string
	key  []uint16 // name as UTF-16, the RFC 8785 sort key
	val  *jvalue
}

type jvalue struct {
	kind    kind
	num     float64
	str     string
	arr     []*jvalue
	members []member
}

type parser struct {
	in  []byte
	pos int
}

func (p *parser) errf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: %s", ErrNotCanonical, p.pos, fmt.Sprintf(format, args...))
}

func (p *parser) skipWS() {
	for p.pos < len(p.in) {
		switch p.in[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

func (p *parser) value(depth int) (*jvalue, error) {
	if depth > maxDepth {
		return nil, p.errf("nesting deeper than %d", maxDepth)
	}
	if p.pos >= len(p.in) {
		return nil, p.errf("unexpected end of input")
	}
	switch c := p.in[p.pos]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.string()
		if err != nil {
			return nil, err
		}
		return &jvalue{kind: kString, str: s}, nil
	case c == 't':
		return p.literal("true", kTrue)
	case c == 'f':
		return p.literal("false", kFalse)
	case c == 'n':
		return p.literal("null", kNull)
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return nil, p.errf("unexpected character %q", c)
	}
}

func (p *parser) literal(lit string, k kind) (*jvalue, error) {
	if !bytes.HasPrefix(p.in[p.pos:], []byte(lit)) {
		return nil, p.errf("invalid literal")
	}
	p.pos += len(lit)
	return &jvalue{kind: k}, nil
}

func (p *parser) object(depth int) (*jvalue, error) {
	p.pos++ // '{'
	v := &jvalue{kind: kObject}
	seen := map[string]bool{}
	p.skipWS()
	if p.pos < len(p.in) && p.in[p.pos] == '}' {
		p.pos++
		return v, nil
	}
	for {
		p.skipWS()
		if p.pos >= len(p.in) || p.in[p.pos] != '"' {
			return nil, p.errf("expected member name")
		}
		name, err := p.string()
		if err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, p.errf("duplicate member name %q", name)
		}
		seen[name] = true
		p.skipWS()
		if p.pos >= len(p.in) || p.in[p.pos] != ':' {
			return nil, p.errf("expected ':'")
		}
		p.pos++
		p.skipWS()
		val, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.members = append(v.members, member{name: name, key: utf16.Encode([]rune(name)), val: val})
		p.skipWS()
		if p.pos >= len(p.in) {
			return nil, p.errf("unterminated object")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			slices.SortFunc(v.members, func(a, b member) int { return slices.Compare(a.key, b.key) })
			return v, nil
		default:
			return nil, p.errf("expected ',' or '}'")
		}
	}
}

func (p *parser) array(depth int) (*jvalue, error) {
	p.pos++ // '['
	v := &jvalue{kind: kArray}
	p.skipWS()
	if p.pos < len(p.in) && p.in[p.pos] == ']' {
		p.pos++
		return v, nil
	}
	for {
		p.skipWS()
		el, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		v.arr = append(v.arr, el)
		p.skipWS()
		if p.pos >= len(p.in) {
			return nil, p.errf("unterminated array")
		}
		switch p.in[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return v, nil
		default:
			return nil, p.errf("expected ',' or ']'")
		}
	}
}

func hexVal(c byte) (rune, bool) {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0'), true
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return rune(c-'A') + 10, true
	}
	return 0, false
}

func (p *parser) hex4() (rune, error) {
	if p.pos+4 > len(p.in) {
		return 0, p.errf("short \\u escape")
	}
	var r rune
	for i := 0; i < 4; i++ {
		h, ok := hexVal(p.in[p.pos+i])
		if !ok {
			return 0, p.errf("bad \\u escape")
		}
		r = r<<4 | h
	}
	p.pos += 4
	return r, nil
}

func (p *parser) string() (string, error) {
	p.pos++ // opening quote
	var sb strings.Builder
	for {
		if p.pos >= len(p.in) {
			return "", p.errf("unterminated string")
		}
		c := p.in[p.pos]
		switch {
		case c == '"':
			p.pos++
			return sb.String(), nil
		case c == '\\':
			p.pos++
			if p.pos >= len(p.in) {
				return "", p.errf("unterminated escape")
			}
			e := p.in[p.pos]
			p.pos++
			switch e {
			case '"', '\\', '/':
				sb.WriteByte(e)
			case 'b':
				sb.WriteByte('\b')
			case 'f':
				sb.WriteByte('\f')
			case 'n':
				sb.WriteByte('\n')
			case 'r':
				sb.WriteByte('\r')
			case 't':
				sb.WriteByte('\t')
			case 'u':
				r, err := p.hex4()
				if err != nil {
					return "", err
				}
				if utf16.IsSurrogate(r) {
					if r >= 0xDC00 || !bytes.HasPrefix(p.in[p.pos:], []byte(`\u`)) {
						return "", p.errf("lone surrogate")
					}
					p.pos += 2
					r2, err := p.hex4()
					if err != nil {
						return "", err
					}
					r = utf16.DecodeRune(r, r2)
					if r == utf8.RuneError {
						return "", p.errf("invalid surrogate pair")
					}
				}
				sb.WriteRune(r)
			default:
				return "", p.errf("invalid escape \\%c", e)
			}
		case c < 0x20:
			return "", p.errf("control character in string")
		case c < utf8.RuneSelf:
			sb.WriteByte(c)
			p.pos++
		default:
			r, size := utf8.DecodeRune(p.in[p.pos:])
			if r == utf8.RuneError && size <= 1 {
				return "", p.errf("invalid UTF-8")
			}
			sb.WriteString(string(p.in[p.pos : p.pos+size]))
			p.pos += size
		}
	}
}

func (p *parser) number() (*jvalue, error) {
	start := p.pos
	if p.in[p.pos] == '-' {
		p.pos++
	}
	digits := func() int {
		n := 0
		for p.pos < len(p.in) && p.in[p.pos] >= '0' && p.in[p.pos] <= '9' {
			p.pos++
			n++
		}
		return n
	}
	if p.pos < len(p.in) && p.in[p.pos] == '0' {
		p.pos++
	} else if digits() == 0 {
		return nil, p.errf("invalid number")
	}
	if p.pos < len(p.in) && p.in[p.pos] == '.' {
		p.pos++
		if digits() == 0 {
			return nil, p.errf("invalid fraction")
		}
	}
	if p.pos < len(p.in) && (p.in[p.pos] == 'e' || p.in[p.pos] == 'E') {
		p.pos++
		if p.pos < len(p.in) && (p.in[p.pos] == '+' || p.in[p.pos] == '-') {
			p.pos++
		}
		if digits() == 0 {
			return nil, p.errf("invalid exponent")
		}
	}
	f, err := strconv.ParseFloat(string(p.in[start:p.pos]), 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, p.errf("number %s is not an IEEE 754 double", p.in[start:p.pos])
	}
	return &jvalue{kind: kNumber, num: f}, nil
}

func writeValue(out *bytes.Buffer, v *jvalue) {
	switch v.kind {
	case kNull:
		out.WriteString("null")
	case kTrue:
		out.WriteString("true")
	case kFalse:
		out.WriteString("false")
	case kNumber:
		out.WriteString(FormatNumber(v.num))
	case kString:
		writeString(out, v.str)
	case kArray:
		out.WriteByte('[')
		for i, el := range v.arr {
			if i > 0 {
				out.WriteByte(',')
			}
			writeValue(out, el)
		}
		out.WriteByte(']')
	case kObject:
		out.WriteByte('{')
		for i, m := range v.members {
			if i > 0 {
				out.WriteByte(',')
			}
			writeString(out, m.name)
			out.WriteByte(':')
			writeValue(out, m.val)
		}
		out.WriteByte('}')
	}
}

func writeString(out *bytes.Buffer, s string) {
	const hexdigits = "0123456789abcdef"
	out.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			out.WriteString(`\"`)
		case '\\':
			out.WriteString(`\\`)
		case '\b':
			out.WriteString(`\b`)
		case '\f':
			out.WriteString(`\f`)
		case '\n':
			out.WriteString(`\n`)
		case '\r':
			out.WriteString(`\r`)
		case '\t':
			out.WriteString(`\t`)
		default:
			if c < 0x20 {
				out.WriteString(`\u00`)
				out.WriteByte(hexdigits[c>>4])
				out.WriteByte(hexdigits[c&0xf])
			} else {
				out.WriteByte(c)
			}
		}
	}
	out.WriteByte('"')
}

// FormatNumber formats f as ECMAScript's Number.prototype.toString does
// (ECMA-262 7.1.12.1), which RFC 8785 section 3.2.2.3 requires. NaN and
// infinities have no JSON form; callers never pass them (the parser refuses
// them).
func FormatNumber(f float64) string {
	if f == 0 {
		return "0" // also -0
	}
	var sb strings.Builder
	if f < 0 {
		sb.WriteByte('-')
		f = -f
	}
	// Shortest round-trip digits, as ECMAScript requires: d.ddde±x.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	exp, _ := strconv.Atoi(expStr)
	k := len(digits)
	n := exp + 1 // position of the decimal point relative to the digits
	switch {
	case k <= n && n <= 21:
		sb.WriteString(digits)
		sb.WriteString(strings.Repeat("0", n-k))
	case 0 < n && n <= 21:
		sb.WriteString(digits[:n])
		sb.WriteByte('.')
		sb.WriteString(digits[n:])
	case -6 < n && n <= 0:
		sb.WriteString("0.")
		sb.WriteString(strings.Repeat("0", -n))
		sb.WriteString(digits)
	default:
		sb.WriteByte(digits[0])
		if k > 1 {
			sb.WriteByte('.')
			sb.WriteString(digits[1:])
		}
		sb.WriteByte('e')
		if n-1 >= 0 {
			sb.WriteByte('+')
		}
		sb.WriteString(strconv.Itoa(n - 1))
	}
	return sb.String()
}
