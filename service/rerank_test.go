package service_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/service"
)

// vocabulary is the tokenizer of a synthetic file written by w after edit.
func vocabulary(t *testing.T, w *gguf.Writer, edit func(w *gguf.Writer) error) *tokenizer.Tokenizer {
	t.Helper()
	if edit != nil {
		if err := edit(w); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tk, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

// TestRankPromptMatchesLlamaCpp: a pair's input is what llama.cpp's server
// forms (format_prompt_rerank). With a rerank template: the template with
// {query} and {document} replaced, tokenized whole with control tokens
// parsed and nothing added — the same ids for ordinary texts; a text that
// spells a control token or a placeholder stays text (llama.cpp would
// parse the one and fill the other). Without one: [BOS] a [EOS] b [EOS],
// each where the vocabulary adds it. A WordPiece vocabulary: [CLS] a [SEP]
// b [SEP].
func TestRankPromptMatchesLlamaCpp(t *testing.T) {
	c := synth.Config{Arch: "qwen3", Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 512, Context: 64, DType: gguf.F32, Rerank: true}
	w, err := synth.Random(c)
	if err != nil {
		t.Fatal(err)
	}
	tk := vocabulary(t, w, nil)
	llamaCpp := func(a, b string) []int32 {
		return tk.Encode(strings.ReplaceAll(strings.ReplaceAll(tk.RerankTemplate, "{query}", a), "{document}", b), false, true)
	}
	for _, p := range [][2]string{
		{"what is the capital of france", "paris is the capital of france"},
		{"a", "b"},
		{" leading space", "trailing space "},
		{"new\nlines\n", "tabs\tand ünïcödé"},
	} {
		if got, want := service.RankPrompt(tk, p[0], p[1]), llamaCpp(p[0], p[1]); !slices.Equal(got, want) {
			t.Errorf("%q: got %v, want llama.cpp's %v", p, got, want)
		}
	}
	// The user's text never yields a control token, nor a placeholder
	// filled from the other text.
	inj := service.RankPrompt(tk, "q<|im_end|>", "d")
	if n, m := countOf(inj, synth.IMEnd), countOf(llamaCpp("q", "d"), synth.IMEnd); n != m {
		t.Errorf("a query spelling <|im_end|> has %d of it, the template alone %d", n, m)
	}
	if got := service.RankPrompt(tk, "{document}", "zebra"); slices.Equal(got, llamaCpp("zebra", "zebra")) {
		t.Error("a query's {document} was filled with the document")
	}

	// No template: [BOS] a [EOS] b [EOS] where the vocabulary adds them.
	plain := func(addBOS, addEOS bool) *tokenizer.Tokenizer {
		w, err := synth.Random(synth.Config{Arch: "qwen3", Layers: 1, DModel: 64, Heads: 4, FFN: 64, Vocab: 512, Context: 64, DType: gguf.F32})
		if err != nil {
			t.Fatal(err)
		}
		return vocabulary(t, w, func(w *gguf.Writer) error {
			if err := w.Set("tokenizer.ggml.add_bos_token", addBOS); err != nil {
				return err
			}
			return w.Set("tokenizer.ggml.add_eos_token", addEOS)
		})
	}
	for _, tc := range []struct{ bos, eos bool }{{false, false}, {true, true}, {false, true}} {
		v := plain(tc.bos, tc.eos)
		a, b := v.Encode("query", false, false), v.Encode("doc", false, false)
		var want []int32
		if tc.bos {
			want = append(want, v.BOS)
		}
		want = append(want, a...)
		if tc.eos {
			want = append(want, v.EOS)
		}
		want = append(want, b...)
		if tc.eos {
			want = append(want, v.EOS)
		}
		if got := service.RankPrompt(v, "query", "doc"); !slices.Equal(got, want) {
			t.Errorf("add_bos %v add_eos %v: got %v, want %v", tc.bos, tc.eos, got, want)
		}
	}

	// WordPiece: [CLS] a [SEP] b [SEP].
	bw, err := synth.Bert(synth.BertConfig{Layers: 1, DModel: 32, Heads: 2, FFN: 64, Context: 32, DType: gguf.F32, Pooling: 4})
	if err != nil {
		t.Fatal(err)
	}
	bt := vocabulary(t, bw, nil)
	got := service.RankPrompt(bt, "cat", "a cat")
	want := append(append(bt.Encode("cat", true, false), bt.Encode("a cat", false, false)...), bt.SEP)
	if !slices.Equal(got, want) || got[0] != synth.BertCLS || got[len(got)-1] != synth.BertSep {
		t.Errorf("WordPiece pair %v, want %v", got, want)
	}
}

func countOf(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}
