package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/cloison/cloison"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/internal/rpcerr"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// The structural tags of these tests open on "<", which a prompt full of
// it makes the test model's favourite token (the context-bag model writes
// the tokens of its context, the most frequent first): it writes a
// trigger at once, then the tag's begin, JSON and end are the grammar's,
// then free text again (where "<" opens the next tag).
const (
	tagLegacy = `{"type":"structural_tag","triggers":["<"],"structures":[` +
		`{"begin":"<function=get_weather>","schema":{"type":"object","properties":{"location":{"type":"string","maxLength":8}},"required":["location"],"additionalProperties":false},"end":"</function>"},` +
		`{"begin":"<function=get_time>","schema":{"type":"object","properties":{"tz":{"enum":["utc","cet"]}},"required":["tz"],"additionalProperties":false},"end":"</function>"}]}`
	tagFormat = `{"type":"structural_tag","format":{"type":"triggered_tags","triggers":["<"],"tags":[` +
		`{"type":"tag","begin":"<function=get_weather>","content":{"type":"json_schema","json_schema":{"type":"object","properties":{"location":{"type":"string","maxLength":8}},"required":["location"],"additionalProperties":false}},"end":"</function>"}],` +
		`"at_least_one":true,"stop_after_first":true}}`
)

// checkTags is the oracle: free text holds no "<" (the trigger); from each
// "<" on, a tag up to "</function>": the begin of a listed function and
// JSON its schema accepts (decoded with encoding/json, checked by hand).
// A tag cut short (finish length) ends the text. It returns the number of
// complete tags.
func checkTags(t *testing.T, text string) int {
	t.Helper()
	n, rest := 0, text
	for {
		i := strings.Index(rest, "<")
		if i < 0 {
			return n
		}
		rest = rest[i:]
		j := strings.Index(rest, "</function>")
		if j < 0 {
			return n
		}
		s := rest[:j]
		rest = rest[j+len("</function>"):]
		name, args, ok := strings.Cut(strings.TrimPrefix(s, "<function="), ">")
		if !strings.HasPrefix(s, "<function=") || !ok {
			t.Fatalf("tag %d of %q: %q is no begin", n, text, s)
		}
		var v map[string]any
		dec := json.NewDecoder(strings.NewReader(args))
		if err := dec.Decode(&v); err != nil || strings.TrimSpace(args[dec.InputOffset():]) != "" {
			t.Fatalf("tag %d of %q: %q is not one JSON object (%v)", n, text, args, err)
		}
		switch name {
		case "get_weather":
			loc, ok := v["location"].(string)
			if !ok || len(v) != 1 || len([]rune(loc)) > 8 {
				t.Fatalf("tag %d of %q: get_weather's arguments %v", n, text, v)
			}
		case "get_time":
			if tz := v["tz"]; len(v) != 1 || (tz != "utc" && tz != "cet") {
				t.Fatalf("tag %d of %q: get_time's arguments %v", n, text, v)
			}
		default:
			t.Fatalf("tag %d of %q: function %q", n, text, name)
		}
		n++
	}
}

// TestStructuralTagHTTP: chat completions constrained by a structural tag
// (response_format of type structural_tag in both of XGrammar's forms, and
// vLLM's structured_outputs.structural_tag as JSON text) write tags the
// oracle accepts although the model is random; bad shapes are refused
// with a typed 400 naming what is wrong.
func TestStructuralTagHTTP(t *testing.T) {
	p, _ := dialectPlatform(t)
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	js := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	chat := func(extra string) (int, []byte) {
		resp, b := request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"`+platformtest.Model+`","messages":[{"role":"user","content":"<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<<"}],"max_tokens":400,"temperature":1`+extra+`}`)
		return resp.StatusCode, b
	}
	for _, tc := range []struct {
		name, extra string
		stop        bool // stop_after_first: one tag, then the end
		compact     bool // disable_any_whitespace: no whitespace in a tag
	}{
		{"response_format legacy", `,"response_format":` + tagLegacy, false, false},
		{"response_format format", `,"response_format":` + tagFormat, true, false},
		{"structured_outputs", `,"structured_outputs":{"structural_tag":` + js(tagLegacy) + `}`, false, false},
		{"structured_outputs compact", `,"structured_outputs":{"structural_tag":` + js(tagFormat) + `,"disable_any_whitespace":true}`, true, true},
	} {
		for seed := range 3 {
			code, b := chat(`,"seed":` + strconv.Itoa(seed+1) + tc.extra)
			var v struct {
				Choices []struct {
					Message      struct{ Content string }
					FinishReason string `json:"finish_reason"`
				}
			}
			if code != 200 || json.Unmarshal(b, &v) != nil || len(v.Choices) != 1 {
				t.Fatalf("%s: %d %s", tc.name, code, b)
			}
			text, fin := v.Choices[0].Message.Content, v.Choices[0].FinishReason
			n := checkTags(t, text)
			if tc.compact && strings.ContainsAny(text, " \t\r\n") {
				t.Fatalf("%s: %q has whitespace in its tag", tc.name, text)
			}
			if tc.stop && (fin != "stop" || n != 1 || !strings.HasSuffix(text, "</function>")) {
				t.Fatalf("%s: %q finished %s, want one tag and stop", tc.name, text, fin)
			}
			if !tc.stop && (n < 1 || !strings.HasPrefix(text, "<function=")) {
				t.Fatalf("%s: %q (%s), want a tag first", tc.name, text, fin)
			}
		}
	}
	for _, c := range []struct{ extra, code, says string }{
		{`,"response_format":{"type":"structural_tag","structures":[],"triggers":["<"]}`, "invalid_request_error", "1 to 64 structures"},
		{`,"response_format":{"type":"structural_tag","structures":[{"begin":"<a>","schema":{},"end":""}],"triggers":["<","["]}`, "invalid_request_error", `trigger "[" opens no tag`},
		{`,"response_format":{"type":"structural_tag","structures":[{"begin":"<a>","schema":{},"end":"","max":1}],"triggers":["<"]}`, "invalid_request_error", `unknown key "max"`},
		{`,"response_format":{"type":"structural_tag","structures":[{"begin":"<a>","schema":{},"end":""}],"triggers":["<"],"strict":true}`, "invalid_request_error", `unknown key "strict"`},
		{`,"response_format":{"type":"structural_tag","format":{"type":"sequence"}}`, "unsupported", `format type "sequence"`},
		{`,"response_format":{"type":"structural_tag","structures":[{"begin":"<a>","schema":{"not":{"minimum":3}},"end":""}],"triggers":["<"]}`, "unsupported", "not"},
		{`,"structured_outputs":{"structural_tag":{"type":"structural_tag"}}`, "invalid_request_error", "structural_tag: strings"},
		{`,"structured_outputs":{"structural_tag":"{}"}`, "invalid_request_error", "structural_tag.type is required"},
		{`,"structured_outputs":{"structural_tag":` + js(tagLegacy) + `,"regex":"a"}`, "invalid_request_error", "one structured output"},
		{`,"response_format":` + tagLegacy + `,"guided_regex":"a"`, "invalid_request_error", "exclusive"},
		{`,"response_format":{"type":"json_object","triggers":["<"]}`, "invalid_request_error", "only for type structural_tag"},
	} {
		code, b := chat(c.extra)
		var e struct {
			Error struct{ Code, Message string }
		}
		if code != 400 || json.Unmarshal(b, &e) != nil || e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.says) {
			t.Errorf("%.90s: %d %s, want 400 %s saying %q", c.extra, code, b, c.code, c.says)
		}
	}
}

// TestStructuralTagGRPC: the same over gRPC (ResponseFormat type
// structural_tag, the object in structural_tag), and its refusals.
func TestStructuralTagGRPC(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	conn, _ := p.GRPC(t)
	client := inferencev1.NewInferenceServiceClient(conn)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+p.Token(t, "victim", tenancy.ScopeInfer))
	gen := func(rf *inferencev1.ResponseFormat, seed int64) (string, string, error) {
		temp, maxTok := 1.0, int64(400)
		st, err := client.Generate(ctx, &inferencev1.GenerateRequest{Model: platformtest.Model,
			Prompt:    &inferencev1.GenerateRequest_Chat{Chat: &inferencev1.ChatMessages{Messages: []*inferencev1.ChatMessage{{Role: "user", Content: strings.Repeat("<", 64)}}}},
			MaxTokens: &maxTok, Temperature: &temp, Seed: &seed, ResponseFormat: rf})
		if err != nil {
			return "", "", err
		}
		text := ""
		for {
			r, err := st.Recv()
			if errors.Is(err, io.EOF) {
				return text, "", errors.New("no final")
			}
			if err != nil {
				return "", "", err
			}
			if f := r.GetFinal(); f != nil {
				return text, f.GetFinishReason(), nil
			}
			text += r.GetChunk().GetText()
		}
	}
	for seed := range int64(3) {
		text, fin, err := gen(&inferencev1.ResponseFormat{Type: "structural_tag", StructuralTag: tagFormat}, seed+1)
		if err != nil || fin != "stop" || checkTags(t, text) != 1 {
			t.Fatalf("format: %q %s %v, want one tag and stop", text, fin, err)
		}
		text, _, err = gen(&inferencev1.ResponseFormat{Type: "structural_tag", StructuralTag: tagLegacy}, seed+1)
		if err != nil || checkTags(t, text) < 1 {
			t.Fatalf("legacy: %q %v, want a tag", text, err)
		}
	}
	for _, c := range []struct {
		rf         *inferencev1.ResponseFormat
		code, says string
	}{
		{&inferencev1.ResponseFormat{Type: "structural_tag"}, "invalid_request_error", "must be a JSON object"},
		{&inferencev1.ResponseFormat{Type: "json_object", StructuralTag: tagLegacy}, "invalid_request_error", "only for type structural_tag"},
		{&inferencev1.ResponseFormat{Type: "structural_tag", StructuralTag: `{"type":"structural_tag","structures":[{"begin":"<a>","schema":{},"end":""}],"triggers":["["]}`},
			"invalid_request_error", "does not start with a trigger"},
		{&inferencev1.ResponseFormat{Type: "structural_tag", StructuralTag: tagLegacy, JsonSchema: &inferencev1.JsonSchema{Name: "x", Schema: "{}"}},
			"invalid_request_error", "only for type json_schema"},
	} {
		_, _, err := gen(c.rf, 1)
		code, _ := rpcerr.Code(err)
		if status.Code(err) != codes.InvalidArgument || string(code) != c.code || !strings.Contains(status.Convert(err).Message(), c.says) {
			t.Errorf("%v: %v (%s), want INVALID_ARGUMENT %s saying %q", c.rf, err, code, c.code, c.says)
		}
	}
}
