package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// r1Template is DeepSeek-R1's shape on ChatML: the generation prompt
// opens the reasoning.
const r1Template = `{% for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% endfor %}<|im_start|>assistant
<think>
`

// TestReasoningServed serves a synthetic model (the context bag, which
// writes only text of its context) with a template whose prompt opens the
// reasoning and a prompt without "/", so the model can never close it: the
// whole generation is reasoning, through the engine, in the chat answer
// (reasoning_content, empty content), its stream (reasoning deltas that
// add up to the same text, no content, each token's logprobs once) and
// the Responses API (a reasoning
// item); a response_format on it leaves the reasoning free.
func TestReasoningServed(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, API: func(c *api.Config) {
		tpl, err := chat.New(r1Template, "", "")
		if err != nil {
			t.Fatal(err)
		}
		c.Chat = tpl
	}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	const msgs = `"messages":[{"role":"user","content":"the cat sat on the mat"}],"max_tokens":6,"temperature":0`
	body := `{"model":"` + platformtest.Model + `",` + msgs + `}`
	resp, b := request(t, "POST", p.URL+"/v1/chat/completions", tok, body)
	var whole struct {
		Choices []struct {
			Message struct {
				Content          *string `json:"content"`
				ReasoningContent string  `json:"reasoning_content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &whole); resp.StatusCode != 200 || err != nil || len(whole.Choices) != 1 {
		t.Fatalf("%d %s (%v)", resp.StatusCode, b, err)
	}
	m := whole.Choices[0].Message
	if m.ReasoningContent == "" || m.Content == nil || *m.Content != "" {
		t.Fatalf("got %s, want all reasoning", b)
	}

	resp, b = request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"`+platformtest.Model+`",`+msgs+`,"stream":true,"logprobs":true}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	var streamed strings.Builder
	scored := 0
	for _, line := range strings.Split(string(b), "\n\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Role             string  `json:"role"`
					Content          *string `json:"content"`
					ReasoningContent string  `json:"reasoning_content"`
				} `json:"delta"`
				Logprobs *struct {
					Content []any `json:"content"`
				} `json:"logprobs"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		for _, c := range ch.Choices {
			if c.Delta.Content != nil && (*c.Delta.Content != "" || c.FinishReason == nil && c.Delta.Role == "") {
				t.Errorf("chunk %s: a content delta", data)
			}
			if c.Logprobs != nil {
				scored += len(c.Logprobs.Content)
			}
			streamed.WriteString(c.Delta.ReasoningContent)
		}
	}
	if streamed.String() != m.ReasoningContent || scored != 6 {
		t.Errorf("streamed reasoning %q with %d tokens' logprobs, whole %q of 6 tokens", streamed.String(), scored, m.ReasoningContent)
	}

	resp, b = request(t, "POST", p.URL+"/v1/responses", tok, `{"model":"`+platformtest.Model+`","input":"the cat sat on the mat","max_output_tokens":6,"temperature":0}`)
	var r struct {
		Output []struct {
			Type    string `json:"type"`
			Summary []any  `json:"summary"`
			Content []struct {
				Type, Text string
			} `json:"content"`
		} `json:"output"`
	}
	if err := json.Unmarshal(b, &r); resp.StatusCode != 200 || err != nil || len(r.Output) == 0 {
		t.Fatalf("%d %s (%v)", resp.StatusCode, b, err)
	}
	it := r.Output[0]
	if it.Type != "reasoning" || it.Summary == nil || len(it.Content) != 1 || it.Content[0].Type != "reasoning_text" || it.Content[0].Text != m.ReasoningContent {
		t.Errorf("got output %s, want a reasoning item with the chat answer's reasoning", b)
	}

	// A schema on a model whose prompt opens the reasoning: the reasoning
	// is free (the bag's text, no JSON), the content, empty here, is never
	// unconstrained text.
	resp, b = request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"`+platformtest.Model+`",`+msgs+`,"response_format":{"type":"json_object"}}`)
	whole.Choices = nil
	if err := json.Unmarshal(b, &whole); resp.StatusCode != 200 || err != nil || len(whole.Choices) != 1 {
		t.Fatalf("response_format on a model whose prompt opens the reasoning: %d %s (%v)", resp.StatusCode, b, err)
	}
	if m := whole.Choices[0].Message; m.ReasoningContent != streamed.String() || m.Content == nil || *m.Content != "" {
		t.Errorf("response_format: got %s, want the same free reasoning and no content", b)
	}
}
