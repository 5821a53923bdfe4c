package api_test

import (
	"encoding/json"
	"io"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	responsev1 "github.com/cloison/cloison/api/proto/cloison/response/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// choicesAnswer is a non-streamed answer of either route, n choices.
type choicesAnswer struct {
	Choices []struct {
		Index        int    `json:"index"`
		Text         string `json:"text"`
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage api.Usage `json:"usage"`
}

// verifyChoice verifies choice (nil: none named) of request id and returns
// the answer and its ledger entry.
func verifyChoice(t *testing.T, p *platformtest.Platform, tok string, id cloison.RequestID, prompt, completion string, choice *int) (int, api.VerifyResult, audit.RequestCompleted) {
	t.Helper()
	body := map[string]any{"prompt": prompt, "completion": completion}
	if choice != nil {
		body["choice"] = *choice
	}
	resp, b := request(t, "POST", p.URL+"/v1/requests/"+string(id)+"/verify", tok, mustJSON(body))
	var res api.VerifyResult
	if resp.StatusCode != 200 {
		return resp.StatusCode, res, audit.RequestCompleted{}
	}
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	env, err := audit.DecodeEnvelope(res.Entry.Payload)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := env.DecodePayload()
	if err != nil {
		t.Fatal(err)
	}
	return 200, res, *pl.(*audit.RequestCompleted)
}

// TestChoices: n > 1 on both routes, end to end on the real engine.
// Non-streamed: choices[i] with index i, usage counting the prompt once
// and the completions summed, choice 0 the n = 1 answer with the same
// seed, the same request giving the same n choices (seeds derived from the
// request's), the choices not all alike. The ledger's request.completed
// holds every choice's keyed digests (no text): each choice verifies under
// its index, not under another's. Streamed: chunks carry the choice index,
// each choice ends with its own finish_reason, usage once at the end, and
// the texts are the non-streamed ones. n above --max-n or below 1 is
// refused (400); all n count against the request's KV pages before any
// starts. Constrained decoding holds per choice.
func TestChoices(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Pages: 128, ReplayPages: 32,
		Quotas: &tenancy.Quotas{MaxConcurrent: 64, KVPages: 24, TokensPerMinute: 10_000_000, MaxContext: 1 << 20}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	// The context bag emits the most frequent token it read (the current
	// one counting once more): a and b tie here, so sampling has a choice
	// to make at the first token.
	const prompt = "ababababababababababababc"
	ask := func(route string, body map[string]any) (int, choicesAnswer, []byte) {
		t.Helper()
		resp, b := request(t, "POST", p.URL+route, tok, mustJSON(body))
		var a choicesAnswer
		if resp.StatusCode == 200 && !strings.Contains(resp.Header.Get("Content-Type"), "event-stream") {
			if err := json.Unmarshal(b, &a); err != nil {
				t.Fatalf("%s", b)
			}
		}
		return resp.StatusCode, a, b
	}
	body := func(n int, extra ...any) map[string]any {
		m := map[string]any{"model": platformtest.Model, "prompt": prompt, "max_tokens": 6, "temperature": 1, "seed": 42, "n": n}
		for i := 0; i < len(extra); i += 2 {
			m[extra[i].(string)] = extra[i+1]
		}
		return m
	}

	code, one, b := ask("/v1/completions", body(1))
	if code != 200 || len(one.Choices) != 1 {
		t.Fatalf("n=1: %d %s", code, b)
	}
	resp, b := request(t, "POST", p.URL+"/v1/completions", tok, mustJSON(body(4)))
	var four choicesAnswer
	if resp.StatusCode != 200 || json.Unmarshal(b, &four) != nil || len(four.Choices) != 4 {
		t.Fatalf("n=4: %d %s", resp.StatusCode, b)
	}
	id := cloison.RequestID(resp.Header.Get("X-Request-Id"))
	sum, distinct := 0, map[string]bool{}
	for i, c := range four.Choices {
		if c.Index != i || c.FinishReason == "" {
			t.Fatalf("choice %d: %s", i, b)
		}
		sum += len(p.Tokenizer.Encode(c.Text, false, false))
		distinct[c.Text] = true
	}
	if four.Choices[0].Text != one.Choices[0].Text {
		t.Fatalf("choice 0 %q differs from the n=1 answer %q with the same seed", four.Choices[0].Text, one.Choices[0].Text)
	}
	if len(distinct) < 2 {
		t.Fatalf("4 choices at temperature 1 with derived seeds all alike: %s", b)
	}
	if four.Usage.PromptTokens != one.Usage.PromptTokens || four.Usage.CompletionTokens < 4 || four.Usage.CompletionTokens > 4*6 ||
		four.Usage.TotalTokens != four.Usage.PromptTokens+four.Usage.CompletionTokens {
		t.Fatalf("usage %+v (n=1: %+v)", four.Usage, one.Usage)
	}
	_, again, _ := ask("/v1/completions", body(4))
	for i := range four.Choices {
		if again.Choices[i].Text != four.Choices[i].Text {
			t.Fatalf("choice %d: %q then %q with the same seed", i, four.Choices[i].Text, again.Choices[i].Text)
		}
	}

	// Verification per choice; the ledger entry holds digests, no text.
	for i, c := range four.Choices {
		code, res, rc := verifyChoice(t, p, tok, id, prompt, c.Text, &i)
		if code != 200 || !res.Match {
			t.Fatalf("choice %d does not verify: %d %+v", i, code, res)
		}
		if rc.PromptTokens != int64(four.Usage.PromptTokens) || rc.CompletionTokens != int64(four.Usage.CompletionTokens) ||
			rc.Served == nil || len(rc.Served.Choices) != 4 || rc.Served.Choices[i].Index != int64(i) {
			t.Fatalf("entry %+v", rc)
		}
		if strings.Contains(string(res.Entry.Payload), "ababab") {
			t.Fatalf("text in the ledger: %s", res.Entry.Payload)
		}
		other := (i + 1) % 4
		if four.Choices[other].Text != c.Text {
			if _, res, _ := verifyChoice(t, p, tok, id, prompt, c.Text, &other); res.CompletionMatch {
				t.Fatalf("choice %d's text verifies as choice %d", i, other)
			}
		}
	}
	if _, res, _ := verifyChoice(t, p, tok, id, prompt, four.Choices[0].Text, nil); !res.Match {
		t.Fatal("no choice named: choice 0 does not verify")
	}
	// Replay of n > 1 replays every choice alone with its recorded seed:
	// all match what was served.
	var rr api.ReplayResult
	resp, b = request(t, "POST", p.URL+"/v1/requests/"+string(id)+"/replay", tok, mustJSON(map[string]any{"prompt": prompt}))
	if resp.StatusCode != 200 || json.Unmarshal(b, &rr) != nil || rr.Verdict != audit.VerdictNotIsolationFailure || rr.Reason != "" {
		t.Fatalf("replay of n=4: %d %s", resp.StatusCode, b)
	}
	bad := 4
	if code, _, _ := verifyChoice(t, p, tok, id, prompt, four.Choices[0].Text, &bad); code != 400 {
		t.Fatalf("choice 4 of 4: %d, want 400", code)
	}

	// Streamed: index per chunk, a finish per choice, usage once.
	resp, b = request(t, "POST", p.URL+"/v1/completions", tok, mustJSON(body(4, "stream", true, "stream_options", map[string]any{"include_usage": true})))
	texts, finishes, usages := make([]string, 4), make([]int, 4), 0
	done := false
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
				Index        int     `json:"index"`
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *api.Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil || len(c.Choices) > 1 {
			t.Fatalf("chunk %s", data)
		}
		if c.Usage != nil {
			usages++
			if *c.Usage != four.Usage {
				t.Fatalf("stream usage %+v, want %+v", *c.Usage, four.Usage)
			}
		}
		for _, ch := range c.Choices {
			if usages > 0 {
				t.Fatalf("a chunk after usage: %s", data)
			}
			texts[ch.Index] += ch.Text
			if ch.FinishReason != nil {
				finishes[ch.Index]++
			}
		}
	}
	if resp.StatusCode != 200 || !done || usages != 1 {
		t.Fatalf("stream: %d done %v usages %d: %s", resp.StatusCode, done, usages, b)
	}
	for i := range texts {
		if texts[i] != four.Choices[i].Text || finishes[i] != 1 {
			t.Fatalf("streamed choice %d: %q (%d finishes), want %q", i, texts[i], finishes[i], four.Choices[i].Text)
		}
	}

	// Chat, and constrained decoding per choice.
	code, chat, b := ask("/v1/chat/completions", map[string]any{"model": platformtest.Model, "n": 3, "max_tokens": 60, "temperature": 1, "seed": 7,
		"messages": []map[string]string{{"role": "user", "content": "Answer in JSON."}}, "response_format": map[string]any{"type": "json_object"}})
	if code != 200 || len(chat.Choices) != 3 {
		t.Fatalf("chat n=3: %d %s", code, b)
	}
	for i, c := range chat.Choices {
		var obj map[string]any
		if c.Index != i || (c.FinishReason == "stop" && json.Unmarshal([]byte(c.Message.Content), &obj) != nil) {
			t.Fatalf("chat choice %d: %q finish %s", i, c.Message.Content, c.FinishReason)
		}
	}

	// gRPC: the same request gives the same choices, each chunk naming its
	// choice, Final every finish reason; verify takes the choice too.
	conn, gctx := p.GRPC(t)
	gctx = metadata.AppendToOutgoingContext(gctx, "authorization", tok)
	max, temp, seed, n := int64(6), 1.0, int64(42), int32(4)
	st, err := inferencev1.NewInferenceServiceClient(conn).Generate(gctx, &inferencev1.GenerateRequest{Model: platformtest.Model,
		Prompt: &inferencev1.GenerateRequest_Text{Text: prompt}, MaxTokens: &max, Temperature: &temp, Seed: &seed, N: &n})
	if err != nil {
		t.Fatal(err)
	}
	gtexts := make([]string, 4)
	var final *inferencev1.Final
	for {
		m, err := st.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if c := m.GetChunk(); c != nil {
			gtexts[c.GetChoice()] += c.GetText()
		}
		if f := m.GetFinal(); f != nil {
			final = f
		}
	}
	if final == nil || len(final.GetFinishReasons()) != 4 || final.GetUsage().GetPromptTokens() != int64(four.Usage.PromptTokens) ||
		final.GetUsage().GetCompletionTokens() != int64(four.Usage.CompletionTokens) {
		t.Fatalf("gRPC final %v", final)
	}
	for i := range gtexts {
		if gtexts[i] != four.Choices[i].Text {
			t.Fatalf("gRPC choice %d: %q, want %q", i, gtexts[i], four.Choices[i].Text)
		}
	}
	last, promptText := int32(3), prompt
	vres, err := responsev1.NewResponseServiceClient(conn).Verify(gctx, &responsev1.VerifyRequest{Request: final.GetRequestId(),
		Prompt: &responsev1.Prompt{Text: &promptText}, Completion: &gtexts[3], Choice: &last})
	if err != nil || !vres.GetMatch() {
		t.Fatalf("gRPC verify of choice 3: %v %v", vres, err)
	}
	big := int32(api.DefaultMaxN + 1)
	if st, err := inferencev1.NewInferenceServiceClient(conn).Generate(gctx, &inferencev1.GenerateRequest{Model: platformtest.Model,
		Prompt: &inferencev1.GenerateRequest_Text{Text: prompt}, N: &big}); err == nil {
		if _, err = st.Recv(); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("gRPC n=%d: %v", big, err)
		}
	}

	// Refusals before anything runs: n above the cap or below 1, and n
	// sequences that together exceed the request's KV pages (24 here:
	// 8 × 3 pages fit, 8 × 5 do not).
	for _, n := range []int{0, -1, api.DefaultMaxN + 1} {
		if code, _, b := ask("/v1/completions", body(n)); code != 400 || !strings.Contains(string(b), "n must be") {
			t.Fatalf("n=%d: %d %s", n, code, b)
		}
	}
	if code, _, b := ask("/v1/completions", body(8, "max_tokens", 20)); code != 200 {
		t.Fatalf("n=8 within the pages: %d %s", code, b)
	}
	if code, _, b := ask("/v1/completions", body(8, "max_tokens", 40)); code != 400 || !strings.Contains(string(b), "8 choices") {
		t.Fatalf("n=8 beyond the pages: %d %s", code, b)
	}
}

// TestChoicesSharePromptPages: with the prefix cache on, the choices of one
// request share the prompt's full pages (choice 0 computes them, the others
// find them in the tenant's namespace), so n = 4 takes fewer than 4 × the
// pages of n = 1 — and another tenant sending the same prompt shares none.
func TestChoicesSharePromptPages(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "attacker"}, Pages: 256, PrefixCache: true})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	// 64 prompt tokens (4 full pages of 16): the vocabulary has no merges
	// beyond single letters here, so each byte is one token.
	entry := func(tok, prompt string, n int) audit.RequestCompleted {
		t.Helper()
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, mustJSON(map[string]any{"model": platformtest.Model, "prompt": prompt,
			"max_tokens": 4, "temperature": 0, "n": n}))
		var a choicesAnswer
		if resp.StatusCode != 200 || json.Unmarshal(b, &a) != nil || len(a.Choices) != n {
			t.Fatalf("n=%d: %d %s", n, resp.StatusCode, b)
		}
		_, res, rc := verifyChoice(t, p, tok, cloison.RequestID(resp.Header.Get("X-Request-Id")), prompt, a.Choices[0].Text, nil)
		if !res.Match {
			t.Fatalf("n=%d: choice 0 does not verify", n)
		}
		return rc
	}
	owned := func(rc audit.RequestCompleted) int64 { return rc.Pages - rc.CachedTokens/16 }
	p1 := strings.Repeat("abcdefgh", 8)
	p4 := strings.Repeat("hgfedcba", 8)
	if n := len(p.Tokenizer.Encode(p4, false, false)); n != 64 {
		t.Fatalf("the prompt is %d tokens, want 64", n)
	}
	one := entry(tok, p1, 1)
	four := entry(tok, p4, 4)
	t.Logf("n=1: pages %d cached %d; n=4: pages %d cached %d", one.Pages, one.CachedTokens, four.Pages, four.CachedTokens)
	// The cache holds the prompt's full pages but the one with its last
	// token (whose logits each sequence computes): 3 pages of 16 here, found
	// by each of choices 1-3.
	if one.CachedTokens != 0 || four.CachedTokens != 3*3*16 || owned(four) >= 4*owned(one) {
		t.Fatalf("n=4 owns %d pages (cached %d tokens), n=1 %d: the choices do not share the prompt's pages", owned(four), four.CachedTokens, owned(one))
	}
	// Never across tenants: the attacker's same prompt computes its own.
	atk := "Bearer " + p.Token(t, "attacker", tenancy.ScopeInfer)
	if rc := entry(atk, p4, 1); rc.CachedTokens != 0 {
		t.Fatalf("another tenant got %d cached tokens of the victim's prompt", rc.CachedTokens)
	}
}
