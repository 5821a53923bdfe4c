package service

import (
	"strings"
	"testing"

	"pgregory.net/rapid"
)

var harmonyCases = []struct {
	name, raw          string
	reasoning, content string
}{
	{"analysis then final", "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.<|return|>", "Add them.", "It is 4."},
	{"final only", "<|channel|>final<|message|>4", "", "4"},
	{"cut off in analysis", "<|channel|>analysis<|message|>still thin", "still thin", ""},
	{"cut off in the next header", "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|chan", "a", ""},
	{"commentary is content", "<|channel|>analysis<|message|>a<|end|><|start|>assistant<|channel|>commentary to=functions.f <|constrain|>json<|message|>{}<|call|>", "a", "{}"},
	{"no header: all content", "It is 4.", "", "It is 4."},
	{"leading space then header", "\n<|channel|>analysis<|message|>r<|end|>", "r", ""},
	{"lookalike marker in text", "<|channel|>analysis<|message|>a <|en b<|end|><|channel|>final<|message|>c", "a <|en b", "c"},
	{"multibyte", "<|channel|>analysis<|message|>é中<|end|><|start|>assistant<|channel|>final<|message|>ü", "é中", "ü"},
	{"a stray message marker is dropped", "<|channel|>analysis<|message|>a<|message|>b<|end|><|channel|>final<|message|><|message|>c", "ab", "c"},
	{"empty", "", "", ""},
}

func harmonyFeed(chunks []string) (string, string) {
	r := NewReasoningStream(Harmony, false)
	var rb, cb strings.Builder
	for _, c := range chunks {
		a, b := r.Feed(c, false)
		rb.WriteString(a)
		cb.WriteString(b)
	}
	a, b := r.Feed("", true)
	return rb.String() + a, cb.String() + b
}

// TestHarmonySplit: gpt-oss's channels split the same whether fed whole,
// cut at any byte, or byte by byte: analysis to the reasoning, other
// channels to the content, no header or marker to either.
func TestHarmonySplit(t *testing.T) {
	for _, c := range harmonyCases {
		t.Run(c.name, func(t *testing.T) {
			check := func(how string, chunks []string) {
				t.Helper()
				if r, ct := harmonyFeed(chunks); r != c.reasoning || ct != c.content {
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

// TestHarmonyProperties: any text, any cutting into deltas, splits as the
// whole text does, and no marker reaches either side.
func TestHarmonyProperties(t *testing.T) {
	atoms := []string{hStart, hChannel, hMessage, hEnd, hReturn, hCall, "analysis", "final", "assistant", "<|", "|>", "a", " ", "é"}
	rapid.Check(t, func(rt *rapid.T) {
		raw := strings.Join(rapid.SliceOfN(rapid.SampledFrom(atoms), 0, 14).Draw(rt, "parts"), "")
		var chunks []string
		for rest := raw; rest != ""; {
			n := rapid.IntRange(1, len(rest)).Draw(rt, "cut")
			chunks = append(chunks, rest[:n])
			rest = rest[n:]
		}
		r, c := harmonyFeed(chunks)
		wr, wc := harmonyFeed([]string{raw})
		if r != wr || c != wc {
			rt.Fatalf("chunks %q: got %q / %q, whole %q / %q", chunks, r, c, wr, wc)
		}
		if strings.HasPrefix(strings.TrimLeft(raw, " "), "<|") {
			for _, m := range []string{hMessage, hEnd, hReturn, hCall} {
				if strings.Contains(r, m) {
					rt.Fatalf("%q: marker %s in the reasoning %q", raw, m, r)
				}
			}
		}
	})
}

func TestDetectHarmony(t *testing.T) {
	if f := DetectReasoning(`{{- "<|start|>assistant<|channel|>analysis<|message|>" }}`); f != Harmony {
		t.Errorf("got %d, want Harmony", f)
	}
	if inside, off := ReasoningStart(Harmony, "<|start|>assistant"); inside || off {
		t.Errorf("harmony start: inside %v off %v", inside, off)
	}
}

// BenchmarkHarmonyFeed: the harmony parser's cost per generated token
// (pieces of 4 bytes, the analysis then the final message).
func BenchmarkHarmonyFeed(b *testing.B) {
	text := "<|channel|>analysis<|message|>" + strings.Repeat("let me think about it ", 50) + "<|end|><|start|>assistant<|channel|>final<|message|>" + strings.Repeat("the answer is four ", 50)
	var pieces []string
	for i := 0; i < len(text); i += 4 {
		pieces = append(pieces, text[i:min(i+4, len(text))])
	}
	b.ResetTimer()
	for range b.N {
		r := NewReasoningStream(Harmony, false)
		for _, p := range pieces {
			r.Feed(p, false)
		}
		r.Feed("", true)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(pieces)), "ns/token")
}
