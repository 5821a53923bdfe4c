package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/engine/toolcall"
	"github.com/cloison/cloison/service"
)

// Usage is the OpenAI usage object.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

// Completion is a /v1/completions response or stream chunk.
type Completion struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices []CompletionChoice `json:"choices"`
	Usage   *Usage             `json:"usage,omitempty"`
}

// CompletionChoice is one choice of a completion.
type CompletionChoice struct {
	Index        int                 `json:"index"`
	Text         string              `json:"text"`
	Logprobs     *CompletionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
	// PromptLogprobs answers prompt_logprobs (vLLM's, per choice).
	PromptLogprobs []map[string]PromptLogprob `json:"prompt_logprobs,omitempty"`
}

// PromptLogprob is one entry of vLLM's prompt_logprobs: per prompt
// position (the first null: nothing precedes it), a map from token id (as
// a JSON key) to the token's logprob, its rank among the alternatives
// (null for the prompt's own token when it is not among them) and its text.
// The prompt's token is always in the map, with the prompt_logprobs best
// alternatives.
type PromptLogprob struct {
	Logprob      float64 `json:"logprob"`
	Rank         *int    `json:"rank"`
	DecodedToken string  `json:"decoded_token"`
}

// CompletionLogprobs is the legacy completions logprobs object. With echo
// the prompt's tokens come first, the first of them with a null logprob
// and null alternatives (nothing precedes it). TextOffset is each token's
// offset in choices[].text, in Unicode code points (Python's str indexes):
// the prompt's tokens at the running length of their pieces (control
// tokens add none), the completion's at the echoed text's length plus
// theirs.
type CompletionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float64           `json:"token_logprobs"`
	TopLogprobs   []map[string]float64 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

// slice returns tokens [k, len) of l.
func (l *CompletionLogprobs) slice(k int) *CompletionLogprobs {
	return &CompletionLogprobs{Tokens: l.Tokens[k:], TokenLogprobs: l.TokenLogprobs[k:], TopLogprobs: l.TopLogprobs[k:], TextOffset: l.TextOffset[k:]}
}

// ChatCompletion is a /v1/chat/completions response or stream chunk.
type ChatCompletion struct {
	ID      string       `json:"id"`
	Object  string       `json:"object"`
	Created int64        `json:"created"`
	Model   string       `json:"model"`
	Choices []ChatChoice `json:"choices"`
	Usage   *Usage       `json:"usage,omitempty"`
	// PromptLogprobs answers prompt_logprobs (vLLM's, once per answer).
	PromptLogprobs []map[string]PromptLogprob `json:"prompt_logprobs,omitempty"`
}

// ChatChoice is one choice of a chat completion.
type ChatChoice struct {
	Index        int           `json:"index"`
	Message      *ChatMessage  `json:"message,omitempty"`
	Delta        *ChatMessage  `json:"delta,omitempty"`
	Logprobs     *ChatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

// ChatMessage is a message or a delta.
type ChatMessage struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
	// ReasoningContent is a reasoning model's reasoning (service.ReasoningStream),
	// apart from its answer in Content.
	ReasoningContent string        `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCallOut `json:"tool_calls,omitempty"`
	// NoContent writes content as null: a message or delta that only
	// carries tool calls, as OpenAI sends them.
	NoContent bool `json:"-"`
}

// MarshalJSON writes content as null when NoContent is set.
func (m ChatMessage) MarshalJSON() ([]byte, error) {
	type wire struct {
		Role             string        `json:"role,omitempty"`
		Content          *string       `json:"content"`
		ReasoningContent string        `json:"reasoning_content,omitempty"`
		ToolCalls        []ToolCallOut `json:"tool_calls,omitempty"`
	}
	w := wire{Role: m.Role, ReasoningContent: m.ReasoningContent, ToolCalls: m.ToolCalls}
	if !m.NoContent {
		w.Content = &m.Content
	}
	return json.Marshal(w)
}

// ChatLogprobs is the chat logprobs object.
type ChatLogprobs struct {
	Content []ChatTokenLogprob `json:"content"`
}

// ChatTokenLogprob is one token's log-probability with alternatives.
type ChatTokenLogprob struct {
	Token       string             `json:"token"`
	Logprob     float64            `json:"logprob"`
	Bytes       []int              `json:"bytes"` // the token's UTF-8 bytes as integers (a token may end inside a character)
	TopLogprobs []ChatTokenLogprob `json:"top_logprobs,omitempty"`
}

// collector accumulates a response's tokens.
type collector struct {
	s      *Server
	in     inference
	text   strings.Builder // every generated text, markers of tool calls included
	n      int
	legacy CompletionLogprobs
	chat   []ChatTokenLogprob
	// offset is the next completion token's text_offset (legacy).
	offset int
	// scored: the prompt's scores arrived (engine.PromptScores); legacy
	// then starts with the prompt's tokens (echo).
	scored bool
	// promptLogprobs answers prompt_logprobs, once the scores arrived.
	promptLogprobs []map[string]PromptLogprob
	// With tools (in.tools): the text split into content and calls.
	tools *service.ToolStream
	// With a reasoning model (chat): the text split into reasoning and
	// the rest (which tool parsing then reads); nil for completions, gRPC
	// (whose chunks carry the raw text) and models that do not reason.
	reason    *service.ReasoningStream
	reasoning strings.Builder // every reasoning released
	thought   string          // the reasoning the last add or finish released
	content   strings.Builder // every content released (chat)
}

func newCollector(s *Server, in inference) *collector {
	c := &collector{s: s, in: in, offset: utf8.RuneCountInString(in.echo)}
	if in.tools != nil {
		c.tools = service.NewToolStream(in.tools)
	}
	if in.chat {
		c.reason = s.text().NewReasoningStream(in.prompt)
	}
	return c
}

// add takes one token and returns the content it releases and the tool
// calls it completes (without tools: its text, no calls); the reasoning
// it releases is in c.thought.
func (c *collector) add(tok engine.Token) (string, []ToolCallOut) {
	text := tok.Text
	c.thought = ""
	if c.reason != nil {
		text = c.s.text().ReasoningText(tok.ID, text)
	}
	if c.tools != nil {
		text = c.s.text().MarkerText(tok.ID, text, c.in.tools.Format)
	}
	c.text.WriteString(text)
	text, calls := c.split(text, false)
	c.addToken(tok)
	return text, calls
}

// split runs text through reasoning parsing (its reasoning to c.thought),
// then tool parsing, and returns the content and calls released (end: the
// generation is over).
//
// A harmony model's calls are messages of their own, named in a header
// the channel parser drops: there tool parsing reads the text first and
// the channel parser what is left.
func (c *collector) split(text string, end bool) (string, []ToolCallOut) {
	var calls []ToolCallOut
	tools := func() {
		if c.tools != nil {
			var got []service.ToolCall
			text, got = c.tools.Feed(text, end)
			calls = toolCallsOut(got)
		}
	}
	harmony := c.in.tools != nil && c.in.tools.Format == toolcall.Harmony
	if harmony {
		tools()
	}
	if c.reason != nil {
		c.thought, text = c.reason.Feed(text, end)
		c.reasoning.WriteString(c.thought)
	}
	if !harmony {
		tools()
	}
	c.content.WriteString(text)
	return text, calls
}

// finish releases what reasoning and tool parsing held back at the end of
// generation (the reasoning in c.thought).
func (c *collector) finish() (string, []ToolCallOut) {
	c.thought = ""
	if c.tools == nil && c.reason == nil {
		return "", nil
	}
	return c.split("", true)
}

// finishReason is the engine's, or "tool_calls" when the model stopped
// after calling.
func (c *collector) finishReason(finish engine.FinishReason) string {
	if c.tools != nil && len(c.tools.Calls()) > 0 && finish == engine.FinishStop {
		return "tool_calls"
	}
	return string(finish)
}

// addPrompt takes the prompt's scores (engine.PromptScores, before any
// generated token): with logprobs, the prompt's tokens open legacy.
func (c *collector) addPrompt(tok engine.Token) {
	c.scored = true
	if k := c.in.common.PromptLogprobs; k != nil {
		c.promptLogprobs = promptLogprobs(c.s.cfg.Tokenizer, c.in.prompt, tok.Prompt, *k)
	}
	if !c.in.logprobs || !c.in.scoreEcho() || len(c.in.prompt) == 0 {
		return
	}
	tk := c.s.cfg.Tokenizer
	off := 0
	for i, id := range c.in.prompt {
		// The token as spelt (control tokens by name); its offset counts
		// only the text it adds to a prompt sent as text (a control token,
		// BOS among them, adds none).
		c.legacy.Tokens = append(c.legacy.Tokens, c.name(id, tk.Piece(id, true)))
		c.legacy.TextOffset = append(c.legacy.TextOffset, off)
		off += utf8.RuneCount(tk.Piece(id, false))
		if i == 0 || i-1 >= len(tok.Prompt) {
			c.legacy.TokenLogprobs = append(c.legacy.TokenLogprobs, nil)
			c.legacy.TopLogprobs = append(c.legacy.TopLogprobs, nil)
			continue
		}
		sc := tok.Prompt[i-1]
		lp := sc.Logprob
		c.legacy.TokenLogprobs = append(c.legacy.TokenLogprobs, &lp)
		top := map[string]float64{}
		for _, alt := range c.top(sc.Top) {
			top[c.name(alt.Token, tk.Piece(alt.Token, false))] = alt.Logprob
		}
		c.legacy.TopLogprobs = append(c.legacy.TopLogprobs, top)
	}
}

// promptLogprobs is vLLM's prompt_logprobs of prompt from its scores
// (engine.Token.Prompt: positions 1…len−1): null first, then at each
// position the prompt's token and the k best alternatives (ranked 1…k).
func promptLogprobs(tk *tokenizer.Tokenizer, prompt []int32, scores []engine.Scored, k int) []map[string]PromptLogprob {
	out := make([]map[string]PromptLogprob, len(prompt))
	for i := 1; i < len(prompt) && i-1 < len(scores); i++ {
		sc := scores[i-1]
		m := map[string]PromptLogprob{}
		for r, alt := range sc.Top[:min(k, len(sc.Top))] {
			rank := r + 1
			m[strconv.Itoa(int(alt.Token))] = PromptLogprob{Logprob: alt.Logprob, Rank: &rank, DecodedToken: string(tk.Piece(alt.Token, true))}
		}
		id := strconv.Itoa(int(prompt[i]))
		if _, in := m[id]; !in {
			m[id] = PromptLogprob{Logprob: sc.Logprob, DecodedToken: string(tk.Piece(prompt[i], true))}
		}
		out[i] = m
	}
	return out
}

// top is a token's alternatives as the request's logprobs asked for them
// (the engine computed at least as many: prompt_logprobs may ask more).
func (c *collector) top(alts []sample.TokenProb) []sample.TokenProb {
	return alts[:min(c.in.topLogprobs, len(alts))]
}

// name is how a logprob names token id, whose bytes are raw: the bytes as
// text, or "token_id:<id>" with return_tokens_as_token_ids (vLLM's form,
// for tokens whose bytes are not whole UTF-8).
func (c *collector) name(id int32, raw []byte) string {
	if c.in.common.TokenIDs {
		return "token_id:" + strconv.Itoa(int(id))
	}
	return string(raw)
}

func (c *collector) addToken(tok engine.Token) {
	if tok.ID == engine.PromptScores {
		c.addPrompt(tok)
		return
	}
	if tok.ID < 0 {
		return // flush of held-back text, not a token
	}
	c.n++
	if !c.in.logprobs {
		return
	}
	raw := c.s.cfg.Tokenizer.Piece(tok.ID, false)
	piece := string(raw)
	if c.in.chat {
		lp := ChatTokenLogprob{Token: c.name(tok.ID, raw), Logprob: tok.Logprob, Bytes: byteInts(raw)}
		for _, alt := range c.top(tok.Top) {
			araw := c.s.cfg.Tokenizer.Piece(alt.Token, false)
			lp.TopLogprobs = append(lp.TopLogprobs, ChatTokenLogprob{Token: c.name(alt.Token, araw), Logprob: alt.Logprob, Bytes: byteInts(araw)})
		}
		c.chat = append(c.chat, lp)
		return
	}
	c.legacy.Tokens = append(c.legacy.Tokens, c.name(tok.ID, raw))
	lp := tok.Logprob
	c.legacy.TokenLogprobs = append(c.legacy.TokenLogprobs, &lp)
	c.legacy.TextOffset = append(c.legacy.TextOffset, c.offset)
	c.offset += utf8.RuneCountInString(piece)
	top := map[string]float64{}
	for _, alt := range c.top(tok.Top) {
		top[c.name(alt.Token, c.s.cfg.Tokenizer.Piece(alt.Token, false))] = alt.Logprob
	}
	c.legacy.TopLogprobs = append(c.legacy.TopLogprobs, top)
}

// fullResponse writes a non-streamed answer that generate has collected
// into cs (one collector per choice) and ledgered.
func (s *Server) fullResponse(w http.ResponseWriter, id cloison.RequestID, in inference, cs []*collector, res genResult) {
	usage := &Usage{PromptTokens: res.Prompt, CompletionTokens: res.Completion, TotalTokens: res.Prompt + res.Completion}
	now := time.Now().Unix()
	if in.chat {
		choices := make([]ChatChoice, len(cs))
		for i, c := range cs {
			finish := string(res.Finishes[i])
			c.finish()
			msg := &ChatMessage{Role: "assistant", Content: c.content.String(), ReasoningContent: c.reasoning.String()}
			if c.tools != nil {
				finish = c.finishReason(res.Finishes[i])
				for _, tc := range toolCallsOut(c.tools.Calls()) {
					tc.Index = nil // a message's calls carry no index
					msg.ToolCalls = append(msg.ToolCalls, tc)
				}
				msg.NoContent = msg.Content == "" && len(msg.ToolCalls) > 0
			}
			choices[i] = ChatChoice{Index: i, Message: msg, FinishReason: &finish}
			if in.logprobs {
				choices[i].Logprobs = &ChatLogprobs{Content: c.chat}
			}
		}
		writeJSON(w, 200, ChatCompletion{ID: "chatcmpl-" + string(id), Object: "chat.completion", Created: now, Model: s.cfg.ModelName,
			Choices: choices, Usage: usage, PromptLogprobs: cs[0].promptLogprobs})
		return
	}
	choices := make([]CompletionChoice, len(cs))
	for i, c := range cs {
		finish := string(res.Finishes[i])
		choices[i] = CompletionChoice{Index: i, Text: in.echo + c.text.String(), FinishReason: &finish, PromptLogprobs: c.promptLogprobs}
		if in.logprobs {
			choices[i].Logprobs = &c.legacy
		}
	}
	writeJSON(w, 200, Completion{ID: "cmpl-" + string(id), Object: "text_completion", Created: now, Model: s.cfg.ModelName,
		Choices: choices, Usage: usage})
}

// sseWriter writes a streamed answer as server-sent events. The final chunk
// (finish_reason) is written only after generate returned success, that is
// after request.completed is in the ledger; a failure ends the stream with
// an error event, never a normal finish.
type sseWriter struct {
	s       *Server
	w       http.ResponseWriter
	flusher http.Flusher
	in      inference
	cs      []*collector // one per choice
	id      string
	rid     cloison.RequestID // the request id the cause of an error event is logged under
	object  string
	now     int64
	begun   bool
	// cancel ends the generation; send calls it when a write fails (the
	// client went away or stopped reading past the write limit), so a
	// stream nobody reads does not run on to max_tokens.
	cancel context.CancelFunc
	failed bool // a write failed: nothing more is sent
	// generated counts the tokens streamed so far, all choices together
	// (stream_options.continuous_usage_stats).
	generated int
	// offset is the index of cs[0] in the answer: a batch's prompt i
	// streams its choices from i·n (serveBatch), a single prompt from 0.
	offset int
	// headers: the status and headers are written (begin).
	headers bool
	// prompted counts the prompt tokens of a batch's prompts already
	// served (continuous_usage_stats sums, as the final usage does).
	prompted int
}

func (s *Server) newSSE(w http.ResponseWriter, id cloison.RequestID, in inference, cs []*collector) *sseWriter {
	flusher, _ := w.(http.Flusher)
	x := &sseWriter{s: s, w: w, flusher: flusher, in: in, cs: cs, id: "cmpl-" + string(id), rid: id, object: "text_completion", now: time.Now().Unix()}
	if in.chat {
		x.id, x.object = "chatcmpl-"+string(id), "chat.completion.chunk"
	}
	return x
}

func (x *sseWriter) send(v any) {
	if x.failed {
		return
	}
	if so := x.in.common.StreamOptions; so != nil && so.ContinuousUsage {
		// vLLM's continuous_usage_stats: every chunk carries the usage so
		// far (the final usage chunk, if asked, its own).
		pt := x.prompted + len(x.in.prompt)
		u := &Usage{PromptTokens: pt, CompletionTokens: x.generated, TotalTokens: pt + x.generated}
		switch c := v.(type) {
		case Completion:
			if c.Usage == nil {
				c.Usage = u
				v = c
			}
		case ChatCompletion:
			if c.Usage == nil {
				c.Usage = u
				v = c
			}
		}
	}
	b, _ := json.Marshal(v)
	if _, err := fmt.Fprintf(x.w, "data: %s\n\n", b); err != nil {
		x.fail()
		return
	}
	if x.flusher != nil {
		x.flusher.Flush()
	}
}

// fail records a failed write and cancels the generation.
func (x *sseWriter) fail() {
	x.failed = true
	if x.cancel != nil {
		x.cancel()
	}
}

// begin writes the headers (and each choice's chat role delta, or its
// echoed prompt).
func (x *sseWriter) begin() {
	x.begun = true
	if !x.headers { // a batch's later prompts: already written
		x.headers = true
		x.w.Header().Set("Content-Type", "text/event-stream")
		x.w.Header().Set("Cache-Control", "no-cache")
		x.w.Header().Set("X-Accel-Buffering", "no")
		x.w.Header().Set("Trailer", ReceiptHeader)
		x.w.WriteHeader(200)
	}
	for i := range x.cs {
		if x.in.chat {
			x.send(ChatCompletion{ID: x.id, Object: x.object, Created: x.now, Model: x.s.cfg.ModelName,
				Choices: []ChatChoice{{Index: x.offset + i, Delta: &ChatMessage{Role: "assistant"}}}})
		}
		if x.in.echo != "" && !x.in.scorePrompt {
			// echo: the prompt text first, in a chunk of its own (scored:
			// once the scores are in, promptChunk).
			x.send(Completion{ID: x.id, Object: x.object, Created: x.now, Model: x.s.cfg.ModelName, Choices: []CompletionChoice{{Index: x.offset + i, Text: x.in.echo}}})
		}
	}
}

func (x *sseWriter) chunk(i int, text string, finish *string) any {
	in, c := x.in, x.cs[i]
	if in.chat {
		ch := ChatChoice{Index: x.offset + i, Delta: &ChatMessage{Content: text}, FinishReason: finish}
		if in.logprobs && len(c.chat) > 0 && finish == nil {
			ch.Logprobs = &ChatLogprobs{Content: c.chat[len(c.chat)-1:]}
		}
		return ChatCompletion{ID: x.id, Object: x.object, Created: x.now, Model: x.s.cfg.ModelName, Choices: []ChatChoice{ch}}
	}
	ch := CompletionChoice{Index: x.offset + i, Text: text, FinishReason: finish}
	if in.logprobs && len(c.legacy.Tokens) > 0 && finish == nil {
		ch.Logprobs = c.legacy.slice(len(c.legacy.Tokens) - 1)
	}
	return Completion{ID: x.id, Object: x.object, Created: x.now, Model: x.s.cfg.ModelName, Choices: []CompletionChoice{ch}}
}

// promptChunk sends choice i's echo once its prompt is scored: the prompt
// text with, if asked, its tokens' logprobs.
func (x *sseWriter) promptChunk(i int) {
	ch := CompletionChoice{Index: x.offset + i, Text: x.in.echo}
	if x.in.logprobs {
		ch.Logprobs = x.cs[i].legacy.slice(0)
	}
	x.send(Completion{ID: x.id, Object: x.object, Created: x.now, Model: x.s.cfg.ModelName, Choices: []CompletionChoice{ch}})
}

func (x *sseWriter) token(i int, tok engine.Token) {
	if tok.ID == engine.PromptScores {
		x.cs[i].add(tok)
		x.promptChunk(i)
		return
	}
	if tok.ID >= 0 {
		x.generated++
	}
	text, calls := x.cs[i].add(tok)
	scored := x.in.logprobs && tok.ID >= 0 // the token's logprobs go with one chunk
	if x.sendReasoning(i, scored && text == "") {
		scored = false
	}
	if text != "" || scored {
		x.send(x.chunk(i, text, nil))
	}
	x.sendCalls(i, calls)
}

// sendReasoning streams the reasoning choice i's last add or finish
// released, if any: a delta with reasoning_content and a null content, as
// vLLM streams it, with the last token's logprobs when scored. It reports
// whether it sent one.
func (x *sseWriter) sendReasoning(i int, scored bool) bool {
	r := x.cs[i].thought
	if r == "" {
		return false
	}
	ch := ChatChoice{Index: x.offset + i, Delta: &ChatMessage{ReasoningContent: r, NoContent: true}}
	if c := x.cs[i]; scored && len(c.chat) > 0 {
		ch.Logprobs = &ChatLogprobs{Content: c.chat[len(c.chat)-1:]}
	}
	x.send(ChatCompletion{ID: x.id, Object: x.object, Created: x.now, Model: x.s.cfg.ModelName, Choices: []ChatChoice{ch}})
	return true
}

// sendCalls streams tool calls as OpenAI does: per call, a delta with its
// index, id, type, name and empty arguments, then one with the arguments.
func (x *sseWriter) sendCalls(i int, calls []ToolCallOut) {
	for _, c := range calls {
		head := c
		head.Function.Arguments = ""
		args := ToolCallOut{Index: c.Index, Function: FunctionCallOut{Arguments: c.Function.Arguments}}
		for _, d := range []ToolCallOut{head, args} {
			x.send(ChatCompletion{ID: x.id, Object: x.object, Created: x.now, Model: x.s.cfg.ModelName,
				Choices: []ChatChoice{{Index: x.offset + i, Delta: &ChatMessage{ToolCalls: []ToolCallOut{d}, NoContent: true}}}})
		}
	}
}

// end writes the finish (and usage) after success, or an error event.
func (x *sseWriter) end(res genResult, err error) {
	if err != nil {
		logCause(x.s.log, x.rid, err)
		code, wire, msg := Describe(err)
		x.send(ErrorBody{Error: ErrorDetail{Message: msg, Type: wire.Type, Code: string(code)}})
		return
	}
	x.finishChoices(res)
	x.close(res.Prompt, res.Completion, []string{res.Receipt})
}

// finishChoices writes the end of every choice of x.cs after success.
func (x *sseWriter) finishChoices(res genResult) {
	// Per choice: what reasoning and tool parsing held back is released
	// only now, after success, then the choice's own finish_reason.
	for i, c := range x.cs {
		text, calls := c.finish()
		x.sendReasoning(i, false)
		if text != "" || len(calls) > 0 {
			if text != "" {
				x.send(x.chunk(i, text, nil))
			}
			x.sendCalls(i, calls)
		}
		finish := c.finishReason(res.Finishes[i])
		x.send(x.chunk(i, "", &finish))
	}
}

// close ends a successful stream: the usage chunk if asked, the receipts
// (one per request: a batch's prompts are requests of their own) as
// comments and trailers, and [DONE].
func (x *sseWriter) close(prompt, completion int, receipts []string) {
	if x.in.common.StreamOptions != nil && x.in.common.StreamOptions.IncludeUsage {
		u := &Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
		if x.in.chat {
			x.send(ChatCompletion{ID: x.id, Object: x.object, Created: x.now, Model: x.s.cfg.ModelName, Choices: []ChatChoice{}, Usage: u})
		} else {
			x.send(Completion{ID: x.id, Object: x.object, Created: x.now, Model: x.s.cfg.ModelName, Choices: []CompletionChoice{}, Usage: u})
		}
	}
	if x.failed {
		return
	}
	for _, rc := range receipts {
		if _, err := fmt.Fprintf(x.w, ": cloison-receipt %s\n\n", rc); err != nil {
			x.fail()
			return
		}
	}
	if _, err := fmt.Fprint(x.w, "data: [DONE]\n\n"); err != nil {
		x.fail()
		return
	}
	if x.flusher != nil {
		x.flusher.Flush()
	}
	for _, rc := range receipts {
		x.w.Header().Add(ReceiptHeader, rc) // the trailer declared in begin
	}
}
