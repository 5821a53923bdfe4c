package service

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/toolcall"
)

// Tools (function calling). The functions reach the model through its own
// chat template (its tools variable; assistant tool_calls and tool
// messages as Hugging Face templates expect them: engine/chat); the calls
// are parsed from the generated text in the format the template teaches
// (engine/toolcall) by a ToolStream, which numbers them and gives them ids
// ("call_…", or 9 letters and digits for Mistral, whose templates take no
// other).
//
// Force "" (tool_choice "auto") parses calls; a transport offers no
// ToolUse at all for "none", so the model cannot call; "required" and a
// named function force a call by constrained decoding (engine/grammar):
// the output must be one call, in the model's own format (toolcall.Frame),
// of one of the offered functions (of the named one), its arguments
// matching the function's parameters schema (any JSON object when it has
// none; a schema feature the grammar cannot enforce is refused naming it).
// Under "auto" with a strict function, the answer may be free text, but a
// call, once the model opens one in its format (toolcall.Triggers:
// <tool_call>, [TOOL_CALLS], <|python_tag|>, Llama 3's "{" as the answer's
// first text), is constrained decoding too (a lazy grammar,
// grammar.CompileLazy): one or more calls (one unless Parallel) of offered
// functions, a strict function's arguments matching its schema, any
// other's any JSON object. Without a strict tool "auto" constrains
// nothing (and gpt-oss's harmony format refuses strict tools under "auto":
// every harmony message opens with the markers a trigger would need). A
// request constrained this way cannot also ask for a
// response_format (RequestGrammar). Without Parallel only the first call
// is returned.
//
// All of this is the service's, not a transport's: what the model is
// constrained to and how its output is read back must be the same over
// every transport, and only the wire's field names differ.

// ErrUnsupported: the request asks for something this node does not do
// (a field, a tool kind, a model without a tool-call format).
var ErrUnsupported = cloison.NewError(cloison.CodeUnsupported, "unsupported request field")

// ToolUse is what a request asks of tools; a transport builds it from its
// decoded fields (nil when the request offers none, or offers them with
// tool_choice "none"), and ToolFormat completes it for the model.
type ToolUse struct {
	Tools    []chat.Tool // for the template
	Names    []string    // the functions a call may name
	Parallel bool        // more than one call per answer
	// Format is the model's tool-call format (set by ToolFormat).
	Format toolcall.Format
	// Force is "" (auto), "required" or the name of the function a call
	// must name; Params are the functions' parameters schemas; Strict the
	// functions with strict: true.
	Force  string
	Params map[string]json.RawMessage
	Strict map[string]bool
	// template is the model's chat template (set by ToolFormat), whose
	// tool-call frames Grammar compiles.
	template string
}

// ToolFormat checks that the model can take tools: its template reads
// them and teaches a format that toolcall parses, and a format that
// frames every call a grammar must force; it sets use.Format. It compiles
// nothing (Grammar does, after admission). A nil use is no tools. Errors:
// ErrUnsupported (no format, a format that cannot be forced).
func (m Model) ToolFormat(use *ToolUse) error {
	if use == nil {
		return nil
	}
	use.template = m.Chat.Source()
	use.Format = toolcall.Detect(use.template)
	if !m.Chat.TakesTools() || use.Format == toolcall.None {
		return ErrUnsupported.Withf("tools: this model's chat template teaches no tool-call format this server parses")
	}
	if !use.Constrained() {
		return nil
	}
	if use.Format == toolcall.Harmony && use.Force == "" {
		// A lazy grammar triggers where a call can open: in harmony every
		// message opens with the same header markers, so it would take the
		// model's analysis and answer for calls.
		return ErrUnsupported.Withf("strict tools under tool_choice \"auto\": gpt-oss's harmony calls cannot be enforced without forcing one (use \"required\" or a named function, or strict false)")
	}
	names := use.Names
	if use.Force != "" && use.Force != "required" {
		names = []string{use.Force}
	}
	for _, name := range names {
		if _, _, ok := toolcall.Frame(use.Format, use.template, name); !ok {
			if use.Force == "" {
				return ErrUnsupported.Withf("strict tools: this model's tool-call format cannot be enforced")
			}
			return ErrUnsupported.Withf("tool_choice %q: this model's tool-call format cannot be forced", use.Force)
		}
	}
	return nil
}

// Constrained reports whether use's calls are constrained by a grammar: a
// forced call ("required" or a named function), or "auto" with a strict
// function.
func (use *ToolUse) Constrained() bool {
	return use != nil && (use.Force != "" || len(use.Strict) > 0)
}

// Grammar compiles the grammar of use's calls (after ToolFormat): for a
// forced call, one call framed as the model's format writes it; under
// "auto" with a strict function, the lazy grammar of the calls. Nil when
// use constrains nothing. Errors: ErrUnsupported (a format that cannot be
// forced), the grammar's (a schema it cannot enforce).
func (use *ToolUse) Grammar() (*grammar.Grammar, error) {
	switch {
	case !use.Constrained():
		return nil, nil
	case use.Force == "":
		return use.lazyGrammar(use.template)
	default:
		return use.forceGrammar(use.template)
	}
}

// forceGrammar compiles the grammar of one call, framed as the model's
// format writes it, of the forced function (or of any offered one, for
// "required").
func (use *ToolUse) forceGrammar(template string) (*grammar.Grammar, error) {
	names := use.Names
	if use.Force != "required" {
		names = []string{use.Force}
	}
	var calls []grammar.Part
	for _, name := range names {
		call, _, ok := use.callPart(template, name, true)
		if !ok {
			return nil, ErrUnsupported.Withf("tool_choice %q: this model's tool-call format cannot be forced", use.Force)
		}
		calls = append(calls, call)
	}
	g, err := grammar.Compile(grammar.Choice(calls...))
	if err != nil {
		return nil, err
	}
	return g, nil
}

// callPart is the grammar of one call of function name, framed as the
// model's format writes it (prefix is the frame's opening); its arguments
// by the function's schema when schema is set and it has one, else any
// JSON object. ok is false when the format has no frame for the template.
func (use *ToolUse) callPart(template, name string, schema bool) (call grammar.Part, prefix string, ok bool) {
	prefix, suffix, ok := toolcall.Frame(use.Format, template, name)
	if !ok {
		return nil, "", false
	}
	args := grammar.AnyObject()
	if p := bytes.TrimSpace(use.Params[name]); schema && len(p) > 0 && string(p) != "null" {
		args = grammar.Schema(p)
	}
	return grammar.Seq(grammar.Literal(prefix), args, grammar.Literal(suffix)), prefix, true
}

// lazyGrammar compiles the grammar of tool_choice "auto" with a strict
// function: free text until the model opens a call in its format, then one
// or more calls (one unless parallel) of offered functions, framed as for
// a forced call, a strict function's arguments by its schema, any other's
// any JSON object.
func (use *ToolUse) lazyGrammar(template string) (*grammar.Grammar, error) {
	var calls []grammar.Part
	var prefix string
	for _, name := range use.Names {
		call, pre, ok := use.callPart(template, name, use.Strict[name])
		if !ok {
			return nil, ErrUnsupported.Withf("strict tools: this model's tool-call format cannot be enforced")
		}
		prefix = pre
		calls = append(calls, call)
	}
	most := 1
	if use.Parallel {
		most = -1
	}
	block := grammar.Repeat(grammar.Choice(calls...), toolcall.Sep(use.Format), 1, most)
	markers, start := toolcall.Triggers(use.Format)
	var triggers []grammar.Trigger
	for _, m := range markers {
		body := block
		if !strings.HasPrefix(prefix, m) { // Llama 3's python tag: then the bare call
			body = grammar.Seq(grammar.Literal(m), block)
		}
		triggers = append(triggers, grammar.Trigger{Text: m, Body: body})
	}
	if start != "" {
		triggers = append(triggers, grammar.Trigger{Text: start, AtStart: true, Body: block})
	}
	return grammar.CompileLazy(triggers, toolcall.Controls(use.Format))
}

// RequestConstraint is what constrains a chat request's output: its
// response_format's schema, or the tool calls' grammar; never both,
// because two grammars cannot both hold of one output. Errors:
// ErrInvalidField.
func RequestConstraint(schema []byte, use *ToolUse) (Constraint, error) {
	if !use.Constrained() {
		return Constraint{Schema: schema}, nil
	}
	if schema != nil {
		return Constraint{}, ErrInvalidField.Withf("response_format cannot be combined with tool_choice \"required\", a named function or a strict tool")
	}
	return Constraint{Tools: use}, nil
}

// TemplateTools is use's tools for the template (none when use is nil).
func (use *ToolUse) TemplateTools() []chat.Tool {
	if use == nil {
		return nil
	}
	return use.Tools
}

// ToolCall is one call read from a generation: Index numbers the calls of
// one answer from 0; ID is what the client sends back with the result.
type ToolCall struct {
	Index     int
	ID        string
	Name      string
	Arguments string
}

// ToolStream turns one generation's text into content and calls
// (toolcall.Parser), numbering the calls and giving them ids. Not safe for
// concurrent use: one per choice.
type ToolStream struct {
	use    *ToolUse
	parser *toolcall.Parser
	calls  []ToolCall // every call so far, with its id
}

// NewToolStream returns the ToolStream of one choice of a request using
// use (after ToolFormat).
func NewToolStream(use *ToolUse) *ToolStream {
	return &ToolStream{use: use, parser: toolcall.NewParser(use.Format, use.Names)}
}

// Calls is every call so far.
func (t *ToolStream) Calls() []ToolCall { return t.calls }

// Feed returns the content and the new calls of text (end: the generation
// is over).
func (t *ToolStream) Feed(text string, end bool) (string, []ToolCall) {
	var evs []toolcall.Event
	if text != "" {
		evs = t.parser.Feed(text)
	}
	if end {
		evs = append(evs, t.parser.Finish()...)
	}
	var content bytes.Buffer
	var calls []ToolCall
	for _, e := range evs {
		if e.Call == nil {
			content.WriteString(e.Content)
			continue
		}
		if !t.use.Parallel && len(t.calls) > 0 {
			continue // parallel_tool_calls false: the first call only
		}
		id := e.Call.ID
		if t.use.Format != toolcall.Mistral || !mistralID(id) {
			id = toolcall.NewID(t.use.Format)
		}
		c := ToolCall{Index: len(t.calls), ID: id, Name: e.Call.Name, Arguments: e.Call.Arguments}
		t.calls = append(t.calls, c)
		calls = append(calls, c)
	}
	return content.String(), calls
}

// mistralID: an id Mistral's templates take back (9 letters and digits).
func mistralID(id string) bool {
	if len(id) != 9 {
		return false
	}
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// MarkerText is the text a generated token contributes to tool parsing:
// the engine streams control tokens as empty text, but a format's markers
// ([TOOL_CALLS], <|python_tag|>, …) are control tokens in their
// vocabularies, so such a token is read back as its marker.
func (m Model) MarkerText(id int32, text string, format toolcall.Format) string {
	if id < 0 || text != "" {
		return text
	}
	piece := string(m.Tokenizer.Piece(id, true))
	if toolcall.IsMarker(format, piece) {
		return piece
	}
	return text
}
