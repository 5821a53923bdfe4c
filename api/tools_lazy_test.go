package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/toolcall"
	"github.com/cloison/cloison/service"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"pgregory.net/rapid"
)

func hfTemplate(t testing.TB, file string) *chat.Template {
	t.Helper()
	src, err := os.ReadFile("../engine/chat/testdata/hf/templates/" + file)
	if err != nil {
		t.Fatal(err)
	}
	tpl, err := chat.New(string(src), "", "")
	if err != nil {
		t.Fatal(err)
	}
	return tpl
}

const strictArgs = `{"type":"object","properties":{"unit":{"enum":["celsius","fahrenheit"]},"days":{"type":"integer"}},"required":["unit","days"],"additionalProperties":false}`

// TestStrictAutoPerFamily: under tool_choice "auto" with a strict tool, for
// the Hermes (Qwen 2.5), Llama 3.1, Mistral Small 3.2 and Mistral Nemo
// templates, a walk that draws each token among those the lazy grammar
// allows (a stand-in for any model's choices), after free text and once a
// call is opened by the family's trigger (as text or as the marker's
// control token), gives an answer the API's tool stream reads as calls of
// the offered functions whose strict arguments validate against the schema
// (oracle: santhosh-tekuri/jsonschema); a walk cut short never yields a
// call that was not constrained. A non-strict tool's call stays any JSON
// object.
func TestStrictAutoPerFamily(t *testing.T) {
	tok := toolTokenizer(t)
	v := grammar.VocabFrom(tok)
	doc, _ := jsonschema.UnmarshalJSON(strings.NewReader(strictArgs))
	jc := jsonschema.NewCompiler()
	if err := jc.AddResource("a.json", doc); err != nil {
		t.Fatal(err)
	}
	oracle, err := jc.Compile("a.json")
	if err != nil {
		t.Fatal(err)
	}
	special := map[string]int32{}
	for id := range int32(tok.Len()) {
		if p := tok.Piece(id, false); len(p) == 0 {
			special[string(tok.Piece(id, true))] = id
		}
	}
	tools := []ToolDef{{Type: "function"}, {Type: "function"}}
	tools[0].Function.Name, tools[0].Function.Parameters = "get_forecast", json.RawMessage(strictArgs)
	yes := true
	tools[0].Function.Strict = &yes
	tools[1].Function.Name = "get_time"
	for _, tt := range []struct {
		file   string
		format toolcall.Format
		opens  []string // trigger openings: text spelled in bytes, or "ctl:" a control token
	}{
		{"Qwen-Qwen2.5-7B-Instruct.jinja", toolcall.Hermes, []string{"<tool_call>", "ctl:<tool_call>"}},
		{"meta-llama-Llama-3.1-8B-Instruct.jinja", toolcall.Llama3, []string{"", "ctl:<|python_tag|>", "<|python_tag|>"}},
		{"Mistral-Small-3.2-24B-Instruct-2506.jinja", toolcall.Mistral, []string{"ctl:[TOOL_CALLS]", "[TOOL_CALLS]"}},
		{"mistralai-Mistral-Nemo-Instruct-2407.jinja", toolcall.Mistral, []string{"ctl:[TOOL_CALLS]"}},
	} {
		t.Run(tt.file, func(t *testing.T) {
			s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{ModelName: "m", Tokenizer: tok, Chat: hfTemplate(t, tt.file)}}
			calls := 0
			rapid.Check(t, func(rt *rapid.T) {
				parallel := rapid.Bool().Draw(rt, "parallel")
				use, err := parseToolUse(tools, nil, &parallel)
				if err != nil {
					rt.Fatal(err)
				}
				if err := s.text().ToolFormat(use); err != nil || use.Format != tt.format || !use.Constrained() {
					rt.Fatalf("toolFormat: %v, format %v, constrained %v", err, use.Format, use.Constrained())
				}
				forced, err := use.Grammar()
				if err != nil {
					rt.Fatal(err)
				}
				m := grammar.NewMatcher(forced, v)
				var gen []engine.Token
				feed := func(id int32) {
					if err := m.Accept(id); err != nil {
						rt.Fatalf("Accept(%d %q): %v", id, tok.Piece(id, true), err)
					}
					gen = append(gen, engine.Token{ID: id, Text: string(tok.Piece(id, false))})
				}
				open := rapid.SampledFrom(tt.opens).Draw(rt, "open")
				lead := []string{"Sure. ", "Let me check, ", "\n"}
				if open == "" {
					lead = []string{"", " ", "\n\n"} // whitespace only before the answer's first "{"
				}
				if text := rapid.SampledFrom(lead).Draw(rt, "text"); text != "" {
					for _, id := range tok.Encode(text, false, false) {
						feed(id)
					}
				}
				if ctl, ok := strings.CutPrefix(open, "ctl:"); ok {
					feed(special[ctl])
				} else {
					for _, id := range tok.Encode(open, false, false) {
						feed(id)
					}
				}
				if open == "" { // Llama 3's bare JSON: the answer's first text
					feed(tok.Encode("{", false, false)[0])
				}
				if !m.Triggered() {
					rt.Fatalf("opening %q did not trigger", open)
				}
				for step := 0; step < 400 && !m.Closed(); step++ {
					mask, _ := m.Allowed()
					var allowed []int32
					for id := range int32(v.Len()) {
						if mask[id>>6]&(1<<(id&63)) != 0 {
							allowed = append(allowed, id)
						}
					}
					if len(allowed) == 0 {
						rt.Fatal("no token allowed")
					}
					// Prefer closing bytes so that most walks finish.
					id := rapid.SampledFrom(allowed).Draw(rt, "tok")
					for _, c := range []byte(`"}]0`) {
						if rapid.IntRange(0, 2).Draw(rt, "close") == 0 && mask[c>>6]&(1<<(c&63)) != 0 {
							id = int32(c)
							break
						}
					}
					if tok.IsEOG(id) {
						break
					}
					feed(id)
				}
				complete := m.Complete()
				in := inference{common: &Common{}, chat: true, tools: use}
				c := newCollector(s, in)
				for _, tk := range gen {
					c.add(tk)
				}
				c.finish()
				got := toolCallsOut(c.tools.Calls())
				if complete && len(got) == 0 {
					rt.Fatalf("a complete constrained answer %q parsed as no call", c.text.String())
				}
				if !parallel && len(got) > 1 {
					rt.Fatalf("parallel_tool_calls false: %d calls", len(got))
				}
				for _, call := range got {
					calls++
					switch call.Function.Name {
					case "get_forecast":
						inst, err := jsonschema.UnmarshalJSON(strings.NewReader(call.Function.Arguments))
						if err != nil {
							rt.Fatalf("arguments %s: %v", call.Function.Arguments, err)
						}
						if err := oracle.Validate(inst); err != nil {
							rt.Fatalf("strict arguments %s do not validate: %v", call.Function.Arguments, err)
						}
					case "get_time":
						if !json.Valid([]byte(call.Function.Arguments)) || !strings.HasPrefix(call.Function.Arguments, "{") {
							rt.Fatalf("get_time arguments %s", call.Function.Arguments)
						}
					default:
						rt.Fatalf("call of %q", call.Function.Name)
					}
				}
			})
			if calls == 0 {
				t.Error("no walk gave a call")
			}
		})
	}
}

// TestStrictAutoGrammar: "auto" builds a lazy grammar only with a strict
// tool; it is not combined with a response_format; a strict schema the
// grammar cannot enforce is refused naming the keyword, while a non-strict
// tool's (unenforced) schema may use any keyword.
func TestStrictAutoGrammar(t *testing.T) {
	s := &Server{log: slog.New(slog.NewTextHandler(io.Discard, nil)), cfg: Config{ModelName: "m", Tokenizer: toolTokenizer(t), Chat: hfTemplate(t, "Qwen-Qwen2.5-7B-Instruct.jinja")}}
	def := func(name, params string, strict bool) ToolDef {
		d := ToolDef{Type: "function"}
		d.Function.Name, d.Function.Parameters, d.Function.Strict = name, json.RawMessage(params), &strict
		return d
	}
	unenforced := `{"type":"object","properties":{"n":{"type":"string","pattern":"^(?=a)"}}}`
	for _, tt := range []struct {
		name  string
		tools []ToolDef
		lazy  bool
		err   string
	}{
		{"no strict tool: unconstrained", []ToolDef{def("f", strictArgs, false)}, false, ""},
		{"a strict tool", []ToolDef{def("f", strictArgs, true), def("g", unenforced, false)}, true, ""},
		{"strict schema the grammar cannot enforce", []ToolDef{def("f", unenforced, true)}, false, "pattern"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			use, err := parseToolUse(tt.tools, json.RawMessage(`"auto"`), nil)
			if err == nil {
				err = s.text().ToolFormat(use)
			}
			var g *grammar.Grammar
			if err == nil {
				g, err = use.Grammar()
			}
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("got %v, want an error naming %s", err, tt.err)
				}
				return
			}
			if err != nil || (g != nil) != tt.lazy {
				t.Fatalf("got %v, grammar %v, want lazy %v", err, g, tt.lazy)
			}
			if _, err := service.RequestConstraint(service.JSONObjectSchema, use); (err != nil) != tt.lazy {
				t.Fatalf("with response_format: %v, want refused %v", err, tt.lazy)
			}
		})
	}
}
