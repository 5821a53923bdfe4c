package chat

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/ardanlabs/jinja"
	"github.com/cloison/cloison"
)

// ErrTemplate: the model's template does not compile, or it refused the
// messages (raise_exception), e.g. roles out of order.
var ErrTemplate = cloison.NewError(cloison.CodeInvalid, "chat: the model's chat template rejected the messages")

// ErrMessages: messages that no template can take (empty list, unknown role).
var ErrMessages = cloison.NewError(cloison.CodeInvalid, "chat: invalid messages")

// ErrContent: the model's template rewrites message content beyond trimming
// whitespace (slicing, case changes, branching on what the content holds), so
// the bytes that came from content cannot be told from the template's own
// and the prompt is refused rather than tokenized with content's control
// tokens live.
var ErrContent = cloison.NewError(cloison.CodeInvalid, "chat: the model's chat template rewrites message content; the prompt cannot be tokenized safely")

// ChatML is the template used when a model has none.
const ChatML = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"

// Message is one chat turn. An assistant message may carry the tool calls
// it made (then an empty Content is passed to the template as none, as
// OpenAI clients send null); a tool message answers the call ToolCallID.
type Message struct {
	Role       string     `json:"role"`
	Content    string     `json:"content"`
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
}

// Template is a compiled chat template.
type Template struct {
	src      string
	tpl      *jinja.Template
	bos, eos string
	now      func() time.Time // strftime_now's clock
}

// New compiles src (ChatML if empty); bos and eos are the model's BOS and
// EOS token strings, which many templates reference.
func New(src, bos, eos string) (*Template, error) {
	if strings.TrimSpace(src) == "" {
		src = ChatML
	}
	tpl, err := compile(src)
	if err != nil {
		return nil, ErrTemplate.Wrap(fmt.Errorf("compile: %w", err))
	}
	return &Template{src: src, tpl: tpl, bos: bos, eos: eos, now: time.Now}, nil
}

// compile parses src. ardanlabs/jinja renders as Hugging Face does
// (trim_blocks and lstrip_blocks on).
// A panic in the library is an error, not a crash of the process.
func compile(src string) (tpl *jinja.Template, err error) {
	defer func() {
		if r := recover(); r != nil {
			tpl, err = nil, fmt.Errorf("renderer panic: %v", r)
		}
	}()
	return jinja.Compile(tojsonRef.ReplaceAllString(src, "|${1}"+tojsonFilter))
}

// tojsonRef finds the template's uses of the tojson filter, which compile
// points at our own (tools.go: ardanlabs/jinja's builtin filters cannot be
// replaced, but a filter it does not know is looked up among the
// variables).
var tojsonRef = regexp.MustCompile(`\|(\s*)tojson\b`)

// tojsonFilter is the name our tojson filter is given.
const tojsonFilter = "cloison_tojson"

// execute renders tpl with data; a panic in the library is an error.
func execute(tpl *jinja.Template, data map[string]jinja.Value) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = "", fmt.Errorf("renderer panic: %v", r)
		}
	}()
	return tpl.RenderValues(data)
}

// strftime formats t with the directives @huggingface/jinja's strftime_now
// knows (%Y %m %d %b %B %H %M %%); any other directive is left as written,
// as there.
func strftime(t time.Time, f string) string {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 == len(f) {
			b.WriteByte(f[i])
			continue
		}
		switch f[i+1] {
		case 'Y':
			b.WriteString(strconv.Itoa(t.Year()))
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'b':
			b.WriteString(t.Month().String()[:3])
		case 'B':
			b.WriteString(t.Month().String())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case '%':
			b.WriteByte('%')
		default:
			b.WriteByte('%')
			continue
		}
		i++
	}
	return b.String()
}

// text is v as the template would print it: a string as itself.
func text(v jinja.Value) string {
	if v.IsString() {
		return v.AsString()
	}
	return v.String()
}

// Source returns the template source in use.
func (t *Template) Source() string { return t.src }

var roles = map[string]bool{"system": true, "user": true, "assistant": true, "tool": true, "developer": true}

// Render returns the prompt text for msgs; with generationPrompt the
// template opens the assistant's turn.
func (t *Template) Render(msgs []Message, generationPrompt bool) (string, error) {
	return t.RenderTools(msgs, nil, generationPrompt)
}

// RenderTools is Render with the functions the model may call, given to
// the template as its tools variable (left undefined when there are none,
// as Hugging Face does).
// Errors: ErrMessages (also a tool or tool call of the wrong shape),
// ErrTemplate.
func (t *Template) RenderTools(msgs []Message, tools []Tool, generationPrompt bool) (string, error) {
	return t.render(msgs, tools, Options{GenerationPrompt: generationPrompt}, identity)
}

// Options are how a chat is rendered beyond its messages and tools.
type Options struct {
	// GenerationPrompt: the template opens the assistant's turn
	// (add_generation_prompt).
	GenerationPrompt bool
	// ContinueFinal: the prompt ends right after the last message's
	// content, so that the model continues that (assistant) message
	// (vLLM's continue_final_message); exclusive with GenerationPrompt.
	ContinueFinal bool
	// Vars are more template variables (chat_template_kwargs,
	// reasoning_effort): bool, int64, float64 or string values. A name the
	// renderer sets itself is refused (ErrMessages). A string is written
	// as the template's own text, where control tokens are parsed: the
	// caller admits only strings it chose.
	Vars map[string]any
}

// reserved are the variables the renderer sets itself.
var reserved = map[string]bool{"messages": true, "tools": true, "add_generation_prompt": true, "bos_token": true, "eos_token": true,
	tojsonFilter: true, "raise_exception": true, "strftime_now": true}

// render renders with every client string of tools and tool calls passed
// through mask (message content is the caller's to mask).
func (t *Template) render(msgs []Message, tools []Tool, o Options, mask maskFunc) (string, error) {
	if len(msgs) == 0 {
		return "", ErrMessages.Withf("no messages")
	}
	list := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		if !roles[m.Role] {
			return "", ErrMessages.Withf("message %d has role %q", i, m.Role)
		}
		d := jinja.NewDict()
		d.AsDict().Set("role", jinja.NewString(m.Role))
		if m.Content == "" && len(m.ToolCalls) > 0 {
			d.AsDict().Set("content", jinja.None())
		} else {
			d.AsDict().Set("content", jinja.NewString(m.Content))
		}
		if len(m.ToolCalls) > 0 {
			if m.Role != "assistant" {
				return "", ErrMessages.Withf("message %d: only an assistant message has tool_calls", i)
			}
			calls, err := toolCallsValue(i, m.ToolCalls, mask)
			if err != nil {
				return "", err
			}
			d.AsDict().Set("tool_calls", calls)
		}
		if m.ToolCallID != "" {
			if m.Role != "tool" {
				return "", ErrMessages.Withf("message %d: only a tool message has a tool_call_id", i)
			}
			if !idPattern.MatchString(m.ToolCallID) {
				return "", ErrMessages.Withf("message %d: tool_call_id must be 1 to 64 letters, digits, '_' or '-'", i)
			}
			d.AsDict().Set("tool_call_id", jinja.NewString(m.ToolCallID))
		}
		list[i] = d
	}
	var raised error
	data := map[string]jinja.Value{
		"messages":              jinja.NewList(list),
		"add_generation_prompt": jinja.NewBool(o.GenerationPrompt),
		"bos_token":             jinja.NewString(t.bos),
		"eos_token":             jinja.NewString(t.eos),
		tojsonFilter:            jinja.NewCallable("tojson", tojson),
		"raise_exception": jinja.NewCallable("raise_exception", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			msg := "raise_exception"
			if len(args) > 0 {
				msg = text(args[0])
			}
			raised = ErrTemplate.Withf("%s", msg)
			return jinja.Undefined(), raised
		}),
		"strftime_now": jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
			f := "%Y-%m-%d"
			if len(args) > 0 {
				f = text(args[0])
			}
			return jinja.NewString(strftime(t.now(), f)), nil
		}),
	}
	for k, v := range o.Vars {
		if reserved[k] {
			return "", ErrMessages.Withf("template variable %q is the renderer's own", k)
		}
		switch v := v.(type) {
		case bool:
			data[k] = jinja.NewBool(v)
		case int64:
			data[k] = jinja.NewInt(v)
		case float64:
			data[k] = jinja.NewFloat(v)
		case string:
			data[k] = jinja.NewString(v)
		case nil:
			data[k] = jinja.None()
		default:
			return "", ErrMessages.Withf("template variable %q: a boolean, number or string", k)
		}
	}
	if len(tools) > 0 {
		tv, err := toolsValue(tools, mask)
		if err != nil {
			return "", err
		}
		data["tools"] = tv
	}
	out, err := execute(t.tpl, data)
	if raised != nil {
		return "", raised
	}
	if err != nil {
		return "", ErrTemplate.Wrap(err)
	}
	return out, nil
}

// Prompt is a rendered prompt with the provenance of its bytes.
type Prompt struct {
	Text string
	// Literal lists the byte ranges [start, end) of Text that the template
	// wrote itself, in order, disjoint and non-empty. Every other byte came
	// from message content (or is whitespace next to where content was put,
	// which counts as content).
	Literal [][2]int
}

// Prompt renders msgs like Render and says which bytes the template wrote.
//
// How: the template is rendered twice, once with the messages as they are
// (the text) and once with each non-empty content replaced by its leading
// whitespace, a placeholder and its trailing whitespace, so that strip, trim
// and lstrip act on both renderings alike. A placeholder is a private-use
// rune, a 128-bit nonce drawn for this render, the message index and another
// private-use rune; content cannot forge one without guessing the nonce (and
// a content that holds the nonce makes Prompt draw another). Substituting
// each placeholder by its content's trimmed core must give back the text
// exactly; what the second rendering has outside placeholders (and outside
// the whitespace next to them) is the template's literal text.
//
// Errors: ErrMessages, ErrTemplate (as Render); ErrContent when the
// substitution does not give back the text: the template rewrote or branched
// on content, so provenance is unknown and the caller must not guess it.
func (t *Template) Prompt(msgs []Message, generationPrompt bool) (Prompt, error) {
	return t.PromptTools(msgs, nil, generationPrompt)
}

// PromptTools is Prompt with tools (RenderTools). Every client string of
// the tools and of the messages' tool calls is content, masked like message
// content: function names, descriptions, the schemas' property names,
// descriptions, enum and default values and unknown keys (only JSON-schema
// keywords and type names, which templates look up, are passed as they
// are), and the arguments' keys and values. Tool call ids are passed as
// they are (Mistral's templates check their length) and are therefore held
// to [A-Za-z0-9_-]. A template that writes a masked string through tojson
// escapes it; the substitution follows the escaping (the escaped bytes are
// content too).
func (t *Template) PromptTools(msgs []Message, tools []Tool, generationPrompt bool) (Prompt, error) {
	return t.PromptWith(msgs, tools, Options{GenerationPrompt: generationPrompt})
}

// PromptWith is PromptTools with Options. With ContinueFinal the prompt is
// cut after the last occurrence of the last message's content (trimmed),
// as Hugging Face's continue_final_message does, its literal ranges
// clipped. Errors: as PromptTools; ErrMessages (ContinueFinal with
// GenerationPrompt, or a last message that is not the assistant's or is
// empty); ErrContent (the content is not found in the rendering).
func (t *Template) PromptWith(msgs []Message, tools []Tool, o Options) (Prompt, error) {
	if !o.ContinueFinal {
		return t.promptWith(msgs, tools, o)
	}
	if o.GenerationPrompt {
		return Prompt{}, ErrMessages.Withf("continue_final_message with add_generation_prompt")
	}
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "assistant" || strings.TrimSpace(msgs[len(msgs)-1].Content) == "" {
		return Prompt{}, ErrMessages.Withf("continue_final_message needs a last assistant message with content")
	}
	o.ContinueFinal = false
	p, err := t.promptWith(msgs, tools, o)
	if err != nil {
		return Prompt{}, err
	}
	core := strings.TrimSpace(msgs[len(msgs)-1].Content)
	i := strings.LastIndex(p.Text, core)
	if i < 0 {
		return Prompt{}, fmt.Errorf("%w: the final message's content is not in the rendering", ErrContent)
	}
	end := i + len(core)
	var lit [][2]int
	for _, r := range p.Literal {
		if r[0] >= end {
			break
		}
		lit = append(lit, [2]int{r[0], min(r[1], end)})
	}
	return Prompt{Text: p.Text[:end], Literal: lit}, nil
}

func (t *Template) promptWith(msgs []Message, tools []Tool, o Options) (Prompt, error) {
	text, err := t.render(msgs, tools, o, identity)
	if err != nil {
		return Prompt{}, err
	}
	mark := newMark(msgs, tools)
	type part struct{ lead, core, trail string }
	var parts []part // by placeholder number
	masked := make([]Message, len(msgs))
	place := func(seg string) string {
		core := strings.TrimLeftFunc(seg, unicode.IsSpace)
		lead := seg[:len(seg)-len(core)]
		core = strings.TrimRightFunc(core, unicode.IsSpace)
		trail := seg[len(lead)+len(core):]
		parts = append(parts, part{lead, core, trail})
		return lead + mark + strconv.Itoa(len(parts)-1) + placeholderEnd + trail
	}
	reasoning := false // some content holds a reasoning marker
	for i, m := range msgs {
		masked[i] = m
		if m.Content == "" {
			continue // nothing to place; "" stays "" for templates that test it
		}
		// A reasoning marker stays in place and each run of text between
		// markers gets its own placeholder, so that a template cutting
		// content at the marker (Qwen3, DeepSeek-R1: split('</think>'))
		// cuts the masked content at the same places.
		var mc strings.Builder
		rest := m.Content
		for rest != "" {
			j, n := nextMarker(rest)
			if j < 0 {
				mc.WriteString(place(rest))
				break
			}
			reasoning = true
			if j > 0 {
				mc.WriteString(place(rest[:j]))
			}
			mc.WriteString(rest[j : j+n])
			rest = rest[j+n:]
		}
		masked[i].Content = mc.String()
	}
	// Tool strings: the same string always gets the same placeholder, so
	// that a template comparing them (a required property against a
	// property name, a call's name against a tool's) compares alike.
	interned := map[string]string{}
	maskTool := func(s string) string {
		if s == "" {
			return s
		}
		if p, ok := interned[s]; ok {
			return p
		}
		p := place(s)
		interned[s] = p
		return p
	}
	shape, err := t.render(masked, tools, o, maskTool)
	if err != nil {
		return Prompt{}, fmt.Errorf("%w: the template fails on placeholders", ErrContent)
	}
	var b strings.Builder
	var lit [][2]int
	var addLiteral func(s string)
	addLiteral = func(s string) {
		if s == "" {
			return
		}
		if reasoning {
			// Content held a marker: a marker in the shape may be content's
			// own, and is counted as content (never a control token).
			if j, n := nextMarker(s); j >= 0 {
				addLiteral(s[:j])
				b.WriteString(s[j : j+n])
				addLiteral(s[j+n:])
				return
			}
		}
		start := b.Len()
		b.WriteString(s)
		if n := len(lit); n > 0 && lit[n-1][1] == start {
			lit[n-1][1] = b.Len()
			return
		}
		lit = append(lit, [2]int{start, b.Len()})
	}
	pendingTrail := "" // trailing whitespace of the content placed last
	for shape != "" {
		j := strings.Index(shape, mark)
		chunk := shape
		if j >= 0 {
			chunk = shape[:j]
		}
		// Whitespace next to a placeholder may be the content's own (or what
		// lstrip/rstrip left of it): count it as content.
		head := commonPrefix(chunk, pendingTrail)
		b.WriteString(chunk[:len(head)])
		chunk = chunk[len(head):]
		if j < 0 {
			addLiteral(chunk)
			break
		}
		rest := shape[j+len(mark):]
		k := strings.Index(rest, placeholderEnd)
		if k <= 0 {
			return Prompt{}, fmt.Errorf("%w: a placeholder was cut", ErrContent)
		}
		i, err := strconv.Atoi(rest[:k])
		if err != nil || i < 0 || i >= len(parts) || rest[:k] != strconv.Itoa(i) {
			return Prompt{}, fmt.Errorf("%w: a placeholder was rewritten", ErrContent)
		}
		tail := commonSuffix(chunk, parts[i].lead)
		addLiteral(chunk[:len(chunk)-len(tail)])
		b.WriteString(tail)
		core := parts[i].core
		if at := b.Len(); at <= len(text) && !strings.HasPrefix(text[at:], core) {
			// Written through tojson: the escaped form is content.
			for _, e := range jsonEscaped(core) {
				if strings.HasPrefix(text[at:], e) {
					core = e
					break
				}
			}
		}
		b.WriteString(core)
		pendingTrail = parts[i].trail
		shape = rest[k+len(placeholderEnd):]
	}
	if b.String() != text {
		return Prompt{}, fmt.Errorf("%w: the rendering depends on content", ErrContent)
	}
	if reasoning {
		// A template that rewrote a marker (replace, slicing) would leave
		// content's bytes among its own. Each literal range must be text
		// that the template also writes for the same messages without
		// markers (up to whitespace at its edges, which the rendering
		// without markers may count as content); otherwise refuse.
		plain := make([]Message, len(msgs))
		for i, m := range msgs {
			plain[i] = m
			for _, mk := range reasoningMarkers {
				plain[i].Content = strings.ReplaceAll(plain[i].Content, mk, "")
			}
		}
		ref, err := t.promptWith(plain, tools, o)
		if err != nil {
			return Prompt{}, err
		}
		var own strings.Builder
		for _, r := range ref.Literal {
			own.WriteString(ref.Text[r[0]:r[1]])
			own.WriteByte(0)
		}
		for _, r := range lit {
			if !strings.Contains(own.String(), strings.TrimSpace(text[r[0]:r[1]])) {
				return Prompt{}, fmt.Errorf("%w: the template rewrites a reasoning marker", ErrContent)
			}
		}
	}
	return Prompt{Text: text, Literal: lit}, nil
}

// reasoningMarkers are the substrings that reasoning templates cut message
// content at; Prompt keeps them in place when it masks content.
var reasoningMarkers = []string{"<think>", "</think>"}

// nextMarker returns the byte offset and length of the first reasoning
// marker in s, or -1.
func nextMarker(s string) (int, int) {
	best, n := -1, 0
	for _, m := range reasoningMarkers {
		if j := strings.Index(s, m); j >= 0 && (best < 0 || j < best) {
			best, n = j, len(m)
		}
	}
	return best, n
}

// placeholderEnd closes a placeholder; newMark's U+E000 opens it. Both are
// private-use runes, which no tokenizer vocabulary gives a control token.
const placeholderEnd = "\uE001"

// newMark returns a placeholder prefix that no content of msgs holds, nor
// any string of their tool calls or of tools.
func newMark(msgs []Message, tools []Tool) string {
	// Every string the shape masks, decoded (a JSON escape could spell the
	// mark otherwise).
	var all strings.Builder
	collect := func(s string) string { all.WriteString(s); all.WriteByte(0); return s }
	for i, m := range msgs {
		_, _ = toolCallsValue(i, m.ToolCalls, collect)
	}
	_, _ = toolsValue(tools, collect)
	for {
		var nonce [16]byte
		_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24)
		mark := "\uE000" + hex.EncodeToString(nonce[:]) + ":"
		clash := strings.Contains(all.String(), mark)
		for _, m := range msgs {
			clash = clash || strings.Contains(m.Content, mark)
		}
		if !clash {
			return mark
		}
	}
}

// commonPrefix returns the longest common prefix of a and b.
func commonPrefix(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return a[:n]
}

// commonSuffix returns the longest common suffix of a and b.
func commonSuffix(a, b string) string {
	n := 0
	for n < len(a) && n < len(b) && a[len(a)-1-n] == b[len(b)-1-n] {
		n++
	}
	return a[len(a)-n:]
}
