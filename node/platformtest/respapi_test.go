package platformtest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

func call(t *testing.T, p *platformtest.Platform, method, path, token, body string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, p.URL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

type respObject struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Status            string `json:"status"`
	Store             bool   `json:"store"`
	IncompleteDetails *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output []struct {
		ID        string `json:"id"`
		Type      string `json:"type"`
		Role      string `json:"role"`
		CallID    string `json:"call_id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
		Content   []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	} `json:"output"`
	Usage struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
		TotalTokens  int `json:"total_tokens"`
	} `json:"usage"`
}

func (r respObject) text() string {
	var b strings.Builder
	for _, it := range r.Output {
		for _, c := range it.Content {
			b.WriteString(c.Text)
		}
	}
	return b.String()
}

func mustResp(t *testing.T, p *platformtest.Platform, method, path, token, body string) respObject {
	t.Helper()
	code, b := call(t, p, method, path, token, body)
	return decodeResp(t, code, b)
}

func decodeResp(t *testing.T, code int, b []byte) respObject {
	t.Helper()
	var r respObject
	if code != 200 || json.Unmarshal(b, &r) != nil || r.Object != "response" {
		t.Fatalf("got %d %s, want a response object", code, b)
	}
	return r
}

type respEvent struct {
	Type     string          `json:"type"`
	Seq      int             `json:"sequence_number"`
	Delta    string          `json:"delta"`
	Response json.RawMessage `json:"response"`
	Item     json.RawMessage `json:"item"`
}

// events parses a Responses stream: "event: T" lines matching data's type.
func events(t *testing.T, b []byte) []respEvent {
	t.Helper()
	var out []respEvent
	for _, block := range strings.Split(strings.TrimSpace(string(b)), "\n\n") {
		if strings.HasPrefix(block, ": cloison-receipt ") && !strings.Contains(block, "\n") {
			continue // an SSE comment, no event: the receipt after the last one
		}
		name, data, ok := strings.Cut(block, "\n")
		name, ok1 := strings.CutPrefix(name, "event: ")
		data, ok2 := strings.CutPrefix(data, "data: ")
		var e respEvent
		if !ok || !ok1 || !ok2 || json.Unmarshal([]byte(data), &e) != nil || e.Type != name {
			t.Fatalf("bad event block %q", block)
		}
		if e.Seq != len(out) {
			t.Fatalf("event %d has sequence_number %d", len(out), e.Seq)
		}
		out = append(out, e)
	}
	return out
}

// TestResponsesAPI runs the Responses API through the whole platform
// (policy, ledger, engine on the context-bag model, Qwen 2.5's template):
// it is the chat completion path (same prompt tokens, same greedy text),
// its stream is the typed events ending in response.completed whose deltas
// make the whole answer, forced tool calls come back as function_call
// items, text.format is enforced, and a stored response is sealed, ledgered
// by digest only, readable and deletable by its tenant alone.
func TestResponsesAPI(t *testing.T) {
	tpl := qwen(t)
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "attacker"}, API: func(c *api.Config) { c.Chat = tpl }})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	other := p.Token(t, "attacker", tenancy.ScopeInfer)
	const secret = "zanzibar quokka"
	m := platformtest.Model
	plain := `{"model":"` + m + `","input":"tell me about ` + secret + `","instructions":"be brief","max_output_tokens":6,"temperature":0}`

	t.Run("the chat completion path", func(t *testing.T) {
		r := mustResp(t, p, "POST", "/v1/responses", tok, plain)
		code, cb := post(t, p, tok, `{"model":"`+m+`","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"tell me about `+secret+`"}],"max_tokens":6,"temperature":0}`)
		var c struct {
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
			Usage struct {
				PromptTokens int `json:"prompt_tokens"`
			} `json:"usage"`
		}
		if code != 200 || json.Unmarshal(cb, &c) != nil {
			t.Fatalf("chat: %d %s", code, cb)
		}
		if r.Usage.InputTokens != c.Usage.PromptTokens || r.text() != c.Choices[0].Message.Content || r.text() == "" {
			t.Fatalf("got %d tokens %q, want the chat completion's %d %q", r.Usage.InputTokens, r.text(), c.Usage.PromptTokens, c.Choices[0].Message.Content)
		}
		if r.Status != "incomplete" || r.IncompleteDetails == nil || r.IncompleteDetails.Reason != "max_output_tokens" || r.Usage.OutputTokens != 6 ||
			r.Store || len(r.Output) != 1 || r.Output[0].Type != "message" || r.Output[0].Role != "assistant" {
			t.Fatalf("got %+v, want one assistant message, incomplete at max_output_tokens, not stored", r)
		}
		if code, b := call(t, p, "GET", "/v1/responses/"+r.ID, tok, ""); code != 404 {
			t.Fatalf("an unstored response: got %d %s, want 404", code, b)
		}
	})
	t.Run("input items equal the string", func(t *testing.T) {
		a := mustResp(t, p, "POST", "/v1/responses", tok, plain)
		b := mustResp(t, p, "POST", "/v1/responses", tok, `{"model":"`+m+`","input":[{"role":"developer","content":"be brief"},`+
			`{"type":"message","role":"user","content":[{"type":"input_text","text":"tell me about `+secret+`"}]}],"max_output_tokens":6,"temperature":0}`)
		if a.Usage.InputTokens != b.Usage.InputTokens || a.text() != b.text() {
			t.Fatalf("got %d %q, want %d %q", b.Usage.InputTokens, b.text(), a.Usage.InputTokens, a.text())
		}
	})
	t.Run("stream", func(t *testing.T) {
		whole := mustResp(t, p, "POST", "/v1/responses", tok, plain)
		code, sb := call(t, p, "POST", "/v1/responses", tok, strings.Replace(plain, `"temperature":0`, `"temperature":0,"stream":true`, 1))
		if code != 200 {
			t.Fatalf("got %d %s", code, sb)
		}
		evs := events(t, sb)
		var types []string
		var deltas strings.Builder
		for _, e := range evs {
			if len(types) == 0 || types[len(types)-1] != e.Type {
				types = append(types, e.Type)
			}
			if e.Type == "response.output_text.delta" {
				deltas.WriteString(e.Delta)
			}
		}
		want := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
			"response.output_text.delta", "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.incomplete"}
		if strings.Join(types, " ") != strings.Join(want, " ") {
			t.Fatalf("got events %v, want %v", types, want)
		}
		var last respObject
		if err := json.Unmarshal(evs[len(evs)-1].Response, &last); err != nil {
			t.Fatal(err)
		}
		if deltas.String() != whole.text() || last.text() != whole.text() || last.Usage != whole.Usage {
			t.Fatalf("got stream %q (%q, %+v), want %q (%+v)", deltas.String(), last.text(), last.Usage, whole.text(), whole.Usage)
		}
	})
	weather := `{"type":"function","name":"set_unit","description":"The unit of temperatures","parameters":{"type":"object","properties":{"unit":{"enum":["celsius","fahrenheit"]}},"required":["unit"],"additionalProperties":false}}`
	t.Run("forced tool call", func(t *testing.T) {
		body := `{"model":"` + m + `","input":"Weather in Paris?","max_output_tokens":120,"temperature":0,"tools":[` + weather + `],"tool_choice":"required"}`
		r := mustResp(t, p, "POST", "/v1/responses", tok, body)
		var args struct{ Unit string }
		if r.Status != "completed" || len(r.Output) != 1 || r.Output[0].Type != "function_call" || r.Output[0].Name != "set_unit" ||
			!strings.HasPrefix(r.Output[0].CallID, "call_") || json.Unmarshal([]byte(r.Output[0].Arguments), &args) != nil || args.Unit != "celsius" && args.Unit != "fahrenheit" {
			t.Fatalf("got %+v, want one set_unit call with a unit", r)
		}
		code, sb := call(t, p, "POST", "/v1/responses", tok, strings.Replace(body, `"temperature":0`, `"temperature":0,"stream":true`, 1))
		if code != 200 {
			t.Fatalf("got %d %s", code, sb)
		}
		var argDelta string
		var item struct{ Type, Name string }
		for _, e := range events(t, sb) {
			switch e.Type {
			case "response.function_call_arguments.delta":
				argDelta += e.Delta
			case "response.output_item.added":
				_ = json.Unmarshal(e.Item, &item)
			}
		}
		if argDelta != r.Output[0].Arguments || item.Type != "function_call" || item.Name != "set_unit" {
			t.Fatalf("got streamed %s %q, want function_call set_unit %q", item.Type, argDelta, r.Output[0].Arguments)
		}
		// The call and its output go back as items.
		next := `{"model":"` + m + `","input":[{"role":"user","content":"Weather in Paris?"},{"type":"function_call","call_id":"call_1","name":"set_unit","arguments":"{\"unit\":\"celsius\"}"},` +
			`{"type":"function_call_output","call_id":"call_1","output":"18C"}],"max_output_tokens":2,"tools":[` + weather + `]}`
		mustResp(t, p, "POST", "/v1/responses", tok, next)
	})
	t.Run("text.format json_schema", func(t *testing.T) {
		body := `{"model":"` + m + `","input":"a city","max_output_tokens":64,"temperature":0,"text":{"format":{"type":"json_schema","name":"city","strict":true,` +
			`"schema":{"type":"object","properties":{"ok":{"type":"boolean"}},"required":["ok"],"additionalProperties":false}}}}`
		r := mustResp(t, p, "POST", "/v1/responses", tok, body)
		var v struct{ OK *bool }
		if r.Status != "completed" || json.Unmarshal([]byte(r.text()), &v) != nil || v.OK == nil {
			t.Fatalf("got %q (%s), want {\"ok\": bool}", r.text(), r.Status)
		}
	})

	t.Run("store, retrieve, previous_response_id, delete", func(t *testing.T) {
		stored := mustResp(t, p, "POST", "/v1/responses", tok, strings.Replace(plain, `"temperature":0`, `"temperature":0,"store":true`, 1))
		if !stored.Store || stored.text() == "" {
			t.Fatalf("got %+v", stored)
		}
		code, b := call(t, p, "GET", "/v1/responses/"+stored.ID, tok, "")
		if got := decodeResp(t, code, b); got.ID != stored.ID || got.text() != stored.text() || got.Usage != stored.Usage {
			t.Fatalf("got %+v, want %+v", got, stored)
		}
		// Another tenant: not found, on every route, and nothing deleted.
		for _, c := range []struct{ method, path, body string }{
			{"GET", "/v1/responses/" + stored.ID, ""},
			{"DELETE", "/v1/responses/" + stored.ID, ""},
			{"POST", "/v1/responses", `{"model":"` + m + `","input":"more","previous_response_id":"` + stored.ID + `"}`},
		} {
			if code, b := call(t, p, c.method, c.path, other, c.body); code != 404 {
				t.Fatalf("%s %s by another tenant: got %d %s, want 404", c.method, c.path, code, b)
			}
		}
		// The row holds the sealed blob, not the text; the ledger its digest.
		var sealed []byte
		if err := p.DB.AdminPool(t).QueryRow(context.Background(), `SELECT sealed FROM stored_responses WHERE id = $1 AND tenant = 'victim'`, stored.ID).Scan(&sealed); err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(sealed, []byte("be brief")) || len(stored.text()) >= 8 && bytes.Contains(sealed, []byte(stored.text())) {
			t.Fatal("the stored row holds the text in the clear")
		}
		sum := sha256.Sum256(sealed)
		// previous_response_id: the conversation continues from the stored one.
		follow := mustResp(t, p, "POST", "/v1/responses", tok, `{"model":"`+m+`","input":"and then?","previous_response_id":"`+stored.ID+`","max_output_tokens":2}`)
		fresh := mustResp(t, p, "POST", "/v1/responses", tok, `{"model":"`+m+`","input":"and then?","max_output_tokens":2}`)
		if follow.Usage.InputTokens <= fresh.Usage.InputTokens+stored.Usage.OutputTokens {
			t.Fatalf("got %d input tokens with the previous response, %d without: the history is missing", follow.Usage.InputTokens, fresh.Usage.InputTokens)
		}
		if code, b := call(t, p, "DELETE", "/v1/responses/"+stored.ID, tok, ""); code != 200 || !strings.Contains(string(b), `"deleted":true`) {
			t.Fatalf("delete: got %d %s", code, b)
		}
		for _, method := range []string{"GET", "DELETE"} {
			if code, b := call(t, p, method, "/v1/responses/"+stored.ID, tok, ""); code != 404 {
				t.Fatalf("%s after delete: got %d %s, want 404", method, code, b)
			}
		}
		var storedEv, deletedEv bool
		if err := p.Ledger.Scan(context.Background(), 1, 0, func(r audit.Record) error {
			if strings.Contains(string(r.Payload), "zanzibar") || strings.Contains(string(r.Payload), "quokka") {
				t.Errorf("text in ledger entry %d: %s", r.Seq, r.Payload)
			}
			env, err := audit.DecodeEnvelope(r.Payload)
			if err != nil {
				return err
			}
			switch env.Kind {
			case audit.KindResponseStored, audit.KindResponseDeleted:
				pl, err := env.DecodePayload()
				if err != nil {
					return err
				}
				switch e := pl.(type) {
				case *audit.ResponseStored:
					storedEv = storedEv || e.Response == audit.Name(stored.ID) && e.Sealed == sum && e.Bytes == int64(len(sealed)) && env.Tenant == "victim"
				case *audit.ResponseDeleted:
					deletedEv = deletedEv || e.Response == audit.Name(stored.ID) && e.Sealed == sum && env.Tenant == "victim"
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !storedEv || !deletedEv {
			t.Fatalf("ledger: response.stored %v, response.deleted %v (digest %s), want both", storedEv, deletedEv, hex.EncodeToString(sum[:]))
		}
	})

	// Fail closed: a response that cannot be stored is not answered as
	// stored — 503 whole, an error event (never response.completed) streamed.
	t.Run("a store that fails fails the response", func(t *testing.T) {
		admin := p.DB.AdminPool(t)
		if _, err := admin.Exec(context.Background(), `REVOKE INSERT ON stored_responses FROM `+p.DB.Roles.Runtime); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if _, err := admin.Exec(context.Background(), `GRANT INSERT ON stored_responses TO `+p.DB.Roles.Runtime); err != nil {
				t.Fatal(err)
			}
		}()
		body := strings.Replace(plain, `"temperature":0`, `"temperature":0,"store":true`, 1)
		if code, b := call(t, p, "POST", "/v1/responses", tok, body); code != 503 {
			t.Fatalf("got %d %s, want 503", code, b)
		}
		code, sb := call(t, p, "POST", "/v1/responses", tok, strings.Replace(body, `"store":true`, `"store":true,"stream":true`, 1))
		evs := events(t, sb)
		if code != 200 || evs[len(evs)-1].Type != "error" {
			t.Fatalf("got %d, last event %s, want an error event", code, evs[len(evs)-1].Type)
		}
		for _, e := range evs {
			if e.Type == "response.completed" || e.Type == "response.incomplete" {
				t.Fatalf("got %s on a response that was not stored", e.Type)
			}
		}
	})

	for _, tt := range []struct{ name, extra, want string }{
		{"include", `,"include":["reasoning.encrypted_content"]`, "include"},
		{"reasoning", `,"reasoning":{"effort":"high"}`, "reasoning"},
		{"background", `,"background":true`, "background"},
		{"hosted tool", `,"tools":[{"type":"web_search"}]`, "web_search"},
		{"unknown field", `,"frobnicate":1`, "frobnicate"},
		{"verbosity", `,"text":{"verbosity":"low"}`, "verbosity"},
	} {
		t.Run("refused "+tt.name, func(t *testing.T) {
			code, b := call(t, p, "POST", "/v1/responses", tok, `{"model":"`+m+`","input":"hi"`+tt.extra+`}`)
			if code != 400 || !strings.Contains(string(b), tt.want) {
				t.Fatalf("got %d %s, want 400 naming %s", code, b, tt.want)
			}
		})
	}
	t.Run("refused image input", func(t *testing.T) {
		code, b := call(t, p, "POST", "/v1/responses", tok, `{"model":"`+m+`","input":[{"role":"user","content":[{"type":"input_image","image_url":"https://x"}]}]}`)
		if code != 400 || !strings.Contains(string(b), "input_image") {
			t.Fatalf("got %d %s, want 400 naming input_image", code, b)
		}
	})
}
