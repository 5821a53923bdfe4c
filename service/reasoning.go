package service

import (
	"slices"
	"strings"
	"unicode"
)

// Reasoning models. A model whose chat template teaches it to think first
// (Qwen3, QwQ, DeepSeek-R1 and their distillations: <think>…</think>)
// writes its reasoning, then its answer; the client gets the two apart:
// reasoning_content beside content in chat completions, a reasoning item
// before the message in the Responses API, as vLLM's reasoning parsers
// give them. The format is chosen from the template (DetectReasoning: its
// text writes <|channel|>, gpt-oss's harmony channels (harmony.go); or
// <think> or </think>); a template with no reasoning markers changes
// nothing. Under a grammar, a harmony model's output is the constrained
// answer from its first token, with no header: all content.
//
// Where the reasoning starts is read from the end of the rendered prompt
// (ReasoningStart): a prompt that ends inside an open <think> (DeepSeek-R1's
// generation prompt) starts the output in reasoning; one that ends with a
// closed block (Qwen3 with enable_thinking false: "<think>\n\n</think>\n\n")
// has thinking off, and the whole output is content; otherwise a <think>
// as the output's first text (after whitespace) opens the reasoning. The
// reasoning ends at </think>; everything after it is content (tool calls
// are parsed there only). A generation that ends before </think> is all
// reasoning, as vLLM reads it.
//
// Constrained decoding (a response_format, structured_outputs, a forced
// or strict tool call) applies after the reasoning, as vLLM does, where
// the prompt opens the reasoning (DeepSeek-R1's generation prompt, Qwen3's
// thinking models): PrepareChat sets Constraint.After to </think>, and the
// grammar compiled is grammar.After's: every token is allowed until the
// output writes </think> (as text, split across tokens, or as the control
// token, as the ReasoningStream reads it), and from the byte after it the
// output must be a sentence of the grammar. A generation that ends before
// </think> is all reasoning and its content empty, never unconstrained
// content. Where the model would open <think> itself (Qwen3), the grammar
// holds from the first token instead, so it does not let <think> open:
// thinking is off, the output is the constrained answer and the reasoning
// empty (a model that skipped its reasoning would otherwise answer
// unconstrained). With thinking off in the prompt the grammar applies as
// for any model. Under tool_choice "auto" with a strict tool the grammar is
// lazy already: the text is free until a call opens, so the model may
// reason, but a call it opens inside its reasoning is reasoning, not a
// call.

// ReasoningFormat is how a model's output separates reasoning from answer.
type ReasoningFormat int

const (
	// NoReasoning: the output is all content.
	NoReasoning ReasoningFormat = iota
	// ThinkTags: <think>REASONING</think>CONTENT.
	ThinkTags
	// Harmony: gpt-oss's channels, <|channel|>analysis<|message|>REASONING
	// <|end|><|start|>assistant<|channel|>final<|message|>CONTENT.
	Harmony
)

const (
	thinkOpen  = "<think>"
	thinkClose = "</think>"
)

// DetectReasoning is the reasoning format the chat template src teaches.
func DetectReasoning(src string) ReasoningFormat {
	if strings.Contains(src, hChannel) {
		return Harmony
	}
	if strings.Contains(src, thinkOpen) || strings.Contains(src, thinkClose) {
		return ThinkTags
	}
	return NoReasoning
}

// ReasoningStart reads the end of a rendered prompt for format f: inside,
// the output starts in reasoning (the prompt opened it); off, thinking is
// off (the prompt closed an empty block) and the output is all content.
func ReasoningStart(f ReasoningFormat, promptTail string) (inside, off bool) {
	if f == Harmony {
		return false, false // each message of the output names its channel
	}
	if f != ThinkTags {
		return false, true
	}
	t := strings.TrimRightFunc(promptTail, unicode.IsSpace)
	switch {
	case strings.HasSuffix(t, thinkClose):
		return false, true
	case strings.HasSuffix(t, thinkOpen):
		return true, false
	}
	return false, false
}

// Reasoning is the reasoning format of the model's template.
func (m Model) Reasoning() ReasoningFormat {
	if m.Chat == nil {
		return NoReasoning
	}
	return DetectReasoning(m.Chat.Source())
}

// promptTail is the text of the last tokens of prompt, control tokens
// spelt, enough to hold the markers ReasoningStart looks for.
func (m Model) promptTail(prompt []int32) string {
	const n = 16
	if len(prompt) > n {
		prompt = prompt[len(prompt)-n:]
	}
	return m.Tokenizer.Decode(prompt, true)
}

// thinking reports whether the output of prompt may hold reasoning (the
// model's format, thinking not switched off by the prompt), and whether it
// starts inside it.
func (m Model) thinking(prompt []int32) (f ReasoningFormat, inside bool) {
	f = m.Reasoning()
	if f == NoReasoning {
		return NoReasoning, false
	}
	inside, off := ReasoningStart(f, m.promptTail(prompt))
	if off {
		return NoReasoning, false
	}
	return f, inside
}

// NewReasoningStream returns the ReasoningStream of one choice of a chat
// request whose rendered prompt is prompt, or nil when its output holds no
// reasoning (a model without reasoning markers, thinking switched off).
func (m Model) NewReasoningStream(prompt []int32) *ReasoningStream {
	f, inside := m.thinking(prompt)
	if f == NoReasoning {
		return nil
	}
	return NewReasoningStream(f, inside)
}

// ReasoningText is the text a generated token contributes to reasoning
// parsing: a vocabulary may hold <think> and </think> as control tokens,
// which the engine streams as empty text; such a token is read back as its
// marker.
func (m Model) ReasoningText(id int32, text string) string {
	if id < 0 || text != "" {
		return text
	}
	if piece := string(m.Tokenizer.Piece(id, true)); piece == thinkOpen || piece == thinkClose || slices.Contains(harmonyMarkers, piece) {
		return piece
	}
	return text
}

// reasoning stream states.
const (
	seekOpen  = iota // at the output's start: a <think> may come
	inReason         // inside the reasoning: </think> ends it
	inContent        // after it (or no reasoning): all content
)

// ReasoningStream splits one generation's text into reasoning and content,
// incrementally: a suffix that may still become a marker is held back
// until the next text (or Finish) decides it, so no part of a tag ever
// reaches either side. Not safe for concurrent use: one per choice.
type ReasoningStream struct {
	harmony *harmonyStream // Harmony's; nil: ThinkTags
	state   int
	inside  bool   // the prompt opened the reasoning
	held    string // text not yet released
}

// NewReasoningStream returns a stream for format f (ThinkTags); inside:
// the prompt opened the reasoning.
func NewReasoningStream(f ReasoningFormat, inside bool) *ReasoningStream {
	if f == Harmony {
		return &ReasoningStream{harmony: &harmonyStream{}}
	}
	return &ReasoningStream{state: seekOpen, inside: inside}
}

// Feed returns the reasoning and the content that text releases (end: the
// generation is over, everything held is released).
func (r *ReasoningStream) Feed(text string, end bool) (reasoning, content string) {
	if r.harmony != nil {
		return r.harmony.feed(text, end)
	}
	var rb, cb strings.Builder
	s := r.held + text
	r.held = ""
	for s != "" {
		switch r.state {
		case seekOpen:
			lead := len(s) - len(strings.TrimLeftFunc(s, unicode.IsSpace))
			rest := s[lead:]
			switch {
			case strings.HasPrefix(rest, thinkOpen):
				// Whitespace before the tag belongs to the reasoning.
				rb.WriteString(s[:lead])
				s = rest[len(thinkOpen):]
				r.state = inReason
			case strings.HasPrefix(thinkOpen, rest) && !end:
				r.held = s // all space, or a partial <think>: undecided
				return rb.String(), cb.String()
			case r.inside:
				r.state = inReason
			default:
				r.state = inContent
			}
		case inReason:
			if i := strings.Index(s, thinkClose); i >= 0 {
				rb.WriteString(s[:i])
				s = s[i+len(thinkClose):]
				r.state = inContent
				continue
			}
			keep := 0
			if !end {
				keep = partialSuffix(s, thinkClose)
			}
			rb.WriteString(s[:len(s)-keep])
			r.held = s[len(s)-keep:]
			s = ""
		case inContent:
			cb.WriteString(s)
			s = ""
		}
	}
	return rb.String(), cb.String()
}

// partialSuffix is the length of the longest proper prefix of marker that
// s ends with.
func partialSuffix(s, marker string) int {
	for n := min(len(marker)-1, len(s)); n > 0; n-- {
		if strings.HasSuffix(s, marker[:n]) {
			return n
		}
	}
	return 0
}
