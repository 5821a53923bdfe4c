package tokenizer

import (
	"container/heap"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"unicode/utf8"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
)

// Errors of FromGGUF (code invalid_request_error).
var (
	// ErrUnsupported: the file names a tokenizer model or pre-tokenizer this
	// package does not implement.
	ErrUnsupported = cloison.NewError(cloison.CodeInvalid, "tokenizer: unsupported")
	// ErrMetadata: tokenizer metadata missing or inconsistent.
	ErrMetadata = cloison.NewError(cloison.CodeInvalid, "tokenizer: bad metadata")
)

// Token types (tokenizer.ggml.token_type), as llama.cpp numbers them.
const (
	TypeNormal      = 1
	TypeUnknown     = 2
	TypeControl     = 3
	TypeUserDefined = 4
	TypeUnused      = 5
	TypeByte        = 6
)

// Tokenizer encodes and decodes text for one model. See the package doc.
type Tokenizer struct {
	Model string // "gpt2", "llama", "gemma4", "bert" or "t5"
	Pre   string // tokenizer.ggml.pre

	// Special ids; -1 when the model has none.
	BOS, EOS, EOT, EOM, UNK, PAD int32
	// SEP ends each segment of a WordPiece (bert) input: Encode with
	// addSpecial gives [CLS] text [SEP], and a cross-encoder's pair is
	// [CLS] a [SEP] b [SEP]. -1 for the other models.
	SEP int32
	// Fill-in-the-middle ids (FIM): prefix, suffix and middle; -1 when
	// the model has none (see fimTokens).
	FIMPre, FIMSuf, FIMMid int32
	AddBOS, AddEOS         bool
	// AddSpacePrefix: SentencePiece prefixes text with a space.
	AddSpacePrefix bool
	// ChatTemplate is tokenizer.chat_template, "" if absent.
	ChatTemplate string
	// RerankTemplate is tokenizer.chat_template.rerank, "" if absent: a
	// decoder reranker's prompt (Qwen3-Reranker), its {query} and
	// {document} replaced by a pair's texts, as llama.cpp's server forms it.
	RerankTemplate string

	tokens []string
	types  []int32
	scores []float32
	index  map[string]int32
	ranks  map[pair]int // gpt2 merges
	pre    preKind
	// ignoreMerges: a piece that is a whole token is that token (llama.cpp's
	// ignore_merges, set for the Llama 3 family).
	ignoreMerges bool
	special      [256][]int32 // control, user-defined and unknown tokens by first byte, longest first
	byteTok      [256]int32   // llama: <0xNN> ids; -1 when absent
	byteEnc      [256]rune    // gpt2: byte → printable rune
	byteDec      map[rune]byte
	maxPiece     int // the longest token's bytes (Piece with special), at least 1

	encoded atomic.Int64 // bytes of text tokenized so far (EncodedBytes)
	// bert: BertNormalizer options and the longest token in bytes.
	lowercase, stripAccents bool
	maxTokenLen             int
	ugm                     *ugm // t5 (Unigram); nil otherwise
}

type pair struct{ a, b string }

// FromGGUF builds the tokenizer that f's metadata describes. Errors wrap
// ErrMetadata (missing or inconsistent keys, ids outside the vocabulary) or
// ErrUnsupported (tokenizer model or pre-tokenizer not implemented).
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	t := &Tokenizer{BOS: -1, EOS: -1, EOT: -1, EOM: -1, UNK: -1, PAD: -1, SEP: -1, FIMPre: -1, FIMSuf: -1, FIMMid: -1}
	var ok bool
	if t.Model, ok = f.String("tokenizer.ggml.model"); !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.model missing", ErrMetadata)
	}
	v, ok := f.Get("tokenizer.ggml.tokens")
	if !ok {
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens missing", ErrMetadata)
	}
	if t.tokens, ok = v.Strings(); !ok || len(t.tokens) == 0 || len(t.tokens) > 1<<31-1 {
		return nil, fmt.Errorf("%w: tokenizer.ggml.tokens is not a non-empty string array", ErrMetadata)
	}
	n := len(t.tokens)
	t.types = make([]int32, n)
	for i := range t.types {
		t.types[i] = TypeNormal
	}
	if v, ok := f.Get("tokenizer.ggml.token_type"); ok {
		tt, ok := v.Ints()
		if !ok || len(tt) != n {
			return nil, fmt.Errorf("%w: tokenizer.ggml.token_type must be %d integers", ErrMetadata, n)
		}
		for i, x := range tt {
			t.types[i] = int32(x)
		}
	}
	if v, ok := f.Get("tokenizer.ggml.scores"); ok {
		if t.scores, ok = v.Float32s(); !ok || len(t.scores) != n {
			return nil, fmt.Errorf("%w: tokenizer.ggml.scores must be %d float32", ErrMetadata, n)
		}
	}
	t.index = make(map[string]int32, n)
	for i, s := range t.tokens {
		if _, dup := t.index[s]; !dup { // first occurrence wins, as in llama.cpp
			t.index[s] = int32(i)
		}
	}
	t.Pre, _ = f.String("tokenizer.ggml.pre")
	t.ChatTemplate, _ = f.String("tokenizer.chat_template")
	t.RerankTemplate, _ = f.String("tokenizer.chat_template.rerank")
	switch t.Model {
	case "gpt2", "gemma4":
		if t.Model == "gpt2" {
			var err error
			if t.pre, err = preFor(t.Pre); err != nil {
				return nil, err
			}
			t.ignoreMerges = ignoreMergesFor(t.Pre)
		} else {
			t.Pre, t.pre = "gemma4", preNone // the pieces are newline runs and the rest (encode)
			t.byteTokens()
		}
		v, ok := f.Get("tokenizer.ggml.merges")
		if !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.merges missing", ErrMetadata)
		}
		merges, ok := v.Strings()
		if !ok {
			return nil, fmt.Errorf("%w: tokenizer.ggml.merges is not a string array", ErrMetadata)
		}
		t.ranks = make(map[pair]int, len(merges))
		for r, m := range merges {
			// The separator is the first space after the first byte, as
			// llama.cpp splits: a token may itself be a space.
			i := -1
			if len(m) > 1 {
				if i = strings.IndexByte(m[1:], ' '); i >= 0 {
					i++
				}
			}
			var a, b string
			if i > 0 {
				a, b = m[:i], m[i+1:]
			}
			if a == "" || b == "" {
				return nil, fmt.Errorf("%w: merge %d %q is not two tokens", ErrMetadata, r, m)
			}
			if _, dup := t.ranks[pair{a, b}]; !dup {
				t.ranks[pair{a, b}] = r
			}
		}
		t.byteEnc = ByteRunes()
		t.byteDec = make(map[rune]byte, 256)
		for b, r := range t.byteEnc {
			t.byteDec[r] = byte(b)
		}
	case "llama":
		t.pre = preNone
		if t.scores == nil {
			return nil, fmt.Errorf("%w: tokenizer.ggml.scores missing for a llama vocabulary", ErrMetadata)
		}
		t.BOS, t.EOS, t.UNK = 1, 2, 0
		t.AddBOS, t.AddSpacePrefix = true, true
		t.byteTokens()
	case "bert":
		// WordPiece, llama.cpp's defaults: [CLS] 101, [SEP] 102, [UNK] 100,
		// [PAD] 0; lowercasing and accent stripping unless the file says not.
		t.pre = preNone
		t.BOS, t.SEP, t.UNK, t.PAD = 101, 102, 100, 0
		t.AddBOS = true
		t.lowercase = true
		if b, ok := f.Bool("tokenizer.ggml.normalizer.lowercase"); ok {
			t.lowercase = b
		}
		t.stripAccents = t.lowercase
		if b, ok := f.Bool("tokenizer.ggml.normalizer.strip_accents"); ok {
			t.stripAccents = b
		}
		for _, s := range t.tokens {
			t.maxTokenLen = max(t.maxTokenLen, len(s))
		}
		for _, id := range []int32{t.BOS, t.SEP, t.UNK, t.PAD} {
			if int(id) >= n {
				return nil, fmt.Errorf("%w: WordPiece vocabulary of %d tokens lacks the default special ids", ErrMetadata, n)
			}
		}
	case "t5":
		// Unigram, llama.cpp's defaults: EOS 1 added, UNK 2, PAD 0, no BOS.
		t.pre = preNone
		t.EOS, t.UNK, t.PAD = 1, 2, 0
		t.AddEOS = true
		if n < 3 {
			return nil, fmt.Errorf("%w: Unigram vocabulary of %d tokens lacks the default special ids", ErrMetadata, n)
		}
		if err := t.loadUnigram(f); err != nil {
			return nil, err
		}
		t.byteTokens()
	default:
		return nil, fmt.Errorf("%w: tokenizer model %q", ErrUnsupported, t.Model)
	}
	ids := []struct {
		key string
		dst *int32
	}{
		{"bos", &t.BOS}, {"eos", &t.EOS}, {"eot", &t.EOT}, {"eom", &t.EOM},
		{"unknown", &t.UNK}, {"padding", &t.PAD}, {"seperator", &t.SEP},
		// FIM: the keys of files converted before llama.cpp renamed them,
		// then the current keys (which win when a file has both).
		{"prefix", &t.FIMPre}, {"suffix", &t.FIMSuf}, {"middle", &t.FIMMid},
		{"fim_pre", &t.FIMPre}, {"fim_suf", &t.FIMSuf}, {"fim_mid", &t.FIMMid},
	}
	for _, id := range ids {
		if x, ok := f.Int("tokenizer.ggml." + id.key + "_token_id"); ok {
			if x < 0 || x >= int64(n) {
				return nil, fmt.Errorf("%w: tokenizer.ggml.%s_token_id %d outside the vocabulary", ErrMetadata, id.key, x)
			}
			*id.dst = int32(x)
		}
	}
	t.fimTokens()
	if t.EOT < 0 {
		for _, s := range []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>"} {
			if id, ok := t.index[s]; ok && t.types[id] == TypeControl {
				t.EOT = id
				break
			}
		}
	}
	if b, ok := f.Bool("tokenizer.ggml.add_bos_token"); ok {
		t.AddBOS = b
	}
	if b, ok := f.Bool("tokenizer.ggml.add_eos_token"); ok {
		t.AddEOS = b
	}
	if b, ok := f.Bool("tokenizer.ggml.add_space_prefix"); ok {
		t.AddSpacePrefix = b
	}
	if t.Model == "gemma4" {
		t.AddBOS = true // as llama.cpp overrides it: Gemma 4 files that say false still need BOS
	}
	if t.AddBOS && t.BOS < 0 {
		return nil, fmt.Errorf("%w: add_bos_token set but no BOS id", ErrMetadata)
	}
	for i, ty := range t.types {
		if (ty == TypeControl || ty == TypeUserDefined || ty == TypeUnknown) && t.tokens[i] != "" {
			c := t.tokens[i][0]
			t.special[c] = append(t.special[c], int32(i))
		}
	}
	for c := range t.special {
		sp := t.special[c]
		sort.SliceStable(sp, func(a, b int) bool { return len(t.tokens[sp[a]]) > len(t.tokens[sp[b]]) })
	}
	t.maxPiece = 1
	for id := range t.tokens {
		t.maxPiece = max(t.maxPiece, len(t.Piece(int32(id), true)))
	}
	return t, nil
}

// MinTokens is a lower bound of the tokens any text of n bytes encodes to
// (without BOS and EOS): no token stands for more bytes than the
// vocabulary's longest. With it a request's prompt can be admitted (or
// refused) from its length before it is tokenized. A vocabulary whose
// normalizer drops bytes (WordPiece's whitespace and accents, Unigram's
// repeated spaces) has no such bound: 0.
func (t *Tokenizer) MinTokens(n int) int {
	if n <= 0 || t.Model == "bert" || t.ugm != nil {
		return 0
	}
	return (n + t.maxPiece - 1) / t.maxPiece
}

// EncodedBytes is the number of bytes of text this tokenizer has encoded
// (Encode, EncodeTemplated, EncodeInfill), over its lifetime: the work
// callers made it do.
func (t *Tokenizer) EncodedBytes() int64 { return t.encoded.Load() }

// fimNames are the fill-in-the-middle tokens llama.cpp looks up by name
// when a file's metadata names no FIM ids (Qwen, StarCoder, DeepSeek,
// CodeLlama, ...), in its order.
var fimNames = [3][]string{
	{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>"},
	{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>"},
	{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>"},
}

// fimTokens fills the FIM ids the metadata did not give from the named
// tokens of the vocabulary, as llama.cpp does. A model has FIM only when it
// has all three (HasFIM).
func (t *Tokenizer) fimTokens() {
	for i, dst := range []*int32{&t.FIMPre, &t.FIMSuf, &t.FIMMid} {
		if *dst >= 0 {
			continue
		}
		for _, name := range fimNames[i] {
			if id, ok := t.index[name]; ok {
				*dst = id
				break
			}
		}
	}
}

// HasFIM reports whether the model has the three fill-in-the-middle tokens
// (EncodeInfill).
func (t *Tokenizer) HasFIM() bool { return t.FIMPre >= 0 && t.FIMSuf >= 0 && t.FIMMid >= 0 }

// EncodeInfill returns the fill-in-the-middle prompt for prefix and suffix,
// as llama.cpp's infill builds it: [BOS] FIM_PRE prefix FIM_SUF suffix
// FIM_MID (BOS when the model adds it). prefix and suffix are user text:
// control tokens written in them are never parsed. ok is false when the
// model has no FIM tokens (HasFIM).
func (t *Tokenizer) EncodeInfill(prefix, suffix string) (ids []int32, ok bool) {
	if !t.HasFIM() {
		return nil, false
	}
	if t.AddBOS && t.BOS >= 0 {
		ids = append(ids, t.BOS)
	}
	ids = append(ids, t.FIMPre)
	ids = append(ids, t.Encode(prefix, false, false)...)
	ids = append(ids, t.FIMSuf)
	ids = append(ids, t.Encode(suffix, false, false)...)
	return append(ids, t.FIMMid), true
}

// byteTokens fills byteTok with the <0xNN> byte-fallback tokens.
func (t *Tokenizer) byteTokens() {
	for b := range t.byteTok {
		id, ok := t.index[fmt.Sprintf("<0x%02X>", b)]
		if !ok {
			id = -1
		}
		t.byteTok[b] = id
	}
}

// Len returns the vocabulary size.
func (t *Tokenizer) Len() int { return len(t.tokens) }

// Token returns the vocabulary string of id ("" if out of range).
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// Type returns the token type of id (0 if out of range).
func (t *Tokenizer) Type(id int32) int32 {
	if id < 0 || int(id) >= len(t.types) {
		return 0
	}
	return t.types[id]
}

// ID returns the id of a vocabulary string.
func (t *Tokenizer) ID(s string) (int32, bool) { id, ok := t.index[s]; return id, ok }

// IsEOG reports whether id ends generation (EOS, EOT or EOM).
func (t *Tokenizer) IsEOG(id int32) bool {
	return id >= 0 && (id == t.EOS || id == t.EOT || id == t.EOM)
}

// Encode tokenizes text. addSpecial adds BOS (and EOS) when the model's flags
// ask for them; parseSpecial lets control tokens written in text (e.g.
// "<|im_start|>") become their ids — leave it false for untrusted user text.
func (t *Tokenizer) Encode(text string, addSpecial, parseSpecial bool) []int32 {
	var allow func(i, j int) bool
	if parseSpecial {
		allow = func(int, int) bool { return true }
	}
	return t.encode(text, addSpecial, allow)
}

// EncodeTemplated tokenizes a rendered chat prompt: a control token is
// recognised only where its text lies wholly inside one of the literal
// ranges [start, end) (sorted and disjoint, as chat.Prompt.Literal gives
// them: what the template wrote itself); everywhere else, and across a
// range's edge, its text is ordinary text, as Encode without parseSpecial
// treats it. So message content never yields a control token, while the
// text around it is tokenized as one string, exactly as Encode would with
// parseSpecial when content holds no control-token text. User-defined
// tokens are recognised everywhere, as in Encode. Ranges outside text are
// ignored.
func (t *Tokenizer) EncodeTemplated(text string, literal [][2]int, addSpecial bool) []int32 {
	return t.encode(text, addSpecial, func(i, j int) bool {
		k := sort.Search(len(literal), func(k int) bool { return literal[k][1] > i })
		return k < len(literal) && literal[k][0] <= i && j <= literal[k][1]
	})
}

// encode tokenizes text; allow(i, j) says whether a control token may be
// matched at text[i:j] (nil: nowhere).
func (t *Tokenizer) encode(text string, addSpecial bool, allow func(i, j int) bool) []int32 {
	t.encoded.Add(int64(len(text)))
	var out []int32
	if addSpecial && t.AddBOS && t.BOS >= 0 {
		out = append(out, t.BOS)
	}
	prevSpecial := true
	t.partition(text, allow, func(raw string, special int32) {
		if special >= 0 {
			out = append(out, special)
			prevSpecial = true
			return
		}
		switch t.Model {
		case "gpt2":
			t.pre.split(raw, func(piece string) { out = t.bpe(piece, out) })
		case "llama":
			if t.AddSpacePrefix && prevSpecial {
				raw = " " + raw
			}
			out = t.spm(strings.ReplaceAll(raw, " ", "▁"), out)
		case "bert":
			out = t.wordpiece(raw, out)
		case "t5":
			out = t.unigram(raw, out)
		case "gemma4":
			// SentencePiece-style BPE: spaces become "▁", and merges run over
			// each run of newlines and each run of other characters (a run
			// of newlines that is a token is that token).
			raw = strings.ReplaceAll(raw, " ", "▁")
			for raw != "" {
				nl := raw[0] == '\n'
				i := 1
				for i < len(raw) && (raw[i] == '\n') == nl {
					i++
				}
				piece := raw[:i]
				raw = raw[i:]
				if id, ok := t.index[piece]; ok && nl {
					out = append(out, id)
					continue
				}
				out = t.bpe(piece, out)
			}
		}
		prevSpecial = false
	})
	if addSpecial && t.AddEOS && t.EOS >= 0 {
		out = append(out, t.EOS)
	}
	if addSpecial && t.Model == "bert" && t.SEP >= 0 {
		out = append(out, t.SEP)
	}
	return out
}

// partition splits text into raw runs and special tokens (longest match
// first, leftmost first). User-defined tokens match anywhere; control and
// unknown tokens only where allow (nil: nowhere) lets them.
func (t *Tokenizer) partition(text string, allow func(i, j int) bool, emit func(raw string, special int32)) {
	start := 0
	for i := 0; i < len(text); {
		matched := int32(-1)
		for _, id := range t.special[text[i]] {
			if !strings.HasPrefix(text[i:], t.tokens[id]) {
				continue
			}
			if t.types[id] == TypeUserDefined || (allow != nil && allow(i, i+len(t.tokens[id]))) {
				matched = id
				break
			}
		}
		if matched < 0 {
			i++
			continue
		}
		if start < i {
			emit(text[start:i], -1)
		}
		emit("", matched)
		i += len(t.tokens[matched])
		start = i
	}
	if start < len(text) {
		emit(text[start:], -1)
	}
}

// bpe encodes one pre-tokenized piece with byte-level BPE: the adjacent pair
// with the lowest merge rank (leftmost on ties) is merged until no pair has a
// rank, as llama.cpp does, in O(n log n) so that a long piece cannot make
// encoding quadratic.
func (t *Tokenizer) bpe(piece string, out []int32) []int32 {
	if piece == "" {
		return out
	}
	if t.ignoreMerges {
		var b strings.Builder
		for i := 0; i < len(piece); i++ {
			b.WriteRune(t.byteEnc[piece[i]])
		}
		if id, ok := t.index[b.String()]; ok {
			return append(out, id)
		}
	}
	var syms []symbol
	if t.Model == "gemma4" { // raw UTF-8: one symbol per character
		for i := 0; i < len(piece); {
			_, n := utf8.DecodeRuneInString(piece[i:])
			syms = append(syms, symbol{prev: len(syms) - 1, next: len(syms) + 1, text: piece[i : i+n]})
			i += n
		}
	} else {
		syms = make([]symbol, len(piece))
		for i := 0; i < len(piece); i++ {
			syms[i] = symbol{prev: i - 1, next: i + 1, text: string(t.byteEnc[piece[i]])}
		}
	}
	syms[len(syms)-1].next = -1
	q := &bigramQueue{}
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		if rank, ok := t.ranks[pair{syms[l].text, syms[r].text}]; ok {
			// Scores order the queue highest first: use -rank.
			heap.Push(q, bigram{left: l, right: r, score: -float32(rank), size: len(syms[l].text) + len(syms[r].text), lsize: len(syms[l].text)})
		}
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for q.Len() > 0 {
		bg := heap.Pop(q).(bigram)
		l, r := &syms[bg.left], &syms[bg.right]
		if l.text == "" || r.text == "" || l.next != bg.right || len(l.text) != bg.lsize || len(l.text)+len(r.text) != bg.size {
			continue // stale
		}
		l.text += r.text
		r.text = ""
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		try(l.prev, bg.left)
		try(bg.left, l.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		s := syms[i].text
		if id, ok := t.index[s]; ok {
			out = append(out, id)
			continue
		}
		if t.Model == "gemma4" { // a symbol outside the vocabulary: its <0xNN> tokens
			for j := 0; j < len(s); j++ {
				if id := t.byteTok[s[j]]; id >= 0 {
					out = append(out, id)
				}
			}
			continue
		}
		for _, r := range s { // a symbol outside the vocabulary: its bytes
			if id, ok := t.index[string(r)]; ok {
				out = append(out, id)
			} else if t.UNK >= 0 {
				out = append(out, t.UNK)
			}
		}
	}
	return out
}

type bigram struct {
	left, right int // symbol indices
	score       float32
	size, lsize int // bytes of the pair and of its left symbol when queued
}

type bigramQueue []bigram

func (q bigramQueue) Len() int { return len(q) }
func (q bigramQueue) Less(i, j int) bool {
	if q[i].score != q[j].score {
		return q[i].score > q[j].score
	}
	return q[i].left < q[j].left
}
func (q bigramQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *bigramQueue) Push(x any)   { *q = append(*q, x.(bigram)) }
func (q *bigramQueue) Pop() any {
	old := *q
	x := old[len(old)-1]
	*q = old[:len(old)-1]
	return x
}

type symbol struct {
	prev, next int
	text       string // "" once merged into its left neighbour
}

// spm encodes text (spaces already "▁") with SentencePiece BPE.
func (t *Tokenizer) spm(text string, out []int32) []int32 {
	if text == "" {
		return out
	}
	var syms []symbol
	for i := 0; i < len(text); {
		_, n := utf8.DecodeRuneInString(text[i:])
		syms = append(syms, symbol{prev: len(syms) - 1, next: len(syms) + 1, text: text[i : i+n]})
		i += n
	}
	syms[len(syms)-1].next = -1
	q := &bigramQueue{}
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		s := syms[l].text + syms[r].text
		if id, ok := t.index[s]; ok {
			heap.Push(q, bigram{left: l, right: r, score: t.scores[id], size: len(s)})
		}
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for q.Len() > 0 {
		bg := heap.Pop(q).(bigram)
		l, r := &syms[bg.left], &syms[bg.right]
		if l.text == "" || r.text == "" || len(l.text)+len(r.text) != bg.size || l.next != bg.right {
			continue // stale
		}
		l.text += r.text
		r.text = ""
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		try(l.prev, bg.left)
		try(bg.left, l.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		s := syms[i].text
		if id, ok := t.index[s]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(s); j++ {
			if id := t.byteTok[s[j]]; id >= 0 {
				out = append(out, id)
			} else if t.UNK >= 0 {
				out = append(out, t.UNK)
			}
		}
	}
	return out
}

// Piece returns the bytes that token id stands for. Control tokens give
// their text only when special is set; unknown ids give nil.
func (t *Tokenizer) Piece(id int32, special bool) []byte {
	if id < 0 || int(id) >= len(t.tokens) {
		return nil
	}
	s := t.tokens[id]
	switch t.types[id] {
	case TypeControl, TypeUnknown:
		if !special {
			return nil
		}
		return []byte(s)
	case TypeUserDefined:
		return []byte(s)
	case TypeByte:
		if t.Model != "gpt2" && len(s) == 6 && strings.HasPrefix(s, "<0x") && s[5] == '>' {
			if b, err := strconv.ParseUint(s[3:5], 16, 8); err == nil {
				return []byte{byte(b)}
			}
		}
	}
	if t.Model != "gpt2" {
		return []byte(strings.ReplaceAll(s, "▁", " "))
	}
	out := make([]byte, 0, len(s))
	for _, r := range s {
		if b, ok := t.byteDec[r]; ok {
			out = append(out, b)
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return out
}

// Decode returns the text of ids (see Piece for special). For SentencePiece
// vocabularies with a space prefix, the leading space the encoder added is
// removed.
func (t *Tokenizer) Decode(ids []int32, special bool) string {
	var b []byte
	strip := ((t.Model == "llama" || t.Model == "t5") && t.AddSpacePrefix) || t.Model == "bert"
	for _, id := range ids {
		p := t.Piece(id, special)
		if strip && len(p) > 0 && t.Type(id) != TypeControl {
			if p[0] == ' ' {
				p = p[1:]
			}
			strip = false
		}
		b = append(b, p...)
	}
	return string(b)
}

// ByteRunes is GPT-2's bytes_to_unicode: printable bytes map to themselves,
// the others to U+0100 upwards, so every byte is a visible character. Byte
// b's token in a byte-level vocabulary is the string of ByteRunes()[b].
func ByteRunes() [256]rune {
	var m [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}
