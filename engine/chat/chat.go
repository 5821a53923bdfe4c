// Package chat renders chat messages into a prompt with a model's own chat
// template (GGUF tokenizer.chat_template, a Jinja template), as llama.cpp and
// Hugging Face do, so that a model sees the turn format it was trained on.
// Rendering uses gonja (a Go Jinja implementation). A model without a
// template gets ChatML.
//
// A Template is immutable and safe for concurrent use. Rendering is bounded:
// templates come from model files, which are operator-supplied, but messages
// come from clients, so their content is passed as data, never as template
// source.
package chat

import (
	"fmt"
	"strings"

	"github.com/cloison/cloison"
	"github.com/nikolalohinski/gonja/v2"
	"github.com/nikolalohinski/gonja/v2/exec"
)

// ErrTemplate: the model's template does not compile, or it refused the
// messages (raise_exception), e.g. roles out of order.
var ErrTemplate = cloison.NewError(cloison.CodeInvalid, "chat: the model's chat template rejected the messages")

// ErrMessages: messages that no template can take (empty list, unknown role).
var ErrMessages = cloison.NewError(cloison.CodeInvalid, "chat: invalid messages")

// ChatML is the template used when a model has none.
const ChatML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Template is a compiled chat template.
type Template struct {
	src      string
	tpl      *exec.Template
	bos, eos string
}

// New compiles src (ChatML if empty); bos and eos are the model's BOS and
// EOS token strings, which many templates reference.
func New(src, bos, eos string) (*Template, error) {
	if strings.TrimSpace(src) == "" {
		src = ChatML
	}
	tpl, err := gonja.FromString(src)
	if err != nil {
		return nil, fmt.Errorf("%w: compile: %v", ErrTemplate, err)
	}
	return &Template{src: src, tpl: tpl, bos: bos, eos: eos}, nil
}

// Source returns the template source in use.
func (t *Template) Source() string { return t.src }

var roles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true, "developer": true}

// Render returns the prompt text for msgs; with generationPrompt the
// template opens the assistant's turn.
func (t *Template) Render(msgs []Message, generationPrompt bool) (string, error) {
	if len(msgs) == 0 {
		return "", fmt.Errorf("%w: no messages", ErrMessages)
	}
	list := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		if !roles[m.Role] {
			return "", fmt.Errorf("%w: message %d has role %q", ErrMessages, i, m.Role)
		}
		list[i] = map[string]any{"role": m.Role, "content": m.Content}
	}
	ctx := exec.NewContext(map[string]any{
		"messages":              list,
		"add_generation_prompt": generationPrompt,
		"bos_token":             t.bos,
		"eos_token":             t.eos,
		"raise_exception": func(msg string) (string, error) {
			return "", fmt.Errorf("%w: %s", ErrTemplate, msg)
		},
	})
	out, err := t.tpl.ExecuteToString(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrTemplate, err)
	}
	return out, nil
}
