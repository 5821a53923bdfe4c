package api_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// A list of prompts on /v1/completions, with vLLM's semantics: choices
// indexed prompt-major (prompt i's choice j at i·n+j), each prompt's text
// what the same prompt gives alone (greedy), usage the sum; one request id
// and one receipt per prompt. Streamed, every chunk carries those indexes,
// each index's text and finish are the non-streamed ones, the usage chunk
// sums, and one receipt comment per prompt precedes [DONE]. Token-id
// prompts batch the same way.
func TestCompletionsBatch(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	prompts := []string{"abcabc", "the cat sat", "zzy"}
	type answer struct {
		Choices []struct {
			Index        int     `json:"index"`
			Text         string  `json:"text"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	body := func(prompt any, extra string) string {
		pj, _ := json.Marshal(prompt)
		return fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":4,"temperature":0,"n":2%s}`, platformtest.Model, pj, extra)
	}
	// Each prompt alone.
	alone := make([]string, len(prompts))
	wantPrompt, wantCompletion := 0, 0
	for i, pr := range prompts {
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body(pr, ""))
		var a answer
		if resp.StatusCode != 200 || json.Unmarshal(b, &a) != nil || len(a.Choices) != 2 || a.Choices[0].Text != a.Choices[1].Text {
			t.Fatalf("%q alone: %d %s", pr, resp.StatusCode, b)
		}
		alone[i] = a.Choices[0].Text
		wantPrompt += a.Usage.PromptTokens
		wantCompletion += a.Usage.CompletionTokens
	}
	resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body(prompts, ""))
	var a answer
	if resp.StatusCode != 200 || json.Unmarshal(b, &a) != nil || len(a.Choices) != 2*len(prompts) {
		t.Fatalf("batch: %d %s", resp.StatusCode, b)
	}
	for k, c := range a.Choices {
		if c.Index != k || c.Text != alone[k/2] || c.FinishReason == nil {
			t.Fatalf("batch choice %d: index %d text %q, want index %d text %q (prompt %d)", k, c.Index, c.Text, k, alone[k/2], k/2)
		}
	}
	if a.Usage == nil || a.Usage.PromptTokens != wantPrompt || a.Usage.CompletionTokens != wantCompletion {
		t.Fatalf("batch usage %+v, want %d prompt and %d completion tokens", a.Usage, wantPrompt, wantCompletion)
	}
	if ids, rcs := resp.Header.Values("X-Request-Id"), resp.Header.Values("Cloison-Receipt"); len(ids) != len(prompts) || len(rcs) != len(prompts) {
		t.Fatalf("batch: %d request ids and %d receipts, want %d each", len(ids), len(rcs), len(prompts))
	}

	// Token ids batch the same way.
	var idPrompts [][]int32
	for _, pr := range prompts[:2] {
		idPrompts = append(idPrompts, p.Tokenizer.Encode(pr, true, false))
	}
	resp, b = request(t, "POST", p.URL+"/v1/completions", tok, body(idPrompts, ""))
	if resp.StatusCode != 200 || json.Unmarshal(b, &a) != nil || len(a.Choices) != 4 || a.Choices[2].Text != alone[1] {
		t.Fatalf("token-id batch: %d %s", resp.StatusCode, b)
	}

	// Streamed.
	resp, b = request(t, "POST", p.URL+"/v1/completions", tok, body(prompts, `,"stream":true,"stream_options":{"include_usage":true}`))
	if resp.StatusCode != 200 {
		t.Fatalf("streamed batch: %d %s", resp.StatusCode, b)
	}
	texts := map[int]string{}
	finishes := map[int]bool{}
	var usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	}
	receipts, done := 0, false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, ": cloison-receipt "):
			receipts++
		case line == "data: [DONE]":
			done = true
		case strings.HasPrefix(line, "data: "):
			var c answer
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &c); err != nil {
				t.Fatalf("chunk %s: %v", line, err)
			}
			for _, ch := range c.Choices {
				texts[ch.Index] += ch.Text
				if ch.FinishReason != nil {
					finishes[ch.Index] = true
				}
			}
			if c.Usage != nil {
				usage = c.Usage
			}
		}
	}
	for k := range 2 * len(prompts) {
		if texts[k] != alone[k/2] || !finishes[k] {
			t.Fatalf("streamed index %d: %q (finished %v), want %q", k, texts[k], finishes[k], alone[k/2])
		}
	}
	if len(texts) != 2*len(prompts) || !done || receipts != len(prompts) || usage == nil || usage.PromptTokens != wantPrompt || usage.CompletionTokens != wantCompletion {
		t.Fatalf("streamed batch: %d indexes, done %v, %d receipts, usage %+v\n%s", len(texts), done, receipts, usage, b)
	}
}
