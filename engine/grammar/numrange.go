package grammar

import (
	"math/big"
	"strings"
)

// fracDigits is the most fraction digits a bounded number is written with.
const fracDigits = 16

// numberRange is a rule for the numbers within minimum, maximum and their
// exclusive forms (draft-04 booleans, draft-06 numbers; whole or
// fractional). Numbers are written without an exponent, with at most
// maxIntDigits integer and fracDigits fraction digits: every string it
// accepts is in range, and every in-range value of that precision has a
// spelling it accepts. The bounds are first moved onto the grid of
// 10^-fracDigits (a lower bound up, an upper bound down, an exclusive one
// a step inside), so both become inclusive grid points; then the integer
// part is a digit-class range and the fraction digits are compared with
// the bound's digit by digit (fewer digits than the bound's stand for
// trailing zeros).
func (c *schemaCompiler) numberRange(s object, path string) (int, error) {
	lo, hi, err := ratBounds(s, path)
	if err != nil {
		return 0, err
	}
	scale := new(big.Int).Exp(big.NewInt(10), big.NewInt(fracDigits), nil)
	step := big.NewInt(1)
	// limit: the largest magnitude written, (10^16-1).9999999999999999
	limit := new(big.Int).Sub(new(big.Int).Mul(new(big.Int).Add(intLimit, step), scale), step)
	grid := func(b *bound, up bool) *big.Int {
		r := new(big.Rat).Mul(b.v, new(big.Rat).SetInt(scale))
		var g *big.Int
		if up {
			g = ceilRat(r)
			if b.ex && r.IsInt() {
				g.Add(g, step)
			}
		} else {
			g = floorRat(r)
			if b.ex && r.IsInt() {
				g.Sub(g, step)
			}
		}
		return g
	}
	glo, ghi := new(big.Int).Neg(limit), limit
	if lo != nil {
		if g := grid(lo, true); g.Cmp(glo) > 0 {
			glo = g
		}
	}
	if hi != nil {
		if g := grid(hi, false); g.Cmp(ghi) < 0 {
			ghi = g
		}
	}
	if glo.Cmp(ghi) > 0 {
		return 0, unsupported(path, "minimum/maximum admitting no number of at most %d integer and %d fraction digits", maxIntDigits, fracDigits)
	}
	n := &numBuilder{b: c.b, scale: scale, memo: map[string]int{}}
	var alts [][]elem
	if ghi.Sign() >= 0 {
		a := glo
		if a.Sign() < 0 {
			a = new(big.Int)
		}
		alts = append(alts, n.magnitude(a, ghi)...)
	}
	if glo.Sign() < 0 {
		// -m with m in max(0,-hi)..-lo; "-0" is 0, admitted only when 0 is.
		a := new(big.Int)
		if ghi.Sign() < 0 {
			a = new(big.Int).Neg(ghi)
		}
		for _, x := range n.magnitude(a, new(big.Int).Neg(glo)) {
			alts = append(alts, cat(lit("-"), x))
		}
	}
	return c.b.add(path+"/number", alts...), nil
}

// bound is one side of a range: its value, and whether it is exclusive.
type bound struct {
	v  *big.Rat
	ex bool
}

// ratBounds reads minimum, maximum and their exclusive forms as the
// tightest lower and upper bound (nil: none).
func ratBounds(s object, path string) (lo, hi *bound, err error) {
	exFlag := map[string]bool{}
	tighter := func(cur *bound, nb *bound, lower bool) *bound {
		if cur == nil {
			return nb
		}
		c := nb.v.Cmp(cur.v)
		if c == 0 {
			if nb.ex {
				return nb
			}
			return cur
		}
		if (c > 0) == lower {
			return nb
		}
		return cur
	}
	for _, k := range []string{"exclusiveMinimum", "exclusiveMaximum"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		if b, ok := v.(bool); ok {
			exFlag[k] = b
			continue
		}
		r, ok := exactRat(v)
		if !ok {
			return nil, nil, bad(path, "%s must be a number or a boolean", k)
		}
		if k == "exclusiveMinimum" {
			lo = tighter(lo, &bound{r, true}, true)
		} else {
			hi = tighter(hi, &bound{r, true}, false)
		}
	}
	for _, k := range []string{"minimum", "maximum"} {
		v, ok := s.get(k)
		if !ok {
			continue
		}
		r, ok := exactRat(v)
		if !ok {
			return nil, nil, bad(path, "%s must be a number", k)
		}
		if k == "minimum" {
			lo = tighter(lo, &bound{r, exFlag["exclusiveMinimum"]}, true)
		} else {
			hi = tighter(hi, &bound{r, exFlag["exclusiveMaximum"]}, false)
		}
	}
	return lo, hi, nil
}

// numBuilder makes the fraction rules of one numberRange.
type numBuilder struct {
	b     *builder
	scale *big.Int
	memo  map[string]int
}

// magnitude: the numerals (no sign) whose value times 10^fracDigits lies
// in a..e (0 ≤ a ≤ e, grid units).
func (n *numBuilder) magnitude(a, e *big.Int) [][]elem {
	ai, af := new(big.Int).QuoRem(a, n.scale, new(big.Int))
	ei, ef := new(big.Int).QuoRem(e, n.scale, new(big.Int))
	pad := func(x *big.Int) string {
		t := x.String()
		return strings.Repeat("0", fracDigits-len(t)) + t
	}
	zeros, nines := strings.Repeat("0", fracDigits), strings.Repeat("9", fracDigits)
	with := func(ints [][]elem, flo, fhi string) [][]elem {
		f := n.fraction(flo, fhi)
		var out [][]elem
		for _, x := range ints {
			out = append(out, cat(x, one(ref(f))))
		}
		return out
	}
	if ai.Cmp(ei) == 0 {
		return with(natRange(ai.String(), ai.String()), pad(af), pad(ef))
	}
	out := with(natRange(ai.String(), ai.String()), pad(af), nines)
	one1 := big.NewInt(1)
	if m := new(big.Int).Add(ai, one1); m.Cmp(ei) < 0 {
		out = append(out, with(natRange(m.String(), new(big.Int).Sub(ei, one1).String()), zeros, nines)...)
	}
	return append(out, with(natRange(ei.String(), ei.String()), zeros, pad(ef))...)
}

// fraction: an optional "." and 1..len(lo) digits whose value, padded
// with zeros to len(lo) digits, lies in lo..hi (digit strings of equal
// length); no fraction stands for all zeros.
func (n *numBuilder) fraction(lo, hi string) int {
	key := "f" + lo + "/" + hi
	if r, ok := n.memo[key]; ok {
		return r
	}
	var alts [][]elem
	if strings.Trim(lo, "0") == "" {
		alts = append(alts, nil)
	}
	alts = append(alts, cat(lit("."), one(ref(n.digits(lo, hi, true)))))
	r := n.b.add("number-fraction", alts...)
	n.memo[key] = r
	return r
}

// digits: up to len(lo) digits (at least one when nonEmpty) whose value
// padded with zeros to len(lo) digits lies in lo..hi.
func (n *numBuilder) digits(lo, hi string, nonEmpty bool) int {
	key := "d" + lo + "/" + hi
	if nonEmpty {
		key = "D" + lo + "/" + hi
	}
	if r, ok := n.memo[key]; ok {
		return r
	}
	var alts [][]elem
	if !nonEmpty && strings.Trim(lo, "0") == "" {
		alts = append(alts, nil)
	}
	if len(lo) > 0 {
		rest := len(lo) - 1
		zeros, nines := strings.Repeat("0", rest), strings.Repeat("9", rest)
		next := func(d1, d2 byte, l, h string) []elem {
			return []elem{terms(int(d1), int(d2)), ref(n.digits(l, h, false))}
		}
		if lo[0] == hi[0] {
			alts = append(alts, next(lo[0], lo[0], lo[1:], hi[1:]))
		} else {
			alts = append(alts, next(lo[0], lo[0], lo[1:], nines))
			if lo[0]+1 <= hi[0]-1 {
				alts = append(alts, next(lo[0]+1, hi[0]-1, zeros, nines))
			}
			alts = append(alts, next(hi[0], hi[0], zeros, hi[1:]))
		}
	}
	r := n.b.add("number-digits", alts...)
	n.memo[key] = r
	return r
}
