package tokenizer

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/cloison/cloison/engine/gguf"
)

// ugm is what a Unigram ("t5") vocabulary adds: SentencePiece's
// normalizer (the precompiled character map and its whitespace rules) and
// the scores its Viterbi search maximises.
type ugm struct {
	xcda         []uint32 // the character map's double array (XCDA)
	replacements []byte   // its NUL-terminated replacement strings
	mergeSpaces  bool     // tokenizer.ggml.remove_extra_whitespaces
	unkScore     float64  // the lowest normal token's score − 10
	// candidates: the tokens a piece may be (normal, user-defined,
	// unused), by text; maxLen their longest, in bytes.
	candidates map[string]int32
	maxLen     int
}

// loadUnigram reads a "t5" vocabulary's normalizer and scores, as
// llama.cpp's llm_tokenizer_ugm. Errors: ErrMetadata.
func (t *Tokenizer) loadUnigram(f *gguf.File) error {
	if t.scores == nil {
		return fmt.Errorf("%w: tokenizer.ggml.scores missing for a t5 vocabulary", ErrMetadata)
	}
	u := &ugm{candidates: map[string]int32{}}
	if v, ok := f.Get("tokenizer.ggml.precompiled_charsmap"); ok {
		raw, ok := v.Ints()
		if !ok {
			return fmt.Errorf("%w: tokenizer.ggml.precompiled_charsmap is not a byte array", ErrMetadata)
		}
		b := make([]byte, len(raw))
		for i, x := range raw {
			b[i] = byte(x)
		}
		if len(b) < 4 {
			return fmt.Errorf("%w: precompiled_charsmap of %d bytes", ErrMetadata, len(b))
		}
		n := int(binary.LittleEndian.Uint32(b))
		if n%4 != 0 || n+4 >= len(b) {
			return fmt.Errorf("%w: precompiled_charsmap's double array of %d bytes in %d", ErrMetadata, n, len(b))
		}
		u.xcda = make([]uint32, n/4)
		for i := range u.xcda {
			u.xcda[i] = binary.LittleEndian.Uint32(b[4+4*i:])
		}
		u.replacements = b[4+n:]
	}
	if b, ok := f.Bool("tokenizer.ggml.remove_extra_whitespaces"); ok {
		u.mergeSpaces = b
	}
	minScore := math.Inf(1)
	for id, s := range t.tokens {
		ty := t.types[id]
		if ty == TypeNormal {
			minScore = min(minScore, float64(t.scores[id]))
		}
		if ty == TypeNormal || ty == TypeUserDefined || ty == TypeUnused {
			if _, dup := u.candidates[s]; !dup && s != "" {
				u.candidates[s] = int32(id)
				u.maxLen = max(u.maxLen, len(s))
			}
		}
	}
	if math.IsInf(minScore, 1) {
		minScore = 0
	}
	u.unkScore = minScore - 10
	t.ugm = u
	return nil
}

// unigram encodes one raw run with SentencePiece's Unigram model, as
// llama.cpp does: the run is normalized (normalizeUGM), then the Viterbi
// search finds the split into candidate tokens of the highest total score
// (user-defined tokens score 0), a code point no token starts with costing
// the unknown score; consecutive unknown pieces become one UNK.
func (t *Tokenizer) unigram(raw string, out []int32) []int32 {
	u := t.ugm
	s := t.normalizeUGM(raw)
	n := len(s)
	if n == 0 {
		return out
	}
	type best struct {
		id    int32
		start int
		score float64
	}
	res := make([]best, n+1)
	for i := range res {
		res[i] = best{t.UNK, 0, -math.MaxFloat64}
	}
	res[0].score = 0
	for i := 0; i < n; {
		_, cp := utf8.DecodeRuneInString(s[i:])
		cp = min(max(cp, 1), n-i)
		single := false
		cur := res[i].score
		for j := i + 1; j <= min(n, i+u.maxLen); j++ {
			id, ok := u.candidates[s[i:j]]
			if !ok {
				continue
			}
			if j-i == cp {
				single = true
			}
			sc := float64(t.scores[id])
			if t.types[id] == TypeUserDefined {
				sc = 0
			}
			if cur+sc > res[j].score {
				res[j] = best{id, i, cur + sc}
			}
		}
		if !single && cur+u.unkScore > res[i+cp].score {
			res[i+cp] = best{t.UNK, i, cur + u.unkScore}
		}
		i += cp
	}
	start := len(out)
	prevUnk := false
	for p := n; ; p = res[p].start {
		unk := res[p].id == t.UNK
		if !(prevUnk && unk) {
			out = append(out, res[p].id)
		}
		if res[p].start == 0 {
			break
		}
		prevUnk = unk
	}
	for i, j := start, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// normalizeUGM is SentencePiece's normalizer as llama.cpp applies it: each
// longest prefix the character map knows is replaced (a user-defined token
// is kept as is, invalid UTF-8 becomes U+FFFD one byte at a time), spaces
// become "▁", one is prepended when the vocabulary adds a space prefix,
// and runs of spaces collapse with remove_extra_whitespaces.
func (t *Tokenizer) normalizeUGM(in string) string {
	u := t.ugm
	var b strings.Builder
	prepended, inWord := false, false
	for off := 0; off < len(in); {
		repl, used := t.normalizePrefix(in, off)
		for i := 0; i < len(repl); i++ {
			c := repl[i]
			if c != ' ' {
				if !inWord {
					inWord = true
					if (t.AddSpacePrefix && !prepended) || u.mergeSpaces {
						b.WriteString("▁")
						prepended = true
					}
				}
				b.WriteByte(c)
				continue
			}
			inWord = false
			if !u.mergeSpaces {
				b.WriteString("▁")
			}
		}
		off += used
	}
	return b.String()
}

// normalizePrefix is the replacement of the longest prefix of in[off:] and
// the bytes it consumes (llama.cpp's normalize_prefix).
func (t *Tokenizer) normalizePrefix(in string, off int) (string, int) {
	rest := in[off:]
	for _, id := range t.special[rest[0]] {
		if t.types[id] == TypeUserDefined && strings.HasPrefix(rest, t.tokens[id]) {
			return t.tokens[id], len(t.tokens[id])
		}
	}
	u := t.ugm
	if len(u.xcda) > 0 {
		node := func(i uint32) (uint32, bool) {
			if int(i) >= len(u.xcda) {
				return 0, false
			}
			return u.xcda[i], true
		}
		base := func(p uint32) uint32 { return (p >> 10) << ((p & (1 << 9)) >> 6) }
		longest, at := 0, uint32(0)
		root, ok := node(0)
		idx := base(root)
		for i := 0; ok && i < len(rest) && rest[i] != 0; i++ {
			c := uint32(rest[i])
			idx ^= c
			var p uint32
			if p, ok = node(idx); !ok || p&((1<<31)|0xff) != c {
				break
			}
			leaf := (p>>8)&1 == 1
			idx ^= base(p)
			if leaf {
				var v uint32
				if v, ok = node(idx); !ok {
					break
				}
				longest, at = i+1, v&((1<<31)-1)
			}
		}
		if longest > 0 && int(at) < len(u.replacements) {
			r := u.replacements[at:]
			if end := strings.IndexByte(string(r), 0); end >= 0 {
				return string(r[:end]), longest
			}
		}
	}
	r, size := utf8.DecodeRuneInString(rest)
	if r == utf8.RuneError && size <= 1 {
		return "\uFFFD", 1
	}
	return rest[:size], size
}
