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
}
