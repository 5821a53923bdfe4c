package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/synth/synthtest"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/engine/toolcall"
	"github.com/cloison/cloison/service"
)

// Qwen3-like templates: the generation prompt leaves the thinking to the
// model (qwen3), closes an empty block (thinking off, as Qwen3 renders
// enable_thinking false), or opens the block itself (DeepSeek-R1).
const (
	turnsTemplate = `{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}<|im_start|>assistant
`
	qwen3Template = turnsTemplate + `{%- if false %}<think></think>{% endif %}`
	offTemplate   = turnsTemplate + "<think>\n\n</think>\n\n"
	r1Template    = turnsTemplate + "<think>\n"
	// harmonyTemplate names gpt-oss's channels: the output's messages say
	// which is reasoning (analysis) and which the answer (final).
	harmonyTemplate = turnsTemplate + `{%- if false %}<|channel|>analysis<|message|>{% endif %}`
)

// thinkTokenizer is the synthetic byte-level vocabulary with the chat
// markers and <think>, </think> as control tokens (the engine streams them
// as empty text) and a tool-call marker.
func thinkTokenizer(t *testing.T) *tokenizer.Tokenizer {
	t.Helper()
	tokens, types, merges := synth.Vocab(400)
	for _, m := range []string{"<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
		"<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>"} {
		tokens = append(tokens, m)
		types = append(types, tokenizer.TypeControl)
	}
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "qwen3"}, {"tokenizer.ggml.model", "gpt2"}, {"tokenizer.ggml.pre", "gpt-2"},
		{"tokenizer.ggml.tokens", tokens}, {"tokenizer.ggml.token_type", types}, {"tokenizer.ggml.merges", merges},
		{"tokenizer.ggml.bos_token_id", uint32(synth.EndOfText)}, {"tokenizer.ggml.eos_token_id", uint32(synth.EndOfText)},
		{"tokenizer.chat_template", qwen3Template},
	} {
		if err := w.Set(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	return synthtest.Tokenizer(t, w, nil)
}

func thinkServer(t *testing.T, tpl string) (*Server, *tokenizer.Tokenizer) {
	t.Helper()
	tok := thinkTokenizer(t)
	c, err := chat.New(tpl, "", "")
	if err != nil {
		t.Fatal(err)
	}
	return &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{ModelName: "m", Tokenizer: tok, Chat: c}}, tok
}

// thinkInference is a chat request of one user message to s's model,
// parsing calls in use's format (the template itself teaches none).
func thinkInference(t *testing.T, s *Server, stream bool, use *service.ToolUse) inference {
	t.Helper()
	prompt, _, err := s.text().PrepareChat([]chat.Message{{Role: "user", Content: "2+2?"}}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return inference{common: &Common{Stream: stream}, chat: true, prompt: prompt, tools: use}
}

type reasoningChunk struct {
	Choices []struct {
		Delta struct {
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
		} `json:"delta"`
	} `json:"choices"`
}

// TestReasoningContent drives the chat response writers (streamed and
// whole) with what a reasoning model generates, through the real
// tokenizer (its <think> tags control tokens, streamed as empty text): the
// reasoning goes to reasoning_content, the answer to content, no tag to
// either, and a tool call after the reasoning is a call.
func TestReasoningContent(t *testing.T) {
	tests := []struct {
		name, template, text string
		reasoning, content   string
		tools                toolcall.Format // None: no tools
		calls                int
	}{
		{"qwen3", qwen3Template, "<think>\nAdd them.\n</think>\n\nIt is 4.", "\nAdd them.\n", "\n\nIt is 4.", toolcall.None, 0},
		{"qwen3 without thinking", qwen3Template, "It is 4.", "", "It is 4.", toolcall.None, 0},
		{"qwen3 under a grammar (no <think>)", qwen3Template, "{\"a\": 4}", "", "{\"a\": 4}", toolcall.None, 0},
		{"thinking off", offTemplate, "It is 4.", "", "It is 4.", toolcall.None, 0},
		{"r1 opened by the prompt", r1Template, "Add them.</think>It is 4.", "Add them.", "It is 4.", toolcall.None, 0},
		{"gpt-oss channels", harmonyTemplate, "<|channel|>analysis<|message|>Add them.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.", "Add them.", "It is 4.", toolcall.None, 0},
		{"gpt-oss final only", harmonyTemplate, "<|channel|>final<|message|>It is 4.", "", "It is 4.", toolcall.None, 0},
		{"gpt-oss cut off in analysis", harmonyTemplate, "<|channel|>analysis<|message|>Add the", "Add the", "", toolcall.None, 0},
		{"cut off while thinking", qwen3Template, "<think>Add the", "Add the", "", toolcall.None, 0},
		{"call after reasoning", qwen3Template, "<think>Use the tool.</think>\n<tool_call>{\"name\": \"add\", \"arguments\": {\"a\": 2}}</tool_call>",
			"Use the tool.", "\n", toolcall.Hermes, 1},
		// gpt-oss: a message to functions.N is a call (its header names
		// it), read before the channels are split; ended by <|call|>, or
		// by the end of generation where <|call|> stopped it unwritten.
		{"gpt-oss call after analysis", harmonyTemplate, "<|channel|>analysis<|message|>Use the tool.<|end|><|start|>assistant<|channel|>commentary to=functions.add <|constrain|>json<|message|>{\"a\": 2}<|call|>",
			"Use the tool.", "", toolcall.Harmony, 1},
		{"gpt-oss call, template's header order, end token unwritten", harmonyTemplate, "<|start|>assistant to=functions.add<|channel|>commentary json<|message|>{\"a\": 2}",
			"", "", toolcall.Harmony, 1},
		{"gpt-oss answer with tools offered", harmonyTemplate, "<|channel|>analysis<|message|>No tool.<|end|><|start|>assistant<|channel|>final<|message|>It is 4.<|return|>",
			"No tool.", "It is 4.", toolcall.Harmony, 0},
		{"gpt-oss call of an unknown function is content", harmonyTemplate, "<|channel|>commentary to=functions.rm<|message|>{}<|call|>",
			"", "{}", toolcall.Harmony, 0},
	}
	for _, tt := range tests {
		s, tok := thinkServer(t, tt.template)
		var use func() *service.ToolUse
		use = func() *service.ToolUse { return nil }
		if tt.tools != toolcall.None {
			use = func() *service.ToolUse {
				return &service.ToolUse{Format: tt.tools, Names: []string{"add"}, Parallel: true}
			}
		}
		t.Run(tt.name+"/stream", func(t *testing.T) {
			rec := httptest.NewRecorder()
			in := thinkInference(t, s, true, use())
			x := s.newSSE(rec, "req-think", in, []*collector{newCollector(s, in)})
			x.begin()
			for _, tk := range generated(tok, tt.text) {
				x.token(0, tk)
			}
			x.end(genResult{Finish: engine.FinishStop, Finishes: []engine.FinishReason{engine.FinishStop}}, nil)
			var reasoning, content strings.Builder
			calls := 0
			for _, line := range strings.Split(rec.Body.String(), "\n\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var ch reasoningChunk
				if err := json.Unmarshal([]byte(data), &ch); err != nil || len(ch.Choices) != 1 {
					t.Fatalf("chunk %s: %v", data, err)
				}
				d := ch.Choices[0].Delta
				if d.ReasoningContent != nil {
					if d.Content != nil {
						t.Errorf("chunk %s: reasoning and content in one delta", data)
					}
					reasoning.WriteString(*d.ReasoningContent)
				}
				if d.Content != nil {
					if tt.template != offTemplate && (strings.Contains(*d.Content, "think>") || strings.Contains(*d.Content, "<|")) {
						t.Errorf("content delta %q leaks a tag", *d.Content)
					}
					content.WriteString(*d.Content)
				}
				if len(d.ToolCalls) > 0 && strings.Contains(string(d.ToolCalls), `"id"`) {
					calls++
				}
			}
			if reasoning.String() != tt.reasoning || content.String() != tt.content || calls != tt.calls {
				t.Fatalf("got reasoning %q content %q calls %d, want %q %q %d", reasoning.String(), content.String(), calls, tt.reasoning, tt.content, tt.calls)
			}
		})
		t.Run(tt.name+"/whole", func(t *testing.T) {
			rec := httptest.NewRecorder()
			in := thinkInference(t, s, false, use())
			c := newCollector(s, in)
			for _, tk := range generated(tok, tt.text) {
				c.add(tk)
			}
			s.fullResponse(rec, "req-think", in, []*collector{c}, genResult{Finish: engine.FinishStop, Finishes: []engine.FinishReason{engine.FinishStop}})
			var out struct {
				Choices []struct {
					Message      map[string]json.RawMessage `json:"message"`
					FinishReason string                     `json:"finish_reason"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || len(out.Choices) != 1 {
				t.Fatalf("body %s: %v", rec.Body.String(), err)
			}
			if want := map[bool]string{true: "tool_calls", false: "stop"}[tt.calls > 0]; out.Choices[0].FinishReason != want {
				t.Fatalf("got finish_reason %q, want %q", out.Choices[0].FinishReason, want)
			}
			m := out.Choices[0].Message
			var reasoning, content string
			_ = json.Unmarshal(m["content"], &content)
			if raw, ok := m["reasoning_content"]; ok {
				_ = json.Unmarshal(raw, &reasoning)
			} else if tt.reasoning != "" {
				t.Fatalf("message %s: no reasoning_content", rec.Body.String())
			}
			var calls []json.RawMessage
			_ = json.Unmarshal(m["tool_calls"], &calls)
			if reasoning != tt.reasoning || content != tt.content || len(calls) != tt.calls {
				t.Fatalf("got reasoning %q content %q calls %d, want %q %q %d", reasoning, content, len(calls), tt.reasoning, tt.content, tt.calls)
			}
		})
	}
}

// TestReasoningItem: through the Responses API the reasoning is a reasoning
// item (OpenAI's shape: empty summary, reasoning_text content) before the
// message, streamed as reasoning_text deltas that carry no tag.
func TestReasoningItem(t *testing.T) {
	s, tok := thinkServer(t, qwen3Template)
	in := thinkInference(t, s, true, nil)
	var events []string
	var deltas strings.Builder
	b := &respBuilder{base: "x", resp: Response{Output: []RespItem{}}, emit: func(typ string, kv map[string]any) {
		events = append(events, typ)
		if typ == "response.reasoning_text.delta" {
			deltas.WriteString(kv["delta"].(string))
		}
	}}
	c := newCollector(s, in)
	for _, tk := range generated(tok, "<think>Add them.</think>It is 4.") {
		text, calls := c.add(tk)
		b.add(c.thought, text, calls, nil)
	}
	text, calls := c.finish()
	b.add(c.thought, text, calls, nil)
	b.finish(genResult{Finish: engine.FinishStop})
	raw, err := json.Marshal(b.resp.Output)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":"rs_x_0","type":"reasoning","status":"completed","summary":[],"content":[{"type":"reasoning_text","text":"Add them."}]},` +
		`{"id":"msg_x_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"It is 4.","annotations":[],"logprobs":[]}]}]`
	if string(raw) != want {
		t.Fatalf("got output %s\nwant %s", raw, want)
	}
	if deltas.String() != "Add them." {
		t.Errorf("got reasoning deltas %q", deltas.String())
	}
	first := strings.Join(events[:4], " ")
	if first != "response.output_item.added response.reasoning_text.delta response.reasoning_text.delta response.reasoning_text.delta" &&
		!strings.HasPrefix(first, "response.output_item.added response.reasoning_text.delta") {
		t.Errorf("got events %q", events)
	}
	var done bool
	for i, e := range events {
		if e == "response.reasoning_text.done" {
			done = events[i+1] == "response.output_item.done" && events[i+2] == "response.output_item.added"
		}
	}
	if !done {
		t.Errorf("got events %q: the reasoning item is not done before the message opens", events)
	}
}

// TestReasoningGrammarAfter: a constrained request where the prompt opens
// the reasoning (DeepSeek-R1) holds its grammar after </think>
// (Constraint.After), whatever constrains it; where the model would open
// it itself (Qwen3), with thinking off, or with no reasoning markers, the
// grammar holds from the first token (it lets no <think> open: thinking is
// off).
func TestReasoningGrammarAfter(t *testing.T) {
	g := service.JSONObjectSchema
	msgs := []chat.Message{{Role: "user", Content: "2+2?"}}
	s, _ := thinkServer(t, r1Template)
	for _, want := range []service.Constraint{{Schema: g}, {Choice: []string{"a", "b"}}, {Syntax: "regex", Grammar: "[0-9]+"}} {
		_, got, err := s.text().PrepareChatWith(msgs, nil, want, chat.Options{GenerationPrompt: true})
		if err != nil || got.After != "</think>" {
			t.Errorf("%+v: got %+v, %v, want the constraint after </think>", want, got, err)
		}
	}
	_, got, err := s.text().PrepareChatWith(msgs, nil, service.Constraint{}, chat.Options{GenerationPrompt: true})
	if err != nil || !got.IsZero() || got.After != "" {
		t.Errorf("unconstrained: got %+v, %v", got, err)
	}
	for _, tpl := range []string{qwen3Template, offTemplate, turnsTemplate} {
		s, _ := thinkServer(t, tpl)
		if _, got, err := s.text().PrepareChat(msgs, nil, g); err != nil || string(got.Schema) != string(g) || got.After != "" {
			t.Errorf("%q: got %v, %v, want the schema from the first token", tpl, got, err)
		}
	}
}

// TestReasoningInputItems: a reasoning item sent back as input (as
// OpenAI's clients send an earlier response's output) becomes the <think>
// block of the assistant turn after it, for the template to keep or drop;
// one that precedes no assistant turn, or carries what this server never
// issues (a summary, encrypted content), is refused.
func TestReasoningInputItems(t *testing.T) {
	const rs = `{"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"Add them."}]}`
	msgs, err := respInput(json.RawMessage(`[{"role":"user","content":"2+2?"},` + rs +
		`,{"type":"message","role":"assistant","content":[{"type":"output_text","text":"4"}]},` + rs +
		`,{"type":"function_call","call_id":"c1","name":"add","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"4"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 4 || msgs[1].Role != "assistant" || msgs[1].Content != "<think>Add them.</think>4" ||
		msgs[2].Content != "<think>Add them.</think>" || len(msgs[2].ToolCalls) != 1 || msgs[3].Role != "tool" {
		t.Fatalf("got %+v", msgs)
	}
	for _, bad := range []string{
		`[` + rs + `,{"role":"user","content":"hi"}]`,
		`[{"role":"user","content":"hi"},` + rs + `]`,
		`[{"type":"reasoning","summary":[{"type":"summary_text","text":"x"}],"content":[]}]`,
		`[{"type":"reasoning","encrypted_content":"abc","content":[]},{"role":"assistant","content":"x"}]`,
		`[{"type":"reasoning","content":[{"type":"output_text","text":"x"}]},{"role":"assistant","content":"x"}]`,
	} {
		if _, err := respInput(json.RawMessage(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
