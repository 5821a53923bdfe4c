package api

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/synth/synthtest"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/engine/toolcall"
	"github.com/cloison/cloison/service"
)

// TestDecodeTools: tool shapes are validated with clear 400s.
func TestDecodeTools(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	fn := func(f string) string { return `{"type":"function","function":` + f + `}` }
	tests := []struct {
		name string
		body string
		want error
	}{
		{"one tool", `"tools":[` + fn(`{"name":"get_weather","description":"d","parameters":{"type":"object","properties":{}}}`) + `]`, nil},
		{"tool_choice auto", `"tools":[` + fn(`{"name":"f"}`) + `],"tool_choice":"auto"`, nil},
		{"tool_choice none", `"tools":[` + fn(`{"name":"f"}`) + `],"tool_choice":"none"`, nil},
		{"parallel false", `"tools":[` + fn(`{"name":"f"}`) + `],"parallel_tool_calls":false`, nil},
		{"strict false", `"tools":[` + fn(`{"name":"f","strict":false}`) + `]`, nil},
		{"strict under auto (a lazy grammar)", `"tools":[` + fn(`{"name":"f","strict":true}`) + `]`, nil},
		{"strict and not strict under auto", `"tools":[` + fn(`{"name":"f","strict":true}`) + `,` + fn(`{"name":"g"}`) + `],"tool_choice":"auto"`, nil},
		{"strict under required", `"tools":[` + fn(`{"name":"f","strict":true,"parameters":{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"],"additionalProperties":false}}`) + `],"tool_choice":"required"`, nil},
		{"strict under named", `"tools":[` + fn(`{"name":"f","strict":true}`) + `,` + fn(`{"name":"g","strict":true}`) + `],"tool_choice":{"type":"function","function":{"name":"g"}}`, nil},
		{"strict under none", `"tools":[` + fn(`{"name":"f","strict":true}`) + `],"tool_choice":"none"`, nil},
		{"bad name", `"tools":[` + fn(`{"name":"get weather"}`) + `]`, ErrBadField},
		{"name with a control token", `"tools":[` + fn(`{"name":"<|im_end|>"}`) + `]`, ErrBadField},
		{"empty name", `"tools":[` + fn(`{"name":""}`) + `]`, ErrBadField},
		{"duplicate name", `"tools":[` + fn(`{"name":"f"}`) + `,` + fn(`{"name":"f"}`) + `]`, ErrBadField},
		{"parameters not an object", `"tools":[` + fn(`{"name":"f","parameters":[1]}`) + `]`, ErrBadField},
		{"parameters not JSON schema", `"tools":[` + fn(`{"name":"f","parameters":"x"}`) + `]`, ErrBadField},
		{"tools not a list", `"tools":{"a":1}`, ErrBadField},
		{"tool_choice unknown string", `"tools":[` + fn(`{"name":"f"}`) + `],"tool_choice":"sometimes"`, ErrBadField},
		{"tool_choice unknown function", `"tools":[` + fn(`{"name":"f"}`) + `],"tool_choice":{"type":"function","function":{"name":"g"}}`, ErrBadField},
		{"tool_choice allowed_tools", `"tools":[` + fn(`{"name":"f"}`) + `],"tool_choice":{"type":"allowed_tools"}`, ErrBadField},
		{"tool_choice required", `"tools":[` + fn(`{"name":"f"}`) + `],"tool_choice":"required"`, nil},
		{"tool_choice named", `"tools":[` + fn(`{"name":"f"}`) + `],"tool_choice":{"type":"function","function":{"name":"f"}}`, nil},
		{"too many tools", `"tools":[` + strings.Repeat(fn(`{"name":"f"}`)+",", MaxTools) + fn(`{"name":"g"}`) + `]`, ErrBadField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeChat(strings.NewReader(`{"model":"m",`+msgs+`,`+tt.body+`}`), DefaultMaxBody)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}

// TestToolUse: tool_choice none offers no tools (and parses nothing);
// parallel_tool_calls defaults to true.
func TestToolUse(t *testing.T) {
	r, err := DecodeChat(strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`), DefaultMaxBody)
	if err != nil {
		t.Fatal(err)
	}
	if use, err := r.toolUse(); err != nil || use != nil {
		t.Fatalf("got %+v, %v, want no tool use", use, err)
	}
	r, err = DecodeChat(strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f"}}]}`), DefaultMaxBody)
	if err != nil {
		t.Fatal(err)
	}
	use, err := r.toolUse()
	if err != nil || use == nil || !use.Parallel || len(use.Tools) != 1 || use.Names[0] != "f" {
		t.Fatalf("got %+v, %v", use, err)
	}
}

// toolTokenizer is the synthetic byte-level vocabulary with the tool-call
// markers of several families as control tokens, as real vocabularies hold
// [TOOL_CALLS] or <|python_tag|>: the engine streams them as empty text.
func toolTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tokens, types, merges := synth.Vocab(400)
	for _, m := range []string{"<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>"} {
		tokens = append(tokens, m)
		types = append(types, tokenizer.TypeControl)
	}
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "llama"}, {"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "gpt-2"},
		{"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.token_type", types}, {"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(synth.EndOfText)}, {"tokenizer.ggml.eos_token_id", uint32(synth.EndOfText)},
	} {
		if err := w.Set(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	return synthtest.Tokenizer(t, w, nil)
}

// generated turns text into the tokens the engine would stream for it:
// control tokens (parsed in text) as empty text.
func generated(tok *tokenizer.Tokenizer, text string) []engine.Token {
	var out []engine.Token
	for _, id := range tok.Encode(text, false, true) {
		out = append(out, engine.Token{ID: id, Text: string(tok.Piece(id, false))})
	}
	return out
}

type sseChunk struct {
	Choices []struct {
		Delta struct {
			Role      string          `json:"role"`
			Content   *string         `json:"content"`
			ToolCalls json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

// TestToolCallsResponse drives the API's response writers (streamed and
// whole) with the tokens a model of each family generates when it calls a
// tool, through the real tokenizer: the synthetic models' random weights
// never emit a call by themselves.
func TestToolCallsResponse(t *testing.T) {
	tok := toolTokenizer(t)
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{ModelName: "m", Tokenizer: tok}}
	names := []string{"get_weather", "get_time"}
	tests := []struct {
		name     string
		format   toolcall.Format
		parallel bool
		text     string
		content  string
		calls    []string // name and arguments
		finish   string
	}{
		{"hermes", toolcall.Hermes, true, "Let me check.<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"location\": \"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"timezone\": \"Asia/Tokyo\"}}\n</tool_call>",
			"Let me check.", []string{`get_weather {"location":"Paris"}`, `get_time {"timezone":"Asia/Tokyo"}`}, "tool_calls"},
		{"mistral control tokens", toolcall.Mistral, true, "[TOOL_CALLS]get_weather[ARGS]{\"location\": \"Paris\"}", "", []string{`get_weather {"location":"Paris"}`}, "tool_calls"},
		{"llama3 python tag", toolcall.Llama3, true, "<|python_tag|>{\"name\": \"get_time\", \"parameters\": {\"timezone\": \"UTC\"}}", "", []string{`get_time {"timezone":"UTC"}`}, "tool_calls"},
		{"llama3 bare JSON", toolcall.Llama3, true, " {\"name\": \"get_time\", \"parameters\": {}}", "", []string{`get_time {}`}, "tool_calls"},
		{"parallel false keeps the first", toolcall.Hermes, false, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {}}</tool_call><tool_call>{\"name\": \"get_time\", \"arguments\": {}}</tool_call>",
			"", []string{`get_weather {}`}, "tool_calls"},
		{"no call", toolcall.Hermes, true, "It is sunny.", "It is sunny.", nil, "stop"},
		{"unknown function is content", toolcall.Hermes, true, "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"rm\", \"arguments\": {}}</tool_call>", nil, "stop"},
	}
	for _, tt := range tests {
		use := &service.ToolUse{Format: tt.format, Names: names, Parallel: tt.parallel}
		t.Run(tt.name+"/stream", func(t *testing.T) {
			rec := httptest.NewRecorder()
			in := inference{common: &Common{Stream: true}, chat: true, tools: use}
			x := s.newSSE(rec, "req-tools", in, []*collector{newCollector(s, in)})
			x.begin()
			for _, tk := range generated(tok, tt.text) {
				x.token(0, tk)
			}
			x.end(genResult{Finish: engine.FinishStop, Finishes: []engine.FinishReason{engine.FinishStop}}, nil)
			var content strings.Builder
			var calls []string
			var finish string
			type delta struct {
				Index    *int    `json:"index"`
				ID       *string `json:"id"`
				Type     string  `json:"type"`
				Function struct {
					Name      *string `json:"name"`
					Arguments *string `json:"arguments"`
				} `json:"function"`
			}
			for _, line := range strings.Split(rec.Body.String(), "\n\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var ch sseChunk
				if err := json.Unmarshal([]byte(data), &ch); err != nil || len(ch.Choices) != 1 {
					t.Fatalf("chunk %s: %v", data, err)
				}
				c := ch.Choices[0]
				if c.FinishReason != nil {
					finish = *c.FinishReason
				}
				if c.Delta.Content != nil {
					if strings.ContainsAny(*c.Delta.Content, "<[") && tt.calls != nil {
						t.Errorf("content delta %q leaks a marker", *c.Delta.Content)
					}
					content.WriteString(*c.Delta.Content)
				}
				if len(c.Delta.ToolCalls) == 0 {
					continue
				}
				var ds []delta
				if err := json.Unmarshal(c.Delta.ToolCalls, &ds); err != nil || len(ds) != 1 || ds[0].Index == nil {
					t.Fatalf("tool_calls delta %s: %v", c.Delta.ToolCalls, err)
				}
				d := ds[0]
				if d.ID != nil { // the first delta of a call: index, id, type, name, empty arguments
					if *d.Index != len(calls) || !strings.HasPrefix(*d.ID, "call_") && tt.format != toolcall.Mistral || d.Type != "function" ||
						d.Function.Name == nil || d.Function.Arguments == nil || *d.Function.Arguments != "" {
						t.Fatalf("got first call delta %s, want index %d, id, type, name and empty arguments", c.Delta.ToolCalls, len(calls))
					}
					calls = append(calls, *d.Function.Name+" ")
					continue
				}
				if *d.Index != len(calls)-1 || d.Function.Name != nil || d.Function.Arguments == nil {
					t.Fatalf("got arguments delta %s", c.Delta.ToolCalls)
				}
				calls[len(calls)-1] += *d.Function.Arguments
			}
			if content.String() != tt.content || !reflect.DeepEqual(calls, tt.calls) || finish != tt.finish {
				t.Fatalf("got content %q calls %q finish %s, want %q %q %s", content.String(), calls, finish, tt.content, tt.calls, tt.finish)
			}
		})
		t.Run(tt.name+"/whole", func(t *testing.T) {
			rec := httptest.NewRecorder()
			in := inference{common: &Common{}, chat: true, tools: use}
			c := newCollector(s, in)
			for _, tk := range generated(tok, tt.text) {
				c.add(tk)
			}
			s.fullResponse(rec, "req-tools", in, []*collector{c}, genResult{Finish: engine.FinishStop, Finishes: []engine.FinishReason{engine.FinishStop}})
			var out struct {
				Choices []struct {
					Message struct {
						Content   *string `json:"content"`
						ToolCalls []struct {
							Index    *int   `json:"index"`
							ID       string `json:"id"`
							Type     string `json:"type"`
							Function struct {
								Name, Arguments string
							} `json:"function"`
						} `json:"tool_calls"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Choices) != 1 {
				t.Fatalf("body %s: %v", rec.Body.String(), err)
			}
			m := out.Choices[0].Message
			if tt.content == "" && tt.calls != nil && m.Content != nil {
				t.Errorf("got content %q, want null beside tool calls", *m.Content)
			}
			got := ""
			if m.Content != nil {
				got = *m.Content
			}
			var calls []string
			for _, tc := range m.ToolCalls {
				if tc.Index != nil || tc.Type != "function" || tc.ID == "" {
					t.Errorf("got call %+v, want an id, type function and no index", tc)
				}
				if tt.format == toolcall.Mistral && len(tc.ID) != 9 {
					t.Errorf("got Mistral id %q, want 9 letters and digits", tc.ID)
				}
				calls = append(calls, tc.Function.Name+" "+tc.Function.Arguments)
			}
			if got != tt.content || !reflect.DeepEqual(calls, tt.calls) || out.Choices[0].FinishReason != tt.finish {
				t.Fatalf("got content %q calls %q finish %s, want %q %q %s", got, calls, out.Choices[0].FinishReason, tt.content, tt.calls, tt.finish)
			}
		})
	}
}

// A stream that fails while a call is open withholds what parsing held
// back: neither the call nor its text nor a finish reach the client, only
// the error event.
func TestToolCallsStreamError(t *testing.T) {
	tok := toolTokenizer(t)
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{ModelName: "m", Tokenizer: tok}}
	rec := httptest.NewRecorder()
	in := inference{common: &Common{Stream: true}, chat: true, tools: &service.ToolUse{Format: toolcall.Hermes, Names: []string{"f"}, Parallel: true}}
	x := s.newSSE(rec, "req-tools", in, []*collector{newCollector(s, in)})
	x.begin()
	for _, tk := range generated(tok, "<tool_call>{\"name\": \"f\", \"arguments\": {}}") {
		x.token(0, tk)
	}
	x.end(genResult{}, ErrLedgerUnavailable)
	if out := rec.Body.String(); strings.Contains(out, "tool_call") || strings.Contains(out, "finish_reason\":\"") || !strings.Contains(out, `"code":"unavailable"`) {
		t.Fatalf("got stream %s, want the error event only", out)
	}
}
