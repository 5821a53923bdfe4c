package chat

import (
	"errors"
	"testing"
)

// Options: template variables reach the template (Qwen3's enable_thinking
// switch, reasoning_effort), a variable the renderer sets itself is
// refused, and continue_final_message cuts the prompt after the last
// message's content with its literal ranges clipped.
func TestOptions(t *testing.T) {
	const src = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}" +
		"{% if add_generation_prompt %}<|im_start|>assistant\n{% if enable_thinking is defined and not enable_thinking %}<think>\n\n</think>\n\n{% endif %}{% endif %}" +
		"{% if reasoning_effort is defined %}effort={{ reasoning_effort }}{% endif %}"
	tpl, err := New(src, "", "")
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "hi"}}
	p, err := tpl.PromptWith(msgs, nil, Options{GenerationPrompt: true, Vars: map[string]any{"enable_thinking": false, "reasoning_effort": "low"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\neffort=low"; p.Text != want {
		t.Fatalf("got %q, want %q", p.Text, want)
	}
	if _, err := tpl.PromptWith(msgs, nil, Options{Vars: map[string]any{"messages": true}}); !errors.Is(err, ErrMessages) {
		t.Fatalf("a reserved variable: %v, want ErrMessages", err)
	}
	cont := append(msgs, Message{Role: "assistant", Content: "The answer is"})
	p, err = tpl.PromptWith(cont, nil, Options{ContinueFinal: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nThe answer is"; p.Text != want {
		t.Fatalf("continue: got %q, want %q", p.Text, want)
	}
	for _, r := range p.Literal {
		if r[1] > len(p.Text) || r[0] >= r[1] {
			t.Fatalf("literal range %v outside %d bytes", r, len(p.Text))
		}
	}
	if last := p.Literal[len(p.Literal)-1]; last[1] != len(p.Text)-len("The answer is") {
		t.Fatalf("last literal %q", p.Text[last[0]:last[1]])
	}
	for _, o := range []Options{{ContinueFinal: true, GenerationPrompt: true}, {ContinueFinal: true}} {
		m := cont
		if !o.GenerationPrompt {
			m = msgs // last message not the assistant's
		}
		if _, err := tpl.PromptWith(m, nil, o); !errors.Is(err, ErrMessages) {
			t.Fatalf("%+v: %v, want ErrMessages", o, err)
		}
	}
}
