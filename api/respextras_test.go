package api_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestResponsesLogprobs: include message.output_text.logprobs with
// top_logprobs gives the output_text part OpenAI's logprobs (token,
// logprob, bytes, top_logprobs), equal to the chat completion's for the
// same conversation; streamed, the output_text.delta events carry them
// and together equal the non-streamed ones. Without include they are [].
func TestResponsesLogprobs(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim"}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	m := platformtest.Model
	body := `{"model":"` + m + `","input":"the cat sat on the mat","max_output_tokens":6,"temperature":0,"include":["message.output_text.logprobs"],"top_logprobs":2}`
	resp, b := request(t, "POST", p.URL+"/v1/responses", tok, body)
	var r api.Response
	if err := json.Unmarshal(b, &r); resp.StatusCode != 200 || err != nil || len(r.Output) == 0 || len(r.Output[0].Content) == 0 {
		t.Fatalf("%d %s (%v)", resp.StatusCode, b, err)
	}
	part := r.Output[0].Content[0]
	if len(part.Logprobs) != r.Usage.OutputTokens || r.Usage.OutputTokens == 0 {
		t.Fatalf("%d logprobs for %d output tokens: %s", len(part.Logprobs), r.Usage.OutputTokens, b)
	}
	// The chat completion of the same conversation: the same logprobs.
	resp, cb := request(t, "POST", p.URL+"/v1/chat/completions", tok, `{"model":"`+m+`","messages":[{"role":"user","content":"the cat sat on the mat"}],"max_tokens":6,"temperature":0,"logprobs":true,"top_logprobs":2}`)
	var c api.ChatCompletion
	if err := json.Unmarshal(cb, &c); resp.StatusCode != 200 || err != nil || c.Choices[0].Logprobs == nil {
		t.Fatalf("chat: %d %s", resp.StatusCode, cb)
	}
	want := c.Choices[0].Logprobs.Content
	if len(want) != len(part.Logprobs) {
		t.Fatalf("got %d logprobs, chat has %d", len(part.Logprobs), len(want))
	}
	text := ""
	for i, lp := range part.Logprobs {
		w := want[i]
		if lp.Token != w.Token || lp.Logprob != w.Logprob || !reflect.DeepEqual(lp.Bytes, w.Bytes) || len(lp.TopLogprobs) != 2 || len(w.TopLogprobs) != 2 {
			t.Fatalf("token %d: got %+v, chat %+v", i, lp, w)
		}
		for k, alt := range lp.TopLogprobs {
			if alt.Token != w.TopLogprobs[k].Token || alt.Logprob != w.TopLogprobs[k].Logprob {
				t.Fatalf("token %d alternative %d: got %+v, chat %+v", i, k, alt, w.TopLogprobs[k])
			}
		}
		text += lp.Token
	}
	if !strings.HasPrefix(text, part.Text) {
		t.Fatalf("tokens spell %q, text %q", text, part.Text)
	}

	t.Run("stream", func(t *testing.T) {
		resp, sb := request(t, "POST", p.URL+"/v1/responses", tok, strings.Replace(body, `"temperature":0`, `"temperature":0,"stream":true`, 1))
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, sb)
		}
		var got, done []api.RespLogprob
		for _, line := range strings.Split(string(sb), "\n") {
			data, ok := strings.CutPrefix(line, "data: ")
			if !ok {
				continue
			}
			var ev struct {
				Type     string            `json:"type"`
				Logprobs []api.RespLogprob `json:"logprobs"`
			}
			if err := json.Unmarshal([]byte(data), &ev); err != nil {
				t.Fatalf("bad event %s", data)
			}
			switch ev.Type {
			case "response.output_text.delta":
				if ev.Logprobs == nil {
					t.Fatalf("delta without logprobs: %s", data)
				}
				got = append(got, ev.Logprobs...)
			case "response.output_text.done":
				done = ev.Logprobs
			}
		}
		if len(got) == 0 || !reflect.DeepEqual(done, part.Logprobs) || !reflect.DeepEqual(got, part.Logprobs[:len(got)]) {
			t.Fatalf("streamed deltas %+v, done %+v; want %+v", got, done, part.Logprobs)
		}
	})
	t.Run("without include", func(t *testing.T) {
		resp, b := request(t, "POST", p.URL+"/v1/responses", tok, `{"model":"`+m+`","input":"the cat","max_output_tokens":3,"temperature":0}`)
		if resp.StatusCode != 200 || !strings.Contains(string(b), `"logprobs":[]`) {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	})
	t.Run("other include values refused", func(t *testing.T) {
		resp, b := request(t, "POST", p.URL+"/v1/responses", tok, `{"model":"`+m+`","input":"x","include":["file_search_call.results"]}`)
		if resp.StatusCode != 400 || !strings.Contains(string(b), "file_search_call.results") {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	})
}

// TestResponsesInputItems: GET /v1/responses/{id}/input_items lists the
// stored response's input items (the previous responses' turns, then its
// own input; not its output; a developer message reads as system, as the
// conversation keeps it), newest first by default, with order, limit
// and after; another tenant's id, an unknown one and a store: false
// response are 404; other query parameters 400.
func TestResponsesInputItems(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"victim", "attacker"}})
	tok := "Bearer " + p.Token(t, "victim", tenancy.ScopeInfer)
	other := "Bearer " + p.Token(t, "attacker", tenancy.ScopeInfer)
	m := platformtest.Model
	create := func(body string) api.Response {
		t.Helper()
		resp, b := request(t, "POST", p.URL+"/v1/responses", tok, body)
		var r api.Response
		if err := json.Unmarshal(b, &r); resp.StatusCode != 200 || err != nil {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		return r
	}
	first := create(`{"model":"` + m + `","input":[{"role":"developer","content":"be brief"},{"role":"user","content":"hello there"}],"instructions":"sys","max_output_tokens":3,"temperature":0,"store":true}`)
	second := create(`{"model":"` + m + `","input":"and then?","max_output_tokens":2,"temperature":0,"store":true,"previous_response_id":"` + first.ID + `"}`)
	list := func(auth, id, query string) (int, api.RespItemList, string) {
		t.Helper()
		resp, b := request(t, "GET", p.URL+"/v1/responses/"+id+"/input_items"+query, auth, "")
		var l api.RespItemList
		if resp.StatusCode == 200 {
			if err := json.Unmarshal(b, &l); err != nil {
				t.Fatalf("%s: %v", b, err)
			}
		}
		return resp.StatusCode, l, string(b)
	}
	texts := func(l api.RespItemList) []string {
		var out []string
		for _, it := range l.Data {
			if it.Type != "message" || len(it.Content) != 1 {
				t.Fatalf("item %+v", it)
			}
			out = append(out, it.Role+":"+it.Content[0].Type+":"+it.Content[0].Text)
		}
		return out
	}
	code, l, b := list(tok, first.ID, "?order=asc")
	if want := []string{"system:input_text:be brief", "user:input_text:hello there"}; code != 200 || !reflect.DeepEqual(texts(l), want) || l.HasMore || l.Object != "list" {
		t.Fatalf("first, asc: %d %s; want %v", code, b, want)
	}
	code, l, b = list(tok, second.ID, "")
	firstOut := first.Output[0].Content[0].Text
	want := []string{"user:input_text:and then?", "assistant:output_text:" + firstOut, "user:input_text:hello there", "system:input_text:be brief"}
	if code != 200 || !reflect.DeepEqual(texts(l), want) || *l.FirstID != l.Data[0].ID || *l.LastID != l.Data[3].ID {
		t.Fatalf("second, default order: %d %s; want %v", code, b, want)
	}
	all := l.Data
	code, l, b = list(tok, second.ID, "?limit=2")
	if code != 200 || len(l.Data) != 2 || !l.HasMore || l.Data[0].ID != all[0].ID {
		t.Fatalf("limit 2: %d %s", code, b)
	}
	code, l, b = list(tok, second.ID, "?limit=2&after="+l.Data[1].ID)
	if code != 200 || len(l.Data) != 2 || l.HasMore || l.Data[0].ID != all[2].ID || l.Data[1].ID != all[3].ID {
		t.Fatalf("after: %d %s", code, b)
	}
	unstored := create(`{"model":"` + m + `","input":"x","max_output_tokens":1}`)
	for _, tc := range []struct {
		name, auth, id, query string
		code                  int
	}{
		{"another tenant's", other, second.ID, "", 404},
		{"unknown", tok, "resp_nope", "", 404},
		{"store false", tok, unstored.ID, "", 404},
		{"bad order", tok, second.ID, "?order=up", 400},
		{"bad limit", tok, second.ID, "?limit=101", 400},
		{"unknown after", tok, second.ID, "?after=msg_x", 400},
		{"include", tok, second.ID, "?include=message.input_image.image_url", 400},
	} {
		if code, _, b := list(tc.auth, tc.id, tc.query); code != tc.code {
			t.Errorf("%s: got %d %s, want %d", tc.name, code, b, tc.code)
		}
	}
}
