package service

import (
	"strings"

	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/tokenizer"
)

// NewModel returns the Model of tok with template tpl, or, when tpl is
// nil, with the template the tokenizer carries (its BOS and EOS spelt as
// their tokens). name is the model's served name. Errors: the template's
// (chat.New).
func NewModel(name string, tok *tokenizer.Tokenizer, tpl *chat.Template) (Model, error) {
	if tpl == nil {
		var err error
		if tpl, err = chat.New(tok.ChatTemplate, tokenString(tok, tok.BOS), tokenString(tok, tok.EOS)); err != nil {
			return Model{}, err
		}
	}
	return Model{Name: name, Tokenizer: tok, Chat: tpl}, nil
}

func tokenString(t *tokenizer.Tokenizer, id int32) string {
	if id < 0 {
		return ""
	}
	return t.Token(id)
}

// CompletionPrompt is a completion request's prompt as token ids: ids as
// sent when isIDs; with a non-empty suffix, fill-in-the-middle as
// llama.cpp's infill ([BOS] FIM_PRE text FIM_SUF suffix FIM_MID), the
// user's text never parsed for control tokens (EncodeInfill); else text
// with BOS, control tokens not parsed. Errors: ErrUnsupported (a suffix
// for a model without fill-in-the-middle tokens).
func (m Model) CompletionPrompt(text string, ids []int32, isIDs bool, suffix string) ([]int32, error) {
	if !isIDs {
		if err := m.admit(len(text) + len(suffix)); err != nil {
			return nil, err
		}
	}
	switch {
	case suffix != "":
		prompt, ok := m.Tokenizer.EncodeInfill(text, suffix)
		if !ok {
			return nil, ErrUnsupported.Withf(`"suffix" (model %s has no fill-in-the-middle tokens)`, m.Name)
		}
		return prompt, nil
	case isIDs:
		return ids, nil
	default:
		return m.Tokenizer.Encode(text, true, false), nil
	}
}

// PrepareChat makes a chat request ready for Generate: its tools checked
// against the model's template (ToolFormat), its constraint (the
// response_format's schema, or the tool calls': RequestConstraint; not
// compiled yet), its prompt rendered (ChatPrompt). Where the prompt opens
// the reasoning, a schema, a choice, a grammar or a forced call holds after
// the reasoning ends (Constraint.After; reasoning.go).
// Errors: those of ToolFormat, RequestConstraint and ChatPrompt.
func (m Model) PrepareChat(msgs []chat.Message, use *ToolUse, schema []byte) (prompt []int32, c Constraint, err error) {
	return m.PrepareChatWith(msgs, use, Constraint{Schema: schema}, chat.Options{GenerationPrompt: true})
}

// PrepareChatWith is PrepareChat with the request's own constraint (a
// schema, a choice or a grammar written as text, and the JSON whitespace
// policy: want) and rendering with o (the generation prompt,
// continue_final_message, template variables; chat.Options).
func (m Model) PrepareChatWith(msgs []chat.Message, use *ToolUse, want Constraint, o chat.Options) (prompt []int32, c Constraint, err error) {
	if err := m.ToolFormat(use); err != nil {
		return nil, Constraint{}, err
	}
	if c, err = RequestConstraint(want.Schema, use); err != nil {
		return nil, Constraint{}, err
	}
	if want.Choice != nil || want.Syntax != "" {
		if !c.IsZero() {
			return nil, Constraint{}, ErrInvalidField.Withf("structured_outputs cannot be combined with response_format, tool_choice \"required\", a named function or a strict tool")
		}
		c.Choice, c.Syntax, c.Grammar = want.Choice, want.Syntax, want.Grammar
	}
	c.Whitespace = want.Whitespace
	p, bos, err := m.renderChat(msgs, use.TemplateTools(), o)
	if err != nil {
		return nil, Constraint{}, err
	}
	if err := m.admit(len(p.Text)); err != nil {
		return nil, Constraint{}, err
	}
	prompt = m.Tokenizer.EncodeTemplated(p.Text, p.Literal, bos)
	if _, inside := m.thinking(prompt); inside && (c.Schema != nil || c.Choice != nil || c.Syntax != "" || (c.Tools != nil && c.Tools.Force != "")) {
		c.After = thinkClose // the reasoning is free, the answer constrained
	}
	return prompt, c, nil
}

// ChatPrompt renders chat messages with the model's template and tokenizes
// the result. The template writes the control tokens itself: they are parsed
// in the template's own text only, never in message content, so content
// cannot open a turn of another role (chat.Prompt, EncodeTemplated).
// Errors: chat.ErrMessages, chat.ErrTemplate, chat.ErrContent.
func (m Model) ChatPrompt(msgs []chat.Message, tools []chat.Tool) ([]int32, error) {
	p, bos, err := m.RenderChat(msgs, tools)
	if err != nil {
		return nil, err
	}
	if err := m.admit(len(p.Text)); err != nil {
		return nil, err
	}
	return m.Tokenizer.EncodeTemplated(p.Text, p.Literal, bos), nil
}

// RenderChat renders chat messages with the model's template, marking the
// template's own text (chat.Prompt.Literal: the only place control tokens
// are parsed); bos says whether the tokenizer must add BOS (the template
// does not write it). Errors: as ChatPrompt.
func (m Model) RenderChat(msgs []chat.Message, tools []chat.Tool) (p chat.Prompt, bos bool, err error) {
	return m.renderChat(msgs, tools, chat.Options{GenerationPrompt: true})
}

func (m Model) renderChat(msgs []chat.Message, tools []chat.Tool, o chat.Options) (p chat.Prompt, bos bool, err error) {
	p, err = m.Chat.PromptWith(msgs, tools, o)
	if err != nil {
		return chat.Prompt{}, false, err
	}
	return p, !strings.Contains(m.Chat.Source(), "bos_token"), nil
}
