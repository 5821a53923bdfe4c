package grammar

import (
	"fmt"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

// TestSharedSubWalksMatchBruteForce: objects with undeclared members,
// their declared names drawn from a few letters, plain and bounded
// strings, all over one Vocab, so that the walks below a first byte
// (walkBelow) are shared between grammars and between the states of an
// undeclared key's trie: at every step the mask equals trying every token
// with the reference recognizer.
func TestSharedSubWalksMatchBruteForce(t *testing.T) {
	var pieces [][]byte
	for b := 0x20; b < 0x7F; b++ {
		pieces = append(pieces, []byte{byte(b)})
	}
	for _, s := range []string{`ab`, `abc`, `ba"`, `a":`, `b":1`, `":`, `":"`, `","`, `"}`, `c"`, `ca`, `é`, `éa"`, `\n`, `\u00`, `1,"`, `{"`, `{"a`, `{"ab":`, `"a`} {
		pieces = append(pieces, []byte(s))
	}
	pieces = append(pieces, nil) // end of generation
	eos := int32(len(pieces) - 1)
	v := NewVocab(pieces, []int32{eos})
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(1, 3).Draw(rt, "n")
		var props []string
		names := rapid.Permutation([]string{"a", "ab", "abc", "b", "ba", "c", "ca"}).Draw(rt, "names")
		for i := range n {
			name := names[i]
			val := rapid.SampledFrom([]string{`{"type":"integer"}`, `{"type":"string"}`, `{"type":"string","maxLength":3}`}).Draw(rt, fmt.Sprint("val", i))
			props = append(props, fmt.Sprintf("%q:%s", name, val))
		}
		extra := rapid.SampledFrom([]string{`true`, `{"type":"integer"}`, `{"type":"string","maxLength":2}`}).Draw(rt, "extra")
		schema := fmt.Sprintf(`{"type":"object","properties":{%s},"additionalProperties":%s}`, strings.Join(props, ","), extra)
		walkAgainstBruteForce(rt, schema, v, pieces, eos, 20)
	})
}
