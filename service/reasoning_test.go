package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode"

	"github.com/cloison/cloison/engine/chat"
	"pgregory.net/rapid"
)

// reasoningCases: a generation's raw text and how it splits, with the
// prompt opening the reasoning (inside) or not.
var reasoningCases = []struct {
	name               string
	inside             bool
	raw                string
	reasoning, content string
}{
	{"qwen3 thinks", false, "<think>\nLet me add.\n</think>\n\n4", "\nLet me add.\n", "\n\n4"},
	{"leading space before the tag", false, "\n <think>a</think>b", "\n a", "b"},
	{"no tags, not inside", false, "just an answer", "", "just an answer"},
	{"tag later is content", false, "answer <think>x</think>", "", "answer <think>x</think>"},
	{"r1 prompt opened it", true, "reason\n</think>\n\nanswer", "reason\n", "\n\nanswer"},
	{"r1 repeats the open tag", true, "<think>reason</think>answer", "reason", "answer"},
	{"cut off while reasoning", false, "<think>still thinking", "still thinking", ""},
	{"cut off inside the close tag", false, "<think>still</thi", "still</thi", ""},
	{"partial open tag at the end", false, "<thi", "", "<thi"},
	{"only whitespace", false, "  \n", "", "  \n"},
	{"second close is content", false, "<think>a</think>b</think>c", "a", "b</think>c"},
	{"lookalike close", false, "<think>a</thinker>b</think>c", "a</thinker>b", "c"},
	{"empty reasoning", false, "<think></think>x", "", "x"},
	{"inside, nothing", true, "", "", ""},
	{"multibyte", true, "é中</think>ü", "é中", "ü"},
}

func feedAll(inside bool, chunks []string) (string, string) {
	r := NewReasoningStream(ThinkTags, inside)
	var rb, cb strings.Builder
	for _, c := range chunks {
		a, b := r.Feed(c, false)
		if strings.Contains(a, thinkClose) {
			panic("the close tag reached the reasoning")
		}
		rb.WriteString(a)
		cb.WriteString(b)
	}
	a, b := r.Feed("", true)
	rb.WriteString(a)
	cb.WriteString(b)
	return rb.String(), cb.String()
}

// TestReasoningSplit: every case splits the same whether fed whole, cut at
// any one byte, or byte by byte (a tag split across deltas never leaks).
func TestReasoningSplit(t *testing.T) {
	for _, c := range reasoningCases {
		t.Run(c.name, func(t *testing.T) {
			check := func(how string, chunks []string) {
				t.Helper()
				r, ct := feedAll(c.inside, chunks)
				if r != c.reasoning || ct != c.content {
					t.Fatalf("%s: got reasoning %q content %q, want %q %q", how, r, ct, c.reasoning, c.content)
				}
			}
			check("whole", []string{c.raw})
			for i := 0; i <= len(c.raw); i++ {
				check("cut", []string{c.raw[:i], c.raw[i:]})
			}
			var bytes []string
			for i := range len(c.raw) {
				bytes = append(bytes, c.raw[i:i+1])
			}
			check("bytes", bytes)
		})
	}
}

// refSplit is the split read from the whole text at once.
func refSplit(raw string, inside bool) (string, string) {
	t := strings.TrimLeftFunc(raw, unicode.IsSpace)
	body := raw
	switch {
	case strings.HasPrefix(t, thinkOpen):
		body = raw[:len(raw)-len(t)] + t[len(thinkOpen):]
	case !inside:
		return "", raw
	}
	i := strings.Index(body, thinkClose)
	if i < 0 {
		return body, ""
	}
	return body[:i], body[i+len(thinkClose):]
}

// TestReasoningProperties: for any text and any cutting of it into deltas,
// concat(reasoning)+concat(content) is the text minus the opening and
// closing tags, the split is the one read from the whole text, and no
// released delta carries the close tag on the reasoning side.
func TestReasoningProperties(t *testing.T) {
	atoms := []string{"<think>", "</think>", "<", "</", "think", ">", "/", "a", " ", "\n", "é", "</thi", "nk>"}
	rapid.Check(t, func(rt *rapid.T) {
		inside := rapid.Bool().Draw(rt, "inside")
		parts := rapid.SliceOfN(rapid.SampledFrom(atoms), 0, 12).Draw(rt, "parts")
		raw := strings.Join(parts, "")
		var chunks []string
		for rest := raw; rest != ""; {
			n := rapid.IntRange(1, len(rest)).Draw(rt, "cut")
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		r, c := feedAll(inside, chunks)
		wr, wc := refSplit(raw, inside)
		if r != wr || c != wc {
			rt.Fatalf("chunks %q: got %q / %q, want %q / %q", chunks, r, c, wr, wc)
		}
		removed := len(raw) - len(r) - len(c)
		if removed != 0 && removed != len(thinkOpen) && removed != len(thinkClose) && removed != len(thinkOpen)+len(thinkClose) {
			rt.Fatalf("removed %d bytes: not the tags", removed)
		}
		if !strings.Contains(raw, "think>") && r+c != raw {
			rt.Fatalf("no tags, yet the text changed: %q+%q != %q", r, c, raw)
		}
	})
}

// TestReasoningStart: the prompt's end decides where the output starts.
func TestReasoningStart(t *testing.T) {
	for _, c := range []struct {
		tail        string
		inside, off bool
	}{
		{"<|im_start|>assistant\n", false, false},
		{"<|im_start|>assistant\n<think>\n\n</think>\n\n", false, true},
		{"<｜Assistant｜><think>\n", true, false},
	} {
		inside, off := ReasoningStart(ThinkTags, c.tail)
		if inside != c.inside || off != c.off {
			t.Errorf("%q: inside %v off %v, want %v %v", c.tail, inside, off, c.inside, c.off)
		}
	}
	if _, off := ReasoningStart(NoReasoning, "<think>"); !off {
		t.Error("a model without reasoning markers is never parsed")
	}
	if DetectReasoning("{{ message.content }}") != NoReasoning || DetectReasoning("{{ '<think>' + r + '</think>' }}") != ThinkTags {
		t.Error("DetectReasoning")
	}
}

// TestReasoningStartTemplates renders real templates' generation prompts
// (engine/chat/testdata) and reads where their output starts: Qwen3 leaves
// the thinking to the model, DeepSeek-R1's distillations and MiniMax M2
// open it, DeepSeek V3.1 (thinking off by default) closes it,
// and templates without the markers are never parsed.
func TestReasoningStartTemplates(t *testing.T) {
	for _, c := range []struct {
		file        string
		f           ReasoningFormat
		inside, off bool
	}{
		{"Qwen-Qwen3-0.6B", ThinkTags, false, false},
		{"Qwen-QwQ-32B", ThinkTags, false, true}, // enable_thinking undefined: closed
		{"deepseek-ai-DeepSeek-R1-Distill-Llama-8B", ThinkTags, true, false},
		{"llama-cpp-deepseek-r1", ThinkTags, true, false},
		{"deepseek-ai-DeepSeek-V3.1", ThinkTags, false, true},
		{"HuggingFaceTB-SmolLM3-3B", ThinkTags, false, false},
		{"MiniMax-M2", ThinkTags, true, false},
		{"ibm-granite-granite-3.3-2B-Instruct", ThinkTags, false, false}, // mentions the tags; parsed only if the output opens one
		{"openai-gpt-oss-120b", Harmony, false, false},
		{"ByteDance-Seed-OSS", NoReasoning, false, true},
		{"NousResearch-Hermes-3-Llama-3.1-8B-tool_use", NoReasoning, false, true},
	} {
		src, err := os.ReadFile(filepath.Join("..", "engine", "chat", "testdata", "hf", "templates", c.file+".jinja"))
		if err != nil {
			t.Fatal(err)
		}
		tpl, err := chat.New(string(src), "<|bos|>", "<|eos|>")
		if err != nil {
			t.Fatal(err)
		}
		p, err := tpl.Prompt([]chat.Message{{Role: "user", Content: "hi"}}, true)
		if err != nil {
			t.Fatal(err)
		}
		f := DetectReasoning(string(src))
		inside, off := ReasoningStart(f, p.Text)
		if f != c.f || inside != c.inside || off != c.off {
			t.Errorf("%s: format %d inside %v off %v, want %d %v %v (prompt ends %q)", c.file, f, inside, off, c.f, c.inside, c.off, p.Text[max(0, len(p.Text)-40):])
		}
	}
}

// BenchmarkReasoningFeed: the parser's cost per generated token (pieces
// of 4 bytes, the reasoning then the answer).
func BenchmarkReasoningFeed(b *testing.B) {
	text := "<think>" + strings.Repeat("let me think about it ", 50) + "</think>" + strings.Repeat("the answer is four ", 50)
	var pieces []string
	for i := 0; i < len(text); i += 4 {
		pieces = append(pieces, text[i:min(i+4, len(text))])
	}
	b.ResetTimer()
	for range b.N {
		r := NewReasoningStream(ThinkTags, false)
		for _, p := range pieces {
			r.Feed(p, false)
		}
		r.Feed("", true)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pieces)), "ns/token")
}
