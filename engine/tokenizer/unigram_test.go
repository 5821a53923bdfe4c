package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
)

// TestUnigramVectors: the Unigram (t5) vocabulary llama.cpp ships,
// ggml-vocab-nomic-bert-moe.gguf (XLM-RoBERTa's SentencePiece, with its
// precompiled character map), tokenizes llama.cpp's test inputs (those of
// llama-spm) as llama.cpp does: testdata/llamacpp-ugm-nomic-bert-moe.json
// holds llama.cpp's ids, recorded through node-llama-cpp 3.22.1
// (llama.cpp ships no .out for this vocabulary).
func TestUnigramVectors(t *testing.T) {
	path := filepath.Join(vocabDir, "ggml-vocab-nomic-bert-moe.gguf")
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s absent: make llama-vocab copies it; CI must not skip this", path)
		}
		t.Skipf("%s absent: run make llama-vocab", path)
	}
	data, err := os.ReadFile("testdata/llamacpp-ugm-nomic-bert-moe.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec struct {
		Inputs []string  `json:"inputs"`
		IDs    [][]int32 `json:"ids"`
	}
	if err := json.Unmarshal(data, &rec); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	pass := 0
	for i, in := range rec.Inputs {
		got := tok.Encode(in, false, false)
		if !slices.Equal(got, rec.IDs[i]) {
			t.Errorf("%q:\n got %v\nwant %v", in, got, rec.IDs[i])
			continue
		}
		pass++
	}
	t.Logf("nomic-bert-moe (t5): %d/%d vectors", pass, len(rec.Inputs))
}

// FuzzUnigram: any text (invalid UTF-8, NULs, the character map's
// prefixes) encodes without panicking, and untrusted text never yields a
// control token.
func FuzzUnigram(f *testing.F) {
	path := filepath.Join(vocabDir, "ggml-vocab-nomic-bert-moe.gguf")
	g, err := gguf.Open(path)
	if err != nil {
		f.Skipf("%s: %v (make llama-vocab)", path, err)
	}
	tok, err := FromGGUF(g)
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Hello  world\t\n ｈｅｌｌｏ ﬁ ①")
	f.Add("\x00\xff\xfe<s></s>▁▁")
	f.Fuzz(func(t *testing.T, s string) {
		for _, id := range tok.Encode(s, false, false) {
			if tok.Type(id) == TypeControl {
				t.Fatalf("%q gave control token %d", s, id)
			}
		}
	})
}
