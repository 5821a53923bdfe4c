package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// completionText decodes a non-streamed /v1/completions answer's texts.
func completionTexts(t *testing.T, b []byte) []string {
	t.Helper()
	var v struct {
		Choices []struct {
			Index int    `json:"index"`
			Text  string `json:"text"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &v); err != nil || len(v.Choices) == 0 {
		t.Fatalf("not a completion: %s (%v)", b, err)
	}
	var out []string
	for i, c := range v.Choices {
		if c.Index != i {
			t.Fatalf("choice %d has index %d: %s", i, c.Index, b)
		}
		out = append(out, c.Text)
	}
	return out
}

// sseTexts decodes a streamed /v1/completions answer: the text chunks in
// order and whether it ended with [DONE].
func sseTexts(t *testing.T, b []byte) (texts []string, done bool) {
	t.Helper()
	for _, line := range strings.Split(string(b), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Error *struct{ Message string } `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Error != nil {
			t.Fatalf("bad chunk %s (%v)", data, err)
		}
		for _, ch := range c.Choices {
			texts = append(texts, ch.Text)
		}
	}
	return texts, done
}

// TestCompletionsEcho: with echo the prompt text precedes the completion
// (non-streamed: in choices[0].text; streamed: a first chunk of its own),
// and the completion after it is the one served without echo.
func TestCompletionsEcho(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	const prompt = "the cat sat on the mat"
	ask := func(extra string) (int, []byte) {
		body := `{"model":"` + platformtest.Model + `","prompt":"` + prompt + `","max_tokens":6,"temperature":0,"seed":3` + extra + `}`
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body)
		return resp.StatusCode, b
	}
	code, plain := ask("")
	if code != 200 {
		t.Fatalf("%d %s", code, plain)
	}
	completion := completionTexts(t, plain)[0]
	if completion == "" {
		t.Fatalf("empty completion: %s", plain)
	}
	code, echoed := ask(`,"echo":true`)
	if code != 200 {
		t.Fatalf("echo: %d %s", code, echoed)
	}
	if got := completionTexts(t, echoed)[0]; got != prompt+completion {
		t.Fatalf("echo: got %q, want %q", got, prompt+completion)
	}
	if code, b := ask(`,"echo":false`); code != 200 || completionTexts(t, b)[0] != completion {
		t.Fatalf("echo false: %d %s", code, b)
	}

	code, streamed := ask(`,"echo":true,"stream":true`)
	texts, done := sseTexts(t, streamed)
	if code != 200 || !done || len(texts) < 2 || texts[0] != prompt || strings.Join(texts, "") != prompt+completion {
		t.Fatalf("echo stream: %d %q (done %v)", code, texts, done)
	}

	// Token ids are echoed as their text.
	ids := p.Tokenizer.Encode(prompt, false, false)
	idj, _ := json.Marshal(ids)
	resp, b := request(t, "POST", p.URL+"/v1/completions", tok,
		`{"model":"`+platformtest.Model+`","prompt":`+string(idj)+`,"max_tokens":2,"temperature":0,"echo":true}`)
	if resp.StatusCode != 200 || !strings.HasPrefix(completionTexts(t, b)[0], prompt) {
		t.Fatalf("echo of ids: %d %s", resp.StatusCode, b)
	}

	// echo with logprobs scores the prompt: TestCompletionsEchoLogprobs.
}

// TestCompletionsSuffix: on a model with fill-in-the-middle tokens the
// prompt is built as llama.cpp's infill ([BOS] FIM_PRE prefix FIM_SUF
// suffix FIM_MID): the suffix reaches the model (the context bag emits the
// suffix's most frequent token), and control tokens written in the user's
// text stay text (the synthetic vocabulary has no merges, so each byte is
// one prompt token and a parsed control token would count one). A model
// without FIM tokens refuses suffix with a 400 naming it; "" or null is no
// suffix.
func TestCompletionsSuffix(t *testing.T) {
	type answer struct {
		Choices []struct{ Text string } `json:"choices"`
		Usage   struct {
			PromptTokens int `json:"prompt_tokens"`
		} `json:"usage"`
	}
	ask := func(p *platformtest.Platform, tok, prompt, extra string) (int, answer, []byte) {
		pj, _ := json.Marshal(prompt)
		body := `{"model":"` + platformtest.Model + `","prompt":` + string(pj) + `,"max_tokens":4,"temperature":0` + extra + `}`
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body)
		var a answer
		if resp.StatusCode == 200 && (json.Unmarshal(b, &a) != nil || len(a.Choices) != 1) {
			t.Fatalf("%s", b)
		}
		return resp.StatusCode, a, b
	}

	t.Run("fim model", func(t *testing.T) {
		p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, FIM: true})
		tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
		if !p.Tokenizer.HasFIM() {
			t.Fatal("the FIM model has no FIM tokens")
		}
		const prefix, suffix = "ab", "zzzzzzzzzz"
		code, a, b := ask(p, tok, prefix, `,"suffix":"`+suffix+`"`)
		if code != 200 || a.Choices[0].Text != "zzzz" || a.Usage.PromptTokens != 3+len(prefix)+len(suffix) {
			t.Fatalf("suffix: %d %s", code, b)
		}
		// Without the suffix the bag reads only the prefix.
		if code, a, b := ask(p, tok, prefix, ""); code != 200 || strings.Contains(a.Choices[0].Text, "z") {
			t.Fatalf("no suffix: %d %s", code, b)
		}
		inject := "<|fim_middle|>" + synthFIMSuffix + "x"
		code, a, b = ask(p, tok, inject, `,"suffix":"`+synthFIMSuffix+`"`)
		if code != 200 || a.Usage.PromptTokens != 3+len(inject)+len(synthFIMSuffix) {
			t.Fatalf("control tokens in user text: %d %s (want %d prompt tokens)", code, b, 3+len(inject)+len(synthFIMSuffix))
		}
		if code, _, b := ask(p, tok, prefix, `,"suffix":"x","echo":true`); code != 400 || !strings.Contains(string(b), `\"suffix\" with \"echo\"`) {
			t.Fatalf("echo with suffix: %d %s", code, b)
		}
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, `{"model":"`+platformtest.Model+`","prompt":[97,98],"suffix":"x"}`)
		if resp.StatusCode != 400 || !strings.Contains(string(b), "suffix") {
			t.Fatalf("suffix with ids: %d %s", resp.StatusCode, b)
		}
	})

	t.Run("model without fim", func(t *testing.T) {
		p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
		tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
		if code, _, b := ask(p, tok, "ab", `,"suffix":"zz"`); code != 400 || !strings.Contains(string(b), "suffix") ||
			!strings.Contains(string(b), "fill-in-the-middle") {
			t.Fatalf("suffix: %d %s", code, b)
		}
		for _, neutral := range []string{`,"suffix":""`, `,"suffix":null`} {
			if code, _, b := ask(p, tok, "ab", neutral); code != 200 {
				t.Fatalf("%s: %d %s", neutral, code, b)
			}
		}
	})
}

// synthFIMSuffix is the synthetic FIM suffix token's text.
const synthFIMSuffix = "<|fim_suffix|>"
