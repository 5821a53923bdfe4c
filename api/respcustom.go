package api

import (
	"encoding/json"
	"fmt"

	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/grammar"
)

// OpenAI's custom tools in the Responses API: a tool whose input is free
// text, plain ({"format": {"type": "text"}}) or constrained by a grammar
// ({"type": "grammar", "syntax": "lark" | "regex", "definition": …}). A
// custom tool is served when tool_choice forces it ({"type": "custom",
// "name": …}, or "required" when it is the only tool): the whole output is
// then the tool's input, constrained by its grammar (compiled after
// admission, through the tenant's grammar cache, as every constraint),
// and the response's output is one custom_tool_call item. A custom tool
// the model may or may not call (tool_choice auto, or beside other tools)
// is refused: no model family's call syntax frames free-text input.
// custom_tool_call and custom_tool_call_output input items are taken as
// a call (its input as the arguments {"input": …}) and its output.

var (
	respCustomFields = map[string]field{"type": {rule: implemented}, "name": {rule: implemented}, "description": {rule: implemented},
		"format": {rule: implemented, note: "text, or grammar with syntax lark or regex"}}
	respCustomFormatFields = map[string]field{"type": {rule: implemented}, "syntax": {rule: implemented}, "definition": {rule: implemented}}
	respCustomCallFields   = map[string]field{"type": {rule: implemented}, "call_id": {rule: implemented}, "name": {rule: implemented},
		"input": {rule: implemented}, "id": {rule: ignored}, "status": {rule: ignored}}
)

// customTool is a custom tool: its name and its input's grammar (Syntax
// "": free text).
type customTool struct {
	Name       string
	Syntax     grammar.Syntax
	Definition string
}

// respCustomTools splits tools into the function tools (for respTools)
// and the custom tools, checked. Errors: ErrBadField, ErrUnsupported.
func respCustomTools(raw json.RawMessage) (functions json.RawMessage, custom []customTool, err error) {
	var list []json.RawMessage
	if isNull(raw) || json.Unmarshal(raw, &list) != nil {
		return raw, nil, nil // respTools says what is wrong
	}
	var fns []json.RawMessage
	seen := map[string]bool{}
	for i, item := range list {
		at := fmt.Sprintf("tools[%d]", i)
		var head struct {
			Type        *string         `json:"type"`
			Name        *string         `json:"name"`
			Description *string         `json:"description"`
			Format      json.RawMessage `json:"format"`
		}
		if json.Unmarshal(item, &head) != nil || head.Type == nil || *head.Type != "custom" {
			fns = append(fns, item)
			continue
		}
		if err := checkFields(item, respCustomFields, at+"."); err != nil {
			return nil, nil, err
		}
		if head.Name == nil || !chat.NamePattern.MatchString(*head.Name) {
			return nil, nil, ErrBadField.Withf("%s.name must be 1 to 64 letters, digits, '_', '-' or '.'", at)
		}
		if seen[*head.Name] {
			return nil, nil, ErrBadField.Withf("%s.name %q is given twice", at, *head.Name)
		}
		seen[*head.Name] = true
		t := customTool{Name: *head.Name}
		if !isNull(head.Format) {
			if err := checkFields(head.Format, respCustomFormatFields, at+".format."); err != nil {
				return nil, nil, err
			}
			var f struct {
				Type       *string `json:"type"`
				Syntax     *string `json:"syntax"`
				Definition *string `json:"definition"`
			}
			if json.Unmarshal(head.Format, &f) != nil || f.Type == nil {
				return nil, nil, ErrBadField.Withf("%s.format must be an object with a type", at)
			}
			switch *f.Type {
			case "text":
				if f.Syntax != nil || f.Definition != nil {
					return nil, nil, ErrBadField.Withf("%s.format: syntax and definition are for type grammar", at)
				}
			case "grammar":
				if f.Syntax == nil || f.Definition == nil {
					return nil, nil, ErrBadField.Withf("%s.format: a grammar has a syntax (lark or regex) and a definition", at)
				}
				switch *f.Syntax {
				case "lark":
					t.Syntax = grammar.Lark
				case "regex":
					t.Syntax = grammar.Regex
				default:
					return nil, nil, ErrUnsupported.Withf("%s.format.syntax %q (lark or regex)", at, truncate(*f.Syntax, maxFieldName))
				}
				if len(*f.Definition) > grammar.MaxTextBytes {
					return nil, nil, ErrBadField.Withf("%s.format.definition: at most %d bytes", at, grammar.MaxTextBytes)
				}
				t.Definition = *f.Definition
			default:
				return nil, nil, ErrUnsupported.Withf("%s.format.type %q (text or grammar)", at, truncate(*f.Type, maxFieldName))
			}
		}
		custom = append(custom, t)
	}
	if custom == nil {
		return raw, nil, nil
	}
	functions, _ = json.Marshal(fns)
	if len(fns) == 0 {
		functions = nil
	}
	return functions, custom, nil
}

// respCustomChoice picks the custom tool tool_choice forces (nil: none)
// and returns the tool_choice left for the function tools. A custom tool
// that is not forced is refused. Errors: ErrBadField, ErrUnsupported.
func respCustomChoice(raw json.RawMessage, functions json.RawMessage, custom []customTool) (*customTool, json.RawMessage, error) {
	if len(custom) == 0 {
		return nil, raw, nil
	}
	var named struct {
		Type *string `json:"type"`
		Name *string `json:"name"`
	}
	var mode string
	switch {
	case json.Unmarshal(raw, &mode) == nil:
		if mode == "none" {
			return nil, raw, nil
		}
		if mode == "required" && len(custom) == 1 && functions == nil {
			return &custom[0], nil, nil
		}
	case json.Unmarshal(raw, &named) == nil && named.Type != nil && *named.Type == "custom":
		if err := checkFields(raw, map[string]field{"type": {rule: implemented}, "name": {rule: implemented}}, "tool_choice."); err != nil {
			return nil, nil, err
		}
		for i := range custom {
			if named.Name != nil && custom[i].Name == *named.Name {
				return &custom[i], nil, nil
			}
		}
		return nil, nil, ErrBadField.Withf("tool_choice names a custom tool that tools does not define")
	}
	return nil, nil, ErrUnsupported.Withf(`custom tools are served only when tool_choice forces one ({"type": "custom", "name": ...}, or "required" with that tool alone): no model's call syntax frames free-text input`)
}

// respCustomCall reads a custom_tool_call input item as a tool call whose
// arguments are {"input": …}. Errors: ErrBadField.
func respCustomCall(item json.RawMessage, at string) (chat.ToolCall, error) {
	if err := checkFields(item, respCustomCallFields, at+"."); err != nil {
		return chat.ToolCall{}, err
	}
	var wire struct {
		CallID *string `json:"call_id"`
		Name   *string `json:"name"`
		Input  *string `json:"input"`
	}
	if json.Unmarshal(item, &wire) != nil || wire.CallID == nil || wire.Name == nil || wire.Input == nil || *wire.CallID == "" {
		return chat.ToolCall{}, ErrBadField.Withf("%s: a custom_tool_call has string call_id, name and input", at)
	}
	if !chat.NamePattern.MatchString(*wire.Name) {
		return chat.ToolCall{}, ErrBadField.Withf("%s.name must be 1 to 64 letters, digits, '_', '-' or '.'", at)
	}
	return customToolCall(*wire.CallID, *wire.Name, *wire.Input), nil
}

// customToolCall is a custom tool's call as a chat tool call.
func customToolCall(id, name, input string) chat.ToolCall {
	args, _ := json.Marshal(map[string]string{"input": input})
	return chat.ToolCall{ID: id, Type: "function", Function: chat.FunctionCall{Name: name, Arguments: string(args)}}
}

// input adds the forced custom tool's input (opening its item first).
func (b *respBuilder) input(s string) {
	if b.customItem == nil {
		empty := ""
		b.resp.Output = append(b.resp.Output, RespItem{ID: fmt.Sprintf("ctc_%s_%d", b.base, len(b.resp.Output)), Type: "custom_tool_call",
			Status: "in_progress", CallID: "call_" + b.base, Name: b.custom.Name, Input: &empty})
		b.customItem = &b.resp.Output[len(b.resp.Output)-1]
		b.event("response.output_item.added", map[string]any{"output_index": len(b.resp.Output) - 1, "item": *b.customItem})
	}
	if s == "" {
		return
	}
	in := *b.customItem.Input + s
	b.customItem.Input = &in
	b.pending = nil // a call's tokens are no output_text
	b.event("response.custom_tool_call_input.delta", map[string]any{"item_id": b.customItem.ID, "output_index": len(b.resp.Output) - 1, "delta": s})
}

// closeInput ends the custom tool call item (opening it first when the
// input is empty).
func (b *respBuilder) closeInput() {
	if b.custom == nil || b.customDone {
		return
	}
	b.input("")
	i := len(b.resp.Output) - 1
	it := b.customItem
	b.event("response.custom_tool_call_input.done", map[string]any{"item_id": it.ID, "output_index": i, "input": *it.Input})
	it.Status = "completed"
	b.event("response.output_item.done", map[string]any{"output_index": i, "item": *it})
	b.customDone = true
}
