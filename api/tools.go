package api

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/toolcall"
)

// Tools (OpenAI function calling). The functions reach the model through
// its own chat template (its tools variable; assistant tool_calls and tool
// messages as Hugging Face templates expect them: engine/chat); the calls
// are parsed from the generated text in the format the template teaches
// (engine/toolcall) and returned as message.tool_calls with ids "call_…"
// (9 letters and digits for Mistral, whose templates take no other) and
// finish_reason "tool_calls", or streamed as delta.tool_calls.
//
// tool_choice: "auto" (the default with tools) parses calls; "none" offers
// no tools to the template and parses nothing, so the model cannot call
// (OpenAI's "must not call"); "required" and a named function force a call
// by constrained decoding (engine/grammar): the output must be one call, in
// the model's own format (toolcall.Frame), of one of the offered functions
// (of the named one), its arguments matching the function's parameters
// schema (any JSON object when it has none; a schema feature the grammar
// cannot enforce is refused with 400 naming it). Under "auto" with a tool
// whose strict is true, the answer may be free text, but a call, once the
// model opens one in its format (toolcall.Triggers: <tool_call>,
// [TOOL_CALLS], <|python_tag|>, Llama 3's "{" as the answer's first text),
// is constrained decoding too (a lazy grammar, grammar.CompileLazy): one or
// more calls (one with parallel_tool_calls false) of offered functions, a
// strict function's arguments matching its schema (refused with 400 as
// above if the grammar cannot enforce it), any other's any JSON object.
// Without a strict tool "auto" constrains nothing. A request constrained
// this way cannot also ask for a response_format. parallel_tool_calls
// false returns the first call only.

// MaxTools bounds the functions of one request (OpenAI's limit).
const MaxTools = 128

// ToolDef is one entry of a chat request's tools.
type ToolDef struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

// toolUse is what a request asks of tools: nil when it offers none (or
// tool_choice is "none").
type toolUse struct {
	tools    []chat.Tool // for the template
	names    []string    // the functions a call may name
	parallel bool        // more than one call per answer
	format   toolcall.Format
	// force is "" (auto), "required" or the name of the function a call
	// must name; params are the functions' parameters schemas; strict the
	// functions with strict: true; forced is the grammar toolFormat
	// compiles for a forced call, or under "auto" with a strict function
	// the lazy grammar of the calls.
	force  string
	params map[string]json.RawMessage
	strict map[string]bool
	forced *grammar.Grammar
}

// toolUse validates tools, tool_choice and parallel_tool_calls.
// Errors: ErrBadField (a malformed tool or choice), ErrUnsupported
// (a non-function tool).
func (r *ChatRequest) toolUse() (*toolUse, error) {
	return parseToolUse(r.Tools, r.ToolChoice, r.ParallelToolCalls)
}

func parseToolUse(defs []ToolDef, choice json.RawMessage, parallel *bool) (*toolUse, error) {
	if len(defs) > MaxTools {
		return nil, ErrBadField.Withf("at most %d tools", MaxTools)
	}
	use := &toolUse{parallel: parallel == nil || *parallel, params: map[string]json.RawMessage{}, strict: map[string]bool{}}
	seen := map[string]bool{}
	for i, d := range defs {
		if d.Type != "function" {
			return nil, ErrUnsupported.Withf("tools[%d].type %q (only \"function\" tools)", i, truncate(d.Type, maxFieldName))
		}
		f := d.Function
		if !chat.NamePattern.MatchString(f.Name) {
			return nil, ErrBadField.Withf("tools[%d].function.name must be 1 to 64 letters, digits, '_', '-' or '.'", i)
		}
		if seen[f.Name] {
			return nil, ErrBadField.Withf("tools[%d].function.name %q is given twice", i, f.Name)
		}
		seen[f.Name] = true
		if p := bytes.TrimSpace(f.Parameters); len(p) > 0 && string(p) != "null" && p[0] != '{' {
			return nil, ErrBadField.Withf("tools[%d].function.parameters must be a JSON schema object", i)
		}
		if f.Strict != nil && *f.Strict {
			use.strict[f.Name] = true
		}
		use.tools = append(use.tools, chat.Tool{Name: f.Name, Description: f.Description, Parameters: f.Parameters})
		use.names = append(use.names, f.Name)
		use.params[f.Name] = f.Parameters
	}
	mode, err := parseToolChoice(choice, seen)
	if err != nil {
		return nil, err
	}
	if mode == "none" || len(defs) == 0 {
		if mode != "none" && mode != "auto" {
			return nil, ErrBadField.Withf("tool_choice %q needs tools", mode)
		}
		return nil, nil
	}
	if mode != "auto" {
		use.force = mode
	}
	return use, nil
}

// parseToolChoice returns "auto", "none", "required" or the name of the
// function a call must name (which tools defines).
func parseToolChoice(raw json.RawMessage, names map[string]bool) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "auto", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch s {
		case "auto", "none", "required":
			return s, nil
		}
		return "", ErrBadField.Withf("tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &named) != nil || named.Type != "function" {
		return "", ErrBadField.Withf("tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	if !names[named.Function.Name] {
		return "", ErrBadField.Withf("tool_choice names a function that tools does not define")
	}
	if named.Function.Name == "auto" || named.Function.Name == "none" || named.Function.Name == "required" {
		return "", ErrBadField.Withf("tool_choice names a function %q, which is also a tool_choice mode", named.Function.Name)
	}
	return named.Function.Name, nil
}

// toolFormat checks that the model can take tools: its template reads
// them and teaches a format that toolcall parses; it sets use.format.
// Errors: ErrUnsupported.
func (s *Server) toolFormat(use *toolUse) error {
	if use == nil {
		return nil
	}
	use.format = toolcall.Detect(s.cfg.Chat.Source())
	if !s.cfg.Chat.TakesTools() || use.format == toolcall.None {
		return ErrUnsupported.Withf("tools: this model's chat template teaches no tool-call format this server parses")
	}
	if use.force == "" {
		if len(use.strict) == 0 {
			return nil
		}
		g, err := use.lazyGrammar(s.cfg.Chat.Source())
		if err != nil {
			return err
		}
		use.forced = g
		return nil
	}
	g, err := use.forceGrammar(s.cfg.Chat.Source())
	if err != nil {
		return err
	}
	use.forced = g
	return nil
}

// forceGrammar compiles the grammar of one call, framed as the model's
// format writes it, of the forced function (or of any offered one, for
// "required").
func (use *toolUse) forceGrammar(template string) (*grammar.Grammar, error) {
	names := use.names
	if use.force != "required" {
		names = []string{use.force}
	}
	var calls []grammar.Part
	for _, name := range names {
		call, _, ok := use.callPart(template, name, true)
		if !ok {
			return nil, ErrUnsupported.Withf("tool_choice %q: this model's tool-call format cannot be forced", use.force)
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
func (use *toolUse) callPart(template, name string, schema bool) (call grammar.Part, prefix string, ok bool) {
	prefix, suffix, ok := toolcall.Frame(use.format, template, name)
	if !ok {
		return nil, "", false
	}
	args := grammar.AnyObject()
	if p := bytes.TrimSpace(use.params[name]); schema && len(p) > 0 && string(p) != "null" {
		args = grammar.Schema(p)
	}
	return grammar.Seq(grammar.Literal(prefix), args, grammar.Literal(suffix)), prefix, true
}

// lazyGrammar compiles the grammar of tool_choice "auto" with a strict
// function: free text until the model opens a call in its format, then one
// or more calls (one unless parallel) of offered functions, framed as for
// a forced call, a strict function's arguments by its schema, any other's
// any JSON object.
func (use *toolUse) lazyGrammar(template string) (*grammar.Grammar, error) {
	var calls []grammar.Part
	var prefix string
	for _, name := range use.names {
		call, pre, ok := use.callPart(template, name, use.strict[name])
		if !ok {
			return nil, ErrUnsupported.Withf("strict tools: this model's tool-call format cannot be enforced")
		}
		prefix = pre
		calls = append(calls, call)
	}
	most := 1
	if use.parallel {
		most = -1
	}
	block := grammar.Repeat(grammar.Choice(calls...), toolcall.Sep(use.format), 1, most)
	markers, start := toolcall.Triggers(use.format)
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
	return grammar.CompileLazy(triggers, toolcall.Controls(use.format))
}

// requestGrammar is what constrains a chat request's output: its
// response_format, or the tool calls' grammar; never both. Errors:
// ErrBadField.
func requestGrammar(format *grammar.Grammar, use *toolUse) (*grammar.Grammar, error) {
	if use == nil || use.forced == nil {
		return format, nil
	}
	if format != nil {
		return nil, ErrBadField.Withf("response_format cannot be combined with tool_choice \"required\", a named function or a strict tool")
	}
	return use.forced, nil
}

// toolTools is use's tools for the template (none when use is nil).
func (use *toolUse) templateTools() []chat.Tool {
	if use == nil {
		return nil
	}
	return use.tools
}

// ToolCallOut is a tool call in a response message or a stream delta.
type ToolCallOut struct {
	Index    *int            `json:"index,omitempty"` // stream deltas only
	ID       string          `json:"id,omitempty"`
	Type     string          `json:"type,omitempty"`
	Function FunctionCallOut `json:"function"`
}

// FunctionCallOut is a call's function.
type FunctionCallOut struct {
	Name      string `json:"name,omitempty"`
	Arguments string `json:"arguments"`
}

// toolStream turns one generation's text into content and calls
// (toolcall.Parser), numbering the calls and giving them ids.
type toolStream struct {
	use    *toolUse
	parser *toolcall.Parser
	calls  []ToolCallOut // every call so far, with its id
}

func newToolStream(use *toolUse) *toolStream {
	return &toolStream{use: use, parser: toolcall.NewParser(use.format, use.names)}
}

// feed returns the content and the new calls of text (end: the generation
// is over).
func (t *toolStream) feed(text string, end bool) (string, []ToolCallOut) {
	var evs []toolcall.Event
	if text != "" {
		evs = t.parser.Feed(text)
	}
	if end {
		evs = append(evs, t.parser.Finish()...)
	}
	var content bytes.Buffer
	var calls []ToolCallOut
	for _, e := range evs {
		if e.Call == nil {
			content.WriteString(e.Content)
			continue
		}
		if !t.use.parallel && len(t.calls) > 0 {
			continue // parallel_tool_calls false: the first call only
		}
		id := e.Call.ID
		if t.use.format != toolcall.Mistral || !mistralID(id) {
			id = toolcall.NewID(t.use.format)
		}
		i := len(t.calls)
		c := ToolCallOut{Index: &i, ID: id, Type: "function", Function: FunctionCallOut{Name: e.Call.Name, Arguments: e.Call.Arguments}}
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

// markerText is the text a generated control token contributes to tool
// parsing: the engine streams control tokens as empty text, but a format's
// markers ([TOOL_CALLS], <|python_tag|>, …) are control tokens in their
// vocabularies.
func (s *Server) markerText(id int32, text string, format toolcall.Format) string {
	if id < 0 || text != "" {
		return text
	}
	piece := string(s.cfg.Tokenizer.Piece(id, true))
	if toolcall.IsMarker(format, piece) {
		return piece
	}
	return text
}
