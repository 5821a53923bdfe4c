package tokenizer

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloison/cloison/engine/gguf"
	"pgregory.net/rapid"
)

func gunzip(t testing.TB, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(z); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func lines(b []byte) []string {
	// Split on "\n" only: some pieces end in "\r", which bufio.ScanLines would drop.
	return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
}

// fromMetadata writes kv into an in-memory GGUF file, parses it and builds
// the tokenizer, exactly as a model load does.
func fromMetadata(t testing.TB, kv map[string]any) *Tokenizer {
	t.Helper()
	w := gguf.NewWriter()
	for k, v := range kv {
		if err := w.Set(k, v); err != nil {
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
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Built tokenizers are immutable and shared between tests (building the
// LLaMA one parses 32,000 pieces and 61,249 merges).
var built sync.Map // name → *Tokenizer

func cached(name string, build func() *Tokenizer) *Tokenizer {
	if t, ok := built.Load(name); ok {
		return t.(*Tokenizer)
	}
	t := build()
	built.Store(name, t)
	return t
}

func gpt2Tok(t testing.TB, pre string) *Tokenizer {
	return cached("gpt2/"+pre, func() *Tokenizer { return buildGPT2(t, pre) })
}

func buildGPT2(t testing.TB, pre string) *Tokenizer {
	var enc map[string]int32
	if err := json.Unmarshal(gunzip(t, "testdata/gpt2_encoder.json.gz"), &enc); err != nil {
		t.Fatal(err)
	}
	tokens := make([]string, len(enc))
	types := make([]int32, len(enc))
	for s, id := range enc {
		tokens[id] = s
		types[id] = TypeNormal
	}
	types[50256] = TypeControl
	merges := lines(gunzip(t, "testdata/gpt2_vocab.bpe.gz"))[1:] // skip "#version"
	return fromMetadata(t, map[string]any{
		"tokenizer.ggml.model":        "gpt2",
		"tokenizer.ggml.pre":          pre,
		"tokenizer.ggml.tokens":       tokens,
		"tokenizer.ggml.token_type":   types,
		"tokenizer.ggml.merges":       merges,
		"tokenizer.ggml.bos_token_id": uint32(50256),
		"tokenizer.ggml.eos_token_id": uint32(50256),
		"tokenizer.chat_template":     "{{ messages }}",
	})
}

type vector struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

func vectors(t testing.TB, path string) []vector {
	var v []vector
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

func TestGPT2PublishedIDs(t *testing.T) {
	tok := gpt2Tok(t, "gpt-2")
	vs := vectors(t, "testdata/gpt2_vectors.json")
	if len(vs) < 10 {
		t.Fatalf("got %d vectors", len(vs))
	}
	for _, v := range vs {
		t.Run(v.Text, func(t *testing.T) {
			got := tok.Encode(v.Text, true, false)
			if !reflect.DeepEqual(got, v.IDs) {
				t.Fatalf("Encode(%q) = %v, want %v", v.Text, got, v.IDs)
			}
			if back := tok.Decode(got, true); back != v.Text {
				t.Errorf("Decode = %q, want %q", back, v.Text)
			}
		})
	}
	if got := tok.Encode("Hello world", true, false); !reflect.DeepEqual(got, []int32{15496, 995}) {
		t.Errorf("got %v, want [15496 995]", got)
	}
	if tok.ChatTemplate != "{{ messages }}" || tok.BOS != 50256 || tok.AddBOS || !tok.IsEOG(50256) {
		t.Errorf("got template %q BOS %d AddBOS %v", tok.ChatTemplate, tok.BOS, tok.AddBOS)
	}
}

func TestSpecialTokensOnlyWhenAllowed(t *testing.T) {
	tok := gpt2Tok(t, "gpt-2")
	text := "a<|endoftext|>b"
	tests := []struct {
		parse bool
		want  []int32
	}{
		{true, []int32{64, 50256, 65}},
		{false, []int32{64, 27, 91, 437, 1659, 5239, 91, 29, 65}},
	}
	for _, tc := range tests {
		if got := tok.Encode(text, false, tc.parse); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseSpecial=%v: got %v, want %v", tc.parse, got, tc.want)
		}
	}
	if got := tok.Decode([]int32{64, 50256}, false); got != "a" {
		t.Errorf("control token rendered without special: %q", got)
	}
	if got := tok.Decode([]int32{64, 50256}, true); got != "a<|endoftext|>" {
		t.Errorf("got %q", got)
	}
}

func TestPreTokenizers(t *testing.T) {
	tests := []struct {
		pre  string
		text string
		want []string
	}{
		{"gpt-2", "Hello world", []string{"Hello", " world"}},
		{"gpt-2", "It's  a test!!", []string{"It", "'s", " ", " a", " test", "!!"}},
		{"gpt-2", "x\n\nab  ", []string{"x", "\n", "\n", "ab", "  "}},
		{"gpt-2", "12345 ab", []string{"12345", " ab"}},
		{"gpt-2", "don'T", []string{"don", "'", "T"}},
		{"smollm", "ab 1234c", []string{"ab", " ", "1", "2", "3", "4", "c"}},
		{"llama-bpe", "12345 ab", []string{"123", "45", " ab"}},
		{"llama-bpe", "don'T\n\n x", []string{"don", "'T", "\n\n", " x"}},
		{"llama-bpe", "hi!!\n\nyo", []string{"hi", "!!\n\n", "yo"}},
		{"llama-bpe", "(foo) \tbar", []string{"(foo", ")", " ", "\tbar"}},
		{"qwen2", "12345", []string{"1", "2", "3", "4", "5"}},
		{"qwen35", "e\u0301x 12", []string{"e\u0301x", " ", "1", "2"}},
		{"qwen2", "e\u0301x", []string{"e", "\u0301x"}},
		{"falcon", "a+b 1234567", []string{"a", "+", "b", " ", "123", "456", "7"}},
		{"deepseek-coder", "ab\n12!!", []string{"ab", "\n", "1", "2", "!!"}},
		{"deepseek-llm", "ab 123\n  ", []string{"ab", " ", "123", "\n", "  "}},
	}
	for _, tc := range tests {
		t.Run(tc.pre+"/"+tc.text, func(t *testing.T) {
			k, err := preFor(tc.pre)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			k.split(tc.text, func(s string) { got = append(got, s) })
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := preFor("no-such-pre"); err == nil {
		t.Error("unknown pre-tokenizer accepted")
	}
}

func llama(t testing.TB) *Tokenizer {
	return cached("llama", func() *Tokenizer { return buildLlama(t) })
}

func buildLlama(t testing.TB) *Tokenizer {
	tokens := lines(gunzip(t, "testdata/llama_vocab.txt.gz"))
	if len(tokens) != 32000 {
		t.Fatalf("got %d tokens", len(tokens))
	}
	index := map[string]int{}
	for i, s := range tokens {
		index[s] = i
	}
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -1e9
	}
	for r, m := range lines(gunzip(t, "testdata/llama_merges.txt.gz")) {
		a, b, _ := strings.Cut(m, " ")
		if id, ok := index[a+b]; ok && scores[id] == -1e9 {
			scores[id] = -float32(r)
		}
	}
	types := make([]int32, len(tokens))
	for i := range types {
		switch {
		case i == 0:
			types[i] = TypeUnknown
		case i <= 2:
			types[i] = TypeControl
		case i < 259:
			types[i] = TypeByte
		default:
			types[i] = TypeNormal
		}
	}
	return fromMetadata(t, map[string]any{
		"tokenizer.ggml.model":      "llama",
		"tokenizer.ggml.tokens":     tokens,
		"tokenizer.ggml.scores":     scores,
		"tokenizer.ggml.token_type": types,
	})
}

func TestLlamaPublishedIDs(t *testing.T) {
	tok := llama(t)
	vs := vectors(t, "testdata/llama_vectors.json")
	if len(vs) != 12 {
		t.Fatalf("got %d vectors, want the package's 12", len(vs))
	}
	for _, v := range vs {
		name := v.Text
		if len(name) > 20 {
			name = name[:20]
		}
		t.Run(name, func(t *testing.T) {
			got := tok.Encode(v.Text, true, false)
			if !reflect.DeepEqual(got, v.IDs) {
				t.Fatalf("Encode(%q) = %v, want %v", v.Text, got, v.IDs)
			}
			if back := tok.Decode(got, false); back != v.Text {
				t.Errorf("Decode = %q, want %q", back, v.Text)
			}
		})
	}
	if tok.BOS != 1 || tok.EOS != 2 || !tok.AddBOS {
		t.Errorf("got BOS %d EOS %d AddBOS %v, want llama defaults 1 2 true", tok.BOS, tok.EOS, tok.AddBOS)
	}
	if got := tok.Encode("<s>", false, true); !reflect.DeepEqual(got, []int32{1}) {
		t.Errorf("parsed <s>: got %v, want [1]", got)
	}
	if got := tok.Encode("<s>", false, false); reflect.DeepEqual(got, []int32{1}) {
		t.Error("control token <s> recognised in untrusted text")
	}
}

func TestBadMetadata(t *testing.T) {
	base := func() map[string]any {
		return map[string]any{
			"tokenizer.ggml.model":  "gpt2",
			"tokenizer.ggml.tokens": []string{"a", "b", "ab"},
			"tokenizer.ggml.merges": []string{"a b"},
		}
	}
	tests := []struct {
		name   string
		change func(map[string]any)
	}{
		{"no model", func(m map[string]any) { delete(m, "tokenizer.ggml.model") }},
		{"unknown model", func(m map[string]any) { m["tokenizer.ggml.model"] = "rwkv" }},
		{"bert without its special ids", func(m map[string]any) { m["tokenizer.ggml.model"] = "bert" }},
		{"no tokens", func(m map[string]any) { delete(m, "tokenizer.ggml.tokens") }},
		{"no merges", func(m map[string]any) { delete(m, "tokenizer.ggml.merges") }},
		{"bad merge", func(m map[string]any) { m["tokenizer.ggml.merges"] = []string{"ab"} }},
		{"types length", func(m map[string]any) { m["tokenizer.ggml.token_type"] = []int32{1} }},
		{"bos out of range", func(m map[string]any) { m["tokenizer.ggml.bos_token_id"] = uint32(3) }},
		{"unknown pre", func(m map[string]any) { m["tokenizer.ggml.pre"] = "nope" }},
		{"llama without scores", func(m map[string]any) { m["tokenizer.ggml.model"] = "llama" }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := base()
			tc.change(m)
			w := gguf.NewWriter()
			for k, v := range m {
				w.Set(k, v)
			}
			var buf bytes.Buffer
			w.WriteTo(&buf)
			f, err := gguf.Parse(buf.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if _, err := FromGGUF(f); err == nil {
				t.Error("got nil error")
			}
		})
	}
}

func FuzzEncodeDecode(f *testing.F) {
	tok := gpt2Tok(f, "gpt-2")
	f.Add("Hello world")
	f.Add("  \n\t x'sé🦙12")
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s, false, false)
		if got := tok.Decode(ids, false); got != s {
			t.Fatalf("round trip of %q gave %q", s, got)
		}
	})
}

// TestLongInputIsNotQuadratic: one 200,000-byte pre-token (a single "word")
// and a 200,000-byte SentencePiece run encode in well under a second per
// 100k bytes; a quadratic merge loop would take minutes.
func TestLongInputIsNotQuadratic(t *testing.T) {
	tests := []struct {
		name string
		tok  *Tokenizer
	}{
		{"gpt2", gpt2Tok(t, "gpt-2")},
		{"llama", llama(t)},
	}
	text := strings.Repeat("abcdefghij", 20000)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			ids := tc.tok.Encode(text, false, false)
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("encoding took %v", d)
			}
			if got := tc.tok.Decode(ids, false); got != text {
				t.Errorf("round trip failed (%d ids)", len(ids))
			}
		})
	}
}

// TestEncodeTemplated: control tokens only inside a literal range, never
// across its edge, so chat content that spells a control token stays text.
func TestEncodeTemplated(t *testing.T) {
	tok := gpt2Tok(t, "gpt-2")
	text := "a<|endoftext|>b<|endoftext|>"
	plain := tok.Encode("<|endoftext|>", false, false)
	tests := []struct {
		name    string
		literal [][2]int
		want    []int32
	}{
		{"no literal", nil, tok.Encode(text, false, false)},
		{"first token literal", [][2]int{{0, 14}}, append([]int32{64, 50256, 65}, plain...)},
		{"second token literal", [][2]int{{0, 1}, {15, 28}}, append(append([]int32{64}, plain...), 65, 50256)},
		{"range cuts the token", [][2]int{{0, 13}, {13, 28}}, append(append([]int32{64}, plain...), 65, 50256)},
		{"everything literal", [][2]int{{0, 28}}, tok.Encode(text, false, true)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tok.EncodeTemplated(text, tt.literal, false); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// MinTokens is a lower bound: no text, of the GPT-2 or the Llama
// vocabulary, encodes to fewer tokens than it says for its length (the
// bound Requests.Preadmit admits a prompt on before tokenizing it), and
// EncodedBytes counts every byte encoded.
func TestMinTokensBoundsEncode(t *testing.T) {
	for name, tok := range map[string]*Tokenizer{"gpt2": gpt2Tok(t, "gpt-2"), "llama": llama(t)} {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				text := rapid.OneOf(rapid.StringOfN(rapid.RuneFrom([]rune(" \n\tabcdeéz0123456789.,-=_")), 0, 400, -1), rapid.String()).Draw(rt, "text")
				before := tok.EncodedBytes()
				ids := tok.Encode(text, false, false)
				if len(ids) < tok.MinTokens(len(text)) {
					rt.Fatalf("Encode(%q): %d tokens, fewer than MinTokens(%d) = %d", text, len(ids), len(text), tok.MinTokens(len(text)))
				}
				if got := tok.EncodedBytes() - before; got != int64(len(text)) {
					rt.Fatalf("EncodedBytes moved by %d for %d bytes", got, len(text))
				}
			})
		})
	}
}
