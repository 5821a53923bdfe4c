package tokenizer

import (
	"fmt"
	"regexp"
	"unicode"
	"unicode/utf8"
)

// preKind selects a pre-tokenizer.
type preKind int

const (
	preGPT2          preKind = iota // GPT-2's regex
	preDigits                       // \p{N} isolated first, then GPT-2 (starcoder, smollm, refact)
	preLlama3                       // Llama 3: \p{N}{1,3}, case-insensitive contractions
	preQwen2                        // as Llama 3 with single digits
	preQwen35                       // as Qwen2 with combining marks (\p{M}) in letter runs
	preFalcon                       // punctuation runs, then GPT-2 without its last \s+, then digits in threes
	preDeepseekLLM                  // llama.cpp's DEEPSEEK_LLM stages
	preDeepseekCoder                // llama.cpp's DEEPSEEK_CODER stages
	preNone                         // SentencePiece: no split
)

// ignoreMergesFor: pre-tokenizers whose models take a piece that is a whole
// vocabulary token as that token without merging (llama.cpp ignore_merges).
func ignoreMergesFor(name string) bool {
	switch name {
	case "llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral":
		return true
	}
	return false
}

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
	case "qwen35":
		return preQwen35, nil
	case "falcon":
		return preFalcon, nil
	case "deepseek-llm":
		return preDeepseekLLM, nil
	case "deepseek-coder":
		return preDeepseekCoder, nil
	}
	return 0, fmt.Errorf("%w: pre-tokenizer %q not supported", ErrUnsupported, name)
}

func isL(r rune) bool     { return unicode.IsLetter(r) }
func isLM(r rune) bool    { return unicode.IsLetter(r) || unicode.IsMark(r) }
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
//
// With marks (Qwen 3.5), letter runs are [\p{L}\p{M}]+ and the symbol class
// excludes \p{M} too.
func llama3(rs []rune, maxDigits int, marks bool, emit func(i, j int)) {
	letter, other := isL, isOther
	if marks {
		letter = isLM
		other = func(r rune) bool { return !isS(r) && !isLM(r) && !isN(r) }
	}
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
		case letter(r):
			j = run(rs, i, letter)
		case !isCRLF(r) && !isN(r) && next >= 0 && letter(next):
			j = run(rs, i+1, letter)
		case isN(r):
			for j < len(rs) && j-i < maxDigits && isN(rs[j]) {
				j++
			}
		case other(r) || (r == ' ' && next >= 0 && other(next)):
			if r == ' ' {
				j++
			}
			j = run(rs, j, other)
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
		llama3(rs, 3, false, sub(0))
	case preQwen2:
		llama3(rs, 1, false, sub(0))
	case preQwen35:
		llama3(rs, 1, true, sub(0))
	default:
		staged(text, stagesOf[k], emit)
	}
}

// A stage splits a fragment of text, as one regex of llama.cpp's list does:
// each match is a piece, and so is each gap between matches.
type stage func(frag string, emit func(string))

// reStage splits with a regular expression (one without lookaround).
func reStage(expr string) stage {
	re := regexp.MustCompile(expr)
	return func(frag string, emit func(string)) {
		prev := 0
		for _, m := range re.FindAllStringIndex(frag, -1) {
			if m[0] > prev {
				emit(frag[prev:m[0]])
			}
			if m[1] > m[0] {
				emit(frag[m[0]:m[1]])
			}
			prev = m[1]
		}
		if prev < len(frag) {
			emit(frag[prev:])
		}
	}
}

// gpt2Stage is GPT-2's regex (its last alternative \s+ only claims what
// would otherwise be a gap, so it splits the same with or without it).
func gpt2Stage(frag string, emit func(string)) {
	rs := []rune(frag)
	offs := make([]int, 0, len(rs)+1)
	for i := range frag {
		offs = append(offs, i)
	}
	offs = append(offs, len(frag))
	gpt2(rs, func(i, j int) { emit(frag[offs[i]:offs[j]]) })
}

// stagesOf lists llama.cpp's regex stages for the staged pre-tokenizers,
// applied in order, each to every piece the previous ones left.
var stagesOf = map[preKind][]stage{
	preFalcon: {
		reStage("[\\p{P}\\$\\+<=>\\^~\\|`]+"),
		gpt2Stage,
		reStage("[0-9][0-9][0-9]"),
	},
	preDeepseekLLM: {
		reStage("[\r\n]"),
		reStage("\\s?[A-Za-z\u00B5\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u01BA\u01BC-\u01BF\u01C4-\u0293\u0295-\u02AF\u0370-\u0373\u0376\u0377\u037B-\u037D\u037F\u0386\u0388-\u038A\u038C\u038E-\u03A1\u03A3-\u03F5\u03F7-\u0481\u048A-\u052F\u0531-\u0556\u10A0-\u10C5\u13A0-\u13F5\u13F8-\u13FD\u1C90-\u1CBA\u1CBD-\u1CBF\u1D00-\u1D2B\u1D6B-\u1D77\u1D79-\u1D9A\u1E00-\u1F15\u1F18-\u1F1D\u1F20-\u1F45\u1F48-\u1F4D\u1F50-\u1F57\u1F59\u1F5B\u1F5D\u1F5F-\u1F7D\u1F80-\u1FB4\u1FB6-\u1FBC\u1FBE\u1FC2-\u1FC4\u1FC6-\u1FCC\u1FD0-\u1FD3\u1FD6-\u1FDB\u1FE0-\u1FEC\u1FF2-\u1FF4\u1FF6-\u1FFC\u2102\u2107\u210A-\u2113\u2115\u2119-\u211D\u2124\u2126\u2128\u212A-\u212D\u212F-\u2134\u2139\u213C-\u213F\u2145-\u2149\u214E\u2183\u2184\u2C00-\u2C7B\u2C7E-\u2CE4\u2CEB-\u2CEE\u2CF2\u2CF3\uA640-\uA66D\uA680-\uA69B\uA722-\uA76F\uA771-\uA787\uA78B-\uA78E\uAB70-\uABBF\uFB00-\uFB06\uFB13-\uFB17\uFF21-\uFF3A\uFF41-\uFF5A\U00010400-\U0001044F\U000104B0-\U000104D3\U000104D8-\U000104FB\U00010C80-\U00010CB2\U00010CC0-\U00010CF2\U000118A0-\U000118DF\U0001E900-\U0001E943]+"),
		reStage("\\s?[!-/:-~\uFF01-\uFF0F\uFF1A-\uFF5E\u2018-\u201F\u3000-\u3002]+"),
		reStage("\\s+$"),
		reStage("[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"),
		reStage("\\p{N}+"),
	},
	preDeepseekCoder: {
		reStage("[\r\n]"),
		reStage("\\s?\\p{L}+"),
		reStage("\\s?\\p{P}+"),
		reStage("[\u4E00-\u9FA5\u0800-\u4E00\uAC00-\uD7FF]+"),
		reStage("\\p{N}"),
	},
}

// staged applies stages to text in order and emits the final pieces.
func staged(text string, stages []stage, emit func(string)) {
	frags := []string{text}
	for _, st := range stages {
		next := frags[:0:0]
		for _, f := range frags {
			st(f, func(p string) { next = append(next, p) })
		}
		frags = next
	}
	for _, f := range frags {
		emit(f)
	}
}
