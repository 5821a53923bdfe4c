package toolcall

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"unicode"
)

// Format is a tool-call format of a model family.
type Format int

// The formats (see the package documentation).
const (
	None Format = iota // the template teaches no format this package parses
	Hermes
	Llama3
	Mistral
	CommandR7B
	DeepSeekR1
	Harmony
)

var formatNames = []string{"none", "hermes", "llama3", "mistral", "command-r7b", "deepseek-r1", "harmony"}

func (f Format) String() string {
	if f < 0 || int(f) >= len(formatNames) {
		return "Format(" + strconv.Itoa(int(f)) + ")"
	}
	return formatNames[f]
}

// Detect returns the format a chat template teaches its model, from the
// markers the template writes (None when it writes none of them, or
// several families' markers, which would make the choice a guess).
func Detect(template string) Format {
	var found []Format
	if strings.Contains(template, "[TOOL_CALLS]") {
		found = append(found, Mistral)
	}
	if strings.Contains(template, "<|START_ACTION|>") {
		found = append(found, CommandR7B)
	}
	if strings.Contains(template, dsCallsBegin) {
		found = append(found, DeepSeekR1)
	}
	if strings.Contains(template, "<tool_call>") {
		found = append(found, Hermes)
	}
	// gpt-oss: harmony messages, a call ended by <|call|>.
	if strings.Contains(template, hChannel) && strings.Contains(template, hCall) {
		found = append(found, Harmony)
	}
	// Llama 3.x: the JSON tool-calling prompt, or the python tag (without
	// Functionary's <function=…> format, which shares the tag).
	if (strings.Contains(template, "<|python_tag|>") || strings.Contains(template, `"parameters": dictionary of argument name`)) &&
		!strings.Contains(template, "<function=") {
		found = append(found, Llama3)
	}
	if len(found) != 1 {
		return None
	}
	return found[0]
}

// Call is one parsed tool call.
type Call struct {
	Index     int    // 0, 1, ... in the order of the text
	ID        string // the id the model wrote (Mistral), or ""
	Name      string
	Arguments string // a JSON object, compact, in the model's key order
}

// Event is content text or a whole tool call (exactly one is set).
type Event struct {
	Content string
	Call    *Call
}

// DeepSeek R1's markers (full-width bars and the U+2581 block).
const (
	dsCallsBegin = "<｜tool▁calls▁begin｜>"
	dsCallsEnd   = "<｜tool▁calls▁end｜>"
	dsCallBegin  = "<｜tool▁call▁begin｜>"
	dsCallEnd    = "<｜tool▁call▁end｜>"
	dsSep        = "<｜tool▁sep｜>"
)

// markers are the texts that open a block of calls, per format.
var markers = map[Format][]string{
	Hermes:     {"<tool_call>"},
	Llama3:     {"<|python_tag|>"},
	Mistral:    {"[TOOL_CALLS]"},
	CommandR7B: {"<|START_ACTION|>"},
	DeepSeekR1: {dsCallsBegin},
	Harmony:    {hStart, hChannel},
}

// tokens are the texts of a format's markers that vocabularies hold as
// control tokens (which a detokenizer drops unless asked for them).
var tokens = map[Format][]string{
	Hermes:     {"<tool_call>", "</tool_call>"},
	Llama3:     {"<|python_tag|>"},
	Mistral:    {"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"},
	CommandR7B: {"<|START_ACTION|>", "<|END_ACTION|>"},
	DeepSeekR1: {dsCallsBegin, dsCallsEnd, dsCallBegin, dsCallEnd, dsSep},
	Harmony:    {hStart, hChannel, hMessage, hEnd, hReturn, hCall, hConstrain},
}

// gpt-oss's harmony markers (control tokens in its vocabulary).
const (
	hStart     = "<|start|>"
	hChannel   = "<|channel|>"
	hMessage   = "<|message|>"
	hEnd       = "<|end|>"
	hReturn    = "<|return|>"
	hCall      = "<|call|>"
	hConstrain = "<|constrain|>"

	// maxHarmonyHeader bounds a header read before its <|message|>.
	maxHarmonyHeader = 256
)

// IsMarker reports whether s is the whole text of one of f's markers, as a
// control token spells it: the caller feeds such a token's text to the
// Parser, and drops other control tokens' text as before.
func IsMarker(f Format, s string) bool {
	for _, m := range tokens[f] {
		if s == m {
			return true
		}
	}
	return false
}

// Parser splits one generation into content and calls.
type Parser struct {
	f       Format
	names   map[string]bool
	buf     string // text not yet resolved into events
	calls   int    // calls emitted
	content bool   // non-whitespace content emitted
	after   bool   // the last event was a call (no content since)
}

// NewParser returns a parser for f that accepts calls of the named
// functions only.
func NewParser(f Format, names []string) *Parser {
	p := &Parser{f: f, names: map[string]bool{}}
	for _, n := range names {
		p.names[n] = true
	}
	return p
}

// Feed adds generated text and returns what can be resolved so far.
func (p *Parser) Feed(text string) []Event {
	p.buf += text
	return p.scan(false)
}

// Finish resolves the rest at the end of the generation: an open block
// that is not a whole call is content.
func (p *Parser) Finish() []Event { return p.scan(true) }

// status of a block parse.
type status int

const (
	complete status = iota
	partial         // may still become a call: wait for more text
	invalid         // not a call: the marker is content
)

func (p *Parser) scan(eof bool) []Event {
	var out []Event
	emit := func(s string) {
		if p.after {
			// Whitespace (and Llama 3's ";") between calls is not content.
			s = strings.TrimLeftFunc(s, func(r rune) bool { return unicode.IsSpace(r) || (p.f == Llama3 && r == ';') })
		}
		if s == "" {
			return
		}
		if strings.TrimSpace(s) != "" {
			p.content, p.after = true, false
		}
		if n := len(out); n > 0 && out[n-1].Call == nil {
			out[n-1].Content += s
			return
		}
		out = append(out, Event{Content: s})
	}
	for p.buf != "" {
		at, marker := p.start()
		if at < 0 {
			if eof {
				emit(p.buf)
				p.buf = ""
				break
			}
			keep := p.holdBack()
			emit(p.buf[:len(p.buf)-keep])
			p.buf = p.buf[len(p.buf)-keep:]
			break
		}
		if marker != "" {
			emit(p.buf[:at])
			p.buf = p.buf[at:]
			at = 0
		} // else Llama 3's bare JSON: the whitespace before it waits with it
		calls, n, st := p.block(p.buf[at+len(marker):], eof)
		switch st {
		case partial:
			return out
		case invalid:
			if marker == "" { // Llama 3's bare JSON: the whole answer is content
				p.content = true
				emit(p.buf)
				p.buf = ""
				return out
			}
			emit(marker)
			p.buf = p.buf[len(marker):]
			continue
		}
		for _, c := range calls {
			c.Index = p.calls
			p.calls++
			out = append(out, Event{Call: &c})
		}
		p.after = true
		p.buf = p.buf[at+len(marker)+n:]
	}
	return out
}

// start finds the first block start in buf: its offset and marker ("" for
// Llama 3's bare JSON), or -1.
func (p *Parser) start() (int, string) {
	best, marker := -1, ""
	for _, m := range markers[p.f] {
		if i := strings.Index(p.buf, m); i >= 0 && (best < 0 || i < best) {
			best, marker = i, m
		}
	}
	if p.f == Llama3 && (!p.content || p.after) {
		// A JSON object as the whole answer (or after a call).
		trimmed := strings.TrimLeftFunc(p.buf, func(r rune) bool { return unicode.IsSpace(r) || (p.after && r == ';') })
		if strings.HasPrefix(trimmed, "{") {
			if i := len(p.buf) - len(trimmed); best < 0 || i < best {
				return i, ""
			}
		}
	}
	return best, marker
}

// holdBack is how many bytes at the end of buf must wait: a prefix of a
// marker, or (Llama 3 before any content) whitespace that may precede a
// bare JSON call.
func (p *Parser) holdBack() int {
	if p.f == Llama3 && (!p.content || p.after) && strings.TrimSpace(p.buf) == "" {
		return len(p.buf)
	}
	keep := 0
	for _, m := range markers[p.f] {
		for k := min(len(m)-1, len(p.buf)); k > keep; k-- {
			if strings.HasSuffix(p.buf, m[:k]) {
				keep = k
				break
			}
		}
	}
	return keep
}

// block parses the calls of one block, s being the text after its marker;
// n is how much of s they take.
func (p *Parser) block(s string, eof bool) (calls []Call, n int, st status) {
	switch p.f {
	case Hermes:
		return p.hermes(s, eof)
	case Llama3:
		return p.llama3(s, eof)
	case Mistral:
		return p.mistral(s, eof)
	case CommandR7B:
		return p.commandR7B(s, eof)
	case DeepSeekR1:
		return p.deepseek(s, eof)
	case Harmony:
		return p.harmony(s, eof)
	}
	return nil, 0, invalid
}

// closed returns the text of s before end and how much of s it takes with
// end; partial while end has not come (invalid at the end of generation).
func closed(s, end string, eof bool) (string, int, status) {
	i := strings.Index(s, end)
	if i < 0 {
		if eof {
			return "", 0, invalid
		}
		return "", 0, partial
	}
	return s[:i], i + len(end), complete
}

// call checks a parsed call: a known name and an object as arguments.
func (p *Parser) call(id, name string, args json.RawMessage) (Call, bool) {
	if !p.names[name] {
		return Call{}, false
	}
	args = bytes.TrimSpace(args)
	if len(args) == 0 || args[0] != '{' {
		return Call{}, false
	}
	var b bytes.Buffer
	if json.Compact(&b, args) != nil {
		return Call{}, false
	}
	return Call{ID: id, Name: name, Arguments: b.String()}, true
}

// jsonAt decodes one JSON value at the start of s (after whitespace):
// partial while it may still complete.
func jsonAt(s string, eof bool) (json.RawMessage, int, status) {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if (errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF)) && !eof {
			return nil, 0, partial
		}
		return nil, 0, invalid
	}
	return raw, int(dec.InputOffset()), complete
}

// object is a JSON object's members in order.
type member struct {
	key string
	val json.RawMessage
}

func objectMembers(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return nil, false
	}
	return m, true
}

func str(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func (p *Parser) hermes(s string, eof bool) ([]Call, int, status) {
	body, n, st := closed(s, "</tool_call>", eof)
	if st != complete {
		return nil, 0, st
	}
	body = strings.TrimSpace(body)
	var c Call
	ok := false
	switch {
	case strings.HasPrefix(body, "{"):
		m, isObj := objectMembers(json.RawMessage(body))
		if !isObj {
			return nil, 0, invalid
		}
		args := m["arguments"]
		if args == nil {
			args = m["parameters"]
		}
		c, ok = p.call("", str(m["name"]), args)
	case strings.HasPrefix(body, "<function="):
		c, ok = p.xmlCall(body)
	default:
		c, ok = p.glmCall(body)
	}
	if !ok {
		return nil, 0, invalid
	}
	return []Call{c}, n, complete
}

// xmlCall reads Qwen3-Coder's <function=N><parameter=K>V</parameter></function>.
func (p *Parser) xmlCall(body string) (Call, bool) {
	rest := strings.TrimPrefix(body, "<function=")
	name, rest, ok := strings.Cut(rest, ">")
	if !ok {
		return Call{}, false
	}
	rest, ok = strings.CutSuffix(strings.TrimSpace(rest), "</function>")
	if !ok {
		return Call{}, false
	}
	var members []member
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		after, found := strings.CutPrefix(rest, "<parameter=")
		if !found {
			return Call{}, false
		}
		key, after, found := strings.Cut(after, ">")
		if !found {
			return Call{}, false
		}
		val, after, found := strings.Cut(after, "</parameter>")
		if !found {
			return Call{}, false
		}
		members = append(members, member{key, xmlValue(val)})
		rest = after
	}
	return p.call("", strings.TrimSpace(name), objectOf(members))
}

// glmCall reads GLM's N<arg_key>K</arg_key><arg_value>V</arg_value>...
func (p *Parser) glmCall(body string) (Call, bool) {
	name, rest, _ := strings.Cut(body, "<arg_key>")
	var members []member
	if rest != "" || strings.Contains(body, "<arg_key>") {
		rest = "<arg_key>" + rest
	}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimSpace(rest) {
		after, found := strings.CutPrefix(rest, "<arg_key>")
		if !found {
			return Call{}, false
		}
		key, after, found := strings.Cut(after, "</arg_key>")
		if !found {
			return Call{}, false
		}
		after, found = strings.CutPrefix(strings.TrimSpace(after), "<arg_value>")
		if !found {
			return Call{}, false
		}
		val, after, found := strings.Cut(after, "</arg_value>")
		if !found {
			return Call{}, false
		}
		members = append(members, member{key, xmlValue(val)})
		rest = after
	}
	return p.call("", strings.TrimSpace(name), objectOf(members))
}

// xmlValue is a parameter's value: JSON when it parses as JSON, else the
// text (one newline trimmed at each end) as a string.
func xmlValue(v string) json.RawMessage {
	v = strings.TrimPrefix(strings.TrimSuffix(v, "\n"), "\n")
	if t := strings.TrimSpace(v); t != "" && json.Valid([]byte(t)) {
		return json.RawMessage(t)
	}
	b, _ := json.Marshal(v)
	return b
}

func objectOf(members []member) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range members {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func (p *Parser) llama3(s string, eof bool) ([]Call, int, status) {
	raw, n, st := jsonAt(s, eof)
	if st != complete {
		return nil, 0, st
	}
	m, ok := objectMembers(raw)
	if !ok {
		return nil, 0, invalid
	}
	args := m["parameters"]
	if args == nil {
		args = m["arguments"]
	}
	c, ok := p.call("", str(m["name"]), args)
	if !ok {
		return nil, 0, invalid
	}
	return []Call{c}, n, complete
}

func (p *Parser) mistral(s string, eof bool) ([]Call, int, status) {
	t := strings.TrimLeftFunc(s, unicode.IsSpace)
	lead := len(s) - len(t)
	if strings.HasPrefix(t, "[") && !strings.HasPrefix(t, "[ARGS]") && !strings.HasPrefix(t, "[CALL_ID]") {
		// Mistral Nemo: a JSON list of calls.
		raw, n, st := jsonAt(t, eof)
		if st != complete {
			return nil, 0, st
		}
		var list []json.RawMessage
		if json.Unmarshal(raw, &list) != nil || len(list) == 0 {
			return nil, 0, invalid
		}
		var calls []Call
		for _, item := range list {
			m, ok := objectMembers(item)
			if !ok {
				return nil, 0, invalid
			}
			c, ok := p.call(str(m["id"]), str(m["name"]), m["arguments"])
			if !ok {
				return nil, 0, invalid
			}
			calls = append(calls, c)
		}
		return calls, lead + n, complete
	}
	// NAME[ARGS]{...} or NAME[CALL_ID]ID[ARGS]{...}
	i := strings.Index(t, "[ARGS]")
	if i < 0 {
		if eof || len(t) > 64+len("[CALL_ID]")+64 {
			return nil, 0, invalid
		}
		return nil, 0, partial
	}
	head, id := t[:i], ""
	if name, cid, found := strings.Cut(head, "[CALL_ID]"); found {
		head, id = name, cid
	}
	raw, n, st := jsonAt(t[i+len("[ARGS]"):], eof)
	if st != complete {
		return nil, 0, st
	}
	c, ok := p.call(id, head, raw)
	if !ok {
		return nil, 0, invalid
	}
	return []Call{c}, lead + i + len("[ARGS]") + n, complete
}

func (p *Parser) commandR7B(s string, eof bool) ([]Call, int, status) {
	body, n, st := closed(s, "<|END_ACTION|>", eof)
	if st != complete {
		return nil, 0, st
	}
	var list []json.RawMessage
	if json.Unmarshal([]byte(body), &list) != nil || len(list) == 0 {
		return nil, 0, invalid
	}
	var calls []Call
	for _, item := range list {
		m, ok := objectMembers(item)
		if !ok {
			return nil, 0, invalid
		}
		c, ok := p.call("", str(m["tool_name"]), m["parameters"])
		if !ok {
			return nil, 0, invalid
		}
		calls = append(calls, c)
	}
	return calls, n, complete
}

func (p *Parser) deepseek(s string, eof bool) ([]Call, int, status) {
	body, n, st := closed(s, dsCallsEnd, eof)
	if st != complete {
		return nil, 0, st
	}
	var calls []Call
	for body = strings.TrimSpace(body); body != ""; body = strings.TrimSpace(body) {
		one, rest, found := strings.Cut(strings.TrimPrefix(body, dsCallBegin), dsCallEnd)
		if !found || !strings.HasPrefix(body, dsCallBegin) {
			return nil, 0, invalid
		}
		body = rest
		_, one, found = strings.Cut(one, dsSep) // "function" before the separator
		if !found {
			return nil, 0, invalid
		}
		name, args, _ := strings.Cut(one, "\n")
		args = strings.TrimSpace(args)
		args = strings.TrimPrefix(args, "```json")
		args = strings.TrimSuffix(strings.TrimSpace(args), "```")
		c, ok := p.call("", strings.TrimSpace(name), json.RawMessage(args))
		if !ok {
			return nil, 0, invalid
		}
		calls = append(calls, c)
	}
	if len(calls) == 0 {
		return nil, 0, invalid
	}
	return calls, n, complete
}

// Parse splits a whole generation (Feed and Finish at once).
func Parse(f Format, names []string, text string) (content string, calls []Call) {
	p := NewParser(f, names)
	var b strings.Builder
	for _, e := range append(p.Feed(text), p.Finish()...) {
		if e.Call != nil {
			calls = append(calls, *e.Call)
		} else {
			b.WriteString(e.Content)
		}
	}
	return b.String(), calls
}

const idAlphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// NewID returns a fresh tool call id for a call of format f: "call_" and
// 24 random letters and digits, or, for Mistral, 9 letters and digits, the
// only ids Mistral's templates take back in the next turn.
func NewID(f Format) string {
	n, prefix := 24, "call_"
	if f == Mistral {
		n, prefix = 9, ""
	}
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	for i := range b {
		b[i] = idAlphabet[int(b[i])%len(idAlphabet)]
	}
	return prefix + string(b)
}

// Triggers returns what opens a block of calls in f, as the Parser looks
// for it: the markers (anywhere in the text), and start, a text that opens
// one only as the first text of the answer after whitespace (Llama 3's
// bare JSON call: "{"; "" for the other formats). A lazy grammar with these
// triggers constrains every call the Parser can read: the Parser starts a
// block nowhere else.
func Triggers(f Format) (marker []string, start string) {
	marker = append([]string(nil), markers[f]...)
	if f == Llama3 {
		start = "{"
	}
	return marker, start
}

// Controls returns the texts of f's markers that vocabularies hold as
// control tokens (the API feeds such a token's text to the Parser, see
// IsMarker).
func Controls(f Format) []string { return append([]string(nil), tokens[f]...) }

// Sep returns what f writes between two calls of one answer; the Parser
// reads calls framed by Frame and joined by Sep as those calls.
func Sep(f Format) string {
	switch f {
	case Llama3:
		return "; "
	case Mistral:
		return ""
	}
	return "\n"
}

// Frame returns the text a call of the function name is written between in
// format f, around its arguments object: what constrained decoding must
// force for tool_choice "required" or a named function (a literal prefix,
// the arguments' JSON schema, a literal suffix; "required" is the choice
// of one frame per offered function). template tells the two Mistral forms
// apart. The markers in the frames are control tokens in the families'
// vocabularies, so a token mask must offer those tokens for their text.
// Parse reads a frame filled with an object back as the call.
func Frame(f Format, template, name string) (prefix, suffix string, ok bool) {
	switch f {
	case Hermes:
		return "<tool_call>\n{\"name\": \"" + name + "\", \"arguments\": ", "}\n</tool_call>", true
	case Llama3:
		return "{\"name\": \"" + name + "\", \"parameters\": ", "}", true
	case Mistral:
		if strings.Contains(template, "[ARGS]") {
			return "[TOOL_CALLS]" + name + "[ARGS]", "", true
		}
		return "[TOOL_CALLS][{\"name\": \"" + name + "\", \"arguments\": ", "}]", true
	case CommandR7B:
		return "<|START_ACTION|>[{\"tool_call_id\": \"0\", \"tool_name\": \"" + name + "\", \"parameters\": ", "}]<|END_ACTION|>", true
	case DeepSeekR1:
		return dsCallsBegin + dsCallBegin + "function" + dsSep + name + "\n```json\n", "\n```" + dsCallEnd + dsCallsEnd, true
	case Harmony:
		return hChannel + "commentary to=functions." + name + " " + hConstrain + "json" + hMessage, hCall, true
	}
	return "", "", false
}

// harmony reads one harmony message as a call, s being the text after the
// marker that opens its header (<|start|> or <|channel|>): a header that
// names a recipient functions.N ("to=functions.N", before or after the
// channel, as the template and the model write it), <|message|>, a JSON
// object, then <|call|> (or <|end|>; or nothing at the end of the
// generation, where the engine stopped on <|call|> as an end-of-generation
// token without writing it). Any other message is not a call: its text
// goes on as content, for the reasoning parser that reads the channels.
func (p *Parser) harmony(s string, eof bool) ([]Call, int, status) {
	i := strings.Index(s, hMessage)
	if i < 0 {
		if eof || len(s) > maxHarmonyHeader || strings.Contains(s, hEnd) || strings.Contains(s, hStart) {
			return nil, 0, invalid
		}
		return nil, 0, partial
	}
	header := s[:i]
	if i > maxHarmonyHeader || strings.Contains(header, hEnd) || strings.Contains(header, hStart) || strings.Contains(header, hCall) {
		return nil, 0, invalid
	}
	name, ok := harmonyRecipient(header)
	if !ok {
		return nil, 0, invalid
	}
	body := s[i+len(hMessage):]
	raw, n, st := jsonAt(body, eof)
	if st != complete {
		return nil, 0, st
	}
	c, ok := p.call("", name, raw)
	if !ok {
		return nil, 0, invalid
	}
	rest := body[n:]
	trimmed := strings.TrimLeft(rest, " \t\r\n")
	n += len(rest) - len(trimmed)
	switch {
	case strings.HasPrefix(trimmed, hCall):
		n += len(hCall)
	case strings.HasPrefix(trimmed, hEnd):
		n += len(hEnd)
	case trimmed == "" && eof:
	case trimmed == "" || strings.HasPrefix(hCall, trimmed) || strings.HasPrefix(hEnd, trimmed):
		return nil, 0, partial
	default:
		return nil, 0, invalid
	}
	return []Call{c}, i + len(hMessage) + n, complete
}

// harmonyRecipient is the function a harmony header sends its message to
// ("to=functions.N").
func harmonyRecipient(header string) (string, bool) {
	const to = "to=functions."
	j := strings.Index(header, to)
	if j < 0 || (j > 0 && !strings.ContainsRune(" \t\n>", rune(header[j-1]))) {
		return "", false
	}
	name := header[j+len(to):]
	if k := strings.IndexAny(name, " \t\n<"); k >= 0 {
		name = name[:k]
	}
	return name, name != ""
}
