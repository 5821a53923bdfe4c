package grammar

import (
	"encoding/json"
	"fmt"
	"strconv"
)

// multipleOf with a whole divisor k (1 to maxDivisor) on integers and
// numbers: the integers divisible by k, as a digit automaton of the
// remainder mod k (a number that is a multiple of a whole k may be written
// with a fraction, 10.0: the grammar generates integers only, a part of
// the language). k = 1 on integers asserts nothing; on numbers it makes
// them integers. Beside minimum or maximum a divisor above 1 is refused,
// as is a fractional divisor (0.01: validators disagree on binary
// floating point).

// maxDivisor bounds k: the automaton has a rule per (remainder, digits).
const maxDivisor = 1000

// wholeDivisor reads multipleOf as a whole divisor in 1..maxDivisor; 0 if
// it is not one.
func wholeDivisor(v any) int {
	n, ok := v.(json.Number)
	if !ok {
		return 0
	}
	k, err := strconv.Atoi(n.String())
	if err != nil || k < 1 || k > maxDivisor {
		return 0
	}
	return k
}

// multipleOfInt: -?(0|[1-9][0-9]{0,15}) divisible by k.
func (b *builder) multipleOfInt(k int) int {
	return b.once(fmt.Sprintf("int-multiple-of-%d", k), true, func(int) [][]elem {
		// alive[n][r]: with n digits written and remainder r, a multiple
		// of k can still be reached within maxIntDigits digits.
		alive := make([][]bool, maxIntDigits+1)
		for n := maxIntDigits; n >= 1; n-- {
			alive[n] = make([]bool, k)
			for r := range k {
				ok := r == 0
				for d := 0; d <= 9 && !ok && n < maxIntDigits; d++ {
					ok = alive[n+1][(10*r+d)%k]
				}
				alive[n][r] = ok
			}
		}
		memo := map[[2]int]int{}
		var digits func(n, r int) int
		digits = func(n, r int) int {
			if x, ok := memo[[2]int{n, r}]; ok {
				return x
			}
			x := b.reserve(fmt.Sprintf("int-multiple-of-%d/%d/%d", k, n, r))
			memo[[2]int{n, r}] = x
			var alts [][]elem
			if r == 0 {
				alts = append(alts, nil)
			}
			if n < maxIntDigits {
				for d := 0; d <= 9; d++ {
					if nr := (10*r + d) % k; alive[n+1][nr] {
						alts = append(alts, []elem{terms('0'+d, '0'+d), ref(digits(n+1, nr))})
					}
				}
			}
			b.set(x, alts...)
			return x
		}
		var nz [][]elem
		for d := 1; d <= 9; d++ {
			if r := d % k; alive[1][r] {
				nz = append(nz, []elem{terms('0'+d, '0'+d), ref(digits(1, r))})
			}
		}
		pos := b.add(fmt.Sprintf("int-multiple-of-%d/positive", k), nz...)
		return [][]elem{lit("0"), one(ref(pos)), cat(lit("-"), one(ref(pos)))}
	})
}
