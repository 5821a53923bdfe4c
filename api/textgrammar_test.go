package api_test

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/cloison/cloison"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestTextGrammarsHTTP: a completion constrained by a regex, a GBNF or a
// Lark grammar (every field that asks for one, on both endpoints) is text
// the constraint accepts, checked by an independent oracle (Go's regexp
// with the same language), although the test model's output is random.
func TestTextGrammarsHTTP(t *testing.T) {
	p, ask := dialectPlatform(t)
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	js := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	const gbnf = "root ::= [0-9]{3} \"-\" word\nword ::= [a-z]{2,4}  # a comment\n"
	const lark = "start: DIGITS \"-\" WORD\nDIGITS: DIGIT~3\nWORD: /[a-z]{2,4}/\n%import common.DIGIT\n"
	oracle := regexp.MustCompile(`^[0-9]{3}-[a-z]{2,4}$`)
	for _, extra := range []string{
		`,"guided_regex":` + js(`\d{3}-[a-z]{2,4}`),
		`,"structured_outputs":{"regex":` + js(`^[0-9]{3}-[a-z]{2,4}$`) + `}`,
		`,"regex":` + js(`[0-9]{3}-(?:[a-z]{2}|[a-z]{3}|[a-z]{4})`),
		`,"ebnf":` + js(gbnf),
		`,"guided_grammar":` + js(gbnf),
		`,"structured_outputs":{"grammar":` + js(gbnf) + `}`,
		`,"structured_outputs":{"grammar":` + js(lark) + `}`,
		`,"guided_grammar":` + js(lark),
	} {
		for seed := range 3 {
			code, a := ask("the cat sat on the mat", `,"max_tokens":40,"temperature":1,"seed":`+string(rune('1'+seed))+extra)
			if code != 200 || a.Choices[0].FinishReason != "stop" || !oracle.MatchString(a.Choices[0].Text) {
				t.Fatalf("completions %s: %d %+v, want text matching %s", extra, code, a, oracle)
			}
		}
		resp, b := request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"`+platformtest.Model+`","messages":[{"role":"user","content":"a code"}],"max_tokens":40,"temperature":1`+extra+`}`)
		var v struct {
			Choices []struct {
				Message      struct{ Content string }
				FinishReason string `json:"finish_reason"`
			}
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil || len(v.Choices) != 1 || v.Choices[0].FinishReason != "stop" || !oracle.MatchString(v.Choices[0].Message.Content) {
			t.Fatalf("chat %s: %d %s, want content matching %s", extra, resp.StatusCode, b, oracle)
		}
	}
	// Refusals: at decode (two constraints, too long) and once compiled
	// after admission (a parse error, a construct refused by name).
	long := strings.Repeat("a", 64<<10+1)
	for _, c := range []struct{ extra, code, says string }{
		{`,"regex":"a","ebnf":"root ::= \"a\""`, "invalid_request_error", "one structured output"},
		{`,"guided_regex":"` + long + `"`, "invalid_request_error", "at most 65536 bytes"},
		{`,"guided_regex":"(a)\\1"`, "unsupported", "backreference"},
		{`,"structured_outputs":{"regex":"a(?=b)"}`, "unsupported", "lookahead"},
		{`,"ebnf":"root ::= \"a"`, "invalid_request_error", "gbnf: line 1"},
		{`,"ebnf":"start ::= \"a\""`, "invalid_request_error", "no root rule"},
		{`,"guided_grammar":"start: x"`, "invalid_request_error", "undefined name x"},
		{`,"guided_grammar":"root ::= root \"a\" | \"a\""`, "unsupported", "left recursion"},
		{`,"structured_outputs":{"grammar":"start: \"a\"\n%declare X"}`, "unsupported", "%declare"},
	} {
		code, a := ask("x", `,"max_tokens":5`+c.extra)
		if code != 400 || a.Error == nil || a.Error.Code != c.code || !strings.Contains(a.Error.Message, c.says) {
			t.Errorf("%.80s: %d %+v, want 400 %s saying %q", c.extra, code, a.Error, c.code, c.says)
		}
	}
}

// TestJSONWhitespaceHTTP: under a strict json_schema the output is compact
// JSON (no whitespace between tokens), as OpenAI writes it; the schema has
// no strings, so any whitespace would lie between tokens.
func TestJSONWhitespaceHTTP(t *testing.T) {
	p, _ := dialectPlatform(t)
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	const schema = `{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}},"b":{"type":"boolean"}},"required":["a","b"],"additionalProperties":false}`
	for _, rf := range []string{
		`"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":` + schema + `}}`,
		`"structured_outputs":{"json":` + schema + `,"disable_any_whitespace":true}`,
	} {
		for seed := range 4 {
			resp, b := request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"`+platformtest.Model+`","messages":[{"role":"user","content":"json"}],"max_tokens":60,"temperature":1.5,"seed":`+string(rune('1'+seed))+`,`+rf+`}`)
			var v struct {
				Choices []struct {
					Message struct{ Content string }
				}
			}
			if resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil || len(v.Choices) != 1 {
				t.Fatalf("%s: %d %s", rf, resp.StatusCode, b)
			}
			if c := v.Choices[0].Message.Content; strings.ContainsAny(c, " \n\t\r") {
				t.Fatalf("%s: %q has whitespace", rf, c)
			}
		}
	}
}

// TestJSONWhitespaceGRPC: a strict json_schema over gRPC gives compact
// JSON too (the regex and grammar fields have no gRPC form).
func TestJSONWhitespaceGRPC(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	conn, _ := p.GRPC(t)
	client := inferencev1.NewInferenceServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+p.Token(t, "victim", tenancy.ScopeInfer))
	const schema = `{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}},"b":{"type":"boolean"}},"required":["a","b"],"additionalProperties":false}`
	temp := 1.5
	maxTok := int64(60)
	for seed := range 4 {
		sd := int64(seed + 1)
		st, err := client.Generate(ctx, &inferencev1.GenerateRequest{Model: platformtest.Model, Prompt: &inferencev1.GenerateRequest_Text{Text: "json"},
			MaxTokens: &maxTok, Temperature: &temp, Seed: &sd,
			ResponseFormat: &inferencev1.ResponseFormat{Type: "json_schema", JsonSchema: &inferencev1.JsonSchema{Name: "x", Schema: schema, Strict: true}}})
		if err != nil {
			t.Fatal(err)
		}
		text := ""
		for {
			r, err := st.Recv()
			if err != nil {
				t.Fatal(err)
			}
			if r.GetFinal() != nil {
				break
			}
			text += r.GetChunk().GetText()
		}
		if text == "" || strings.ContainsAny(text, " \n\t\r") {
			t.Fatalf("seed %d: %q, want compact JSON", seed, text)
		}
	}
}
