package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// dialectAnswer is a non-streamed /v1/completions answer's text, finish
// and completion tokens (choice 0).
type dialectAnswer struct {
	Choices []struct {
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// dialectPlatform is a platform and a way to ask it for a greedy completion
// of prompt with extra fields.
func dialectPlatform(t *testing.T) (*platformtest.Platform, func(prompt, extra string) (int, dialectAnswer)) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	return p, func(prompt, extra string) (int, dialectAnswer) {
		t.Helper()
		pj, _ := json.Marshal(prompt)
		body := `{"model":"` + platformtest.Model + `","prompt":` + string(pj) + `,"temperature":0,"seed":3` + extra + `}`
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body)
		var a dialectAnswer
		if err := json.Unmarshal(b, &a); err != nil || (resp.StatusCode == 200 && len(a.Choices) != 1) {
			t.Fatalf("%d %s (%v)", resp.StatusCode, b, err)
		}
		return resp.StatusCode, a
	}
}

// TestVLLMStopping: vLLM's ignore_eos, min_tokens, stop_token_ids and
// include_stop_str_in_output with its semantics, over HTTP.
func TestVLLMStopping(t *testing.T) {
	p, ask := dialectPlatform(t)
	const prompt = "the cat sat on the mat"
	code, plain := ask(prompt, `,"max_tokens":6,"ignore_eos":true`)
	if code != 200 || plain.Usage.CompletionTokens != 6 || plain.Choices[0].FinishReason != "length" || len(plain.Choices[0].Text) < 2 {
		t.Fatalf("ignore_eos: %d %+v", code, plain)
	}
	text := plain.Choices[0].Text
	// The synthetic vocabulary has no merges: the first byte is the first
	// token.
	first := p.Tokenizer.Encode(text[:1], false, false)[0]

	t.Run("stop_token_ids", func(t *testing.T) {
		code, a := ask(prompt, fmt.Sprintf(`,"max_tokens":6,"ignore_eos":true,"stop_token_ids":[%d]`, first))
		if code != 200 || a.Choices[0].Text != "" || a.Choices[0].FinishReason != "stop" || a.Usage.CompletionTokens != 1 {
			t.Fatalf("%d %+v, want a stop at the first token", code, a)
		}
	})
	t.Run("min_tokens suppresses stop tokens and strings", func(t *testing.T) {
		stop, _ := json.Marshal(text[:1])
		code, a := ask(prompt, fmt.Sprintf(`,"max_tokens":6,"ignore_eos":true,"min_tokens":6,"stop_token_ids":[%d],"stop":[%s]`, first, stop))
		if code != 200 || a.Usage.CompletionTokens != 6 || a.Choices[0].FinishReason != "length" {
			t.Fatalf("%d %+v, want 6 tokens", code, a)
		}
		if strings.Contains(a.Choices[0].Text[:1], text[:1]) {
			t.Fatalf("the stop token was sampled before min_tokens: %q", a.Choices[0].Text)
		}
		// A stop string (the text's first byte, which the third token
		// repeats) ends the completion at the min_tokens-th token, as
		// vLLM checks it from there on.
		if text[2] != text[0] {
			t.Fatalf("the deterministic model's text %q no longer repeats its first byte at the third: pick another stop string", text)
		}
		code, a = ask(prompt, fmt.Sprintf(`,"max_tokens":6,"ignore_eos":true,"min_tokens":3,"stop":[%s]`, stop))
		if code != 200 || a.Choices[0].Text != text[:2] || a.Usage.CompletionTokens != 3 || a.Choices[0].FinishReason != "stop" {
			t.Fatalf("%d %+v, want %q", code, a, text[:2])
		}
	})
	t.Run("include_stop_str_in_output", func(t *testing.T) {
		stop := text[1:2]
		cut := strings.Index(text, stop)
		sj, _ := json.Marshal(stop)
		code, a := ask(prompt, `,"max_tokens":6,"ignore_eos":true,"stop":[`+string(sj)+`]`)
		if code != 200 || a.Choices[0].Text != text[:cut] || a.Choices[0].FinishReason != "stop" {
			t.Fatalf("without: %d %+v, want %q", code, a, text[:cut])
		}
		code, a = ask(prompt, `,"max_tokens":6,"ignore_eos":true,"include_stop_str_in_output":true,"stop":[`+string(sj)+`]`)
		if code != 200 || a.Choices[0].Text != text[:cut]+stop {
			t.Fatalf("with: %d %+v, want %q", code, a, text[:cut]+stop)
		}
	})
	t.Run("refused values", func(t *testing.T) {
		for _, extra := range []string{`,"max_tokens":4,"min_tokens":5`, `,"min_tokens":-1`, `,"stop_token_ids":[-1]`,
			`,"stop_token_ids":[4294967296]`, `,"ignore_eos":"yes"`} {
			if code, a := ask(prompt, extra); code != 400 || a.Error == nil {
				t.Errorf("%s: %d %+v, want 400", extra, code, a)
			}
		}
	})
}

// TestHealth: GET /health, the probe of vLLM, SGLang and llama.cpp,
// answers 200 with no body and no token while the node serves, and 503
// (still no body) once the ledger does not answer; and an unknown model
// is OpenAI's model_not_found.
func TestHealth(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	resp, b := request(t, "GET", p.URL+"/health", "", "")
	if resp.StatusCode != 200 || len(b) != 0 {
		t.Fatalf("serving: %d %q, want 200 and no body", resp.StatusCode, b)
	}
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	resp, b = request(t, "POST", p.URL+"/v1/completions", tok, `{"model":"gpt-4o","prompt":"x"}`)
	if typ, code := errorOf(t, resp, b); resp.StatusCode != 404 || code != "model_not_found" || typ != "invalid_request_error" {
		t.Fatalf("unknown model: %d %s", resp.StatusCode, b)
	}

	server, err := pgtest.ServerURL()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, server)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	ident := pgx.Identifier{p.DB.Name}.Sanitize()
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident+" ALLOW_CONNECTIONS false"); err != nil {
		t.Fatal(err)
	}
	defer admin.Exec(ctx, "ALTER DATABASE "+ident+" ALLOW_CONNECTIONS true") //nolint:errcheck
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()", p.DB.Name); err != nil {
		t.Fatal(err)
	}
	resp, b = request(t, "GET", p.URL+"/health", "", "")
	if resp.StatusCode != 503 || len(b) != 0 {
		t.Fatalf("ledger down: %d %q, want 503 and no body", resp.StatusCode, b)
	}
}

// TestDefaultMaxTokens: a request that names no max_tokens gets the rest
// of the tenant's context (as vLLM and OpenAI do; it was 256), capped by
// --default-max-tokens (api.Config.DefaultMaxTokens) when set; a prompt
// that fills the context is refused with context_length_exceeded.
func TestDefaultMaxTokens(t *testing.T) {
	usage := func(b []byte) (prompt, completion int) {
		var v struct {
			Usage struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		return v.Usage.PromptTokens, v.Usage.CompletionTokens
	}
	contextOf := func(p *platformtest.Platform, tok string) int {
		resp, b := request(t, "GET", p.URL+"/v1/models/"+platformtest.Model, tok, "")
		var m struct {
			ContextLength int `json:"context_length"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &m) != nil {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return m.ContextLength
	}
	const body = `{"model":"` + platformtest.Model + `","prompt":"the cat sat on the mat","temperature":0,"ignore_eos":true}`

	t.Run("rest of the context", func(t *testing.T) {
		q := tenancy.Quotas{MaxConcurrent: 4, KVPages: 64, TokensPerMinute: 1 << 20, MaxContext: 300}
		p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Quotas: &q})
		tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
		ctxLen := contextOf(p, tok)
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		if pr, c := usage(b); pr+c != ctxLen || c <= 256 {
			t.Fatalf("prompt %d + completion %d, want the context of %d (more than the old 256)", pr, c, ctxLen)
		}
		long, _ := json.Marshal(strings.Repeat("a", ctxLen))
		resp, b = request(t, "POST", p.URL+"/v1/completions", tok, `{"model":"`+platformtest.Model+`","prompt":`+string(long)+`}`)
		if _, code := errorOf(t, resp, b); resp.StatusCode != 400 || code != "context_length_exceeded" {
			t.Fatalf("a prompt filling the context: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("--default-max-tokens", func(t *testing.T) {
		p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, API: func(c *api.Config) { c.DefaultMaxTokens = 7 }})
		tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body)
		if _, c := usage(b); resp.StatusCode != 200 || c != 7 {
			t.Fatalf("%d %s, want 7 completion tokens", resp.StatusCode, b)
		}
		// A max_tokens named is the client's, above the default too.
		resp, b = request(t, "POST", p.URL+"/v1/completions", tok, strings.Replace(body, `"temperature"`, `"max_tokens":9,"temperature"`, 1))
		if _, c := usage(b); resp.StatusCode != 200 || c != 9 {
			t.Fatalf("%d %s, want 9 completion tokens", resp.StatusCode, b)
		}
	})
}

// TestStreamOptions: continuous_usage_stats puts the usage so far in every
// chunk (vLLM's), and a stream_options sub-key the server does not know is
// refused, never ignored.
func TestStreamOptions(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	body := func(so string) string {
		return `{"model":"` + platformtest.Model + `","prompt":"the cat sat","max_tokens":5,"temperature":0,"ignore_eos":true,"stream":true,"stream_options":` + so + `}`
	}
	resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body(`{"continuous_usage_stats":true}`))
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	chunks, last := 0, -1
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var c struct {
			Usage *struct {
				PromptTokens     int `json:"prompt_tokens"`
				CompletionTokens int `json:"completion_tokens"`
				TotalTokens      int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Usage == nil {
			t.Fatalf("chunk without usage: %s", data)
		}
		u := c.Usage
		if u.PromptTokens <= 0 || u.CompletionTokens < last || u.TotalTokens != u.PromptTokens+u.CompletionTokens {
			t.Fatalf("usage %+v after %d completion tokens", *u, last)
		}
		last = u.CompletionTokens
		chunks++
	}
	if chunks < 5 || last != 5 {
		t.Fatalf("%d chunks, last usage %d completion tokens, want 5", chunks, last)
	}
	for _, so := range []string{`{"include_usage":true,"continuous_usage":true}`, `{"x":1}`} {
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body(so))
		if _, code := errorOf(t, resp, b); resp.StatusCode != 400 || code != "unsupported" {
			t.Fatalf("%s: %d %s", so, resp.StatusCode, b)
		}
	}
}

// TestDetokenizeAndTruncate: skip_special_tokens false writes control
// tokens as text (a prompt of the EOS token, which the context bag repeats,
// shows it); truncate_prompt_tokens keeps the prompt's last tokens; the
// refused fields name themselves and why.
func TestDetokenizeAndTruncate(t *testing.T) {
	p, ask := dialectPlatform(t)
	eos := p.Tokenizer.EOS
	piece := string(p.Tokenizer.Piece(eos, true))
	code, a := ask("", fmt.Sprintf(`,"prompt":[%d,%d,%d],"max_tokens":3,"ignore_eos":true`, eos, eos, eos))
	if code != 200 || strings.Contains(a.Choices[0].Text, piece) {
		t.Fatalf("default: %d %+v (control token %q written)", code, a, piece)
	}
	code, a = ask("", fmt.Sprintf(`,"prompt":[%d,%d,%d],"max_tokens":3,"ignore_eos":true,"skip_special_tokens":false`, eos, eos, eos))
	if code != 200 || !strings.Contains(a.Choices[0].Text, piece) {
		t.Fatalf("skip_special_tokens false: %d %+v, want %q in the text", code, a, piece)
	}

	var u struct {
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	resp, b := request(t, "POST", p.URL+"/v1/completions", tok, `{"model":"`+platformtest.Model+`","prompt":"the cat sat on the mat","max_tokens":1,"truncate_prompt_tokens":5}`)
	if resp.StatusCode != 200 || json.Unmarshal(b, &u) != nil || u.Usage.PromptTokens != 5 {
		t.Fatalf("truncate_prompt_tokens 5: %d %s", resp.StatusCode, b)
	}
	resp, b = request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"`+platformtest.Model+`","messages":[{"role":"user","content":"the cat sat on the mat"}],"max_tokens":1,"truncate_prompt_tokens":4}`)
	if resp.StatusCode != 200 || json.Unmarshal(b, &u) != nil || u.Usage.PromptTokens != 4 {
		t.Fatalf("chat truncate_prompt_tokens 4: %d %s", resp.StatusCode, b)
	}
	for _, c := range []struct{ extra, want string }{
		{`,"truncate_prompt_tokens":-1`, "truncate_prompt_tokens"},
		{`,"truncate_prompt_tokens":2,"echo":true`, "truncate_prompt_tokens"},
		{`,"priority":5`, "priority"},
		{`,"cache_salt":""`, "cache_salt"},
		{`,"spaces_between_special_tokens":false`, "spaces_between_special_tokens"},
	} {
		code, a := ask("x", c.extra)
		if code != 400 || a.Error == nil || !strings.Contains(a.Error.Message, c.want) {
			t.Errorf("%s: %d %+v, want 400 naming %s", c.extra, code, a, c.want)
		}
	}
	for _, extra := range []string{`,"priority":0,"max_tokens":1`, `,"spaces_between_special_tokens":true,"max_tokens":1`} {
		if code, a := ask("x", extra); code != 200 {
			t.Errorf("%s (neutral): %d %+v", extra, code, a)
		}
	}
}

// TestStructuredOutputs: vLLM's structured_outputs and guided_* fields:
// a choice gives exactly one of its strings, json a value of the schema,
// on both endpoints (regex and grammar: textgrammar_test.go);
// structural_tag is refused naming itself, and two constraints at once
// are refused.
func TestStructuredOutputs(t *testing.T) {
	p, ask := dialectPlatform(t)
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	choices := map[string]bool{"yes": true, "no": true, "maybe later": true}
	for _, extra := range []string{`,"guided_choice":["yes","no","maybe later"]`, `,"structured_outputs":{"choice":["yes","no","maybe later"]}`} {
		code, a := ask("the cat sat on the mat", `,"max_tokens":20`+extra)
		if code != 200 || !choices[a.Choices[0].Text] || a.Choices[0].FinishReason != "stop" {
			t.Fatalf("%s: %d %+v, want one of the choices", extra, code, a)
		}
	}
	const schema = `{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}`
	for _, extra := range []string{`,"guided_json":` + schema, `,"structured_outputs":{"json":` + schema + `}`} {
		resp, b := request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"`+platformtest.Model+`","messages":[{"role":"user","content":"a number"}],"max_tokens":40,"temperature":0`+extra+`}`)
		var v struct {
			Choices []struct {
				Message      struct{ Content string }
				FinishReason string `json:"finish_reason"`
			}
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil || len(v.Choices) != 1 {
			t.Fatalf("%s: %d %s", extra, resp.StatusCode, b)
		}
		var out struct {
			N *int64 `json:"n"`
		}
		if c := v.Choices[0]; c.FinishReason == "stop" && (json.Unmarshal([]byte(c.Message.Content), &out) != nil || out.N == nil) {
			t.Fatalf("%s: %q is not a value of the schema", extra, c.Message.Content)
		}
	}
	for _, c := range []struct{ extra, want string }{
		{`,"structured_outputs":{"structural_tag":{}}`, "structural_tag"},
		{`,"guided_regex":"a+","guided_choice":["a"]`, "one structured output"},
		{`,"structured_outputs":{"whitespace_pattern":" "}`, "whitespace_pattern"},
		{`,"guided_choice":["a"],"guided_json":{"type":"string"}`, "one structured output"},
		{`,"guided_choice":[]`, "choice"},
		{`,"guided_choice":[""]`, "choice"},
		{`,"guided_choice":["a"],"min_tokens":1`, "min_tokens"},
	} {
		code, a := ask("x", c.extra)
		if code != 400 || a.Error == nil || !strings.Contains(a.Error.Message, c.want) {
			t.Errorf("%s: %d %+v, want 400 naming %s", c.extra, code, a, c.want)
		}
	}
}

// TestTemplateFields: add_generation_prompt false renders without the
// assistant's opening, continue_final_message continues the last
// assistant message (its end-of-turn not rendered), and
// chat_template_kwargs and reasoning_effort are refused where the
// template reads no such variable or the value is a string (HTTP; the
// rendering itself: engine/chat TestOptions).
func TestTemplateFields(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	ask := func(msgs, extra string) (int, int, []byte) {
		resp, b := request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"`+platformtest.Model+`","messages":`+msgs+`,"max_tokens":1`+extra+`}`)
		var v struct {
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		_ = json.Unmarshal(b, &v)
		return resp.StatusCode, v.Usage.PromptTokens, b
	}
	const user = `[{"role":"user","content":"hello there"}]`
	code, with, b := ask(user, "")
	if code != 200 {
		t.Fatalf("%d %s", code, b)
	}
	code, without, b := ask(user, `,"add_generation_prompt":false`)
	if code != 200 || without >= with {
		t.Fatalf("add_generation_prompt false: %d, %d prompt tokens (%d with it) %s", code, without, with, b)
	}
	const cont = `[{"role":"user","content":"hello there"},{"role":"assistant","content":"General"}]`
	_, closed, _ := ask(cont, `,"add_generation_prompt":false`)
	code, open, b := ask(cont, `,"continue_final_message":true`)
	if code != 200 || open >= closed || open <= without {
		t.Fatalf("continue_final_message: %d, %d prompt tokens (closed turn %d, user alone %d) %s", code, open, closed, without, b)
	}
	for _, c := range []struct{ extra, want string }{
		{`,"chat_template_kwargs":{"enable_thinking":false}`, "enable_thinking"},
		{`,"chat_template_kwargs":{"x":"<|im_start|>system"}`, "string"},
		{`,"chat_template_kwargs":{"messages":[]}`, "messages"},
		{`,"reasoning_effort":"low"`, "reasoning_effort"},
		{`,"reasoning_effort":"extreme"`, "reasoning_effort"},
		{`,"continue_final_message":true,"add_generation_prompt":true`, "exclusive"},
		{`,"chat_template":"{{ messages }}"`, "chat_template"},
	} {
		code, _, b := ask(cont, c.extra)
		if code != 400 || !strings.Contains(string(b), c.want) {
			t.Errorf("%s: %d %s, want 400 naming %s", c.extra, code, b, c.want)
		}
	}
}

// TestBatchPrompts: a list of several prompts, text or token ids, is a
// batch (its prompts in Batch); a list of one prompt is that prompt; more
// than MaxBatchPrompts, an empty list or a suffix with a batch are refused
// (batch_test.go serves batches).
func TestBatchPrompts(t *testing.T) {
	many := `["a"` + strings.Repeat(`,"a"`, api.MaxBatchPrompts) + `]`
	for _, c := range []struct {
		body  string
		batch int // 0: one prompt
		err   error
	}{
		{`"prompt":["a","b"]`, 2, nil}, {`"prompt":[[1,2],[3]]`, 2, nil}, {`"prompt":["a"]`, 0, nil}, {`"prompt":[[5,6]]`, 0, nil},
		{`"prompt":[5,6]`, 0, nil}, {`"prompt":[]`, 0, api.ErrBadField}, {`"prompt":` + many, 0, api.ErrBadField},
		{`"prompt":["a","b"],"suffix":"c"`, 0, api.ErrUnsupported}, {`"prompt":[[1],[-2]]`, 0, api.ErrBadField},
	} {
		req, err := api.DecodeCompletion(strings.NewReader(`{"model":"m",`+c.body+`}`), api.DefaultMaxBody)
		switch {
		case c.err != nil:
			if !errors.Is(err, c.err) {
				t.Errorf("%s: %v, want %v", c.body, err, c.err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.body, err)
		case len(req.Prompt.Batch) != c.batch:
			t.Errorf("%s: a batch of %d, want %d", c.body, len(req.Prompt.Batch), c.batch)
		}
	}
}

// TestTokensAsIDs: return_tokens_as_token_ids names every logprob token
// (chosen and alternatives) "token_id:<id>", on both endpoints;
// prompt_logprobs outside [0, 20] is refused naming it (promptlogprobs_test.go).
func TestTokensAsIDs(t *testing.T) {
	p, ask := dialectPlatform(t)
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	resp, b := request(t, "POST", p.URL+"/v1/completions", tok, `{"model":"`+platformtest.Model+`","prompt":"the cat","max_tokens":3,"logprobs":2,"return_tokens_as_token_ids":true}`)
	var v struct {
		Choices []struct {
			Logprobs struct {
				Tokens      []string             `json:"tokens"`
				TopLogprobs []map[string]float64 `json:"top_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &v) != nil || len(v.Choices) != 1 || len(v.Choices[0].Logprobs.Tokens) != 3 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	lp := v.Choices[0].Logprobs
	for i, s := range lp.Tokens {
		if !strings.HasPrefix(s, "token_id:") {
			t.Fatalf("token %d is %q", i, s)
		}
		for k := range lp.TopLogprobs[i] {
			if !strings.HasPrefix(k, "token_id:") {
				t.Fatalf("alternative %q of token %d", k, i)
			}
		}
	}
	resp, b = request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"`+platformtest.Model+`","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"logprobs":true,"top_logprobs":1,"return_tokens_as_token_ids":true}`)
	if resp.StatusCode != 200 || strings.Count(string(b), `"token":"token_id:`) != 4 {
		t.Fatalf("chat: %d %s, want 2 tokens and 2 alternatives as ids", resp.StatusCode, b)
	}
	if code, a := ask("x", `,"prompt_logprobs":21`); code != 400 || a.Error == nil || !strings.Contains(a.Error.Message, "prompt_logprobs") {
		t.Fatalf("prompt_logprobs: %d %+v", code, a)
	}
}

// TestDefaultMaxTokensGRPC: gRPC Generate without max_tokens gets the same
// default as HTTP (the rest of the context), and an unknown model is
// model_not_found there too.
func TestDefaultMaxTokensGRPC(t *testing.T) {
	q := tenancy.Quotas{MaxConcurrent: 4, KVPages: 64, TokensPerMinute: 1 << 20, MaxContext: 300}
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Quotas: &q})
	conn, _ := p.GRPC(t)
	client := inferencev1.NewInferenceServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+p.Token(t, "victim", tenancy.ScopeInfer))
	run := func(req *inferencev1.GenerateRequest) (*inferencev1.Usage, error) {
		st, err := client.Generate(ctx, req)
		if err != nil {
			return nil, err
		}
		for {
			r, err := st.Recv()
			if err != nil {
				return nil, err
			}
			if f := r.GetFinal(); f != nil {
				return f.GetUsage(), nil
			}
		}
	}
	u, err := run(&inferencev1.GenerateRequest{Model: platformtest.Model, Prompt: &inferencev1.GenerateRequest_Text{Text: "the cat sat on the mat"}})
	if err != nil {
		t.Fatal(err)
	}
	if u.GetCompletionTokens() <= 256 || u.GetPromptTokens()+u.GetCompletionTokens() != 300 {
		t.Fatalf("usage %v: want the rest of the context", u)
	}
	_, err = run(&inferencev1.GenerateRequest{Model: "gpt-9", Prompt: &inferencev1.GenerateRequest_Text{Text: "x"}})
	if st, _ := status.FromError(err); st.Code() != codes.NotFound || !strings.Contains(fmt.Sprint(st.Details()), "model_not_found") {
		t.Fatalf("unknown model: %v", err)
	}
}
