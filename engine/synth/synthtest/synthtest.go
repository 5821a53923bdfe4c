// Package synthtest turns the synthetic GGUF models of engine/synth into what
// tests use: the parsed file and its tokenizer, failing the test on any error.
package synthtest

import (
	"bytes"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
)

// File serializes w (made with err, as synth's constructors return them)
// and parses it back, as a reader of the file on disk would.
func File(tb testing.TB, w *gguf.Writer, err error) *gguf.File {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		tb.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		tb.Fatal(err)
	}
	return f
}

// Tokenizer is the tokenizer of the model w.
func Tokenizer(tb testing.TB, w *gguf.Writer, err error) *tokenizer.Tokenizer {
	tb.Helper()
	tok, err := tokenizer.FromGGUF(File(tb, w, err))
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// ChatML is the tokenizer of a small random synthetic model: byte-level BPE
// whose vocabulary has the ChatML control tokens <|im_start|> and
// <|im_end|> (synth.IMStart, synth.IMEnd).
func ChatML(tb testing.TB) *tokenizer.Tokenizer {
	tb.Helper()
	w, err := synth.Random(synth.Config{Layers: 1, DModel: 64, Heads: 2, FFN: 64, Vocab: 600, Context: 256, DType: gguf.F32, Seed: 1})
	return Tokenizer(tb, w, err)
}

// Bag is the tokenizer of the context-bag model (its vocabulary does not
// depend on the model's size).
func Bag(tb testing.TB) *tokenizer.Tokenizer {
	tb.Helper()
	w, err := synth.ContextBag(synth.BagConfig{})
	return Tokenizer(tb, w, err)
}
