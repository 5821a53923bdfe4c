package chat

import (
	"errors"
	"testing"
)

// Llama 2's template, as published in its tokenizer_config.json.
const llama2 = "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"

// SmolLM2-Instruct's template (ChatML with a default system prompt).
const smollm2 = "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

func TestRender(t *testing.T) {
	user := []Message{{Role: "user", Content: "Bonjour, ça va ?"}}
	tests := []struct {
		name string
		src  string
		msgs []Message
		gen  bool
		want string
		err  error
	}{
		{"chatml default", "", user, true, "<|im_start|>user\nBonjour, ça va ?<|im_end|>\n<|im_start|>assistant\n", nil},
		{"chatml without generation prompt", "", user, false, "<|im_start|>user\nBonjour, ça va ?<|im_end|>\n", nil},
		{"smollm2 adds its system prompt", smollm2, user, true, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n<|im_start|>user\nBonjour, ça va ?<|im_end|>\n<|im_start|>assistant\n", nil},
		{"llama2 with system", llama2, []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: " Hi "}}, true, "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\n Hi [/INST]", nil},
		{"llama2 refuses out-of-order roles", llama2, []Message{{Role: "assistant", Content: "x"}}, true, "", ErrTemplate},
		{"no messages", "", nil, true, "", ErrMessages},
		{"unknown role", "", []Message{{Role: "root", Content: "x"}}, true, "", ErrMessages},
		{"content is data, never template source", "", []Message{{Role: "user", Content: "{{ 7*7 }}{% raw %}"}}, false, "<|im_start|>user\n{{ 7*7 }}{% raw %}<|im_end|>\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tpl, err := New(tt.src, "<s>", "</s>")
			if err != nil {
				t.Fatal(err)
			}
			got, err := tpl.Render(tt.msgs, tt.gen)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("got error %v, want %v", err, tt.err)
			}
			if got != tt.want {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
	if _, err := New("{% for %}", "", ""); !errors.Is(err, ErrTemplate) {
		t.Fatalf("got %v, want ErrTemplate for a broken template", err)
	}
}
