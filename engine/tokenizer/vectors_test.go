package tokenizer

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/gguf"
)

// vocabDir holds llama.cpp's tokenizer test vocabularies; make llama-vocab
// (run by make test) extracts them from the pinned llama.cpp source.
const vocabDir = "../../.cache/llama-vocab"

// mustPass are the vocabularies whose every vector must match: those that the
// architectures we load use. Any other vocabulary in the set must either pass
// every vector too or be refused with ErrUnsupported (never tokenized wrong).
// Gemma 1–3 files use the SentencePiece model
// that llama-spm and phi-3 check; gemma-4 is the "gemma4" model.
var mustPass = []string{
	"gpt-2", "llama-bpe", "llama-spm", "qwen2", "qwen35", "deepseek-llm", "deepseek-coder",
	"falcon", "starcoder", "refact", "mpt", "phi-3", "command-r", "gemma-4",
	"bert-bge",
}

// llamaVectors reads name.gguf.inp/.out as llama.cpp's test-tokenizer-0 does:
// inputs separated by "\n__ggml_vocab_test__\n", one line of ids each.
func llamaVectors(t *testing.T, base string) (inputs []string, want [][]int32) {
	t.Helper()
	inp, err := os.ReadFile(base + ".inp")
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(base + ".out")
	if err != nil {
		t.Fatal(err)
	}
	const sep = "\n__ggml_vocab_test__\n"
	inputs = strings.Split(strings.TrimSuffix(string(inp), sep), sep)
	outLines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(inputs) != len(outLines) {
		t.Fatalf("%s: %d inputs, %d outputs", base, len(inputs), len(outLines))
	}
	for _, l := range outLines {
		var ids []int32
		for _, f := range strings.Fields(l) {
			id, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s: %q: %v", base, l, err)
			}
			ids = append(ids, int32(id))
		}
		want = append(want, ids)
	}
	return inputs, want
}

// TestLlamaCppVectors runs llama.cpp's tokenizer vectors (test-tokenizer-0:
// no BOS/EOS, control tokens not parsed) over every vocabulary of its test
// set, and decodes each encoding back to its input (WordPiece, which
// normalizes, excepted).
func TestLlamaCppVectors(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join(vocabDir, "ggml-vocab-*.gguf"))
	if len(files) == 0 {
		if os.Getenv("CI") != "" {
			t.Fatalf("llama.cpp vocabularies absent from %s: make test runs make llama-vocab; CI must not skip this", vocabDir)
		}
		t.Skipf("llama.cpp vocabularies absent from %s: run make llama-vocab (make test does)", vocabDir)
	}
	seen := map[string]bool{}
	totalPass, totalCases := 0, 0
	for _, path := range files {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "ggml-vocab-"), ".gguf")
		if _, err := os.Stat(path + ".inp"); err != nil {
			continue // llama.cpp has no vectors for this one
		}
		seen[name] = true
		t.Run(name, func(t *testing.T) {
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			tok, err := FromGGUF(f)
			if err != nil {
				if slices.Contains(mustPass, name) || !errors.Is(err, ErrUnsupported) {
					t.Fatalf("FromGGUF: %v", err)
				}
				t.Logf("refused (not a supported architecture's vocabulary): %v", err)
				return
			}
			inputs, want := llamaVectors(t, path)
			pass := 0
			for i, in := range inputs {
				got := tok.Encode(in, false, false)
				if len(got) < tok.MinTokens(len(in)) {
					t.Errorf("Encode(%q): %d tokens, fewer than MinTokens' bound %d", in, len(got), tok.MinTokens(len(in)))
				}
				// Every vector round-trips, but WordPiece: its normalizer
				// lowercases, strips accents and drops whitespace.
				if back := tok.Decode(got, false); back != in && tok.Model != "bert" {
					t.Errorf("Decode(Encode(%q)) = %q", in, back)
				}
				if slices.Equal(got, want[i]) {
					pass++
					continue
				}
				t.Errorf("%q:\n got %v\nwant %v", in, got, want[i])
			}
			totalPass += pass
			totalCases += len(inputs)
			t.Logf("%s (model %s, pre %q): %d/%d vectors", name, tok.Model, tok.Pre, pass, len(inputs))
		})
	}
	for _, name := range mustPass {
		if !seen[name] {
			t.Errorf("vocabulary %s missing from %s", name, vocabDir)
		}
	}
	t.Logf("all vocabularies: %d/%d vectors", totalPass, totalCases)
}
