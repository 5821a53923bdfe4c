package api

import (
	"bytes"
	"encoding/json"

	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/service"
)

// Tools (OpenAI function calling) on the wire: the request's tools,
// tool_choice and parallel_tool_calls decoded into a service.ToolUse
// (service/tools.go holds what the model is constrained to and how its
// output is read back), and the calls written as message.tool_calls with
// finish_reason "tool_calls", or streamed as delta.tool_calls. tool_choice
// "none" offers no tools to the template and parses nothing, so the model
// cannot call (OpenAI's "must not call"); a schema feature the grammar
// cannot enforce, under "required", a named function or a strict tool, is
// refused with 400 naming it.

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

// toolUse validates tools, tool_choice and parallel_tool_calls.
// Errors: ErrBadField (a malformed tool or choice), ErrUnsupported
// (a non-function tool).
func (r *ChatRequest) toolUse() (*service.ToolUse, error) {
	return parseToolUse(r.Tools, r.ToolChoice, r.ParallelToolCalls)
}

func parseToolUse(defs []ToolDef, choice json.RawMessage, parallel *bool) (*service.ToolUse, error) {
	if len(defs) > MaxTools {
		return nil, ErrBadField.Withf("at most %d tools", MaxTools)
	}
	use := &service.ToolUse{Parallel: parallel == nil || *parallel, Params: map[string]json.RawMessage{}, Strict: map[string]bool{}}
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
			use.Strict[f.Name] = true
		}
		use.Tools = append(use.Tools, chat.Tool{Name: f.Name, Description: f.Description, Parameters: f.Parameters})
		use.Names = append(use.Names, f.Name)
		use.Params[f.Name] = f.Parameters
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
		use.Force = mode
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

// toolCallsOut is calls as the wire writes them (service.ToolStream reads
// them from the generation).
func toolCallsOut(calls []service.ToolCall) []ToolCallOut {
	var out []ToolCallOut
	for _, c := range calls {
		i := c.Index
		out = append(out, ToolCallOut{Index: &i, ID: c.ID, Type: "function", Function: FunctionCallOut{Name: c.Name, Arguments: c.Arguments}})
	}
	return out
}
