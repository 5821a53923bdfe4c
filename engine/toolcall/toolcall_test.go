package toolcall

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"pgregory.net/rapid"
)

var fns = []string{"special_function", "special_function_with_opt", "get_weather", "python"}

type want struct {
	name, args, id string
}

// TestParse holds llama.cpp's tests/test-chat.cpp parsing expectations for
// the families of the shipped templates (ported as cases, not code), and
// our own edge cases.
func TestParse(t *testing.T) {
	one := []want{{"special_function", `{"arg1":1}`, ""}}
	tests := []struct {
		name    string
		f       Format
		text    string
		content string
		calls   []want
	}{
		// Hermes 2 Pro (test-chat.cpp: NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use).
		{"hermes call", Hermes, "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>", "", one},
		{"hermes content then call", Hermes, "Hello, world!\nWhat's up?<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>", "Hello, world!\nWhat's up?", one},
		{"hermes content only", Hermes, "Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", nil},
		{"hermes two calls", Hermes, "<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"special_function_with_opt\", \"arguments\": {\"arg1\": 1, \"arg2\": 2}}\n</tool_call>",
			"", []want{{"special_function", `{"arg1":1}`, ""}, {"special_function_with_opt", `{"arg1":1,"arg2":2}`, ""}}},
		// Qwen3.5 / Qwen3-Coder XML bodies (test-chat.cpp: Qwen3.5-4B).
		{"qwen3.5 xml call", Hermes, "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>", "", one},
		{"qwen3.5 xml two calls", Hermes, "<tool_call>\n<function=special_function>\n<parameter=arg1>\n1\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=special_function_with_opt>\n<parameter=arg1>\n1\n</parameter>\n<parameter=arg2>\n2\n</parameter>\n</function>\n</tool_call>",
			"", []want{{"special_function", `{"arg1":1}`, ""}, {"special_function_with_opt", `{"arg1":1,"arg2":2}`, ""}}},
		{"xml string value", Hermes, "<tool_call>\n<function=get_weather>\n<parameter=location>\nParis, France\n</parameter>\n</function>\n</tool_call>", "", []want{{"get_weather", `{"location":"Paris, France"}`, ""}}},
		// GLM 4.6 bodies.
		{"glm call", Hermes, "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>", "", one},
		// Mistral Nemo (test-chat.cpp: mistralai-Mistral-Nemo-Instruct-2407).
		{"nemo call with id", Mistral, "[TOOL_CALLS][{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}, \"id\": \"123456789\"}]", "", []want{{"special_function", `{"arg1":1}`, "123456789"}}},
		// Mistral Small 3.2 and Devstral.
		{"mistral small call id", Mistral, "[TOOL_CALLS]special_function[CALL_ID]123456789[ARGS]{\"arg1\": 1}", "", []want{{"special_function", `{"arg1":1}`, "123456789"}}},
		{"mistral small parallel", Mistral, "[TOOL_CALLS]special_function[CALL_ID]000000001[ARGS]{\"arg1\": 1}[TOOL_CALLS]special_function_with_opt[CALL_ID]000000002[ARGS]{\"arg1\": 1, \"arg2\": 2}",
			"", []want{{"special_function", `{"arg1":1}`, "000000001"}, {"special_function_with_opt", `{"arg1":1,"arg2":2}`, "000000002"}}},
		{"devstral call", Mistral, "[TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}", "", one},
		{"devstral content then call", Mistral, "Hello, world!\nWhat's up?[TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}", "Hello, world!\nWhat's up?", one},
		// Command R7B (test-chat.cpp: CohereForAI-c4ai-command-r7b-12-2024-tool_use).
		{"command r7b", CommandR7B, "<|START_ACTION|>[\n    {\"tool_call_id\": \"0\", \"tool_name\": \"special_function\", \"parameters\": {\"arg1\": 1}}\n]<|END_ACTION|>", "", one},
		// DeepSeek R1 (test-chat.cpp: llama-cpp-deepseek-r1).
		{"deepseek r1", DeepSeekR1, "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>special_function\n```json\n{\"arg1\": 1}```<｜tool▁call▁end｜><｜tool▁calls▁end｜>", "", one},
		// Llama 3.x JSON tool calling.
		{"llama3 bare json", Llama3, "{\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", "", one},
		{"llama3 leading space", Llama3, "\n {\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", "", one},
		{"llama3 python tag", Llama3, "<|python_tag|>{\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", "", one},
		{"llama3 two calls", Llama3, "{\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}; {\"name\": \"get_weather\", \"parameters\": {\"location\": \"Paris\"}}",
			"", []want{{"special_function", `{"arg1":1}`, ""}, {"get_weather", `{"location":"Paris"}`, ""}}},
		{"llama3 content only", Llama3, "Hello, world!\nWhat's up?", "Hello, world!\nWhat's up?", nil},
		{"llama3 json not a call is content", Llama3, "{\"answer\": 42}", "{\"answer\": 42}", nil},
		{"llama3 json after content is content", Llama3, "Sure: {\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", "Sure: {\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", nil},
		// What is not a call stays content, as written.
		{"unknown function is content", Hermes, "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"rm_rf\", \"arguments\": {}}</tool_call>", nil},
		{"arguments not an object", Hermes, "<tool_call>{\"name\": \"special_function\", \"arguments\": [1]}</tool_call>", "<tool_call>{\"name\": \"special_function\", \"arguments\": [1]}</tool_call>", nil},
		{"unclosed block is content", Hermes, "<tool_call>{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}", "<tool_call>{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}", nil},
		{"cut JSON is content", Mistral, "[TOOL_CALLS]special_function[ARGS]{\"arg1\": ", "[TOOL_CALLS]special_function[ARGS]{\"arg1\": ", nil},
		{"bad block then good", Hermes, "<tool_call>oops</tool_call><tool_call>{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}</tool_call>", "<tool_call>oops</tool_call>", one},
		{"partial marker at end is content", Hermes, "Hi <tool_c", "Hi <tool_c", nil},
		{"content, calls, whitespace between", Hermes, "Let me check.<tool_call>{\"name\": \"python\", \"arguments\": {}}</tool_call>\n<tool_call>{\"name\": \"python\", \"arguments\": {}}</tool_call>\n",
			"Let me check.", []want{{"python", `{}`, ""}, {"python", `{}`, ""}}},
		{"key order kept", Hermes, "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"z\": 1, \"a\": {\"y\": 2, \"b\": 3}}}</tool_call>", "", []want{{"get_weather", `{"z":1,"a":{"y":2,"b":3}}`, ""}}},
		// gpt-oss harmony: a message to functions.N is a call (the
		// recipient after the channel, as the model writes it, or before,
		// as the template does); other messages go on as they are, for the
		// channel parser.
		{"harmony call", Harmony, "<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\":\"Paris\"}<|call|>", "", []want{{"get_weather", `{"location":"Paris"}`, ""}}},
		{"harmony analysis then call", Harmony, "<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"Paris\"}<|call|>",
			"<|channel|>analysis<|message|>Need weather.<|end|>", []want{{"get_weather", `{"location":"Paris"}`, ""}}},
		{"harmony template order", Harmony, "<|start|>assistant to=functions.special_function<|channel|>commentary json<|message|>{\"arg1\": 1}<|call|>", "", one},
		{"harmony call cut by its end token", Harmony, "<|channel|>commentary to=functions.special_function<|message|>{\"arg1\": 1}", "", one},
		{"harmony final is content", Harmony, "<|channel|>final<|message|>It is 4.<|return|>", "<|channel|>final<|message|>It is 4.<|return|>", nil},
		{"harmony two calls", Harmony, "<|channel|>commentary to=functions.python<|message|>{}<|call|><|start|>assistant<|channel|>commentary to=functions.get_weather<|message|>{\"location\":\"x\"}<|end|>",
			"", []want{{"python", `{}`, ""}, {"get_weather", `{"location":"x"}`, ""}}},
		{"harmony unknown function is content", Harmony, "<|channel|>commentary to=functions.rm_rf<|message|>{}<|call|>", "<|channel|>commentary to=functions.rm_rf<|message|>{}<|call|>", nil},
		{"harmony browser tool is content", Harmony, "<|channel|>analysis to=browser.search<|message|>{\"q\":1}<|call|>", "<|channel|>analysis to=browser.search<|message|>{\"q\":1}<|call|>", nil},
		{"harmony cut JSON is content", Harmony, "<|channel|>commentary to=functions.python<|message|>{\"code\": ", "<|channel|>commentary to=functions.python<|message|>{\"code\": ", nil},
		{"harmony text after the JSON is content", Harmony, "<|channel|>commentary to=functions.python<|message|>{} and more<|call|>", "<|channel|>commentary to=functions.python<|message|>{} and more<|call|>", nil},
		{"none parses nothing", None, "<tool_call>{\"name\": \"special_function\", \"arguments\": {}}</tool_call>", "<tool_call>{\"name\": \"special_function\", \"arguments\": {}}</tool_call>", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content, calls := Parse(tt.f, fns, tt.text)
			if content != tt.content {
				t.Fatalf("got content %q, want %q", content, tt.content)
			}
			var got []want
			for i, c := range calls {
				if c.Index != i {
					t.Fatalf("got index %d, want %d", c.Index, i)
				}
				got = append(got, want{c.Name, c.Arguments, c.ID})
			}
			if !reflect.DeepEqual(got, tt.calls) {
				t.Fatalf("got calls %+v, want %+v", got, tt.calls)
			}
			// Streamed byte by byte: the same events, and no content
			// holds a marker of a block that became a call.
			p := NewParser(tt.f, fns)
			var sc strings.Builder
			var scalls []Call
			for i := 0; i < len(tt.text); i++ {
				for _, e := range p.Feed(tt.text[i : i+1]) {
					if e.Call != nil {
						scalls = append(scalls, *e.Call)
					}
					sc.WriteString(e.Content)
				}
			}
			for _, e := range p.Finish() {
				if e.Call != nil {
					scalls = append(scalls, *e.Call)
				}
				sc.WriteString(e.Content)
			}
			if sc.String() != tt.content || !reflect.DeepEqual(scalls, calls) {
				t.Fatalf("streamed: got %q %+v, want %q %+v", sc.String(), scalls, tt.content, calls)
			}
		})
	}
}

// TestStreamNoPartialMarker: while a marker is arriving, nothing of it is
// released as content.
func TestStreamNoPartialMarker(t *testing.T) {
	p := NewParser(Hermes, fns)
	var got []Event
	for _, piece := range []string{"Let me check.", "<", "tool", "_call", ">\n{\"name\": \"get_weather\", ", "\"arguments\": {\"location\": \"Paris\"}}\n", "</tool_call>"} {
		evs := p.Feed(piece)
		for _, e := range evs {
			if strings.Contains(e.Content, "<") {
				t.Fatalf("content %q leaks a marker", e.Content)
			}
		}
		got = append(got, evs...)
	}
	got = append(got, p.Finish()...)
	if len(got) != 2 || got[0].Content != "Let me check." || got[1].Call == nil || got[1].Call.Name != "get_weather" {
		t.Fatalf("got %+v", got)
	}
}

// TestStreamChunking (property): however the text is cut into pieces, the
// events are those of the whole text (content merged).
func TestStreamChunking(t *testing.T) {
	texts := map[Format][]string{
		Hermes:     {"Hi!<tool_call>\n{\"name\": \"special_function\", \"arguments\": {\"arg1\": 1}}\n</tool_call>\n<tool_call><function=get_weather><parameter=location>Paris</parameter></function></tool_call>", "a <tool_ b <tool_call>bad</tool_call> c"},
		Mistral:    {"ok[TOOL_CALLS]special_function[ARGS]{\"arg1\": 1}[TOOL_CALLS]get_weather[ARGS]{\"location\": \"x\"}", "[TOOL_CALLS][{\"name\": \"python\", \"arguments\": {}}]"},
		Llama3:     {" {\"name\": \"python\", \"parameters\": {\"code\": \"print(1)\"}}", "<|python_tag|>{\"name\": \"special_function\", \"parameters\": {\"arg1\": 1}}", "text { not json"},
		DeepSeekR1: {"x<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>python\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>"},
		CommandR7B: {"<|START_ACTION|>[{\"tool_name\": \"python\", \"parameters\": {}}]<|END_ACTION|>"},
		Harmony: {"<|channel|>analysis<|message|>hm<|end|><|start|>assistant<|channel|>commentary to=functions.python <|constrain|>json<|message|>{\"code\": \"1\"}<|call|>",
			"<|channel|>final<|message|>a <|chan b<|end|>", "<|start|>assistant to=functions.get_weather<|channel|>commentary json<|message|>{\"location\": \"x\"}"},
	}
	rapid.Check(t, func(rt *rapid.T) {
		f := rapid.SampledFrom([]Format{Hermes, Mistral, Llama3, DeepSeekR1, CommandR7B, Harmony}).Draw(rt, "format")
		text := rapid.SampledFrom(texts[f]).Draw(rt, "text")
		wantContent, wantCalls := Parse(f, fns, text)
		p := NewParser(f, fns)
		var content strings.Builder
		var calls []Call
		rest := text
		for rest != "" {
			n := rapid.IntRange(1, len(rest)).Draw(rt, "cut")
			for _, e := range p.Feed(rest[:n]) {
				if e.Call != nil {
					calls = append(calls, *e.Call)
				}
				content.WriteString(e.Content)
			}
			rest = rest[n:]
		}
		for _, e := range p.Finish() {
			if e.Call != nil {
				calls = append(calls, *e.Call)
			}
			content.WriteString(e.Content)
		}
		if content.String() != wantContent || !reflect.DeepEqual(calls, wantCalls) {
			rt.Fatalf("got %q %+v, want %q %+v", content.String(), calls, wantContent, wantCalls)
		}
	})
}

// TestDetect: the format of each shipped template that teaches one
// (engine/chat's fixtures: llama.cpp's models/templates).
func TestDetect(t *testing.T) {
	dir := "../chat/testdata/hf/templates/"
	tests := map[string]Format{
		"Qwen-Qwen2.5-7B-Instruct.jinja":                      Hermes,
		"Qwen-Qwen3-0.6B.jinja":                               Hermes,
		"Qwen3.5-4B.jinja":                                    Hermes,
		"Qwen3-Coder.jinja":                                   Hermes,
		"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja": Hermes,
		"GLM-4.6.jinja":                                       Hermes,
		"meta-llama-Llama-3.1-8B-Instruct.jinja":              Llama3,
		"meta-llama-Llama-3.2-3B-Instruct.jinja":              Llama3,
		"meta-llama-Llama-3.3-70B-Instruct.jinja":             Llama3,
		"mistralai-Mistral-Nemo-Instruct-2407.jinja":          Mistral,
		"Mistral-Small-3.2-24B-Instruct-2506.jinja":           Mistral,
		"unsloth-mistral-Devstral-Small-2507.jinja":           Mistral,
		"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja": CommandR7B,
		"llama-cpp-deepseek-r1.jinja":                         DeepSeekR1,
		"openai-gpt-oss-120b.jinja":                           Harmony,
		"meetkai-functionary-medium-v3.1.jinja":               None,
		"google-gemma-2-2b-it.jinja":                          None,
	}
	for name, want := range tests {
		b, err := os.ReadFile(dir + name)
		if err != nil {
			t.Fatal(err)
		}
		if got := Detect(string(b)); got != want {
			t.Errorf("%s: got %v, want %v", name, got, want)
		}
	}
}

func TestNewID(t *testing.T) {
	if id := NewID(Hermes); !strings.HasPrefix(id, "call_") || len(id) != 29 {
		t.Fatalf("got %q, want call_ and 24 characters", id)
	}
	if id := NewID(Mistral); len(id) != 9 || strings.Trim(id, idAlphabet) != "" {
		t.Fatalf("got %q, want 9 letters and digits", id)
	}
	if a, b := NewID(Hermes), NewID(Hermes); a == b {
		t.Fatal("two ids are equal")
	}
}

// FuzzParse: the parser never panics, streaming agrees with the whole, and
// every call it returns has a known name and an object as arguments.
func FuzzParse(f *testing.F) {
	f.Add(0, "<tool_call>{\"name\": \"python\", \"arguments\": {}}</tool_call>", 3)
	f.Add(2, "[TOOL_CALLS]python[ARGS]{}", 5)
	f.Add(1, " {\"name\": \"python\", \"parameters\": {}}", 1)
	f.Add(5, "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>commentary to=functions.python<|message|>{}<|call|>", 40)
	f.Fuzz(func(t *testing.T, fi int, text string, cut int) {
		formats := []Format{Hermes, Llama3, Mistral, CommandR7B, DeepSeekR1, Harmony}
		fm := formats[(fi%len(formats)+len(formats))%len(formats)]
		content, calls := Parse(fm, fns, text)
		for _, c := range calls {
			if !strings.HasPrefix(c.Arguments, "{") {
				t.Fatalf("arguments %q", c.Arguments)
			}
		}
		if cut <= 0 || cut > len(text) {
			return
		}
		p := NewParser(fm, fns)
		var b strings.Builder
		n := 0
		for _, e := range append(append(p.Feed(text[:cut]), p.Feed(text[cut:])...), p.Finish()...) {
			if e.Call != nil {
				n++
			}
			b.WriteString(e.Content)
		}
		if b.String() != content || n != len(calls) {
			t.Fatalf("streamed %q (%d calls), whole %q (%d calls)", b.String(), n, content, len(calls))
		}
	})
}

// TestFrame: a frame filled with an arguments object parses back as that
// call, in every format (the contract constrained decoding relies on).
func TestFrame(t *testing.T) {
	for _, f := range []Format{Hermes, Llama3, Mistral, CommandR7B, DeepSeekR1, Harmony} {
		for _, tpl := range []string{"", "[ARGS]"} {
			pre, suf, ok := Frame(f, tpl, "get_weather")
			if !ok {
				t.Fatalf("%v: no frame", f)
			}
			content, calls := Parse(f, fns, pre+`{"location": "Paris"}`+suf)
			if content != "" || len(calls) != 1 || calls[0].Name != "get_weather" || calls[0].Arguments != `{"location":"Paris"}` {
				t.Errorf("%v %q: got %q %+v", f, tpl, content, calls)
			}
		}
	}
	if _, _, ok := Frame(None, "", "f"); ok {
		t.Error("got a frame for None")
	}
}

// TestTriggersAndSep: every frame opens with one of its format's triggers
// (Llama 3's bare JSON with the start trigger, or after the python tag), and
// two frames joined by Sep read back as two calls, with free text before
// them as content: what a lazy grammar with these triggers and separator
// produces is what the Parser reads.
func TestTriggersAndSep(t *testing.T) {
	for _, f := range []Format{Hermes, Llama3, Mistral, CommandR7B, DeepSeekR1} {
		for _, tpl := range []string{"", "[ARGS]"} {
			markers, start := Triggers(f)
			pre, suf, _ := Frame(f, tpl, "get_weather")
			pre2, suf2, _ := Frame(f, tpl, "python")
			two := pre + `{"location": "Paris"}` + suf + Sep(f) + pre2 + `{}` + suf2
			opened := start != "" && strings.HasPrefix(pre, start)
			for _, m := range markers {
				opened = opened || strings.HasPrefix(pre, m)
			}
			if !opened {
				t.Errorf("%v %q: frame %q opens with none of the triggers %q, %q", f, tpl, pre, markers, start)
			}
			var texts []string
			if start != "" {
				texts = append(texts, " "+two)
			}
			for _, m := range markers {
				lead := "Let me see. "
				if !strings.HasPrefix(pre, m) {
					lead += m
				}
				texts = append(texts, lead+two)
			}
			for _, text := range texts {
				content, calls := Parse(f, fns, text)
				if strings.HasPrefix(text, "Let") && content != "Let me see. " || !strings.HasPrefix(text, "Let") && content != "" ||
					len(calls) != 2 || calls[0].Name != "get_weather" || calls[1].Name != "python" || calls[0].Arguments != `{"location":"Paris"}` {
					t.Errorf("%v %q: %q gave %q %+v", f, tpl, text, content, calls)
				}
			}
		}
	}
}

// TestHarmonyProperties: a random sequence of harmony messages (calls to
// offered functions, in either header order, ended by <|call|>, <|end|> or,
// last, by nothing; and messages that are no call: other channels, other
// recipients, unknown functions, bodies that are no object) parses, however
// it is cut into pieces, into exactly the calls, in order, and content that
// is exactly the other messages' text, as written.
func TestHarmonyProperties(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var text, content strings.Builder
		var calls []want
		n := rapid.IntRange(0, 5).Draw(rt, "messages")
		for i := range n {
			open := rapid.SampledFrom([]string{"<|channel|>", "<|start|>assistant<|channel|>"}).Draw(rt, "open")
			if i > 0 {
				open = "<|start|>assistant<|channel|>"
			}
			if rapid.Bool().Draw(rt, "call") {
				name := rapid.SampledFrom(fns).Draw(rt, "name")
				val := rapid.SampledFrom([]string{"1", `"a b"`, `[1, {"c": null}]`, `{"d": "<|call|>"}`}).Draw(rt, "value")
				args := `{"k": ` + val + `}`
				header := open + "commentary to=functions." + name + " <|constrain|>json"
				if rapid.Bool().Draw(rt, "template order") {
					header = "<|start|>assistant to=functions." + name + "<|channel|>commentary json"
				}
				end := rapid.SampledFrom([]string{"<|call|>", "<|end|>"}).Draw(rt, "end")
				if i == n-1 && rapid.Bool().Draw(rt, "cut") {
					end = ""
				}
				text.WriteString(header + "<|message|>" + args + end)
				compact := strings.NewReplacer(": ", ":", ", ", ",").Replace(args)
				calls = append(calls, want{name, compact, ""})
				continue
			}
			msg := open + rapid.SampledFrom([]string{
				"analysis<|message|>thinking <|ch about it<|end|>",
				"final<|message|>It is 4.<|return|>",
				"commentary to=browser.search<|message|>{\"q\": 1}<|call|>",
				"commentary to=functions.rm_rf<|message|>{}<|call|>",
				"commentary to=functions.python<|message|>[1]<|call|>",
				"commentary to=functions.python<|message|>{} then text<|call|>",
			}).Draw(rt, "other")
			text.WriteString(msg)
			content.WriteString(msg)
		}
		raw := text.String()
		p := NewParser(Harmony, fns)
		var gotContent strings.Builder
		var got []want
		var evs []Event
		for rest := raw; rest != ""; {
			k := rapid.IntRange(1, len(rest)).Draw(rt, "cut at")
			evs = append(evs, p.Feed(rest[:k])...)
			rest = rest[k:]
		}
		for _, e := range append(evs, p.Finish()...) {
			if e.Call != nil {
				got = append(got, want{e.Call.Name, e.Call.Arguments, ""})
			}
			gotContent.WriteString(e.Content)
		}
		if gotContent.String() != content.String() || !reflect.DeepEqual(got, calls) {
			rt.Fatalf("%q:\ngot content %q calls %+v\nwant %q %+v", raw, gotContent.String(), got, content.String(), calls)
		}
	})
}
