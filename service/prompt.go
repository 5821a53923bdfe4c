package service

import (
	"strings"

	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/grammar"
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
// against the model's template (ToolFormat), its grammar (format, the
// response_format, or the forced call: RequestGrammar), its prompt
// rendered (ChatPrompt). Errors: those of ToolFormat, RequestGrammar and
// ChatPrompt.
func (m Model) PrepareChat(msgs []chat.Message, use *ToolUse, format *grammar.Grammar) (prompt []int32, g *grammar.Grammar, err error) {
	return m.PrepareChatWith(msgs, use, format, chat.Options{GenerationPrompt: true})
}

// PrepareChatWith is PrepareChat rendering with o (the generation prompt,
// continue_final_message, template variables; chat.Options).
func (m Model) PrepareChatWith(msgs []chat.Message, use *ToolUse, format *grammar.Grammar, o chat.Options) (prompt []int32, g *grammar.Grammar, err error) {
	if err := m.ToolFormat(use); err != nil {
		return nil, nil, err
	}
	if g, err = RequestGrammar(format, use); err != nil {
		return nil, nil, err
	}
	p, bos, err := m.renderChat(msgs, use.TemplateTools(), o)
	if err != nil {
		return nil, nil, err
	}
	return m.Tokenizer.EncodeTemplated(p.Text, p.Literal, bos), g, nil
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

// schemaGrammars shares compiled grammars between requests that send the
// same schema, so that their masks are computed once (warm), whichever
// transport the requests came by.
var schemaGrammars = grammar.NewCache(64)

// SchemaGrammar is the grammar that constrains output to JSON schema
// (response_format's json_object and json_schema; the schema is always
// enforced, and a feature the grammar cannot enforce is refused, never
// relaxed). Errors: grammar.ErrUnsupportedSchema and grammar.ErrBadSchema
// naming the feature.
func SchemaGrammar(schema []byte) (*grammar.Grammar, error) {
	return schemaGrammars.FromSchema(schema)
}
