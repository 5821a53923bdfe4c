package api_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestResponsesCustomTools: a custom tool with a Lark or regex grammar,
// forced by tool_choice, gives one custom_tool_call item whose input the
// grammar accepts (an independent regexp as oracle; the test model is
// random); streamed, its input deltas add up to the item's input; the call
// and its output are taken back as input items; a custom tool the model
// may or may not call is refused, as are bad grammars (after admission).
func TestResponsesCustomTools(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	m := platformtest.Model
	js := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	lark := "start: \"SELECT \" COL (\", \" COL)~0..2 \" FROM \" TABLE\nCOL: /[a-z]{1,8}/\nTABLE: \"users\" | \"orders\"\n"
	oracle := regexp.MustCompile(`^SELECT [a-z]{1,8}(, [a-z]{1,8}){0,2} FROM (users|orders)$`)
	tools := []string{
		`[{"type":"custom","name":"sql","description":"a query","format":{"type":"grammar","syntax":"lark","definition":` + js(lark) + `}}]`,
		`[{"type":"custom","name":"sql","format":{"type":"grammar","syntax":"regex","definition":` + js(`SELECT [a-z]{1,8}(, [a-z]{1,8}){0,2} FROM (users|orders)`) + `}},{"type":"function","name":"f","parameters":{"type":"object"}}]`,
	}
	for i, tl := range tools {
		for range 3 {
			body := `{"model":"` + m + `","input":"list the users","max_output_tokens":60,"temperature":1,"tools":` + tl + `,"tool_choice":{"type":"custom","name":"sql"}}`
			resp, b := request(t, "POST", p.URL+"/v1/responses", tok, body)
			var r api.Response
			if err := json.Unmarshal(b, &r); resp.StatusCode != 200 || err != nil || len(r.Output) != 1 {
				t.Fatalf("tools %d: %d %s (%v)", i, resp.StatusCode, b, err)
			}
			it := r.Output[0]
			if it.Type != "custom_tool_call" || it.Name != "sql" || it.CallID == "" || it.Input == nil || !oracle.MatchString(*it.Input) || r.Status != "completed" {
				t.Fatalf("tools %d: %s, want a completed custom_tool_call whose input matches %s", i, b, oracle)
			}
		}
	}

	t.Run("stream", func(t *testing.T) {
		body := `{"model":"` + m + `","input":"q","max_output_tokens":60,"temperature":1,"stream":true,"tools":` + tools[0] + `,"tool_choice":"required"}`
		resp, sb := request(t, "POST", p.URL+"/v1/responses", tok, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, sb)
		}
		deltas, done := "", ""
		for _, line := range strings.Split(string(sb), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type  string `json:"type"`
				Delta string `json:"delta"`
				Input string `json:"input"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("bad event %s", data)
			}
			switch ev.Type {
			case "response.custom_tool_call_input.delta":
				deltas += ev.Delta
			case "response.custom_tool_call_input.done":
				done = ev.Input
			case "response.output_text.delta":
				t.Fatalf("output text under a forced custom tool: %s", data)
			}
		}
		if deltas != done || !oracle.MatchString(done) {
			t.Fatalf("deltas %q, done %q; want equal and matching %s", deltas, done, oracle)
		}
	})

	t.Run("input items", func(t *testing.T) {
		body := `{"model":"` + m + `","max_output_tokens":5,"temperature":0,"input":[{"role":"user","content":"list"},` +
			`{"type":"custom_tool_call","call_id":"call_1","name":"sql","input":"SELECT a FROM users"},` +
			`{"type":"custom_tool_call_output","call_id":"call_1","output":"3 rows"}]}`
		resp, b := request(t, "POST", p.URL+"/v1/responses", tok, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	})

	for _, c := range []struct{ tools, choice, code, says string }{
		{tools[0], `"auto"`, "unsupported", "custom tools are served only when tool_choice forces one"},
		{tools[1], `"required"`, "unsupported", "custom tools are served only"},
		{tools[0], `{"type":"custom","name":"nope"}`, "invalid_request_error", "does not define"},
		{`[{"type":"custom","name":"x","format":{"type":"grammar","syntax":"ebnf","definition":"x"}}]`, `"required"`, "unsupported", "lark or regex"},
		{`[{"type":"custom","name":"x","format":{"type":"grammar","syntax":"lark","definition":"start: x"}}]`, `"required"`, "invalid_request_error", "undefined name x"},
		{`[{"type":"custom","name":"x","format":{"type":"grammar","syntax":"regex","definition":"(a)\\1"}}]`, `"required"`, "unsupported", "backreference"},
		{`[{"type":"custom","name":"x","format":{"type":"grammar","syntax":"lark"}}]`, `"required"`, "invalid_request_error", "definition"},
	} {
		resp, b := request(t, "POST", p.URL+"/v1/responses", tok, `{"model":"`+m+`","input":"q","max_output_tokens":5,"tools":`+c.tools+`,"tool_choice":`+c.choice+`}`)
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(b, &e) != nil || resp.StatusCode != 400 || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.says) {
			t.Errorf("%s %s: %d %s, want 400 %s saying %q", c.tools, c.choice, resp.StatusCode, b, c.code, c.says)
		}
	}
}
