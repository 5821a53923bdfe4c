package api_test

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

type legacyLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type echoChoice struct {
	Index        int             `json:"index"`
	Text         string          `json:"text"`
	Logprobs     *legacyLogprobs `json:"logprobs"`
	FinishReason *string         `json:"finish_reason"`
}

type echoAnswer struct {
	Choices []echoChoice `json:"choices"`
	Usage   *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	Error *struct{ Message string } `json:"error"`
}

// refScore is position i's reference: log_softmax(logits after
// tokens[:i])[tokens[i]] and the top alternatives' log-probabilities.
type refScore struct {
	logprob float64
	top     []struct {
		tok int32
		lp  float64
	}
}

// referenceScores runs the served model (a copy of its GGUF on its own CPU
// backend) over the whole prompt in one forward pass, every row's logits,
// and computes each position's log-softmax in float64 here.
func referenceScores(t *testing.T, file []byte, ids []int32, n int) []refScore {
	t.Helper()
	f, err := gguf.Parse(file)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cpu.New(kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(b, f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); b.Close() })
	pool, _ := isolation.NewPool(isolation.Config{Pages: 16, PageTokens: 16})
	pool.AddTenant(isolation.TenantConfig{ID: "ref"})
	arena, err := b.NewArena(m.ArenaConfig(16, 16, kernels.KVF32))
	if err != nil {
		t.Fatal(err)
	}
	lease, err := pool.Allocate("ref", "ref", len(ids))
	if err != nil {
		t.Fatal(err)
	}
	pool.Write(lease, len(ids))
	bt, err := pool.BlockTable(lease, len(ids))
	if err != nil {
		t.Fatal(err)
	}
	out, err := m.Forward(arena, []model.Seq{{Table: bt, Tokens: ids}}, true)
	if err != nil {
		t.Fatal(err)
	}
	v := m.Vocab
	refs := make([]refScore, len(ids))
	for i := 1; i < len(ids); i++ {
		row := out[0][(i-1)*v : i*v]
		mx := math.Inf(-1)
		for _, x := range row {
			mx = max(mx, float64(x))
		}
		s := 0.0
		for _, x := range row {
			s += math.Exp(float64(x) - mx)
		}
		lse := mx + math.Log(s)
		refs[i].logprob = float64(row[ids[i]]) - lse
		used := map[int]bool{}
		for range n {
			best := -1
			for j, x := range row {
				if !used[j] && (best < 0 || x > row[best]) {
					best = j
				}
			}
			used[best] = true
			refs[i].top = append(refs[i].top, struct {
				tok int32
				lp  float64
			}{int32(best), float64(row[best]) - lse})
		}
	}
	return refs
}

// TestCompletionsEchoLogprobs: echo with logprobs scores the prompt as
// OpenAI's legacy completions do — the prompt's tokens first (the first
// with null logprob and alternatives), each logprob equal to the served
// model's full forward pass computed directly, its alternatives too, then
// the completion's — the same with other requests in flight (batch
// invariance), for every choice of n = 2, in the stream's echo chunk, and
// with max_tokens 0 (the prompt alone, scored).
func TestCompletionsEchoLogprobs(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "other"}, PrefixCache: true})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	const prompt = "the cat sat on the mat, the dog sat on the log"
	ids := p.Tokenizer.Encode(prompt, true, false)
	refs := referenceScores(t, p.ModelFile, ids, 3)
	ask := func(t *testing.T, extra string) echoAnswer {
		t.Helper()
		body := `{"model":"` + platformtest.Model + `","prompt":"` + prompt + `","temperature":0,"echo":true,"logprobs":3` + extra + `}`
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body)
		var a echoAnswer
		if err := json.Unmarshal(b, &a); resp.StatusCode != 200 || err != nil || a.Error != nil || len(a.Choices) == 0 {
			t.Fatalf("%d %s (%v)", resp.StatusCode, b, err)
		}
		return a
	}
	checkPrompt := func(t *testing.T, lp *legacyLogprobs) {
		t.Helper()
		if lp == nil || len(lp.Tokens) < len(ids) || len(lp.TokenLogprobs) != len(lp.Tokens) || len(lp.TopLogprobs) != len(lp.Tokens) || len(lp.TextOffset) != len(lp.Tokens) {
			t.Fatalf("logprobs %+v: want at least the %d prompt tokens in every list", lp, len(ids))
		}
		if lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil {
			t.Fatalf("first prompt token: logprob %v, top %v; want null, null", lp.TokenLogprobs[0], lp.TopLogprobs[0])
		}
		for i := 1; i < len(ids); i++ {
			if want := string(p.Tokenizer.Piece(ids[i], true)); lp.Tokens[i] != want {
				t.Fatalf("token %d: got %q, want %q", i, lp.Tokens[i], want)
			}
			if lp.TokenLogprobs[i] == nil || math.Abs(*lp.TokenLogprobs[i]-refs[i].logprob) > 1e-12 {
				t.Fatalf("position %d: got %v, want %v (direct forward)", i, lp.TokenLogprobs[i], refs[i].logprob)
			}
			if len(lp.TopLogprobs[i]) == 0 {
				t.Fatalf("position %d: no alternatives", i)
			}
			for _, alt := range refs[i].top {
				got, ok := lp.TopLogprobs[i][string(p.Tokenizer.Piece(alt.tok, false))]
				if len(lp.TopLogprobs[i]) == 3 && (!ok || math.Abs(got-alt.lp) > 1e-12) {
					t.Fatalf("position %d alternative %d: got %v (%v), want %v", i, alt.tok, got, ok, alt.lp)
				}
			}
			if lp.TextOffset[i] < lp.TextOffset[i-1] {
				t.Fatalf("text_offset decreases at %d: %v", i, lp.TextOffset)
			}
		}
	}

	alone := ask(t, `,"max_tokens":4`)
	c := alone.Choices[0]
	if !strings.HasPrefix(c.Text, prompt) || alone.Usage.PromptTokens != len(ids) || alone.Usage.CompletionTokens != 4 {
		t.Fatalf("text %q, usage %+v", c.Text, alone.Usage)
	}
	checkPrompt(t, c.Logprobs)
	if got := len(c.Logprobs.Tokens); got != len(ids)+4 {
		t.Fatalf("%d logprob tokens, want %d prompt + 4 completion", got, len(ids))
	}
	if off := c.Logprobs.TextOffset[len(ids)]; off != len([]rune(prompt)) {
		t.Fatalf("first completion token at offset %d, want %d (after the echoed prompt)", off, len([]rune(prompt)))
	}

	t.Run("batch invariance", func(t *testing.T) {
		other := "Bearer " + p.Token(t, "other", tenancy.ScopeInfer)
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				body := fmt.Sprintf(`{"model":"%s","prompt":"%s","max_tokens":24,"temperature":0.8,"seed":%d}`, platformtest.Model, strings.Repeat("zebra quilt ", 6+i), i)
				request(t, "POST", p.URL+"/v1/completions", other, body)
			}()
		}
		busy := ask(t, `,"max_tokens":4`)
		wg.Wait()
		if !reflect.DeepEqual(busy.Choices[0], alone.Choices[0]) {
			t.Fatalf("with others in flight: %+v, alone: %+v", busy.Choices[0], alone.Choices[0])
		}
	})
	t.Run("n=2", func(t *testing.T) {
		a := ask(t, `,"max_tokens":3,"n":2,"temperature":1,"seed":5`)
		if len(a.Choices) != 2 {
			t.Fatalf("%d choices", len(a.Choices))
		}
		for _, ch := range a.Choices {
			checkPrompt(t, ch.Logprobs)
			if !strings.HasPrefix(ch.Text, prompt) || len(ch.Logprobs.Tokens) != len(ids)+3 {
				t.Fatalf("choice %d: %q, %d tokens", ch.Index, ch.Text, len(ch.Logprobs.Tokens))
			}
		}
	})
	t.Run("max_tokens 0", func(t *testing.T) {
		a := ask(t, `,"max_tokens":0`)
		c := a.Choices[0]
		if c.Text != prompt || a.Usage.CompletionTokens != 0 || c.FinishReason == nil || *c.FinishReason != "length" || len(c.Logprobs.Tokens) != len(ids) {
			t.Fatalf("got %+v, usage %+v; want the prompt alone, scored", c, a.Usage)
		}
		checkPrompt(t, c.Logprobs)
		wantPrompt := alone.Choices[0].Logprobs
		if !reflect.DeepEqual(c.Logprobs.TokenLogprobs, wantPrompt.TokenLogprobs[:len(ids)]) {
			t.Fatal("max_tokens 0 scores differ from max_tokens 4's prompt scores")
		}
		// Without echo, max_tokens 0 is still refused.
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, `{"model":"`+platformtest.Model+`","prompt":"x","max_tokens":0}`)
		if resp.StatusCode != 400 || !strings.Contains(string(b), "max_tokens") {
			t.Fatalf("max_tokens 0 without echo: %d %s", resp.StatusCode, b)
		}
		// echo and max_tokens 0 without logprobs: the prompt, no logprobs.
		resp, b = request(t, "POST", p.URL+"/v1/completions", tok, `{"model":"`+platformtest.Model+`","prompt":"`+prompt+`","max_tokens":0,"echo":true}`)
		var plain echoAnswer
		if err := json.Unmarshal(b, &plain); resp.StatusCode != 200 || err != nil || plain.Choices[0].Text != prompt || plain.Choices[0].Logprobs != nil {
			t.Fatalf("echo, max_tokens 0, no logprobs: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("stream", func(t *testing.T) {
		body := `{"model":"` + platformtest.Model + `","prompt":"` + prompt + `","temperature":0,"echo":true,"logprobs":3,"max_tokens":4,"stream":true}`
		resp, b := request(t, "POST", p.URL+"/v1/completions", tok, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		var chunks []echoChoice
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
			var a echoAnswer
			if err := json.Unmarshal([]byte(data), &a); err != nil || a.Error != nil {
				t.Fatalf("bad chunk %s (%v)", data, err)
			}
			chunks = append(chunks, a.Choices...)
		}
		if !done || len(chunks) < 2 || chunks[0].Text != prompt {
			t.Fatalf("chunks %+v (done %v): want the echo first", chunks, done)
		}
		want := alone.Choices[0].Logprobs
		first := chunks[0].Logprobs
		checkPrompt(t, first)
		if len(first.Tokens) != len(ids) || !reflect.DeepEqual(first.TokenLogprobs, want.TokenLogprobs[:len(ids)]) {
			t.Fatalf("echo chunk logprobs %+v, want the non-streamed prompt's", first)
		}
		text, n := "", 0
		for _, ch := range chunks {
			text += ch.Text
			if ch.Logprobs != nil {
				n += len(ch.Logprobs.Tokens)
			}
		}
		if text != alone.Choices[0].Text || n != len(ids)+4 {
			t.Fatalf("streamed %q with %d logprob tokens, want %q with %d", text, n, alone.Choices[0].Text, len(ids)+4)
		}
	})
}

// TestCompletionsEchoLogprobsSplit: a decode node of a split deployment
// refuses echo with logprobs (400): its prompts are computed on prefill
// nodes, which return KV and no logits; echo alone is served.
func TestCompletionsEchoLogprobsSplit(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}, Split: &platformtest.Split{}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	resp, b := request(t, "POST", p.URL+"/v1/completions", tok, `{"model":"`+platformtest.Model+`","prompt":"the cat sat","max_tokens":2,"echo":true,"logprobs":1}`)
	if resp.StatusCode != 400 || !strings.Contains(string(b), "disaggregated") {
		t.Fatalf("echo with logprobs on a decode node: %d %s", resp.StatusCode, b)
	}
	resp, b = request(t, "POST", p.URL+"/v1/completions", tok, `{"model":"`+platformtest.Model+`","prompt":"the cat sat","max_tokens":2,"echo":true}`)
	if resp.StatusCode != 200 {
		t.Fatalf("echo on a decode node: %d %s", resp.StatusCode, b)
	}
}
