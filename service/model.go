package service

import (
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/tokenizer"
)

// Model is the served model's text side: its tokenizer and chat template.
// It turns a decoded request into prompt tokens and a grammar, and the
// generated tokens back into tool calls (tools.go), so that every
// transport builds the same prompt from the same request and reads the
// same calls from the same output. A value holding only pointers to
// read-only state: safe for concurrent use.
type Model struct {
	Name      string // the served name, in errors
	Tokenizer *tokenizer.Tokenizer
	Chat      *chat.Template
	// Admit (optional) is called with the length in bytes of a prompt's
	// text before it is tokenized (CompletionPrompt, PrepareChat,
	// ChatPrompt; a chat once rendered): its error is returned instead
	// and nothing is tokenized. Transports set it to the caller's
	// Requests.Preadmit, so that a request its tenant's quota or policy
	// refuses costs no tokenization.
	Admit func(promptBytes int) error
}

// admit is m.Admit, nil when unset.
func (m Model) admit(promptBytes int) error {
	if m.Admit == nil {
		return nil
	}
	return m.Admit(promptBytes)
}
