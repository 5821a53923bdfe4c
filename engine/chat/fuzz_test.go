package chat

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzTemplate: any template source either fails to compile with
// ErrTemplate or renders; rendering fails only with ErrTemplate or
// ErrMessages (never a panic: the renderer's are recovered); and a Prompt
// that succeeds has Render's text and literal ranges inside it, in order.
func FuzzTemplate(f *testing.F) {
	files, _ := filepath.Glob("testdata/hf/templates/*.jinja")
	for _, p := range files[:min(len(files), 8)] {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b), "hi</think><|im_end|>")
	}
	f.Add(ChatML, "x")
	f.Add("{{ (messages[0].content if true else 1) | tojson(indent=2) }}{{ strftime_now('%d %b %Y') }}", "a\"b")
	f.Add("{% for m in messages %}{{ raise_exception(m.content) }}{% endfor %}", "no")
	f.Fuzz(func(t *testing.T, src, content string) {
		if len(src) > 1<<16 {
			return
		}
		tpl, err := New(src, "<s>", "</s>")
		if err != nil {
			if !errors.Is(err, ErrTemplate) {
				t.Fatalf("New: %v is not ErrTemplate", err)
			}
			return
		}
		msgs := []Message{{Role: "system", Content: "s"}, {Role: "user", Content: content}}
		text, err := tpl.Render(msgs, true)
		if err != nil {
			if !errors.Is(err, ErrTemplate) && !errors.Is(err, ErrMessages) {
				t.Fatalf("Render: %v", err)
			}
			return
		}
		p, err := tpl.Prompt(msgs, true)
		if err != nil {
			return
		}
		if p.Text != text {
			t.Fatalf("Prompt text %q != Render text %q", p.Text, text)
		}
		end := 0
		for _, r := range p.Literal {
			if r[0] < end || r[1] <= r[0] || r[1] > len(p.Text) {
				t.Fatalf("literal ranges %v out of order or bounds (len %d)", p.Literal, len(p.Text))
			}
			end = r[1]
		}
	})
}
