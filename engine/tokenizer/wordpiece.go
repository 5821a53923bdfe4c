package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// wordStart is the prefix a WordPiece vocabulary converted to GGUF gives
// every token that begins a word ("▁hello"); continuation tokens, "##ello"
// in the original vocabulary, are stored without a prefix ("ello").
const wordStart = "▁"

// wordpiece encodes one raw run of text with BERT's WordPiece, as
// llama.cpp's WPM tokenizer does: the run is normalized and split into
// words (bertWords), each word is prefixed with "▁" and split greedily
// into the longest vocabulary tokens from the left; a word with any part
// outside the vocabulary becomes one UNK token.
func (t *Tokenizer) wordpiece(raw string, out []int32) []int32 {
	for _, w := range bertWords(raw, t.lowercase, t.stripAccents) {
		word := wordStart + w
		start := len(out)
		for i := 0; i < len(word); {
			j := min(len(word), i+t.maxTokenLen)
			for ; j > i; j-- {
				if id, ok := t.index[word[i:j]]; ok {
					out = append(out, id)
					break
				}
			}
			if j == i { // no token starts here: the whole word is unknown
				out = out[:start]
				break
			}
			i = j
		}
		if len(out) == start && t.UNK >= 0 {
			out = append(out, t.UNK)
		}
	}
	return out
}

// bertWords is BertNormalizer and BertPreTokenizer as llama.cpp implements
// them: with stripAccents, each code point is replaced by the first code
// point of its NFD decomposition and combining marks (\p{M}) are dropped;
// NUL, U+FFFD and other controls (\p{C}) are dropped; with lowercase, code
// points are lowercased; whitespace splits words; punctuation (\p{P}), ASCII
// symbols and CJK ideographs are words of their own.
func bertWords(text string, lowercase, stripAccents bool) []string {
	var words []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			words = append(words, cur.String())
			cur.Reset()
		}
	}
	for _, r := range text {
		if stripAccents {
			r = nfdFirst(r)
		}
		switch {
		case unicode.Is(unicode.White_Space, r):
			flush()
			continue
		case r == 0 || r == utf8.RuneError || unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs):
			continue
		case stripAccents && unicode.Is(unicode.M, r):
			continue
		}
		if lowercase {
			r = unicode.ToLower(r)
		}
		if unicode.Is(unicode.P, r) || (r < 0x7F && unicode.Is(unicode.S, r)) || isCJK(r) {
			flush()
			words = append(words, string(r))
			continue
		}
		cur.WriteRune(r)
	}
	flush()
	return words
}

// nfdFirst is the first code point of r's canonical decomposition (llama.cpp's
// unicode_cpts_normalize_nfd): "é" → "e", a Hangul syllable → its leading jamo.
func nfdFirst(r rune) rune {
	if r < 0xC0 {
		return r
	}
	var buf [utf8.UTFMax]byte
	n := utf8.EncodeRune(buf[:], r)
	if norm.NFD.IsNormal(buf[:n]) {
		return r
	}
	d, _ := utf8.DecodeRune(norm.NFD.Append(nil, buf[:n]...))
	return d
}

// isCJK: the CJK ideograph blocks that BERT splits one character at a time,
// with llama.cpp's (and Hugging Face's) bounds.
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}
