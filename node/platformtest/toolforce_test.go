package platformtest_test

import (
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// Tools whose arguments a random-weight model can only complete: an enum
// and a boolean, so a forced call ends within max_tokens.
const (
	unitTool  = `{"type":"function","function":{"name":"set_unit","parameters":{"type":"object","properties":{"unit":{"enum":["celsius","fahrenheit"]}},"required":["unit"],"additionalProperties":false}}}`
	alarmTool = `{"type":"function","function":{"name":"set_alarm","parameters":{"type":"object","properties":{"on":{"type":"boolean"}},"required":["on"],"additionalProperties":false}}}`
)

// TestChatToolChoiceForced: tool_choice "required" and a named function
// force a call by constrained decoding, so even the random-weight
// context-bag model answers with a well-formed call of an offered function
// (of the named one), its arguments valid for the function's schema, over
// HTTP (whole and streamed) and gRPC; forcing cannot be combined with a
// response_format.
func TestChatToolChoiceForced(t *testing.T) {
	tpl := qwen(t)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, API: func(c *api.Config) { c.Chat = tpl }})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	strictly := func(tool string) string {
		return strings.Replace(tool, `"parameters"`, `"strict":true,"parameters"`, 1)
	}
	body := func(choice, extra string) string {
		tools := unitTool + `,` + alarmTool
		if strings.HasPrefix(extra, "strict") { // strict: true on both tools (OpenAI's Agents SDK sends it)
			tools, extra = strictly(unitTool)+`,`+strictly(alarmTool), strings.TrimPrefix(extra, "strict")
		}
		return `{"model":"` + platformtest.Model + `","messages":[{"role":"user","content":"Set it up."}],"max_tokens":120,"temperature":0,` +
			`"tools":[` + tools + `],"tool_choice":` + choice + extra + `}`
	}
	type call struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	}
	for _, tt := range []struct{ name, choice, want, strict string }{
		{"required", `"required"`, "", ""},
		{"named", `{"type":"function","function":{"name":"set_alarm"}}`, "set_alarm", ""},
		{"strict required", `"required"`, "", "strict"},
		{"strict named", `{"type":"function","function":{"name":"set_unit"}}`, "set_unit", "strict"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, b := post(t, p, tok, body(tt.choice, tt.strict))
			var a struct {
				Choices []struct {
					Message struct {
						Content   *string `json:"content"`
						ToolCalls []call  `json:"tool_calls"`
					} `json:"message"`
					FinishReason string `json:"finish_reason"`
				} `json:"choices"`
			}
			if code != 200 || json.Unmarshal(b, &a) != nil || len(a.Choices) != 1 {
				t.Fatalf("got %d %s", code, b)
			}
			c := a.Choices[0]
			if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
				t.Fatalf("got %s, want one tool call", b)
			}
			tc := c.Message.ToolCalls[0]
			if tt.want != "" && tc.Function.Name != tt.want {
				t.Fatalf("called %q, want %q", tc.Function.Name, tt.want)
			}
			if tc.Type != "function" || !strings.HasPrefix(tc.ID, "call_") {
				t.Fatalf("call %+v", tc)
			}
			checkArgs(t, tc.Function.Name, tc.Function.Arguments)

			code, sb := post(t, p, tok, body(tt.choice, tt.strict+`,"stream":true`))
			if code != 200 {
				t.Fatalf("stream: got %d %s", code, sb)
			}
			var name, args, finish string
			for _, line := range strings.Split(string(sb), "\n\n") {
				data, ok := strings.CutPrefix(line, "data: ")
				if !ok || data == "[DONE]" {
					continue
				}
				var ch struct {
					Choices []struct {
						Delta struct {
							ToolCalls []struct {
								Function struct{ Name, Arguments string } `json:"function"`
							} `json:"tool_calls"`
						} `json:"delta"`
						FinishReason *string `json:"finish_reason"`
					} `json:"choices"`
				}
				if err := json.Unmarshal([]byte(data), &ch); err != nil {
					t.Fatal(err)
				}
				for _, c := range ch.Choices {
					for _, d := range c.Delta.ToolCalls {
						name += d.Function.Name
						args += d.Function.Arguments
					}
					if c.FinishReason != nil {
						finish = *c.FinishReason
					}
				}
			}
			if finish != "tool_calls" || name != tc.Function.Name || args != tc.Function.Arguments {
				t.Fatalf("stream gave %s(%s) %s, whole %s(%s)", name, args, finish, tc.Function.Name, tc.Function.Arguments)
			}
		})
	}
	t.Run("forced per choice", func(t *testing.T) {
		// n = 3: each choice decoded under its own matcher and parsed by
		// its own tool parser, each a well-formed call.
		code, b := post(t, p, tok, `{"model":"`+platformtest.Model+`","messages":[{"role":"user","content":"Set it up."}],"max_tokens":120,"temperature":1,"seed":9,"n":3,`+
			`"tools":[`+unitTool+`,`+alarmTool+`],"tool_choice":"required"}`)
		var a struct {
			Choices []struct {
				Index   int `json:"index"`
				Message struct {
					ToolCalls []call `json:"tool_calls"`
				} `json:"message"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if code != 200 || json.Unmarshal(b, &a) != nil || len(a.Choices) != 3 {
			t.Fatalf("got %d %s", code, b)
		}
		for i, c := range a.Choices {
			if c.Index != i || c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 {
				t.Fatalf("choice %d: %s", i, b)
			}
			checkArgs(t, c.Message.ToolCalls[0].Function.Name, c.Message.ToolCalls[0].Function.Arguments)
		}
	})
	t.Run("not with response_format", func(t *testing.T) {
		code, b := post(t, p, tok, body(`"required"`, `,"response_format":{"type":"json_object"}`))
		if code != 400 || !strings.Contains(string(b), "response_format") {
			t.Fatalf("got %d %s, want 400 naming response_format", code, b)
		}
	})
	t.Run("a schema the grammar cannot enforce", func(t *testing.T) {
		bad := `{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"n":{"type":"string","pattern":"^(?=a)"}}}}}`
		b := `{"model":"` + platformtest.Model + `","messages":[{"role":"user","content":"x"}],"tools":[` + bad + `],"tool_choice":"required"}`
		code, out := post(t, p, tok, b)
		if code != 400 || !strings.Contains(string(out), "pattern") {
			t.Fatalf("got %d %s, want 400 naming pattern", code, out)
		}
	})
	t.Run("grpc", func(t *testing.T) {
		conn, ctx := p.GRPC(t)
		client := inferencev1.NewInferenceServiceClient(conn)
		actx := metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
		var ut, at struct {
			Function struct {
				Name       string
				Parameters json.RawMessage
			}
		}
		_ = json.Unmarshal([]byte(unitTool), &ut)
		_ = json.Unmarshal([]byte(alarmTool), &at)
		tools := []*inferencev1.Tool{{Name: ut.Function.Name, ParametersJson: string(ut.Function.Parameters)}, {Name: at.Function.Name, ParametersJson: string(at.Function.Parameters)}}
		mt, temp := int64(120), 0.0
		msgs := &inferencev1.GenerateRequest_Chat{Chat: &inferencev1.ChatMessages{Messages: []*inferencev1.ChatMessage{{Role: "user", Content: "Set it up."}}}}
		st, err := client.Generate(actx, &inferencev1.GenerateRequest{Model: platformtest.Model, Prompt: msgs, MaxTokens: &mt, Temperature: &temp, Tools: tools, ToolChoice: "set_unit"})
		if err != nil {
			t.Fatal(err)
		}
		var calls []*inferencev1.ToolCall
		finish := ""
		for {
			m, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if c := m.GetToolCall(); c != nil {
				calls = append(calls, c)
			}
			if f := m.GetFinal(); f != nil {
				finish = f.GetFinishReason()
				break
			}
		}
		if finish != "tool_calls" || len(calls) != 1 || calls[0].GetName() != "set_unit" {
			t.Fatalf("got %v (%s), want one set_unit call", calls, finish)
		}
		checkArgs(t, calls[0].GetName(), calls[0].GetArguments())
		bad, err := client.Generate(actx, &inferencev1.GenerateRequest{Model: platformtest.Model, Prompt: msgs, MaxTokens: &mt, Tools: tools, ToolChoice: "required",
			ResponseFormat: &inferencev1.ResponseFormat{Type: "json_object"}})
		if err == nil {
			_, err = bad.Recv()
		}
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "response_format") {
			t.Fatalf("got %v, want INVALID_ARGUMENT naming response_format", err)
		}
	})
}

// checkArgs fails t unless args are JSON arguments of one of the two
// offered functions (set_unit, set_alarm) that match its schema.
func checkArgs(t *testing.T, name, args string) {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatalf("arguments %q are not JSON: %v", args, err)
	}
	switch name {
	case "set_unit":
		if u, _ := a["unit"].(string); len(a) != 1 || (u != "celsius" && u != "fahrenheit") {
			t.Fatalf("set_unit arguments %q do not match the schema", args)
		}
	case "set_alarm":
		if _, ok := a["on"].(bool); len(a) != 1 || !ok {
			t.Fatalf("set_alarm arguments %q do not match the schema", args)
		}
	default:
		t.Fatalf("call of %q, not an offered function", name)
	}
}
