package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/sample"
)

func TestDecodeCompletion(t *testing.T) {
	tests := []struct {
		name string
		body string
		want error
	}{
		{"minimal", `{"model":"m","prompt":"hi"}`, nil},
		{"token ids", `{"model":"m","prompt":[1,2,3],"max_tokens":5}`, nil},
		{"one-element list", `{"model":"m","prompt":["hi"]}`, nil},
		{"batch of prompts", `{"model":"m","prompt":["a","b"]}`, nil},
		{"token id out of range", `{"model":"m","prompt":[-1]}`, ErrBadField},
		{"malformed JSON", `{"model":"m",`, ErrBadJSON},
		{"trailing data", `{"model":"m","prompt":"x"} {}`, ErrBadJSON},
		{"invalid UTF-8", "{\"model\":\"m\",\"prompt\":\"\xff\xfe\"}", ErrBadUTF8},
		{"negative max_tokens", `{"model":"m","prompt":"x","max_tokens":-5}`, ErrBadField},
		{"zero max_tokens", `{"model":"m","prompt":"x","max_tokens":0}`, ErrBadField},
		{"huge max_tokens is admission's business", `{"model":"m","prompt":"x","max_tokens":99999999999999}`, nil},
		{"max_tokens not a number", `{"model":"m","prompt":"x","max_tokens":"ten"}`, ErrBadField},
		{"max_tokens overflows int64", `{"model":"m","prompt":"x","max_tokens":1e30}`, ErrBadField},
		{"missing model", `{"prompt":"x"}`, ErrBadField},
		{"missing prompt", `{"model":"m"}`, ErrBadField},
		{"n = 2", `{"model":"m","prompt":"x","n":2}`, nil},
		{"n = 0", `{"model":"m","prompt":"x","n":0}`, ErrBadField},
		{"echo", `{"model":"m","prompt":"x","echo":true}`, nil},
		{"echo with logprobs", `{"model":"m","prompt":"x","echo":true,"logprobs":2}`, nil},
		{"echo with max_tokens 0", `{"model":"m","prompt":"x","echo":true,"max_tokens":0}`, nil},
		{"max_tokens 0 without echo", `{"model":"m","prompt":"x","max_tokens":0}`, ErrBadField},
		{"echo with max_tokens -1", `{"model":"m","prompt":"x","echo":true,"max_tokens":-1}`, ErrBadField},
		{"echo false with logprobs", `{"model":"m","prompt":"x","echo":false,"logprobs":2}`, nil},
		{"temperature out of range", `{"model":"m","prompt":"x","temperature":7}`, sample.ErrInvalidParams},
		{"five stops", `{"model":"m","prompt":"x","stop":["a","b","c","d","e"]}`, ErrBadField},
		{"stop as string", `{"model":"m","prompt":"x","stop":"\n"}`, nil},
		{"logprobs too many", `{"model":"m","prompt":"x","logprobs":50}`, ErrBadField},
		{"not an object", `[1,2]`, ErrBadField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeCompletion(strings.NewReader(tt.body), DefaultMaxBody)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	big := `{"model":"m","prompt":"` + strings.Repeat("a", 2000) + `"}`
	if _, err := DecodeCompletion(strings.NewReader(big), 1000); !errors.Is(err, ErrBodyTooLarge) {
		t.Fatalf("got %v, want ErrBodyTooLarge", err)
	}
}

func TestDecodeChat(t *testing.T) {
	r, err := DecodeChat(strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"Salut"}],"max_completion_tokens":7,"seed":3,"top_logprobs":2,"logprobs":true}`), DefaultMaxBody)
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxNew() != 7 || r.Messages[0].Content != "Salut" {
		t.Fatalf("got %+v", r)
	}
	if p := r.Sampling(true, 2); p.Seed != 3 || p.Temperature != 1 || !p.Logprobs {
		t.Fatalf("sampling %+v", p)
	}
	if _, err := DecodeChat(strings.NewReader(`{"model":"m","messages":[]}`), DefaultMaxBody); !errors.Is(err, ErrBadField) {
		t.Fatalf("got %v, want ErrBadField", err)
	}
}

// FuzzDecode: decoding never panics, and whatever it accepts validates.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"model":"m","prompt":"hi"}`, `{"model":"m","prompt":[1,2]}`, `{"model":"m","messages":[{"role":"user","content":"x"}]}`, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url"}]}]}`, `{`, "\xff",
		`{"model":"m","messages":[{"role":"user","content":"x"}],"logit_bias":{"5":-100},"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"anyOf":[{"type":"string"},{"$ref":"#"}]}}}}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if r, err := DecodeCompletion(strings.NewReader(string(b)), DefaultMaxBody); err == nil {
			if r.Prompt == nil || r.Model == "" || r.MaxNew() < 1 {
				t.Fatalf("accepted an invalid request: %+v", r)
			}
		}
		if r, err := DecodeChat(strings.NewReader(string(b)), DefaultMaxBody); err == nil {
			if len(r.Messages) == 0 || r.Model == "" {
				t.Fatalf("accepted an invalid request: %+v", r)
			}
		}
	})
}
