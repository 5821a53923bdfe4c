package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/chat"
)

// TestDecodeResponses: a Responses request becomes the chat request it
// amounts to (input items as messages, instructions first, tools and
// tool_choice in their chat forms, text.format as response_format), and
// what the API does not implement is refused with 400 naming it.
func TestDecodeResponses(t *testing.T) {
	tests := []struct {
		name string
		body string
		want error
		msgs []chat.Message
	}{
		{"string input", `"input":"hi","instructions":"sys"`, nil, []chat.Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "hi"}}},
		{"items", `"input":[{"role":"developer","content":"d"},{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}]},` +
			`{"role":"assistant","content":[{"type":"output_text","text":"c","annotations":[]}]},{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},` +
			`{"type":"function_call_output","call_id":"c1","output":"42"}]`, nil,
			[]chat.Message{{Role: "system", Content: "d"}, {Role: "user", Content: "a\nb"},
				{Role: "assistant", Content: "c", ToolCalls: []chat.ToolCall{{ID: "c1", Type: "function", Function: chat.FunctionCall{Name: "f", Arguments: "{}"}}}},
				{Role: "tool", ToolCallID: "c1", Content: "42"}}},
		{"function tool, named choice", `"input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],"tool_choice":{"type":"function","name":"f"}`, nil, nil},
		{"json_schema", `"input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}}`, nil, nil},
		{"ignored fields", `"input":"x","user":"u","metadata":{"a":"b"},"store":false,"include":[],"truncation":"disabled","service_tier":"auto"`, nil, nil},
		{"no input", `"instructions":"x"`, ErrBadField, nil},
		{"empty items", `"input":[]`, ErrBadField, nil},
		{"image part", `"input":[{"role":"user","content":[{"type":"input_image","image_url":"u"}]}]`, ErrUnsupported, nil},
		{"output_text in a user turn", `"input":[{"role":"user","content":[{"type":"output_text","text":"u"}]}]`, ErrUnsupported, nil},
		{"item_reference", `"input":[{"type":"item_reference","id":"msg_1"}]`, ErrUnsupported, nil},
		{"reasoning item before no assistant turn", `"input":[{"type":"reasoning","id":"rs_1","summary":[]}]`, ErrBadField, nil},
		{"bad role", `"input":[{"role":"tool","content":"x"}]`, ErrBadField, nil},
		{"call without id", `"input":[{"type":"function_call","name":"f","arguments":"{}"}]`, ErrBadField, nil},
		{"hosted tool", `"input":"x","tools":[{"type":"file_search"}]`, ErrUnsupported, nil},
		{"strict tool under auto", `"input":"x","tools":[{"type":"function","name":"f","strict":true}]`, nil, nil},
		{"unknown tool field", `"input":"x","tools":[{"type":"function","name":"f","cache":true}]`, ErrUnsupported, nil},
		{"allowed_tools choice", `"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"allowed_tools","mode":"auto"}`, ErrUnsupported, nil},
		{"choice of an unknown function", `"input":"x","tools":[{"type":"function","name":"f"}],"tool_choice":{"type":"function","name":"g"}`, ErrBadField, nil},
		{"format type", `"input":"x","text":{"format":{"type":"grammar"}}`, ErrUnsupported, nil},
		{"reasoning", `"input":"x","reasoning":{"effort":"low"}`, ErrUnsupported, nil},
		{"background", `"input":"x","background":true`, ErrUnsupported, nil},
		{"include logprobs", `"input":"x","include":["message.output_text.logprobs"],"top_logprobs":3`, nil, nil},
		{"include other", `"input":"x","include":["message.output_text.logprobs","reasoning.encrypted_content"]`, ErrUnsupported, nil},
		{"include not a list", `"input":"x","include":"message.output_text.logprobs"`, ErrBadField, nil},
		{"top_logprobs 21", `"input":"x","top_logprobs":21`, ErrBadField, nil},
		{"top_logprobs -1", `"input":"x","top_logprobs":-1`, ErrBadField, nil},
		{"conversation", `"input":"x","conversation":"conv_1"`, ErrUnsupported, nil},
		{"unknown", `"input":"x","seed":1`, ErrUnsupported, nil},
		{"bad max", `"input":"x","max_output_tokens":0`, ErrBadField, nil},
		{"bad previous id", `"input":"x","previous_response_id":"a b"`, ErrNoResponse, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := DecodeResponses(strings.NewReader(`{"model":"m",`+tt.body+`}`), DefaultMaxBody)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if err != nil || tt.msgs == nil {
				return
			}
			got := c.messages()
			if len(got) != len(tt.msgs) {
				t.Fatalf("got %+v, want %+v", got, tt.msgs)
			}
			for i := range got {
				if got[i].Role != tt.msgs[i].Role || got[i].Content != tt.msgs[i].Content || got[i].ToolCallID != tt.msgs[i].ToolCallID ||
					len(got[i].ToolCalls) != len(tt.msgs[i].ToolCalls) {
					t.Fatalf("message %d: got %+v, want %+v", i, got[i], tt.msgs[i])
				}
			}
		})
	}
}

// FuzzDecodeResponses: any body either decodes into a chat request with at
// least one message, or is refused with a typed error; never a panic.
func FuzzDecodeResponses(f *testing.F) {
	for _, s := range []string{`{"model":"m","input":"hi"}`, `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"a"}]}]}`,
		`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"f","arguments":"{}"}],"tools":[{"type":"function","name":"f"}],"tool_choice":"required"}`,
		`{"model":"m","input":"x","text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"}}}}`,
		`{"model":"m","input":[{"type":"custom_tool_call","call_id":"c","name":"sql","input":"x"},{"type":"custom_tool_call_output","call_id":"c","output":"y"}],"tools":[{"type":"custom","name":"sql","format":{"type":"grammar","syntax":"lark","definition":"start: \"a\""}}],"tool_choice":{"type":"custom","name":"sql"}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		c, err := DecodeResponses(strings.NewReader(body), DefaultMaxBody)
		if err != nil {
			if c != nil {
				t.Fatal("a call with an error")
			}
			return
		}
		if len(c.messages()) == 0 || c.chat == nil {
			t.Fatalf("decoded %q into no messages", body)
		}
	})
}
