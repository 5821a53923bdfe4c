package platformtest_test

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

func template(t *testing.T, file, eos string) *chat.Template {
	t.Helper()
	src, err := os.ReadFile("../../engine/chat/testdata/hf/templates/" + file)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chat.New(string(src), "", eos)
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

// TestToolsStrictAuto: strict tools under tool_choice "auto" (what the
// OpenAI Agents SDK sends) are served, no longer refused, over chat
// completions (whole and streamed) and the Responses API, for the Hermes
// (Qwen 2.5), Llama 3.1 and Mistral Small 3.2 templates. The context-bag
// model emits the most frequent token of its context, so an input of many
// "{" (or logit_bias on "{") makes it open Llama 3's bare-JSON call: from
// there the lazy grammar constrains it, and the answer is one call of an
// offered function whose arguments match the strict schema. The Hermes and
// Mistral answers never open a call (their markers are multi-byte in this
// vocabulary): free text, returned as content.
func TestToolsStrictAuto(t *testing.T) {
	strictly := func(tool string) string {
		return strings.Replace(tool, `"parameters"`, `"strict":true,"parameters"`, 1)
	}
	tools := strictly(unitTool) + `,` + strictly(alarmTool)
	respTools := `{"type":"function","name":"set_unit","strict":true,"parameters":{"type":"object","properties":{"unit":{"enum":["celsius","fahrenheit"]}},"required":["unit"],"additionalProperties":false}},` +
		`{"type":"function","name":"set_alarm","strict":true,"parameters":{"type":"object","properties":{"on":{"type":"boolean"}},"required":["on"],"additionalProperties":false}}`
	for _, fam := range []struct {
		name, file, eos string
		call            bool // the model opens a call
	}{
		{"hermes", "Qwen-Qwen2.5-7B-Instruct.jinja", "<|im_end|>", false},
		{"llama3", "meta-llama-Llama-3.1-8B-Instruct.jinja", "<|eot_id|>", true},
		{"mistral", "Mistral-Small-3.2-24B-Instruct-2506.jinja", "</s>", false},
	} {
		t.Run(fam.name, func(t *testing.T) {
			braces := strings.Repeat("{", 300)
			if fam.call {
				braces = strings.Repeat("{", 2000) // more than any other token of the prompt
			}
			tpl := template(t, fam.file, fam.eos)
			p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, API: func(c *api.Config) { c.Chat = tpl }})
			tok := p.Token(t, "victim", tenancy.ScopeInfer)
			body := `{"model":"` + platformtest.Model + `","messages":[{"role":"user","content":"` + braces + `"}],"max_tokens":120,"temperature":0,` +
				`"logit_bias":{"123":100},"parallel_tool_calls":false,"tools":[` + tools + `]}`
			code, b := post(t, p, tok, body)
			var a struct {
				Choices []struct {
					Message struct {
						Content   *string `json:"content"`
						ToolCalls []struct {
							ID       string `json:"id"`
							Function struct{ Name, Arguments string }
						} `json:"tool_calls"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if code != 200 || json.Unmarshal(b, &a) != nil || len(a.Choices) != 1 {
				t.Fatalf("got %d %s", code, b)
			}
			c := a.Choices[0]
			var name, args string
			if fam.call {
				if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.Content != nil {
					t.Fatalf("got %s, want one tool call and no content", b)
				}
				name, args = c.Message.ToolCalls[0].Function.Name, c.Message.ToolCalls[0].Function.Arguments
				checkArgs(t, name, args)
			} else if len(c.Message.ToolCalls) != 0 || c.Message.Content == nil || c.FinishReason == "tool_calls" {
				t.Fatalf("got %s, want free text", b)
			}
			// Streamed: the same answer.
			code, sb := post(t, p, tok, strings.Replace(body, `"temperature":0`, `"temperature":0,"stream":true`, 1))
			if code != 200 {
				t.Fatalf("stream: got %d %s", code, sb)
			}
			var sname, sargs, content, finish string
			for _, line := range strings.Split(string(sb), "\n\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var ch struct {
					Choices []struct {
						Delta struct {
							Content   string `json:"content"`
							ToolCalls []struct {
								Function struct{ Name, Arguments string } `json:"function"`
							} `json:"tool_calls"`
						} `json:"delta"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(data), &ch); err != nil {
					t.Fatalf("chunk %s: %v", data, err)
				}
				for _, c := range ch.Choices {
					content += c.Delta.Content
					for _, d := range c.Delta.ToolCalls {
						sname += d.Function.Name
						sargs += d.Function.Arguments
					}
					if c.FinishReason != nil {
						finish = *c.FinishReason
					}
				}
			}
			if finish != c.FinishReason || sname != name || sargs != args || !fam.call && content != *c.Message.Content {
				t.Fatalf("stream gave %s(%s) %q %s, whole %s", sname, sargs, content, finish, b)
			}
			// Responses API (no logit_bias there: the input's braces do it).
			rbody := `{"model":"` + platformtest.Model + `","input":"` + braces + `","max_output_tokens":120,"temperature":0,"parallel_tool_calls":false,"tools":[` + respTools + `]}`
			r := mustResp(t, p, "POST", "/v1/responses", tok, rbody)
			if fam.call {
				if r.Status != "completed" || len(r.Output) != 1 || r.Output[0].Type != "function_call" || !strings.HasPrefix(r.Output[0].CallID, "call_") {
					t.Fatalf("responses: got %+v, want one function_call", r)
				}
				checkArgs(t, r.Output[0].Name, r.Output[0].Arguments)
			} else {
				for _, it := range r.Output {
					if it.Type == "function_call" {
						t.Fatalf("responses: got %+v, want free text", r)
					}
				}
			}
			code, rs := call(t, p, "POST", "/v1/responses", tok, strings.Replace(rbody, `"temperature":0`, `"temperature":0,"stream":true`, 1))
			if code != 200 {
				t.Fatalf("responses stream: got %d %s", code, rs)
			}
			evs := events(t, rs)
			var last struct {
				Output []struct{ Type, Name, Arguments string } `json:"output"`
			}
			if err := json.Unmarshal(evs[len(evs)-1].Response, &last); err != nil || len(last.Output) != len(r.Output) {
				t.Fatalf("responses stream ended with %s, whole %+v", evs[len(evs)-1].Response, r)
			}
			if fam.call && (last.Output[0].Name != r.Output[0].Name || last.Output[0].Arguments != r.Output[0].Arguments) {
				t.Fatalf("responses stream gave %+v, whole %+v", last.Output, r.Output)
			}
		})
	}
}
