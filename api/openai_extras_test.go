package api_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// request makes one request with a raw Authorization header ("" for none).
func request(t *testing.T, method, url, auth, body string) (*http.Response, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// errorOf decodes an OpenAI-shaped error body, failing the test on
// anything else.
func errorOf(t *testing.T, resp *http.Response, b []byte) (string, string) {
	t.Helper()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, body %s", ct, b)
	}
	var eb struct {
		Error *struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &eb); err != nil || eb.Error == nil || eb.Error.Message == "" {
		t.Fatalf("not a JSON error body: %s (%v)", b, err)
	}
	return eb.Error.Type, eb.Error.Code
}

// TestOpenAIExtras end to end over HTTP on the in-process platform:
// GET /v1/models/{id}, the Authorization scheme in any case, JSON 404 and
// 405 bodies, content parts and logprob bytes through a real chat
// completion.
func TestOpenAIExtras(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)

	t.Run("models/{id}", func(t *testing.T) {
		resp, b := request(t, "GET", p.URL+"/v1/models/"+platformtest.Model, "Bearer "+tok, "")
		var m struct {
			ID, Object    string
			ContextLength int `json:"context_length"`
		}
		if resp.StatusCode != 200 || json.Unmarshal(b, &m) != nil || m.ID != platformtest.Model || m.Object != "model" || m.ContextLength <= 0 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		for _, id := range []string{"gpt-4o", "org/" + platformtest.Model, platformtest.Model + "x"} {
			resp, b := request(t, "GET", p.URL+"/v1/models/"+id, "Bearer "+tok, "")
			if typ, code := errorOf(t, resp, b); resp.StatusCode != 404 || code != "model_not_found" || typ != "invalid_request_error" {
				t.Fatalf("%s: %d %s", id, resp.StatusCode, b)
			}
		}
		if resp, _ := request(t, "GET", p.URL+"/v1/models/"+platformtest.Model, "", ""); resp.StatusCode != 401 {
			t.Fatalf("no token: %d", resp.StatusCode)
		}
	})

	t.Run("authorization scheme", func(t *testing.T) {
		for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
			if resp, b := request(t, "GET", p.URL+"/v1/models", scheme+" "+tok, ""); resp.StatusCode != 200 {
				t.Fatalf("%s: %d %s", scheme, resp.StatusCode, b)
			}
		}
		for _, auth := range []string{"Basic " + tok, "Bearer", tok} {
			resp, b := request(t, "GET", p.URL+"/v1/models", auth, "")
			if typ, _ := errorOf(t, resp, b); resp.StatusCode != 401 || typ != "authentication_error" {
				t.Fatalf("%q: %d %s", auth[:min(len(auth), 8)], resp.StatusCode, b)
			}
		}
	})

	t.Run("json 404 and 405", func(t *testing.T) {
		for _, path := range []string{"/v1/nothing", "/", "/v2/chat/completions"} {
			resp, b := request(t, "POST", p.URL+path, "Bearer "+tok, "{}")
			if _, code := errorOf(t, resp, b); resp.StatusCode != 404 || code != "not_found" {
				t.Fatalf("%s: %d %s", path, resp.StatusCode, b)
			}
		}
		for _, c := range []struct{ method, path, allow string }{
			{"GET", "/v1/chat/completions", "POST"}, {"DELETE", "/v1/completions", "POST"}, {"POST", "/v1/models", "GET"}, {"GET", "/tokenize", "POST"},
		} {
			resp, b := request(t, c.method, p.URL+c.path, "Bearer "+tok, "")
			if _, code := errorOf(t, resp, b); resp.StatusCode != 405 || code != "method_not_allowed" || !strings.Contains(resp.Header.Get("Allow"), c.allow) {
				t.Fatalf("%s %s: %d Allow %q %s", c.method, c.path, resp.StatusCode, resp.Header.Get("Allow"), b)
			}
		}
	})

	t.Run("content parts", func(t *testing.T) {
		ask := func(content string) (int, []byte) {
			body := `{"model":"` + platformtest.Model + `","max_tokens":3,"temperature":0,"seed":1,"messages":[{"role":"user","content":` + content + `}]}`
			resp, b := request(t, "POST", p.URL+"/v1/chat/completions", "Bearer "+tok, body)
			return resp.StatusCode, b
		}
		text := func(b []byte) string {
			var v struct {
				Choices []struct{ Message struct{ Content string } } `json:"choices"`
			}
			if json.Unmarshal(b, &v) != nil || len(v.Choices) != 1 {
				t.Fatalf("%s", b)
			}
			return v.Choices[0].Message.Content
		}
		code, plain := ask(`"Bonjour la France"`)
		if code != 200 {
			t.Fatalf("%d %s", code, plain)
		}
		code, parts := ask(`[{"type":"text","text":"Bonjour"},{"type":"text","text":"la France"}]`)
		code2, joined := ask(`"Bonjour\nla France"`)
		if code != 200 || code2 != 200 || text(parts) != text(joined) {
			t.Fatalf("parts %d %s, joined %d %s", code, parts, code2, joined)
		}
		code, b := ask(`[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]`)
		var eb struct {
			Error struct{ Message, Code string } `json:"error"`
		}
		if code != 400 || json.Unmarshal(b, &eb) != nil || eb.Error.Code != "unsupported" || !strings.Contains(eb.Error.Message, "image_url") {
			t.Fatalf("image part: %d %s", code, b)
		}
	})

	t.Run("logprob bytes", func(t *testing.T) {
		body := `{"model":"` + platformtest.Model + `","max_tokens":4,"temperature":0,"logprobs":true,"top_logprobs":2,"messages":[{"role":"user","content":"Bonjour"}]}`
		resp, b := request(t, "POST", p.URL+"/v1/chat/completions", "Bearer "+tok, body)
		type lp struct {
			Token       string `json:"token"`
			Bytes       []int  `json:"bytes"`
			TopLogprobs []lp   `json:"top_logprobs"`
		}
		var v struct {
			Choices []struct {
				Logprobs struct{ Content []lp } `json:"logprobs"`
			} `json:"choices"`
		}
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		if err := json.Unmarshal(b, &v); err != nil || len(v.Choices) != 1 || len(v.Choices[0].Logprobs.Content) == 0 {
			t.Fatalf("bytes are not integer lists: %v %s", err, b)
		}
		check := func(l lp) {
			raw := make([]byte, len(l.Bytes))
			for i, c := range l.Bytes {
				if c < 0 || c > 255 {
					t.Fatalf("byte %d out of range", c)
				}
				raw[i] = byte(c)
			}
			if len(raw) == 0 || (utf8.Valid(raw) && string(raw) != l.Token) {
				t.Fatalf("token %q has bytes %v", l.Token, l.Bytes)
			}
		}
		for _, l := range v.Choices[0].Logprobs.Content {
			check(l)
			if len(l.TopLogprobs) != 2 {
				t.Fatalf("top_logprobs %+v", l.TopLogprobs)
			}
			for _, a := range l.TopLogprobs {
				check(a)
			}
		}
	})
}

// TestTokenizeHTTP: POST /tokenize answers what the served tokenizer
// gives (text and chat), /detokenize inverts it, both refuse unknown
// models and fields, and both are charged to the tenant's tokens-per-minute
// quota: once it is spent they answer 429, the other tenant unaffected.
func TestTokenizeHTTP(t *testing.T) {
	const quota = 200
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "attacker"},
		Quotas: &tenancy.Quotas{MaxConcurrent: 8, KVPages: 256, TokensPerMinute: quota, MaxContext: 1 << 20}})
	tok := p.Token(t, "attacker", tenancy.ScopeInfer)
	post := func(token, path, body string) (*http.Response, []byte) {
		return request(t, "POST", p.URL+path, "Bearer "+token, body)
	}
	var tr struct {
		Count       int     `json:"count"`
		MaxModelLen int     `json:"max_model_len"`
		Tokens      []int32 `json:"tokens"`
	}
	resp, b := post(tok, "/tokenize", `{"model":"`+platformtest.Model+`","prompt":"Bonjour la France","add_special_tokens":false}`)
	if resp.StatusCode != 200 || json.Unmarshal(b, &tr) != nil {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	want := p.Tokenizer.Encode("Bonjour la France", false, false)
	if tr.Count != len(want) || len(tr.Tokens) != len(want) || tr.MaxModelLen <= 0 {
		t.Fatalf("got %+v, want %v", tr, want)
	}
	for i := range want {
		if tr.Tokens[i] != want[i] {
			t.Fatalf("got %v, want %v", tr.Tokens, want)
		}
	}
	spent := tr.Count
	ids, _ := json.Marshal(tr.Tokens)
	resp, b = post(tok, "/detokenize", `{"model":"`+platformtest.Model+`","tokens":`+string(ids)+`}`)
	var dr struct{ Prompt string }
	if resp.StatusCode != 200 || json.Unmarshal(b, &dr) != nil || dr.Prompt != "Bonjour la France" {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	spent += tr.Count

	resp, b = post(tok, "/tokenize", `{"messages":[{"role":"user","content":[{"type":"text","text":"Salut"}]}]}`)
	if resp.StatusCode != 200 || json.Unmarshal(b, &tr) != nil || tr.Count == 0 {
		t.Fatalf("chat: %d %s", resp.StatusCode, b)
	}
	spent += tr.Count

	for _, c := range []struct {
		path, body string
		status     int
		code       string
	}{
		{"/tokenize", `{"model":"gpt-4o","prompt":"x"}`, 404, "model_not_found"},
		{"/tokenize", `{"prompt":"x","return_token_strs":true}`, 400, "unsupported"},
		{"/tokenize", `{"prompt":"x","messages":[{"role":"user","content":"y"}]}`, 400, "invalid_request_error"},
		{"/tokenize", `{}`, 400, "invalid_request_error"},
		{"/tokenize", `{"messages":[{"role":"user","content":"y"}],"add_generation_prompt":false}`, 400, "unsupported"},
		{"/detokenize", `{"tokens":[-1]}`, 400, "invalid_request_error"},
		{"/detokenize", `{"tokens":[99999999]}`, 400, "invalid_request_error"},
		{"/detokenize", `{"model":"gpt-4o","tokens":[1]}`, 404, "model_not_found"},
		{"/detokenize", `{}`, 400, "invalid_request_error"},
	} {
		resp, b := post(tok, c.path, c.body)
		if _, code := errorOf(t, resp, b); resp.StatusCode != c.status || code != c.code {
			t.Fatalf("%s %s: %d %s", c.path, c.body, resp.StatusCode, b)
		}
	}

	// Spend the rest of the quota: every answer counts, and the first 429
	// comes no later than the quota allows.
	long := strings.Repeat("Bonjour la France ", 3)
	limited := false
	for i := 0; i < quota && !limited; i++ {
		resp, b := post(tok, "/tokenize", `{"prompt":"`+long+`"}`)
		switch resp.StatusCode {
		case 200:
			if json.Unmarshal(b, &tr) != nil {
				t.Fatal(string(b))
			}
			spent += tr.Count
		case 429:
			limited = true
			if resp.Header.Get("Retry-After") == "" {
				t.Fatalf("429 without Retry-After: %s", b)
			}
		default:
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	if !limited || spent > quota {
		t.Fatalf("limited %v after %d tokens (quota %d)", limited, spent, quota)
	}
	// A detokenize of as many ids as the quota no longer fits either.
	many, _ := json.Marshal(make([]int32, quota))
	if resp, b := post(tok, "/detokenize", `{"tokens":`+string(many)+`}`); resp.StatusCode != 429 {
		t.Fatalf("detokenize past the quota: %d %s", resp.StatusCode, b)
	}
	if resp, b := post(p.Token(t, "victim", tenancy.ScopeInfer), "/tokenize", `{"prompt":"x"}`); resp.StatusCode != 200 {
		t.Fatalf("the other tenant: %d %s", resp.StatusCode, b)
	}
}
