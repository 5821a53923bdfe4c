package tokenizer

import (
	"fmt"
	"unicode"
	"unicode/utf8"
)

// preKind selects a pre-tokenizer.
type preKind int

const (
	preGPT2   preKind = iota // GPT-2's regex
	preDigits                // \p{N} isolated first, then GPT-2 (starcoder, smollm, refact)
	preLlama3                // Llama 3: \p{N}{1,3}, case-insensitive contractions
	preQwen2                 // as Llama 3 with single digits
	preNone                  // SentencePiece: no split
)

func preFor(name string) (preKind, error) {
	switch name {
	case "", "default", "gpt-2", "gpt2", "phi-2", "jina-es", "jina-de", "olmo", "jais", "poro-chat", "viking", "mpt":
		return preGPT2, nil
	case "smollm", "starcoder", "refact", "codeshell", "command-r", "exaone", "minerva-7b":
		return preDigits, nil
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral", "dbrx", "smaug-bpe":
		return preLlama3, nil
	case "qwen2", "deepseek-r1-qwen", "stablelm2", "megrez", "hunyuan":
		return preQwen2, nil
	}
	return 0, fmt.Errorf("%w: pre-tokenizer %q not supported", ErrUnsupported, name)
}

func isL(r rune) bool     { return unicode.IsLetter(r) }
func isN(r rune) bool     { return unicode.IsNumber(r) }
func isS(r rune) bool     { return unicode.IsSpace(r) }
func isOther(r rune) bool { return !isS(r) && !isL(r) && !isN(r) }
func isCRLF(r rune) bool  { return r == '\r' || r == '\n' }

// contraction returns the length (in runes) of a contraction at rs[i:], or 0.
func contraction(rs []rune, i int, fold bool) int {
	if rs[i] != '\'' || i+1 >= len(rs) {
		return 0
	}
	low := func(r rune) rune {
		if fold {
			return unicode.ToLower(r)
		}
		return r
	}
	a := low(rs[i+1])
	if i+2 < len(rs) {
		b := low(rs[i+2])
		if (a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l') {
			return 3
		}
	}
	if a == 's' || a == 't' || a == 'm' || a == 'd' {
		return 2
	}
	return 0
}

func run(rs []rune, i int, f func(rune) bool) int {
	for i < len(rs) && f(rs[i]) {
		i++
	}
	return i
}

// whitespace applies \s+(?!\S)|\s+ at rs[i] (a space).
func whitespace(rs []rune, i int) int {
	j := run(rs, i, isS)
	if j == len(rs) || j-i == 1 {
		return j
	}
	return j - 1
}

// gpt2 splits rs with GPT-2's regex; emit receives each piece.
func gpt2(rs []rune, emit func(i, j int)) {
	for i := 0; i < len(rs); {
		j := i
		r := rs[i]
		var next rune = -1
		if i+1 < len(rs) {
			next = rs[i+1]
		}
		switch {
		case contraction(rs, i, false) > 0:
			j = i + contraction(rs, i, false)
		case isL(r):
			j = run(rs, i, isL)
		case r == ' ' && next >= 0 && isL(next):
			j = run(rs, i+1, isL)
		case isN(r):
			j = run(rs, i, isN)
		case r == ' ' && next >= 0 && isN(next):
			j = run(rs, i+1, isN)
		case isOther(r):
			j = run(rs, i, isOther)
		case r == ' ' && next >= 0 && isOther(next):
			j = run(rs, i+1, isOther)
		default: // whitespace
			j = whitespace(rs, i)
		}
		emit(i, j)
		i = j
	}
}

// llama3 splits rs with the Llama 3 regex, or Qwen2's when maxDigits is 1:
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
// ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func llama3(rs []rune, maxDigits int, emit func(i, j int)) {
	for i := 0; i < len(rs); {
		j := i
		r := rs[i]
		var next rune = -1
		if i+1 < len(rs) {
			next = rs[i+1]
		}
		switch {
		case contraction(rs, i, true) > 0:
			j = i + contraction(rs, i, true)
		case isL(r):
			j = run(rs, i, isL)
		case !isCRLF(r) && !isN(r) && next >= 0 && isL(next):
			j = run(rs, i+1, isL)
		case isN(r):
			for j < len(rs) && j-i < maxDigits && isN(rs[j]) {
				j++
			}
		case isOther(r) || (r == ' ' && next >= 0 && isOther(next)):
			if r == ' ' {
				j++
			}
			j = run(rs, j, isOther)
			j = run(rs, j, isCRLF)
		default: // whitespace
			end := run(rs, i, isS)
			last := -1
			for k := i; k < end; k++ {
				if isCRLF(rs[k]) {
					last = k
				}
			}
			if last >= 0 {
				j = last + 1
			} else {
				j = whitespace(rs, i)
			}
		}
		emit(i, j)
		i = j
	}
}

// split applies the pre-tokenizer to text. Pieces are emitted as byte ranges
// of text, so invalid UTF-8 passes through unchanged (as one U+FFFD-classed
// rune per bad byte).
func (k preKind) split(text string, emit func(string)) {
	if k == preNone {
		emit(text)
		return
	}
	rs := make([]rune, 0, len(text))
	offs := make([]int, 0, len(text)+1)
	for i := 0; i < len(text); {
		r, n := utf8.DecodeRuneInString(text[i:])
		rs = append(rs, r)
		offs = append(offs, i)
		i += n
	}
	offs = append(offs, len(text))
	sub := func(base int) func(i, j int) {
		return func(i, j int) { emit(text[offs[base+i]:offs[base+j]]) }
	}
	switch k {
	case preGPT2:
		gpt2(rs, sub(0))
	case preDigits:
		start := 0
		for i, r := range rs {
			if isN(r) {
				gpt2(rs[start:i], sub(start))
				emit(text[offs[i]:offs[i+1]])
				start = i + 1
			}
		}
		gpt2(rs[start:], sub(start))
	case preLlama3:
		llama3(rs, 3, sub(0))
	case preQwen2:
		llama3(rs, 1, sub(0))
	}
}
