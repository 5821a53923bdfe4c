package api

import (
	"context"
	"net/http"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/service"
)

// serveBatch answers a /v1/completions request whose prompt is a list of
// prompts, with vLLM's semantics: the choices are indexed prompt-major
// (prompt i's choice j is index i·n+j), streamed chunks carry those
// indexes, and the usage is summed over the prompts. Each prompt is a
// request of its own, generated one after the other: its own request id
// (the X-Request-Id values, in prompt order), policy decision, admission,
// ledger rows and receipt (a Cloison-Receipt value each, in prompt order;
// streamed, a receipt comment each before [DONE]). A prompt that fails
// ends the answer with its error (an error event once streaming began):
// the prompts before it were served, ledgered and charged; none after it
// runs.
func (s *Server) serveBatch(w http.ResponseWriter, r *http.Request, req *CompletionRequest) {
	batch := req.Prompt.Batch
	n := 1
	if req.N != nil {
		n = *req.N
	}
	ids := make([]cloison.RequestID, len(batch))
	for i := range ids {
		ids[i] = NewRequestID()
		w.Header().Add("X-Request-Id", string(ids[i]))
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	p := principal(r)
	var sse *sseWriter
	decided := func(d string) {
		if sse == nil || !sse.headers {
			w.Header().Add("X-Cloison-Decision-Id", d)
		}
	}
	fail := func(err error) {
		if sse != nil && sse.headers {
			sse.end(genResult{}, err)
			return
		}
		WriteHTTPError(w, err)
	}
	var choices []CompletionChoice
	var receipts []string
	prompt, completion := 0, 0
	for i, pr := range batch {
		in, err := s.completionInference(ctx, p, req, pr, decided)
		if err != nil {
			fail(err)
			return
		}
		cs := make([]*collector, n)
		for j := range cs {
			cs[j] = newCollector(s, in)
		}
		sink := service.Sink{Decided: decided, Token: func(j int, tok engine.Token) { cs[j].add(tok) }}
		if req.Stream {
			if sse == nil {
				sse = s.newSSE(w, ids[0], in, cs)
				sse.cancel = cancel
			}
			sse.in, sse.cs, sse.offset, sse.rid = in, cs, i*n, ids[i]
			sink.Started, sink.Token = sse.begin, sse.token
		}
		res, err := s.generate(ctx, p, ids[i], in, sink)
		if err != nil {
			fail(err)
			return
		}
		prompt += res.Prompt
		completion += res.Completion
		receipts = append(receipts, res.Receipt)
		if sse != nil {
			sse.finishChoices(res)
			sse.prompted += res.Prompt
			continue
		}
		for j, c := range cs {
			finish := string(res.Finishes[j])
			ch := CompletionChoice{Index: i*n + j, Text: in.echo + c.text.String(), FinishReason: &finish, PromptLogprobs: c.promptLogprobs}
			if in.logprobs {
				ch.Logprobs = &c.legacy
			}
			choices = append(choices, ch)
		}
	}
	if sse != nil {
		sse.close(prompt, completion, receipts)
		return
	}
	for _, rc := range receipts {
		w.Header().Add(ReceiptHeader, rc)
	}
	writeJSON(w, 200, Completion{ID: "cmpl-" + string(ids[0]), Object: "text_completion", Created: time.Now().Unix(), Model: s.cfg.ModelName,
		Choices: choices, Usage: &Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}})
}
