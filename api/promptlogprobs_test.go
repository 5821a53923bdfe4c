package api_test

import (
	"encoding/json"
	"math"
	"strconv"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

type promptLP = map[string]struct {
	Logprob      float64 `json:"logprob"`
	Rank         *int    `json:"rank"`
	DecodedToken string  `json:"decoded_token"`
}

// prompt_logprobs with vLLM's semantics: every prompt token's logprob (the
// first null), the prompt's own token always present with the k best
// alternatives ranked 1…k; on /v1/completions per choice, on chat once per
// answer over the rendered prompt. The logprobs are the ones echo with
// logprobs gives for the same prompt (one scoring, two shapes); the
// generated tokens keep the logprobs count they asked for. Refused with
// stream and outside [0, 20].
func TestPromptLogprobs(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	const prompt = "abcabcabd"
	ids := p.Tokenizer.Encode(prompt, true, false)
	post := func(path string, body map[string]any) (int, []byte) {
		body["model"] = platformtest.Model
		resp, b := request(t, "POST", p.URL+path, tok, mustJSON(body))
		return resp.StatusCode, b
	}
	// The reference: echo with logprobs scores the same prompt.
	status, b := post("/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 0, "echo": true, "logprobs": 0})
	var echo struct {
		Choices []struct {
			Logprobs struct {
				TokenLogprobs []*float64 `json:"token_logprobs"`
			} `json:"logprobs"`
		} `json:"choices"`
	}
	if status != 200 || json.Unmarshal(b, &echo) != nil || len(echo.Choices) != 1 || len(echo.Choices[0].Logprobs.TokenLogprobs) != len(ids) {
		t.Fatalf("echo reference: %d %s", status, b)
	}
	ref := echo.Choices[0].Logprobs.TokenLogprobs
	check := func(name string, got []promptLP, want []int32, k int) {
		t.Helper()
		if len(got) != len(want) || got[0] != nil {
			t.Fatalf("%s: %d positions (first %v), want %d with the first null", name, len(got), got[0], len(want))
		}
		for i := 1; i < len(want); i++ {
			own, ok := got[i][strconv.Itoa(int(want[i]))]
			if !ok || len(got[i]) > k+1 || len(got[i]) < max(k, 1) {
				t.Fatalf("%s position %d: %v; want the prompt's token %d among at most %d entries", name, i, got[i], want[i], k+1)
			}
			if own.DecodedToken != string(p.Tokenizer.Piece(want[i], true)) {
				t.Fatalf("%s position %d: decoded %q", name, i, own.DecodedToken)
			}
			ranks := map[int]bool{}
			for _, e := range got[i] {
				if e.Rank != nil {
					ranks[*e.Rank] = true
				}
			}
			for r := 1; r <= k; r++ {
				if !ranks[r] {
					t.Fatalf("%s position %d: no alternative ranked %d in %v", name, i, r, got[i])
				}
			}
		}
	}
	for _, k := range []int{0, 3} {
		status, b := post("/v1/completions", map[string]any{"prompt": prompt, "max_tokens": 2, "n": 2, "temperature": 0, "prompt_logprobs": k, "logprobs": 1})
		var a struct {
			Choices []struct {
				PromptLogprobs []promptLP `json:"prompt_logprobs"`
				Logprobs       struct {
					TopLogprobs []map[string]float64 `json:"top_logprobs"`
				} `json:"logprobs"`
			} `json:"choices"`
		}
		if status != 200 || json.Unmarshal(b, &a) != nil || len(a.Choices) != 2 {
			t.Fatalf("completions, prompt_logprobs %d: %d %s", k, status, b)
		}
		for c, ch := range a.Choices {
			check("completions choice "+strconv.Itoa(c), ch.PromptLogprobs, ids, k)
			for i := 1; i < len(ids); i++ {
				if got := ch.PromptLogprobs[i][strconv.Itoa(int(ids[i]))].Logprob; math.Abs(got-*ref[i]) > 1e-9 {
					t.Fatalf("position %d: %v, echo scored %v", i, got, *ref[i])
				}
			}
			for _, top := range ch.Logprobs.TopLogprobs {
				if len(top) != 1 {
					t.Fatalf("a generated token's top_logprobs %v: want the 1 asked (not prompt_logprobs' %d)", top, k)
				}
			}
		}
	}
	// Chat: once per answer, over the rendered prompt.
	status, b = post("/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": prompt}}, "max_tokens": 1, "prompt_logprobs": 2})
	var chat struct {
		PromptLogprobs []promptLP `json:"prompt_logprobs"`
		Usage          struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	if status != 200 || json.Unmarshal(b, &chat) != nil {
		t.Fatalf("chat: %d %s", status, b)
	}
	if len(chat.PromptLogprobs) != chat.Usage.PromptTokens || chat.PromptLogprobs[0] != nil {
		t.Fatalf("chat: %d positions for %d prompt tokens", len(chat.PromptLogprobs), chat.Usage.PromptTokens)
	}
	for i := 1; i < len(chat.PromptLogprobs); i++ {
		if n := len(chat.PromptLogprobs[i]); n < 2 || n > 3 {
			t.Fatalf("chat position %d: %v", i, chat.PromptLogprobs[i])
		}
	}
	for _, bad := range []map[string]any{
		{"prompt": prompt, "max_tokens": 1, "prompt_logprobs": 21},
		{"prompt": prompt, "max_tokens": 1, "prompt_logprobs": -1},
		{"prompt": prompt, "max_tokens": 1, "prompt_logprobs": 1, "stream": true},
	} {
		if status, b := post("/v1/completions", bad); status != 400 {
			t.Fatalf("%v: %d %s, want 400", bad, status, b)
		}
	}
}
