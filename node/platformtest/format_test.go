package platformtest_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// chatReply posts a chat completion and returns the status, the content,
// the finish reason and the error code.
func chatReply(t *testing.T, p *platformtest.Platform, token string, body map[string]any) (int, string, string, string) {
	t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", p.URL+"/v1/chat/completions", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var v struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
		Choices []struct {
			Message      struct{ Content string } `json:"message"`
			FinishReason string                   `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, raw, err)
	}
	if len(v.Choices) == 0 {
		return resp.StatusCode, v.Error.Message, "", v.Error.Code
	}
	return resp.StatusCode, v.Choices[0].Message.Content, v.Choices[0].FinishReason, v.Error.Code
}

// TestResponseFormat end to end over HTTP: the context-bag model, which
// can only repeat what it read, answers a json_schema request with JSON
// that validates against the schema (and json_object with an object),
// because constrained decoding chose every token; a schema feature the
// grammar cannot enforce is refused with 400 naming it, before anything
// runs; logit_bias with an id outside the vocabulary is refused likewise.
func TestResponseFormat(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	schema := `{"type":"object","properties":{"city":{"type":"string","maxLength":12},"ok":{"type":"boolean"},"n":{"enum":[1,2,3]}},"required":["city","ok","n"],"additionalProperties":false}`
	msgs := []map[string]string{{"role": "user", "content": "Where? Answer in JSON."}}
	for _, temp := range []float64{0, 1} {
		status, content, finish, _ := chatReply(t, p, tok, map[string]any{"model": platformtest.Model, "messages": msgs, "max_tokens": 200, "temperature": temp,
			"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "place", "strict": true, "schema": json.RawMessage(schema)}}})
		if status != 200 || finish != "stop" {
			t.Fatalf("temperature %v: %d %q finish %q, want 200 stop", temp, status, content, finish)
		}
		doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(schema))
		c := jsonschema.NewCompiler()
		if err := c.AddResource("s.json", doc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("s.json")
		if err != nil {
			t.Fatal(err)
		}
		v, err := jsonschema.UnmarshalJSON(strings.NewReader(content))
		if err != nil {
			t.Fatalf("content %q is not JSON: %v", content, err)
		}
		if err := sch.Validate(v); err != nil {
			t.Fatalf("content %q does not validate: %v", content, err)
		}
	}
	status, content, finish, _ := chatReply(t, p, tok, map[string]any{"model": platformtest.Model, "messages": msgs, "max_tokens": 200, "temperature": 0,
		"response_format": map[string]any{"type": "json_object"}})
	var obj map[string]any
	if status != 200 || (finish == "stop" && json.Unmarshal([]byte(content), &obj) != nil) {
		t.Fatalf("json_object: %d %q finish %q, want 200 and an object", status, content, finish)
	}
	for _, tc := range []struct {
		name string
		body map[string]any
		code string
		msg  string
	}{
		{"pattern", map[string]any{"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "p", "schema": map[string]any{"type": "string", "pattern": "^(?=x)"}}}}, "unsupported", `"pattern"`},
		{"logit_bias outside the vocabulary", map[string]any{"logit_bias": map[string]any{"99999999": 5}}, "invalid_request_error", "logit_bias"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.body["model"], tc.body["messages"], tc.body["max_tokens"] = platformtest.Model, msgs, 4
			status, msg, _, code := chatReply(t, p, tok, tc.body)
			if status != 400 || code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %d %s %q, want 400 %s naming %s", status, code, msg, tc.code, tc.msg)
			}
		})
	}
}
