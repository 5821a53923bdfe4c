package grammar

import (
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// maxIntDigits is the most digits an integer is generated with (as in
// integer): a bound beyond ±(10^16-1) constrains nothing the grammar could
// produce anyway.
const maxIntDigits = 16

var intLimit = new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(maxIntDigits), nil), big.NewInt(1))

// numericBound names a bound keyword of s, if it has one.
func numericBound(s object) (string, bool) {
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if _, ok := s.get(k); ok {
			return k, true
		}
	}
	return "", false
}

// exactRat reads a JSON number exactly (a decimal bound such as
// 1.0000000000000001 must not round to 1); ok false when it is no number.
// Beyond ±1e17 it only says so (clamped), so that an exponent such as
// 1e999999 costs nothing.
func exactRat(v any) (*big.Rat, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return nil, false
	}
	f, err := strconv.ParseFloat(n.String(), 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return nil, false
	}
	if math.Abs(f) > 1e17 || math.IsInf(f, 0) {
		if f < 0 {
			return new(big.Rat).SetFloat64(-1e17), true
		}
		return new(big.Rat).SetFloat64(1e17), true
	}
	r, ok := new(big.Rat).SetString(n.String())
	return r, ok
}

// floorRat and ceilRat round a rational to an integer.
func floorRat(r *big.Rat) *big.Int {
	q, m := new(big.Int).DivMod(r.Num(), r.Denom(), new(big.Int))
	_ = m // DivMod is Euclidean: with a positive denominator q is the floor
	return q
}

func ceilRat(r *big.Rat) *big.Int {
	q := floorRat(r)
	if !r.IsInt() {
		q.Add(q, big.NewInt(1))
	}
	return q
}

// intBounds reads minimum, maximum and their exclusive forms (draft-04's
// booleans and draft-06's numbers) as the least and greatest integer
// allowed; nil where the side is unbounded or its bound lies beyond what
// the grammar generates anyway.
func intBounds(s object, path string) (lo, hi *big.Int, err error) {
	exclusive := func(k string) (bool, *big.Rat, error) {
		v, ok := s.get(k)
		if !ok {
			return false, nil, nil
		}
		if b, ok := v.(bool); ok {
			return b, nil, nil
		}
		r, ok := exactRat(v)
		if !ok {
			return false, nil, bad(path, "%s must be a number or a boolean", k)
		}
		return false, r, nil
	}
	exMin, exMinV, err := exclusive("exclusiveMinimum")
	if err != nil {
		return nil, nil, err
	}
	exMax, exMaxV, err := exclusive("exclusiveMaximum")
	if err != nil {
		return nil, nil, err
	}
	raise := func(x *big.Int) {
		if lo == nil || x.Cmp(lo) > 0 {
			lo = x
		}
	}
	lower := func(x *big.Int) {
		if hi == nil || x.Cmp(hi) < 0 {
			hi = x
		}
	}
	if v, ok := s.get("minimum"); ok {
		r, ok := exactRat(v)
		if !ok {
			return nil, nil, bad(path, "minimum must be a number")
		}
		if exMin {
			raise(new(big.Int).Add(floorRat(r), big.NewInt(1)))
		} else {
			raise(ceilRat(r))
		}
	}
	if exMinV != nil {
		raise(new(big.Int).Add(floorRat(exMinV), big.NewInt(1)))
	}
	if v, ok := s.get("maximum"); ok {
		r, ok := exactRat(v)
		if !ok {
			return nil, nil, bad(path, "maximum must be a number")
		}
		if exMax {
			lower(new(big.Int).Sub(ceilRat(r), big.NewInt(1)))
		} else {
			lower(floorRat(r))
		}
	}
	if exMaxV != nil {
		lower(new(big.Int).Sub(ceilRat(exMaxV), big.NewInt(1)))
	}
	negLimit := new(big.Int).Neg(intLimit)
	if lo != nil && lo.Cmp(negLimit) <= 0 {
		lo = nil // no constraint on what the grammar can write
	}
	if hi != nil && hi.Cmp(intLimit) >= 0 {
		hi = nil
	}
	if lo != nil && lo.Cmp(intLimit) > 0 || hi != nil && hi.Cmp(negLimit) < 0 || lo != nil && hi != nil && lo.Cmp(hi) > 0 {
		return nil, nil, unsupported(path, "minimum/maximum admitting no integer of at most %d digits", maxIntDigits)
	}
	return lo, hi, nil
}

// intRange is a rule for the integers lo..hi (nil: unbounded, that is up
// to maxIntDigits digits), in canonical form: no leading zero, "-" only
// before a non-zero magnitude. Each digit length is a union of digit-class
// sequences, so the automaton is exact.
func (b *builder) intRange(name string, lo, hi *big.Int) (int, error) {
	if lo == nil {
		lo = new(big.Int).Neg(intLimit)
	}
	if hi == nil {
		hi = intLimit
	}
	var alts [][]elem
	if lo.Sign() < 0 {
		// negative: "-" then a magnitude in max(1,-hi)..-lo
		mlo := big.NewInt(1)
		if hi.Sign() < 0 {
			mlo = new(big.Int).Neg(hi)
		}
		for _, a := range natRange(mlo.String(), new(big.Int).Neg(lo).String()) {
			alts = append(alts, cat(lit("-"), a))
		}
	}
	if hi.Sign() >= 0 {
		nlo := lo
		if lo.Sign() < 0 {
			nlo = big.NewInt(0)
		}
		alts = append(alts, natRange(nlo.String(), hi.String())...)
	}
	return b.add(name+"/integer", alts...), nil
}

// natRange: digit-class sequences matching exactly the decimal numerals of
// a..b (0 ≤ a ≤ b, canonical, no leading zeros).
func natRange(a, b string) [][]elem {
	var out [][]elem
	for n := len(a); n <= len(b); n++ {
		lo, hi := a, b
		if n > len(a) {
			lo = "1" + strings.Repeat("0", n-1)
		}
		if n < len(b) {
			hi = strings.Repeat("9", n)
		}
		out = append(out, sameLen(lo, hi)...)
	}
	return out
}

// sameLen: sequences matching every digit string of lo's length between lo
// and hi inclusive.
func sameLen(lo, hi string) [][]elem {
	if len(lo) == 0 {
		return [][]elem{nil}
	}
	rest := len(lo) - 1
	any := func(d1, d2 byte) []elem {
		e := []elem{terms(int(d1), int(d2))}
		for i := 0; i < rest; i++ {
			e = append(e, terms('0', '9'))
		}
		return e
	}
	if lo[1:] == strings.Repeat("0", rest) && hi[1:] == strings.Repeat("9", rest) {
		return [][]elem{any(lo[0], hi[0])}
	}
	prefix := func(d byte, tails [][]elem) [][]elem {
		var out [][]elem
		for _, t := range tails {
			out = append(out, cat(one(terms(int(d), int(d))), t))
		}
		return out
	}
	if lo[0] == hi[0] {
		return prefix(lo[0], sameLen(lo[1:], hi[1:]))
	}
	out := prefix(lo[0], sameLen(lo[1:], strings.Repeat("9", rest)))
	if lo[0]+1 <= hi[0]-1 {
		out = append(out, any(lo[0]+1, hi[0]-1))
	}
	return append(out, prefix(hi[0], sameLen(strings.Repeat("0", rest), hi[1:]))...)
}
