package tokenizer

import (
	"slices"
	"testing"
)

// bertTok is a small WordPiece vocabulary in llama.cpp's GGUF form: word
// starts carry "▁", continuations ("##" in the original) carry nothing.
func bertTok(t testing.TB, extra map[string]any) *Tokenizer {
	toks := make([]string, 110)
	types := make([]int32, 110)
	for i := range toks {
		toks[i] = "[unused" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "]"
		types[i] = TypeUnused
	}
	toks[0], toks[100], toks[101], toks[102], toks[103] = "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"
	for _, i := range []int{0, 100, 101, 102, 103} {
		types[i] = TypeControl
	}
	words := []string{"▁hello", "▁world", "▁play", "ing", "▁!", "▁cafe", "▁x", "▁,", "▁中", "▁文", "s"}
	toks = append(toks[:104], words...)
	types = append(types[:104], make([]int32, len(words))...)
	for i := 104; i < len(types); i++ {
		types[i] = TypeNormal
	}
	kv := map[string]any{
		"tokenizer.ggml.model":      "bert",
		"tokenizer.ggml.tokens":     toks,
		"tokenizer.ggml.token_type": types,
	}
	for k, v := range extra {
		kv[k] = v
	}
	return fromMetadata(t, kv)
}

func TestWordPiece(t *testing.T) {
	tok := bertTok(t, nil)
	id := func(s string) int32 {
		i, ok := tok.ID(s)
		if !ok {
			t.Fatalf("no %q", s)
		}
		return i
	}
	cls, sep, unk := int32(101), int32(102), int32(100)
	tests := []struct {
		in      string
		special bool
		want    []int32
	}{
		{"Hello world", true, []int32{cls, id("▁hello"), id("▁world"), sep}},
		{"HELLO,world!", false, []int32{id("▁hello"), id("▁,"), id("▁world"), id("▁!")}},
		{"playing plays", false, []int32{id("▁play"), id("ing"), id("▁play"), id("s")}},
		{"Café", false, []int32{id("▁cafe")}},              // accent stripped, lowercased
		{"playx hello", false, []int32{unk, id("▁hello")}}, // an unmatched piece makes the word [UNK]
		{"中文", false, []int32{id("▁中"), id("▁文")}},         // CJK: one word a character
		{" \t\n\u200b ", false, nil},                       // whitespace and format controls vanish
	}
	for _, tc := range tests {
		if got := tok.Encode(tc.in, tc.special, false); !slices.Equal(got, tc.want) {
			t.Errorf("Encode(%q, %v) = %v, want %v", tc.in, tc.special, got, tc.want)
		}
	}
	// Control tokens in user text stay text; allowed, they are the token.
	if got := tok.Encode("[SEP]", false, false); slices.Contains(got, sep) {
		t.Errorf("[SEP] in untrusted text became the control token: %v", got)
	}
	if got := tok.Encode("[SEP]", false, true); !slices.Equal(got, []int32{sep}) {
		t.Errorf("parsed [SEP] = %v", got)
	}
	if got := tok.Decode(tok.Encode("Hello, playing world", true, false), false); got != "hello , playing world" {
		t.Errorf("Decode = %q", got)
	}
	if tok.SEP != sep || tok.BOS != cls || tok.UNK != unk || tok.PAD != 0 {
		t.Errorf("special ids %d %d %d %d", tok.BOS, tok.SEP, tok.UNK, tok.PAD)
	}
	// The normalizer options are read from the file.
	cased := bertTok(t, map[string]any{"tokenizer.ggml.normalizer.lowercase": false})
	if got := cased.Encode("Hello hello", false, false); !slices.Equal(got, []int32{unk, id("▁hello")}) {
		t.Errorf("cased Encode = %v", got)
	}
}

// FuzzWordPiece: any text encodes without panicking, and untrusted text
// never yields a control token ([CLS], [SEP], [PAD], [MASK]).
func FuzzWordPiece(f *testing.F) {
	tok := bertTok(f, nil)
	f.Add("Hello, world! [SEP] Café 中文 playing")
	f.Add("\x00\xff\u0301e\uAC00")
	f.Fuzz(func(t *testing.T, s string) {
		for _, id := range tok.Encode(s, false, false) {
			if tok.Type(id) == TypeControl && id != tok.UNK {
				t.Fatalf("%q gave control token %d", s, id)
			}
		}
	})
}
