package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// The OpenAI Responses API, on the chat completion path: a
// request is translated into a ChatRequest (input items into messages,
// instructions into a leading system message, tools and tool_choice into
// their chat forms, text.format into response_format) and served by the
// same template, tool parser, grammar and generate as /v1/chat/completions.
// Only the wire shapes differ: the response object with output items of
// type message (output_text content) and function_call, and, when
// streaming, the typed events (response.created, response.in_progress,
// response.output_item.added, response.content_part.added,
// response.output_text.delta / .done, response.function_call_arguments.delta
// / .done, response.content_part.done, response.output_item.done, then
// response.completed, or response.incomplete when max_output_tokens cut it
// short). A failure after the stream began ends it with an error event and
// never a completed one.
//
//	POST   /v1/responses        scope infer
//	GET    /v1/responses/{id}   scope infer: a stored response of the caller's tenant
//	DELETE /v1/responses/{id}   scope infer: deletes it
//
// store: Cloison keeps nothing unless asked: an absent store is false
// (OpenAI's default is true), and the response object says so. With store:
// true the response and the conversation it ends (input and output, for
// previous_response_id; not the instructions, which OpenAI does not carry
// over either) are sealed with AES-256-GCM under the tenant's key
// (audit.StoredResponseKey, derived from the KEK as the report key is)
// and stored (service.Responses.Store) in one transaction with the
// response.stored ledger event,
// which holds the id, the request, the SHA-256 of the sealed blob and its
// size — never text. Reads, deletes and previous_response_id name the
// tenant: another tenant's id is 404, the answer an unknown or deleted id
// gets.

// Errors of the Responses API (service.Responses' stored responses).
var (
	// ErrNoResponse: no stored response of the caller's tenant has this id.
	ErrNoResponse = service.ErrNoResponse
	// ErrStoreOff: store: true, or previous_response_id, on a server
	// without a key-encryption key to seal responses with.
	ErrStoreOff = service.ErrStoreOff
)

// respFields are the fields of a /v1/responses request (the rules of
// fields.go).
var respFields = map[string]field{
	"model":                {rule: implemented},
	"input":                {rule: implemented}, // a string, or a list of items (respInput)
	"instructions":         {rule: implemented}, // a leading system message
	"tools":                {rule: implemented}, // function tools only
	"tool_choice":          {rule: implemented},
	"parallel_tool_calls":  {rule: implemented},
	"text":                 {rule: implemented}, // format: text, json_object or json_schema
	"max_output_tokens":    {rule: implemented},
	"temperature":          {rule: implemented},
	"top_p":                {rule: implemented},
	"stream":               {rule: implemented},
	"store":                {rule: implemented},
	"previous_response_id": {rule: implemented},
	// No effect on the output (as for chat: fields.go).
	"user":              {rule: ignored},
	"safety_identifier": {rule: ignored},
	"metadata":          {rule: ignored},
	"service_tier":      {rule: ignored},
	"prompt_cache_key":  {rule: ignored},
	// include: message.output_text.logprobs only (respIncludes).
	"include":      {rule: implemented, note: "message.output_text.logprobs"},
	"top_logprobs": {rule: implemented},
	// Not implemented: refused unless neutral.
	"reasoning":          {rule: refused, neutral: []string{`{}`}},
	"background":         {rule: refused, neutral: []string{`false`}},
	"truncation":         {rule: refused, neutral: []string{`"disabled"`}},
	"max_tool_calls":     {rule: refused},
	"conversation":       {rule: refused},
	"prompt":             {rule: refused},
	"stream_options":     {rule: refused},
	"context_management": {rule: refused},
}

var (
	respTextFields   = map[string]field{"format": {rule: implemented}, "verbosity": {rule: refused, neutral: []string{`"medium"`}}}
	respFormatFields = map[string]field{"type": {rule: implemented}, "name": {rule: implemented}, "schema": {rule: implemented},
		"strict": {rule: implemented}, "description": {rule: ignored}}
	respToolFields = map[string]field{"type": {rule: implemented}, "name": {rule: implemented}, "description": {rule: implemented},
		"parameters": {rule: implemented}, "strict": {rule: implemented, note: "true: enforced; under auto, on each call the model opens"}}
	// Input items: a message (its id and status are the client's echo of
	// an earlier output and change nothing), a function call, a function
	// call's output.
	respMessageFields = map[string]field{"type": {rule: implemented}, "role": {rule: implemented}, "content": {rule: implemented},
		"id": {rule: ignored}, "status": {rule: ignored}}
	respCallFields = map[string]field{"type": {rule: implemented}, "call_id": {rule: implemented}, "name": {rule: implemented},
		"arguments": {rule: implemented}, "id": {rule: ignored}, "status": {rule: ignored}}
	respOutputFields = map[string]field{"type": {rule: implemented}, "call_id": {rule: implemented}, "output": {rule: implemented},
		"id": {rule: ignored}, "status": {rule: ignored}}
	respTextPartFields = map[string]field{"type": {rule: implemented}, "text": {rule: implemented},
		"annotations": {rule: refused, neutral: []string{`[]`}}, "logprobs": {rule: ignored}}
	// A reasoning item, as an earlier response wrote it (summary is always
	// empty here; encrypted reasoning is never issued).
	respReasoningFields = map[string]field{"type": {rule: implemented}, "content": {rule: implemented},
		"summary": {rule: refused, neutral: []string{`[]`}}, "encrypted_content": {rule: refused, neutral: []string{`null`}},
		"id": {rule: ignored}, "status": {rule: ignored}}
	respReasoningPartFields = map[string]field{"type": {rule: implemented}, "text": {rule: implemented}}
)

// RespRequest is a /v1/responses body.
type RespRequest struct {
	Model              string          `json:"model"`
	Input              json.RawMessage `json:"input"`
	Instructions       *string         `json:"instructions"`
	Tools              json.RawMessage `json:"tools"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	ParallelToolCalls  *bool           `json:"parallel_tool_calls"`
	Text               json.RawMessage `json:"text"`
	MaxOutputTokens    *int64          `json:"max_output_tokens"`
	Temperature        *float64        `json:"temperature"`
	TopP               *float64        `json:"top_p"`
	Stream             bool            `json:"stream"`
	Store              *bool           `json:"store"`
	PreviousResponseID *string         `json:"previous_response_id"`
	User               string          `json:"user"`
	Metadata           json.RawMessage `json:"metadata"`
	Include            []string        `json:"include"`
	TopLogprobs        *int            `json:"top_logprobs"`
}

// respIncludes are the include values served: the output text's token
// logprobs. Others (reasoning.encrypted_content, file_search_call.results,
// …) concern what this API does not serve and are refused.
var respIncludes = map[string]bool{"message.output_text.logprobs": true}

// respCall is what DecodeResponses makes of a request: the chat request it
// amounts to, and what the response object echoes.
type respCall struct {
	req      RespRequest
	chat     *ChatRequest
	input    []chat.Message // the request's own input, after the previous response's conversation
	history  []chat.Message // the previous response's conversation (previous_response_id)
	store    bool
	textEcho json.RawMessage // the response's text field
	// custom is the custom tool tool_choice forces (respcustom.go): the
	// output is its input; nil: none.
	custom *customTool
}

// DecodeResponses reads and validates a /v1/responses body into the chat
// request it amounts to; history is the conversation of the
// previous_response_id (nil without one: the caller loads it).
// Errors: ErrBodyTooLarge, ErrBadUTF8, ErrBadJSON, ErrBadField,
// ErrUnsupported (a field or item the tables refuse or do not know), and
// those of DecodeChat's checks.
func DecodeResponses(r io.Reader, limit int64) (*respCall, error) {
	var req RespRequest
	if err := decodeFields(r, limit, respFields, &req); err != nil {
		return nil, err
	}
	call := &respCall{req: req, store: req.Store != nil && *req.Store}
	if len(req.Input) == 0 || string(req.Input) == "null" {
		return nil, ErrBadField.Withf("input is required")
	}
	var err error
	if call.input, err = respInput(req.Input); err != nil {
		return nil, err
	}
	cr := &ChatRequest{Common: Common{Model: req.Model, MaxTokens: req.MaxOutputTokens, Temperature: req.Temperature, TopP: req.TopP,
		Stream: req.Stream, User: req.User}, ParallelToolCalls: req.ParallelToolCalls}
	for i, v := range req.Include {
		if !respIncludes[v] {
			return nil, ErrUnsupported.Withf("include[%d] %q (only message.output_text.logprobs)", i, truncate(v, maxFieldName))
		}
		cr.Logprobs = true
	}
	if t := req.TopLogprobs; t != nil {
		if *t < 0 || *t > 20 {
			return nil, ErrBadField.Withf("top_logprobs must be in [0, 20]")
		}
		// Alternatives are asked: the logprobs they come with are given
		// too, as chat's top_logprobs does.
		cr.TopLogprobs = t
		cr.Logprobs = cr.Logprobs || *t > 0
	}
	functions, custom, err := respCustomTools(req.Tools)
	if err != nil {
		return nil, err
	}
	if cr.Tools, err = respTools(functions); err != nil {
		return nil, err
	}
	var choice json.RawMessage
	if call.custom, choice, err = respCustomChoice(req.ToolChoice, functions, custom); err != nil {
		return nil, err
	}
	if call.custom != nil {
		cr.Tools = nil // the output is the custom tool's input, constrained by its grammar
	}
	if cr.ToolChoice, err = respToolChoice(choice); err != nil {
		return nil, err
	}
	if cr.ResponseFormat, call.textEcho, err = respText(req.Text); err != nil {
		return nil, err
	}
	if err := cr.Common.validate(); err != nil {
		return nil, err
	}
	if _, err := cr.toolUse(); err != nil {
		return nil, err
	}
	if cr.Schema, err = ResponseFormat(cr.ResponseFormat); err != nil {
		return nil, err
	}
	cr.Whitespace = cr.Structured.whitespace(formatStrict(cr.ResponseFormat))
	if call.custom != nil {
		if cr.Schema != nil {
			return nil, ErrBadField.Withf("text.format json_schema or json_object with a forced custom tool (its input is the output)")
		}
		cr.Syntax, cr.Grammar = call.custom.Syntax, call.custom.Definition
	}
	if req.PreviousResponseID != nil && audit.CheckName("previous_response_id", *req.PreviousResponseID) != nil {
		return nil, ErrNoResponse // no stored id has that shape
	}
	call.chat = cr
	return call, nil
}

// messages is the conversation the template renders
// (service.ConversationMessages).
func (c *respCall) messages() []chat.Message {
	instructions := ""
	if c.req.Instructions != nil {
		instructions = *c.req.Instructions
	}
	return service.ConversationMessages(instructions, c.history, c.input)
}

// respInput turns input (a string, or a list of items) into chat messages.
// Consecutive function_call items join the assistant message before them,
// as chat templates expect one assistant turn with its calls.
func respInput(raw json.RawMessage) ([]chat.Message, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []chat.Message{{Role: "user", Content: s}}, nil
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return nil, ErrBadField.Withf("input must be a string or a list of items")
	}
	if len(items) == 0 {
		return nil, ErrBadField.Withf("input must not be an empty list")
	}
	var out []chat.Message
	thought := ""     // a reasoning item's text, for the assistant turn after it
	reasoned := false // a reasoning item waits for that turn
	for i, item := range items {
		at := fmt.Sprintf("input[%d]", i)
		var head struct {
			Type *string `json:"type"`
			Role *string `json:"role"`
		}
		if json.Unmarshal(item, &head) != nil {
			return nil, ErrBadField.Withf("%s must be an object", at)
		}
		typ := "message" // an easy input message may omit its type
		if head.Type != nil {
			typ = *head.Type
		}
		if reasoned && typ != "message" && typ != "function_call" && typ != "custom_tool_call" && typ != "reasoning" {
			return nil, ErrBadField.Withf("%s: a reasoning item is followed by the assistant message or function_call it preceded", at)
		}
		switch typ {
		case "reasoning":
			text, err := respReasoning(item, at)
			if err != nil {
				return nil, err
			}
			thought += text
			reasoned = true
			continue
		case "message":
			m, err := respMessage(item, at)
			if err != nil {
				return nil, err
			}
			if reasoned {
				if m.Role != "assistant" {
					return nil, ErrBadField.Withf("%s: a reasoning item is followed by the assistant message or function_call it preceded", at)
				}
				if thought != "" {
					m.Content = "<think>" + thought + "</think>" + m.Content
				}
				thought, reasoned = "", false
			}
			out = append(out, m)
		case "function_call":
			if err := checkFields(item, respCallFields, at+"."); err != nil {
				return nil, err
			}
			var fc struct{ CallID, Name, Arguments string }
			var wire struct {
				CallID    *string `json:"call_id"`
				Name      *string `json:"name"`
				Arguments *string `json:"arguments"`
			}
			if json.Unmarshal(item, &wire) != nil || wire.CallID == nil || wire.Name == nil || wire.Arguments == nil || *wire.CallID == "" {
				return nil, ErrBadField.Withf("%s: a function_call has string call_id, name and arguments", at)
			}
			fc.CallID, fc.Name, fc.Arguments = *wire.CallID, *wire.Name, *wire.Arguments
			if !chat.NamePattern.MatchString(fc.Name) {
				return nil, ErrBadField.Withf("%s.name must be 1 to 64 letters, digits, '_', '-' or '.'", at)
			}
			tc := chat.ToolCall{ID: fc.CallID, Type: "function", Function: chat.FunctionCall{Name: fc.Name, Arguments: fc.Arguments}}
			if n := len(out); n > 0 && out[n-1].Role == "assistant" && thought == "" {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, tc)
			} else {
				content := ""
				if thought != "" {
					content = "<think>" + thought + "</think>"
				}
				out = append(out, chat.Message{Role: "assistant", Content: content, ToolCalls: []chat.ToolCall{tc}})
			}
			thought, reasoned = "", false
		case "custom_tool_call":
			tc, err := respCustomCall(item, at)
			if err != nil {
				return nil, err
			}
			if n := len(out); n > 0 && out[n-1].Role == "assistant" && thought == "" {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, tc)
			} else {
				content := ""
				if thought != "" {
					content = "<think>" + thought + "</think>"
				}
				out = append(out, chat.Message{Role: "assistant", Content: content, ToolCalls: []chat.ToolCall{tc}})
			}
			thought, reasoned = "", false
		case "function_call_output", "custom_tool_call_output":
			if err := checkFields(item, respOutputFields, at+"."); err != nil {
				return nil, err
			}
			var wire struct {
				CallID *string `json:"call_id"`
				Output *string `json:"output"`
			}
			if json.Unmarshal(item, &wire) != nil || wire.CallID == nil || wire.Output == nil || *wire.CallID == "" {
				return nil, ErrBadField.Withf("%s: a function_call_output has a string call_id and a string output", at)
			}
			out = append(out, chat.Message{Role: "tool", ToolCallID: *wire.CallID, Content: *wire.Output})
		default:
			return nil, ErrUnsupported.Withf("%s.type %q (message, function_call, function_call_output, custom_tool_call, custom_tool_call_output and reasoning items)", at, truncate(typ, maxFieldName))
		}
	}
	if reasoned {
		return nil, ErrBadField.Withf("input: a reasoning item is followed by the assistant message or function_call it preceded")
	}
	return out, nil
}

// respReasoning is the text of a reasoning item (its reasoning_text
// parts), which goes back to the template as the <think> block of the
// assistant turn after it (the template keeps or drops it, as it does a
// chat assistant message's).
func respReasoning(item json.RawMessage, at string) (string, error) {
	if err := checkFields(item, respReasoningFields, at+"."); err != nil {
		return "", err
	}
	var r struct {
		Content []json.RawMessage `json:"content"`
	}
	if json.Unmarshal(item, &r) != nil {
		return "", ErrBadField.Withf("%s: a reasoning item's content is a list of reasoning_text parts", at)
	}
	var b strings.Builder
	for k, raw := range r.Content {
		pat := fmt.Sprintf("%s.content[%d]", at, k)
		if err := checkFields(raw, respReasoningPartFields, pat+"."); err != nil {
			return "", err
		}
		var part struct {
			Type *string `json:"type"`
			Text *string `json:"text"`
		}
		if json.Unmarshal(raw, &part) != nil || part.Type == nil || *part.Type != "reasoning_text" || part.Text == nil {
			return "", ErrBadField.Withf("%s: a reasoning_text part with a string text", pat)
		}
		b.WriteString(*part.Text)
	}
	return b.String(), nil
}

// respMessage is one message item: role user, system, developer (a system
// message for the template) or assistant; content a string or a list of
// input_text (output_text for the assistant) parts.
func respMessage(item json.RawMessage, at string) (chat.Message, error) {
	if err := checkFields(item, respMessageFields, at+"."); err != nil {
		return chat.Message{}, err
	}
	var m struct {
		Role    *string         `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(item, &m) != nil || m.Role == nil {
		return chat.Message{}, ErrBadField.Withf("%s: a message has a string role", at)
	}
	role, part := *m.Role, "input_text"
	switch role {
	case "user", "system":
	case "developer":
		role = "system"
	case "assistant":
		part = "output_text"
	default:
		return chat.Message{}, ErrBadField.Withf("%s.role must be user, system, developer or assistant", at)
	}
	var s string
	if json.Unmarshal(m.Content, &s) == nil {
		return chat.Message{Role: role, Content: s}, nil
	}
	var parts []json.RawMessage
	if json.Unmarshal(m.Content, &parts) != nil || len(parts) == 0 {
		return chat.Message{}, ErrBadField.Withf("%s.content must be a string or a non-empty list of content parts", at)
	}
	texts := make([]string, len(parts))
	for j, raw := range parts {
		pat := fmt.Sprintf("%s.content[%d]", at, j)
		var p struct {
			Type *string `json:"type"`
			Text *string `json:"text"`
		}
		if json.Unmarshal(raw, &p) != nil || p.Type == nil {
			return chat.Message{}, ErrBadField.Withf("%s must be an object with a string type", pat)
		}
		if *p.Type != part {
			return chat.Message{}, ErrUnsupported.Withf("%s.type %q: only %s parts are supported here", pat, truncate(*p.Type, maxFieldName), part)
		}
		if err := checkFields(raw, respTextPartFields, pat+"."); err != nil {
			return chat.Message{}, err
		}
		if p.Text == nil {
			return chat.Message{}, ErrBadField.Withf("%s.text must be a string", pat)
		}
		texts[j] = *p.Text
	}
	return chat.Message{Role: role, Content: strings.Join(texts, "\n")}, nil
}

// respTools turns Responses function tools ({type, name, description,
// parameters, strict}) into chat ToolDefs; any other tool type is refused.
func respTools(raw json.RawMessage) ([]ToolDef, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil, ErrBadField.Withf("tools must be a list")
	}
	defs := make([]ToolDef, len(list))
	for i, item := range list {
		at := fmt.Sprintf("tools[%d]", i)
		var t struct {
			Type        *string         `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Parameters  json.RawMessage `json:"parameters"`
			Strict      *bool           `json:"strict"`
		}
		if json.Unmarshal(item, &t) != nil || t.Type == nil {
			return nil, ErrBadField.Withf("%s must be an object with a string type", at)
		}
		if *t.Type != "function" {
			return nil, ErrUnsupported.Withf("%s.type %q (only \"function\" tools)", at, truncate(*t.Type, maxFieldName))
		}
		if err := checkFields(item, respToolFields, at+"."); err != nil {
			return nil, err
		}
		defs[i].Type = "function"
		defs[i].Function.Name, defs[i].Function.Description, defs[i].Function.Parameters, defs[i].Function.Strict = t.Name, t.Description, t.Parameters, t.Strict
	}
	return defs, nil
}

// respToolChoice turns a Responses tool_choice ("none", "auto",
// "required" or {"type": "function", "name": ...}) into its chat form.
func respToolChoice(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || raw[0] != '{' {
		return raw, nil // a string (or null): the same in both APIs
	}
	var named struct {
		Type *string `json:"type"`
		Name *string `json:"name"`
	}
	if err := checkFields(raw, map[string]field{"type": {rule: implemented}, "name": {rule: implemented}}, "tool_choice."); err != nil {
		return nil, err
	}
	if json.Unmarshal(raw, &named) != nil || named.Type == nil || *named.Type != "function" || named.Name == nil {
		return nil, ErrBadField.Withf("tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"name\": ...}")
	}
	return json.Marshal(map[string]any{"type": "function", "function": map[string]string{"name": *named.Name}})
}

// respText turns text ({"format": {...}}) into a chat response_format, and
// returns the text object the response echoes.
func respText(raw json.RawMessage) (format, echo json.RawMessage, err error) {
	echo = json.RawMessage(`{"format":{"type":"text"}}`)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, echo, nil
	}
	if err := checkFields(raw, respTextFields, "text."); err != nil {
		return nil, nil, err
	}
	var t struct {
		Format json.RawMessage `json:"format"`
	}
	if json.Unmarshal(raw, &t) != nil {
		return nil, nil, ErrBadField.Withf("text must be an object")
	}
	if len(t.Format) == 0 || string(t.Format) == "null" {
		return nil, echo, nil
	}
	if err := checkFields(t.Format, respFormatFields, "text.format."); err != nil {
		return nil, nil, err
	}
	var f struct {
		Type        *string         `json:"type"`
		Name        json.RawMessage `json:"name"`
		Schema      json.RawMessage `json:"schema"`
		Strict      json.RawMessage `json:"strict"`
		Description json.RawMessage `json:"description"`
	}
	if json.Unmarshal(t.Format, &f) != nil || f.Type == nil {
		return nil, nil, ErrBadField.Withf("text.format must be an object with a type")
	}
	echo, _ = json.Marshal(map[string]json.RawMessage{"format": t.Format})
	switch *f.Type {
	case "text", "json_object":
		format, _ = json.Marshal(map[string]string{"type": *f.Type})
		return format, echo, nil
	case "json_schema":
		js := map[string]json.RawMessage{}
		for k, v := range map[string]json.RawMessage{"name": f.Name, "schema": f.Schema, "strict": f.Strict, "description": f.Description} {
			if len(v) > 0 {
				js[k] = v
			}
		}
		format, _ = json.Marshal(map[string]any{"type": "json_schema", "json_schema": js})
		return format, echo, nil
	}
	return nil, nil, ErrUnsupported.Withf("text.format.type %q (text, json_object or json_schema)", truncate(*f.Type, maxFieldName))
}

// Response is the Responses API response object.
type Response struct {
	ID                 string          `json:"id"`
	Object             string          `json:"object"`
	CreatedAt          int64           `json:"created_at"`
	Status             string          `json:"status"` // in_progress, completed, incomplete, failed
	Error              *RespError      `json:"error"`
	IncompleteDetails  *RespIncomplete `json:"incomplete_details"`
	Instructions       *string         `json:"instructions"`
	MaxOutputTokens    *int64          `json:"max_output_tokens"`
	Model              string          `json:"model"`
	Output             []RespItem      `json:"output"`
	ParallelToolCalls  bool            `json:"parallel_tool_calls"`
	PreviousResponseID *string         `json:"previous_response_id"`
	Reasoning          json.RawMessage `json:"reasoning"`
	Store              bool            `json:"store"`
	Temperature        *float64        `json:"temperature"`
	Text               json.RawMessage `json:"text"`
	ToolChoice         json.RawMessage `json:"tool_choice"`
	Tools              json.RawMessage `json:"tools"`
	TopP               *float64        `json:"top_p"`
	Truncation         string          `json:"truncation"`
	Usage              *RespUsage      `json:"usage"`
	User               *string         `json:"user"`
	Metadata           json.RawMessage `json:"metadata"`
}

// RespError is a failed response's error.
type RespError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// RespIncomplete says why a response is incomplete (max_output_tokens).
type RespIncomplete struct {
	Reason string `json:"reason"`
}

// RespUsage is the Responses usage object.
type RespUsage struct {
	InputTokens        int `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int `json:"total_tokens"`
}

// RespItem is an output item: a message (Role, Content) or a function call
// (CallID, Name, Arguments).
type RespItem struct {
	ID        string     `json:"id"`
	Type      string     `json:"type"` // message, function_call or reasoning
	Status    string     `json:"status"`
	Role      string     `json:"role,omitempty"`
	Content   []RespPart `json:"content,omitempty"`
	CallID    string     `json:"call_id,omitempty"`
	Name      string     `json:"name,omitempty"`
	Arguments *string    `json:"arguments,omitempty"`
	Input     *string    `json:"input,omitempty"` // a custom_tool_call's
}

// MarshalJSON writes a message's content as a list even when empty, and a
// reasoning item as OpenAI's: an empty summary and its text as
// reasoning_text content.
func (it RespItem) MarshalJSON() ([]byte, error) {
	type plain RespItem
	if it.Type == "reasoning" {
		type part struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		type reasoning struct {
			ID      string            `json:"id"`
			Type    string            `json:"type"`
			Status  string            `json:"status"`
			Summary []json.RawMessage `json:"summary"`
			Content []part            `json:"content"`
		}
		r := reasoning{ID: it.ID, Type: it.Type, Status: it.Status, Summary: []json.RawMessage{}, Content: []part{}}
		for _, p := range it.Content {
			r.Content = append(r.Content, part{Type: "reasoning_text", Text: p.Text})
		}
		return json.Marshal(r)
	}
	if it.Type != "message" {
		return json.Marshal(plain(it))
	}
	type msg struct {
		ID      string     `json:"id"`
		Type    string     `json:"type"`
		Status  string     `json:"status"`
		Role    string     `json:"role"`
		Content []RespPart `json:"content"`
	}
	c := it.Content
	if c == nil {
		c = []RespPart{}
	}
	return json.Marshal(msg{ID: it.ID, Type: it.Type, Status: it.Status, Role: it.Role, Content: c})
}

// RespPart is an output_text content part.
type RespPart struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []RespLogprob     `json:"logprobs"`
}

// RespLogprob is one output token's log-probability with its alternatives
// (include message.output_text.logprobs; top_logprobs of them).
type RespLogprob struct {
	Token       string           `json:"token"`
	Logprob     float64          `json:"logprob"`
	Bytes       []int            `json:"bytes"`
	TopLogprobs []RespTopLogprob `json:"top_logprobs"`
}

// RespTopLogprob is an alternative of an output token.
type RespTopLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func respLogprobs(lps []ChatTokenLogprob) []RespLogprob {
	out := make([]RespLogprob, len(lps))
	for i, lp := range lps {
		out[i] = RespLogprob{Token: lp.Token, Logprob: lp.Logprob, Bytes: lp.Bytes, TopLogprobs: make([]RespTopLogprob, len(lp.TopLogprobs))}
		for k, alt := range lp.TopLogprobs {
			out[i].TopLogprobs[k] = RespTopLogprob{Token: alt.Token, Logprob: alt.Logprob, Bytes: alt.Bytes}
		}
	}
	return out
}

func textPart(s string) RespPart {
	return RespPart{Type: "output_text", Text: s, Annotations: []json.RawMessage{}, Logprobs: []RespLogprob{}}
}

// respBuilder turns one generation's content and calls into output items,
// in the order generated, and, when streaming, into events.
type respBuilder struct {
	resp Response
	base string                             // the id suffix items are named after
	emit func(typ string, v map[string]any) // nil: not streaming
	open *RespItem                          // the message item receiving text, nil when none
	// thinking is the reasoning item receiving reasoning, nil when none.
	thinking *RespItem
	// custom is the forced custom tool whose input the text is
	// (respcustom.go), customItem its call item once opened.
	custom     *customTool
	customItem *RespItem
	customDone bool
	// pending are the logprobs of tokens whose text is not released yet
	// (held back: an incomplete character, a possible stop string).
	pending []RespLogprob
}

func (b *respBuilder) event(typ string, kv map[string]any) {
	if b.emit != nil {
		b.emit(typ, kv)
	}
}

// reason adds reasoning to the open reasoning item (opening one first).
func (b *respBuilder) reason(s string) {
	if s == "" {
		return
	}
	if b.thinking == nil {
		b.closeText()
		b.resp.Output = append(b.resp.Output, RespItem{ID: fmt.Sprintf("rs_%s_%d", b.base, len(b.resp.Output)), Type: "reasoning", Status: "in_progress"})
		b.thinking = &b.resp.Output[len(b.resp.Output)-1]
		b.event("response.output_item.added", map[string]any{"output_index": len(b.resp.Output) - 1, "item": *b.thinking})
		b.thinking.Content = []RespPart{{Type: "reasoning_text"}}
	}
	b.thinking.Content[0].Text += s
	b.event("response.reasoning_text.delta", map[string]any{"item_id": b.thinking.ID, "output_index": len(b.resp.Output) - 1, "content_index": 0, "delta": s})
}

// closeReasoning ends the open reasoning item.
func (b *respBuilder) closeReasoning() {
	if b.thinking == nil {
		return
	}
	i := len(b.resp.Output) - 1
	it := b.thinking
	b.event("response.reasoning_text.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "text": it.Content[0].Text})
	it.Status = "completed"
	b.event("response.output_item.done", map[string]any{"output_index": i, "item": *it})
	b.thinking = nil
}

// text adds content to the open message item (opening one first).
func (b *respBuilder) text(s string) {
	if s == "" {
		return
	}
	b.closeReasoning()
	if b.custom != nil {
		b.input(s)
		return
	}
	if b.open == nil {
		b.resp.Output = append(b.resp.Output, RespItem{ID: fmt.Sprintf("msg_%s_%d", b.base, len(b.resp.Output)), Type: "message", Status: "in_progress", Role: "assistant"})
		b.open = &b.resp.Output[len(b.resp.Output)-1]
		b.event("response.output_item.added", map[string]any{"output_index": len(b.resp.Output) - 1, "item": *b.open})
		b.open.Content = []RespPart{textPart("")}
		b.event("response.content_part.added", map[string]any{"item_id": b.open.ID, "output_index": len(b.resp.Output) - 1, "content_index": 0, "part": textPart("")})
	}
	b.open.Content[0].Text += s
	lps := b.takePending()
	b.open.Content[0].Logprobs = append(b.open.Content[0].Logprobs, lps...)
	b.event("response.output_text.delta", map[string]any{"item_id": b.open.ID, "output_index": len(b.resp.Output) - 1, "content_index": 0, "delta": s, "logprobs": lps})
}

func (b *respBuilder) takePending() []RespLogprob {
	lps := b.pending
	b.pending = nil
	if lps == nil {
		lps = []RespLogprob{}
	}
	return lps
}

// closeText ends the open message item.
func (b *respBuilder) closeText() {
	if b.open == nil {
		return
	}
	i := len(b.resp.Output) - 1
	it := b.open
	// Tokens that added no text (an end-of-generation token) still count.
	it.Content[0].Logprobs = append(it.Content[0].Logprobs, b.takePending()...)
	b.event("response.output_text.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "text": it.Content[0].Text, "logprobs": it.Content[0].Logprobs})
	b.event("response.content_part.done", map[string]any{"item_id": it.ID, "output_index": i, "content_index": 0, "part": it.Content[0]})
	it.Status = "completed"
	b.event("response.output_item.done", map[string]any{"output_index": i, "item": *it})
	b.open = nil
}

// call adds a function call item.
func (b *respBuilder) call(c ToolCallOut) {
	b.closeReasoning()
	b.closeText()
	empty, args := "", c.Function.Arguments
	it := RespItem{ID: fmt.Sprintf("fc_%s_%d", b.base, len(b.resp.Output)), Type: "function_call", Status: "in_progress", CallID: c.ID, Name: c.Function.Name, Arguments: &empty}
	i := len(b.resp.Output)
	b.event("response.output_item.added", map[string]any{"output_index": i, "item": it})
	b.event("response.function_call_arguments.delta", map[string]any{"item_id": it.ID, "output_index": i, "delta": args})
	b.event("response.function_call_arguments.done", map[string]any{"item_id": it.ID, "output_index": i, "arguments": args})
	it.Status, it.Arguments = "completed", &args
	b.resp.Output = append(b.resp.Output, it)
	b.event("response.output_item.done", map[string]any{"output_index": i, "item": it})
}

// add takes released text, completed calls and the logprobs of the tokens
// that produced them: the logprobs go with the output text (a call's
// tokens are no output_text: theirs are dropped).
func (b *respBuilder) add(thought, text string, calls []ToolCallOut, lps []RespLogprob) {
	b.reason(thought)
	b.pending = append(b.pending, lps...)
	b.text(text)
	if len(calls) > 0 {
		b.pending = nil
	}
	for _, c := range calls {
		b.call(c)
	}
}

// finish completes the response object after a successful generation.
func (b *respBuilder) finish(res genResult) {
	b.closeReasoning()
	b.closeText()
	b.closeInput()
	if len(b.resp.Output) == 0 { // nothing generated: one empty message
		b.resp.Output = append(b.resp.Output, RespItem{ID: "msg_" + b.base + "_0", Type: "message", Status: "completed", Role: "assistant",
			Content: []RespPart{textPart("")}})
	}
	b.resp.Status = "completed"
	if res.Finish == engine.FinishLength {
		b.resp.Status, b.resp.IncompleteDetails = "incomplete", &RespIncomplete{Reason: "max_output_tokens"}
	}
	u := &RespUsage{InputTokens: res.Prompt, OutputTokens: res.Completion, TotalTokens: res.Prompt + res.Completion}
	b.resp.Usage = u
}

// messagesOut is the output as chat messages, for a stored conversation.
func (r *Response) messagesOut() []chat.Message {
	var out []chat.Message
	for _, it := range r.Output {
		switch it.Type {
		case "message":
			var texts []string
			for _, p := range it.Content {
				texts = append(texts, p.Text)
			}
			out = append(out, chat.Message{Role: "assistant", Content: strings.Join(texts, "")})
		case "function_call", "custom_tool_call":
			args := ""
			if it.Arguments != nil {
				args = *it.Arguments
			}
			tc := chat.ToolCall{ID: it.CallID, Type: "function", Function: chat.FunctionCall{Name: it.Name, Arguments: args}}
			if it.Type == "custom_tool_call" && it.Input != nil {
				tc = customToolCall(it.CallID, it.Name, *it.Input)
			}
			if n := len(out); n > 0 && out[n-1].Role == "assistant" {
				out[n-1].ToolCalls = append(out[n-1].ToolCalls, tc)
			} else {
				out = append(out, chat.Message{Role: "assistant", ToolCalls: []chat.ToolCall{tc}})
			}
		}
	}
	return out
}

func (s *Server) respAPIRoutes(mux *http.ServeMux) {
	mux.Handle("POST /v1/responses", s.auth(s.byModel((*Server).createResponse), tenancy.ScopeInfer))
	mux.Handle("GET /v1/responses/{id}", s.auth(s.getResponse, tenancy.ScopeInfer))
	mux.Handle("GET /v1/responses/{id}/input_items", s.auth(s.responseInputItems, tenancy.ScopeInfer))
	mux.Handle("DELETE /v1/responses/{id}", s.auth(s.deleteResponse, tenancy.ScopeInfer))
}

// storedBody is a stored response's conversation
// (service.Conversation) with its response object decoded.
type storedBody struct {
	Response Response
	Messages []chat.Message
}

// loadStored opens tenant t's stored response id
// (service.Responses.LoadConversation). Errors: ErrNoResponse (another
// tenant's, unknown or deleted), ErrStoreOff, the store's.
func (s *Server) loadStored(ctx context.Context, t cloison.TenantID, id string) (storedBody, error) {
	c, err := s.ops.responses.LoadConversation(ctx, t, id)
	if err != nil {
		return storedBody{}, err
	}
	b := storedBody{Messages: c.Messages}
	if err := json.Unmarshal(c.Response, &b.Response); err != nil {
		return storedBody{}, err
	}
	return b, nil
}

// keep seals and stores a completed response with its conversation, and
// ledgers response.stored in the same transaction
// (service.Responses.Keep).
func (s *Server) keep(ctx context.Context, p tenancy.Principal, rid cloison.RequestID, resp Response, conv []chat.Message) error {
	if !s.ops.responses.StoreOn() {
		return ErrStoreOff
	}
	raw, err := json.Marshal(resp)
	if err != nil {
		return err
	}
	return s.ops.responses.Keep(ctx, p, rid, audit.Name(resp.ID), raw, conv)
}

func (s *Server) createResponse(w http.ResponseWriter, r *http.Request) {
	call, err := DecodeResponses(r.Body, s.cfg.MaxBody)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	p := principal(r)
	if call.store && !s.ops.responses.StoreOn() {
		WriteHTTPError(w, ErrStoreOff)
		return
	}
	if id := call.req.PreviousResponseID; id != nil {
		if call.history, err = s.ops.responses.History(r.Context(), p.Tenant, *id); err != nil {
			WriteHTTPError(w, err)
			return
		}
	}
	call.chat.Messages = call.messages()
	in, err := s.chatInference(r.Context(), p, call.chat, decisionHeader(w))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	s.serveResponse(w, r, call, in)
}

// serveResponse answers one /v1/responses request through generate.
func (s *Server) serveResponse(w http.ResponseWriter, r *http.Request, call *respCall, in inference) {
	id := NewRequestID()
	w.Header().Set("X-Request-Id", string(id))
	p := principal(r)
	base := strings.TrimPrefix(string(id), "req-")
	b := &respBuilder{base: base, resp: s.respObject(call, "resp_"+base, in), custom: call.custom}
	c := newCollector(s, in)
	sink := service.Sink{Decided: func(d string) { w.Header().Set("X-Cloison-Decision-Id", d) },
		Token: func(_ int, tok engine.Token) { // one choice: the Responses API has no n
			k := len(c.chat)
			text, calls := c.add(tok)
			b.add(c.thought, text, calls, respLogprobs(c.chat[k:]))
		}}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	var sse *respSSE
	if call.req.Stream {
		sse = &respSSE{w: w, cancel: cancel}
		sse.flusher, _ = w.(http.Flusher)
		b.emit = sse.send
		sink.Started = func() { sse.begin(b.resp) }
	}
	res, err := s.generate(ctx, p, id, in, sink)
	if err == nil {
		text, calls := c.finish() // what tool parsing held back, released after success only
		b.add(c.thought, text, calls, nil)
		b.finish(res)
		if call.store {
			err = s.keep(ctx, p, id, b.resp, append(append(append([]chat.Message(nil), call.history...), call.input...), b.resp.messagesOut()...))
		}
	}
	switch {
	case sse != nil && sse.begun:
		if err != nil {
			logCause(s.log, id, err)
			code, _, msg := Describe(err)
			sse.send("error", map[string]any{"code": string(code), "message": msg, "param": nil})
			return
		}
		done := "response.completed"
		if b.resp.Status == "incomplete" {
			done = "response.incomplete"
		}
		sse.send(done, map[string]any{"response": b.resp})
		sse.receipt(res.Receipt)
	case err != nil:
		WriteHTTPError(w, err)
	default:
		w.Header().Set(ReceiptHeader, res.Receipt)
		writeJSON(w, 200, b.resp)
	}
}

// respObject is the response object before generation (status
// in_progress), echoing what the request asked.
func (s *Server) respObject(call *respCall, id string, in inference) Response {
	rq := call.req
	resp := Response{ID: id, Object: "response", CreatedAt: time.Now().Unix(), Status: "in_progress", Instructions: rq.Instructions,
		MaxOutputTokens: rq.MaxOutputTokens, Model: s.cfg.ModelName, Output: []RespItem{}, ParallelToolCalls: rq.ParallelToolCalls == nil || *rq.ParallelToolCalls,
		PreviousResponseID: rq.PreviousResponseID, Reasoning: json.RawMessage(`{"effort":null,"summary":null}`), Store: call.store,
		Temperature: rq.Temperature, Text: call.textEcho, ToolChoice: rq.ToolChoice, Tools: rq.Tools, TopP: rq.TopP, Truncation: "disabled",
		Metadata: rq.Metadata}
	if len(resp.ToolChoice) == 0 || string(resp.ToolChoice) == "null" {
		resp.ToolChoice = json.RawMessage(`"auto"`)
	}
	if len(resp.Tools) == 0 || string(resp.Tools) == "null" {
		resp.Tools = json.RawMessage(`[]`)
	}
	if len(resp.Metadata) == 0 || string(resp.Metadata) == "null" {
		resp.Metadata = json.RawMessage(`{}`)
	}
	if rq.User != "" {
		resp.User = &rq.User
	}
	return resp
}

// respSSE writes Responses API events: "event: TYPE" and the JSON data,
// each with its sequence_number.
type respSSE struct {
	w       http.ResponseWriter
	flusher http.Flusher
	cancel  context.CancelFunc
	seq     int
	begun   bool
	failed  bool
}

func (x *respSSE) begin(resp Response) {
	x.begun = true
	x.w.Header().Set("Content-Type", "text/event-stream")
	x.w.Header().Set("Cache-Control", "no-cache")
	x.w.Header().Set("X-Accel-Buffering", "no")
	x.w.Header().Set("Trailer", ReceiptHeader)
	x.w.WriteHeader(200)
	x.send("response.created", map[string]any{"response": resp})
	x.send("response.in_progress", map[string]any{"response": resp})
}

func (x *respSSE) send(typ string, kv map[string]any) {
	if x.failed || !x.begun {
		return
	}
	kv["type"], kv["sequence_number"] = typ, x.seq
	x.seq++
	data, _ := json.Marshal(kv)
	if _, err := fmt.Fprintf(x.w, "event: %s\ndata: %s\n\n", typ, data); err != nil {
		x.failed = true
		x.cancel()
		return
	}
	if x.flusher != nil {
		x.flusher.Flush()
	}
}

// receipt ends a successful stream with its receipt: an SSE comment
// after the last event, and the trailer declared in begin (ReceiptHeader).
func (x *respSSE) receipt(r string) {
	if x.failed || !x.begun {
		return
	}
	if _, err := fmt.Fprintf(x.w, ": cloison-receipt %s\n\n", r); err != nil {
		x.failed = true
		return
	}
	if x.flusher != nil {
		x.flusher.Flush()
	}
	x.w.Header().Set(ReceiptHeader, r)
}

func (s *Server) getResponse(w http.ResponseWriter, r *http.Request) {
	b, err := s.loadStored(r.Context(), principal(r).Tenant, r.PathValue("id"))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, b.Response)
}

func (s *Server) deleteResponse(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := s.ops.responses.DeleteStored(r.Context(), principal(r), id); err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"id": id, "object": "response", "deleted": true})
}
