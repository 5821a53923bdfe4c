package api

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// TestContentParts: a list of text parts is the text the parts join to
// ("\n"); every other part type, a text part with another field and
// malformed lists get clear typed errors.
func TestContentParts(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string
		err     error
	}{
		{"string", `"Salut"`, "Salut", nil},
		{"one text part", `[{"type":"text","text":"Salut"}]`, "Salut", nil},
		{"two text parts", `[{"type":"text","text":"a"},{"type":"text","text":"b"}]`, "a\nb", nil},
		{"empty text", `[{"type":"text","text":""}]`, "", nil},
		{"image", `[{"type":"text","text":"what is this?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]`, "", ErrUnsupported},
		{"audio", `[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]`, "", ErrUnsupported},
		{"file", `[{"type":"file","file":{"file_id":"f"}}]`, "", ErrUnsupported},
		{"refusal part", `[{"type":"refusal","refusal":"no"}]`, "", ErrUnsupported},
		{"text part with cache_control", `[{"type":"text","text":"a","cache_control":{"type":"ephemeral"}}]`, "", ErrUnsupported},
		{"empty list", `[]`, "", ErrBadField},
		{"part not an object", `["a"]`, "", ErrBadField},
		{"part without type", `[{"text":"a"}]`, "", ErrBadField},
		{"text part without text", `[{"type":"text"}]`, "", ErrBadField},
		{"text not a string", `[{"type":"text","text":5}]`, "", ErrBadField},
		{"list of numbers", `[1,2]`, "", ErrBadField},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := `{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":` + tt.content + `}]}`
			r, err := DecodeChat(strings.NewReader(body), DefaultMaxBody)
			if !errors.Is(err, tt.err) || (tt.err == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), "messages[1].content") {
					t.Errorf("error %q does not name the content", err)
				}
				return
			}
			if len(r.Messages) != 2 || r.Messages[0].Content != "s" || r.Messages[1].Content != tt.want || r.Messages[1].Role != "user" {
				t.Fatalf("messages %+v, want user content %q", r.Messages, tt.want)
			}
		})
	}
}

// TestContentPartsKeepRequest: flattening the parts leaves every other
// field of the request as sent (numbers exact, tools intact).
func TestContentPartsKeepRequest(t *testing.T) {
	body := `{"model":"m","seed":9007199254740993,"max_tokens":3,"logit_bias":{"5":-100},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"tools":[{"type":"function","function":{"name":"f"}}]}`
	r, err := DecodeChat(strings.NewReader(body), DefaultMaxBody)
	if err != nil {
		t.Fatal(err)
	}
	if *r.Seed != 9007199254740993 || r.MaxNew() != 3 || r.LogitBias["5"] != -100 || len(r.Tools) != 1 || r.Messages[0].Content != "hi" {
		t.Fatalf("got %+v", r)
	}
}

// TestBearerToken: the scheme is case-insensitive; anything else is no
// token.
func TestBearerToken(t *testing.T) {
	tests := []struct {
		header, want string
		ok           bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER abc", "abc", true},
		{"bEaReR  abc ", "abc", true},
		{"Bearer ", "", false},
		{"Bearer", "", false},
		{"Basic abc", "", false},
		{"Bearerabc", "", false},
		{"", "", false},
	}
	for _, tt := range tests {
		got, ok := bearerToken(tt.header)
		if got != tt.want || ok != tt.ok {
			t.Errorf("bearerToken(%q) = %q, %v; want %q, %v", tt.header, got, ok, tt.want, tt.ok)
		}
	}
}

// TestLogprobBytes: bytes are a JSON list of integers, also for a token
// that ends inside a UTF-8 character (whose token text cannot carry it).
func TestLogprobBytes(t *testing.T) {
	piece := []byte{0xe2, 0x82} // the first two bytes of "€"
	b, err := json.Marshal(ChatTokenLogprob{Token: string(piece), Bytes: byteInts(piece)})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Bytes json.RawMessage `json:"bytes"`
	}
	if err := json.Unmarshal(b, &v); err != nil || string(v.Bytes) != `[226,130]` {
		t.Fatalf("bytes %s (%v), want [226,130]", v.Bytes, err)
	}
}
