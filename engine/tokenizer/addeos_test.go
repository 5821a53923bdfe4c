package tokenizer_test

import (
	"bytes"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
)

// TestAddEOSLastTokenPooling: a last-token-pooling embedding model whose
// vocabulary sets tokenizer.ggml.add_eos_token (Qwen3-Embedding's files)
// has EOS appended to every text the embeddings path encodes with its
// special tokens, as llama.cpp's tokenizer does, so the pooled last token
// is EOS; without the flag (or set false) nothing is appended, and a text
// encoded without special tokens never ends in an added EOS.
func TestAddEOSLastTokenPooling(t *testing.T) {
	for _, tc := range []struct {
		name    string
		set     *bool
		wantEOS bool
	}{
		{"absent", nil, false},
		{"false", new(false), false},
		{"true", new(true), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := synth.ContextBag(synth.BagConfig{Pooling: 3})
			if err != nil {
				t.Fatal(err)
			}
			if tc.set != nil {
				if err := w.Set("tokenizer.ggml.add_eos_token", *tc.set); err != nil {
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
			plain := tk.Encode("hello world", false, false)
			got := tk.Encode("hello world", true, false)
			want := plain
			if tc.wantEOS {
				want = append(append([]int32{}, plain...), tk.EOS)
			}
			if len(got) != len(want) {
				t.Fatalf("got %v, want %v", got, want)
			}
			for i := range got {
				if got[i] != want[i] {
					t.Fatalf("got %v, want %v", got, want)
				}
			}
			if len(plain) == 0 || plain[len(plain)-1] == tk.EOS {
				t.Fatalf("plain encoding %v", plain)
			}
		})
	}
}
