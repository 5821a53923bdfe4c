package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"

	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/toolcall"
)

// TestHarmonyForcedCall: with gpt-oss's template, tool_choice "required"
// or a named function constrains the output to one harmony call message
// (the header as the model writes it, the arguments by the function's
// schema, <|call|>); a walk that draws each token among those the grammar
// allows (a stand-in for any model's choices) gives an answer the API
// reads as exactly one call of an offered function, its arguments valid
// for the schema (oracle: santhosh-tekuri/jsonschema), no content and
// finish_reason tool_calls. Strict tools under "auto" are refused for
// this format (its lazy triggers would open on every message).
func TestHarmonyForcedCall(t *testing.T) {
	tok := thinkTokenizer(t)
	v := grammar.VocabFrom(tok)
	doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(strictArgs))
	jc := jsonschema.NewCompiler()
	if err := jc.AddResource("a.json", doc); err != nil {
		t.Fatal(err)
	}
	oracle, err := jc.Compile("a.json")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{ModelName: "m", Tokenizer: tok, Chat: hfTemplate(t, "openai-gpt-oss-120b.jinja")}}
	tools := []ToolDef{{Type: "function"}, {Type: "function"}}
	tools[0].Function.Name, tools[0].Function.Parameters = "get_forecast", json.RawMessage(strictArgs)
	tools[1].Function.Name, tools[1].Function.Parameters = "get_time", json.RawMessage(`{"type":"object","properties":{"tz":{"enum":["utc","cet"]}},"required":["tz"],"additionalProperties":false}`)
	closed := 0
	rapid.Check(t, func(rt *rapid.T) {
		choice := rapid.SampledFrom([]string{`"required"`, `{"type":"function","function":{"name":"get_forecast"}}`}).Draw(rt, "tool_choice")
		use, err := parseToolUse(tools, json.RawMessage(choice), nil)
		if err != nil {
			rt.Fatal(err)
		}
		if err := s.text().ToolFormat(use); err != nil || use.Format != toolcall.Harmony {
			rt.Fatalf("ToolFormat: %v, format %v", err, use.Format)
		}
		g, err := use.Grammar()
		if err != nil {
			rt.Fatal(err)
		}
		m := grammar.NewMatcher(g, v)
		var gen []engine.Token
		for step := 0; step < 600 && !m.Closed(); step++ {
			mask, _ := m.Allowed()
			var allowed []int32
			for id := range int32(v.Len()) {
				if mask[id>>6]&(1<<(id&63)) != 0 && !tok.IsEOG(id) {
					allowed = append(allowed, id)
				}
			}
			if len(allowed) == 0 {
				rt.Fatal("no token allowed")
			}
			id := rapid.SampledFrom(allowed).Draw(rt, "tok")
			for _, c := range []byte(`"}0`) { // prefer closing bytes so that walks finish
				if rapid.IntRange(0, 2).Draw(rt, "close") == 0 && mask[c>>6]&(1<<(c&63)) != 0 {
					id = int32(c)
					break
				}
			}
			if err := m.Accept(id); err != nil {
				rt.Fatalf("Accept(%d): %v", id, err)
			}
			gen = append(gen, engine.Token{ID: id, Text: string(tok.Piece(id, false))})
		}
		if !m.Closed() {
			return // a walk cut short: no claim
		}
		closed++
		in := thinkInference(t, s, false, use)
		c := newCollector(s, in)
		for _, tk := range gen {
			c.add(tk)
		}
		rec := httptest.NewRecorder()
		s.fullResponse(rec, "req-h", in, []*collector{c}, genResult{Finish: engine.FinishStop, Finishes: []engine.FinishReason{engine.FinishStop}})
		var out struct {
			Choices []struct {
				Message struct {
					Content   *string       `json:"content"`
					ToolCalls []ToolCallOut `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Choices) != 1 {
			rt.Fatalf("body %s: %v", rec.Body.String(), err)
		}
		ch := out.Choices[0]
		if len(ch.Message.ToolCalls) != 1 || ch.FinishReason != "tool_calls" || (ch.Message.Content != nil && *ch.Message.Content != "") {
			rt.Fatalf("%q gave %s", c.text.String(), rec.Body.String())
		}
		call := ch.Message.ToolCalls[0].Function
		switch {
		case call.Name == "get_forecast":
			inst, err := jsonschema.UnmarshalJSON(strings.NewReader(call.Arguments))
			if err != nil || oracle.Validate(inst) != nil {
				rt.Fatalf("arguments %s do not validate", call.Arguments)
			}
		case call.Name == "get_time" && choice == `"required"`:
		default:
			rt.Fatalf("call of %q under %s", call.Name, choice)
		}
	})
	if closed == 0 {
		t.Error("no walk closed the call")
	}
	strict := true
	tools[0].Function.Strict = &strict
	use, err := parseToolUse(tools, json.RawMessage(`"auto"`), nil)
	if err == nil {
		err = s.text().ToolFormat(use)
	}
	if err == nil || !strings.Contains(err.Error(), "harmony") {
		t.Fatalf("strict tools under auto: got %v, want a refusal naming harmony", err)
	}
}
