package api

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/cloison/cloison"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
)

// Fields Cloison does not implement are refused with 400 unsupported naming
// the field, on both endpoints, never accepted and ignored: a client must not
// believe a setting applied that was not.
func TestUnsupportedFields(t *testing.T) {
	const chatMsgs = `"messages":[{"role":"user","content":"hi"}]`
	tests := []struct {
		name  string
		chat  bool
		body  string
		field string // "" : accepted
	}{
		{"completion: tools is not a completions field", false, `{"model":"m","prompt":"x","tools":[{"type":"function"}]}`, "tools"},
		{"completion: logit_bias", false, `{"model":"m","prompt":"x","logit_bias":{"50256":-100}}`, ""},
		{"completion: empty logit_bias is neutral", false, `{"model":"m","prompt":"x","logit_bias":{}}`, ""},
		{"completion: suffix (the model decides: TestCompletionsSuffix)", false, `{"model":"m","prompt":"x","suffix":"end"}`, ""},
		{"completion: suffix with token ids", false, `{"model":"m","prompt":[1,2],"suffix":"end"}`, "suffix"},
		{"completion: echo with suffix", false, `{"model":"m","prompt":"x","suffix":"end","echo":true}`, "suffix"},
		{"completion: null suffix is absent", false, `{"model":"m","prompt":"x","suffix":null}`, ""},
		{"completion: best_of 3", false, `{"model":"m","prompt":"x","best_of":3}`, "best_of"},
		{"completion: best_of 1", false, `{"model":"m","prompt":"x","best_of":1}`, ""},
		{"completion: echo", false, `{"model":"m","prompt":"x","echo":true}`, ""},
		{"completion: echo with logprobs", false, `{"model":"m","prompt":"x","echo":true,"logprobs":0}`, ""},
		{"completion: unknown field", false, `{"model":"m","prompt":"x","guided_foo":{}}`, "guided_foo"},
		{"completion: user is ignored", false, `{"model":"m","prompt":"x","user":"u-1"}`, ""},
		{"completion: messages belong to chat", false, `{"model":"m","prompt":"x",` + chatMsgs + `}`, "messages"},
		{"chat: tools", true, `{"model":"m",` + chatMsgs + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, ""},
		{"chat: tool of another type", true, `{"model":"m",` + chatMsgs + `,"tools":[{"type":"custom","custom":{"name":"f"}}]}`, "custom"},
		{"chat: unknown tool field", true, `{"model":"m",` + chatMsgs + `,"tools":[{"type":"function","function":{"name":"f","returns":{}}}]}`, "returns"},
		{"chat: empty tools", true, `{"model":"m",` + chatMsgs + `,"tools":[]}`, ""},
		{"chat: tool_choice required", true, `{"model":"m",` + chatMsgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"required"}`, ""},
		{"chat: tool_choice named", true, `{"model":"m",` + chatMsgs + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`, ""},
		{"chat: strict tool", true, `{"model":"m",` + chatMsgs + `,"tools":[{"type":"function","function":{"name":"f","strict":true}}]}`, ""},
		{"chat: tool_choice none", true, `{"model":"m",` + chatMsgs + `,"tool_choice":"none"}`, ""},
		{"chat: response_format json", true, `{"model":"m",` + chatMsgs + `,"response_format":{"type":"json_object"}}`, ""},
		{"chat: response_format unknown field", true, `{"model":"m",` + chatMsgs + `,"response_format":{"type":"json_object","guided":1}}`, "guided"},
		{"chat: json_schema unknown field", true, `{"model":"m",` + chatMsgs + `,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{},"extra":1}}}`, "extra"},
		{"chat: response_format type", true, `{"model":"m",` + chatMsgs + `,"response_format":{"type":"grammar"}}`, "grammar"},
		{"chat: response_format text", true, `{"model":"m",` + chatMsgs + `,"response_format":{ "type" : "text" }}`, ""},
		{"chat: logit_bias", true, `{"model":"m",` + chatMsgs + `,"logit_bias":{"1":5}}`, ""},
		{"chat: store true", true, `{"model":"m",` + chatMsgs + `,"store":true}`, "store"},
		{"chat: chat_template", true, `{"model":"m",` + chatMsgs + `,"chat_template":"x"}`, "chat_template"},
		{"chat: unknown field", true, `{"model":"m",` + chatMsgs + `,"chat_template_vars":{}}`, "chat_template_vars"},
		{"chat: field names are exact", true, `{"model":"m",` + chatMsgs + `,"Tools":[{}]}`, "Tools"},
		{"chat: suffix is a completions field", true, `{"model":"m",` + chatMsgs + `,"suffix":"x"}`, "suffix"},
		{"chat: what SDKs send", true, `{"model":"m",` + chatMsgs + `,"n":1,"stream":true,"stream_options":{"include_usage":true},"user":"u","metadata":{"a":"b"},"parallel_tool_calls":true,"service_tier":"auto"}`, ""},
		{"chat: message name", true, `{"model":"m","messages":[{"role":"user","content":"hi","name":"alice"}]}`, "name"},
		{"chat: message tool_calls", true, `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, ""},
		{"chat: unknown tool call field", true, `{"model":"m","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"1","index":0}]}]}`, "index"},
		{"chat: unknown call function field", true, `{"model":"m","messages":[{"role":"assistant","content":"","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{}","x":1}}]}]}`, "x"},
		{"chat: message unknown field", true, `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"user","content":"x","cache_control":{}}]}`, "cache_control"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.chat {
				_, err = DecodeChat(strings.NewReader(tt.body), DefaultMaxBody)
			} else {
				_, err = DecodeCompletion(strings.NewReader(tt.body), DefaultMaxBody)
			}
			if tt.field == "" {
				if err != nil {
					t.Fatalf("got %v, want accepted", err)
				}
				return
			}
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("got %v, want ErrUnsupported", err)
			}
			code, wire, msg := Describe(err)
			if code != cloison.CodeUnsupported || wire.HTTP != http.StatusBadRequest {
				t.Fatalf("got %s %d, want unsupported 400", code, wire.HTTP)
			}
			if !strings.Contains(msg, `"`+tt.field+`"`) {
				t.Fatalf("got message %q, want it to name %q", msg, tt.field)
			}
		})
	}
}

// Every refused field is refused with a value that is not neutral, and
// every field the table implements is one the request struct decodes, and
// every field it decodes is in the table: tables and decoders cannot drift
// apart.
func TestFieldTables(t *testing.T) {
	tables := []struct {
		name  string
		table map[string]field
		typ   reflect.Type
	}{
		{"completions", completionFields, reflect.TypeOf(CompletionRequest{})},
		{"chat", chatFields, reflect.TypeOf(ChatRequest{})},
	}
	for _, tt := range tables {
		t.Run(tt.name, func(t *testing.T) {
			decoded := jsonFields(tt.typ)
			for name, f := range tt.table {
				if f.rule == implemented && !decoded[name] {
					t.Errorf("field %s: got implemented and not decoded by %s, want decoded", name, tt.typ)
				}
				if f.rule != refused {
					continue
				}
				body := `{"model":"m","prompt":"x","messages":[{"role":"user","content":"x"}],"` + name + `":{"unsupported":1}}`
				if err := checkFields([]byte(body), tt.table, ""); !errors.Is(err, ErrUnsupported) {
					// prompt or messages is itself refused on one endpoint:
					// check the field alone.
					if err := checkFields([]byte(`{"`+name+`":{"x":1}}`), tt.table, ""); !errors.Is(err, ErrUnsupported) {
						t.Errorf("field %s: got %v, want ErrUnsupported", name, err)
					}
				}
			}
			for name := range decoded {
				if _, ok := tt.table[name]; !ok {
					t.Errorf("field %s is decoded but not in the table", name)
				}
			}
		})
	}
}

func jsonFields(typ reflect.Type) map[string]bool {
	out := map[string]bool{}
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Anonymous {
			for k := range jsonFields(f.Type) {
				out[k] = true
			}
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" && name != "-" {
			out[name] = true
		}
	}
	return out
}

// A gRPC request with fields this server's schema does not define
// (anywhere in the message) is refused as unsupported, as unknown JSON
// fields are.
func TestUnknownProtoFields(t *testing.T) {
	unknown := protowire.AppendVarint(protowire.AppendTag(nil, 99, protowire.VarintType), 1)
	withUnknown := func(m proto.Message) proto.Message {
		m.ProtoReflect().SetUnknown(unknown)
		return m
	}
	msgs := func(extra bool) *inferencev1.ChatMessages {
		m := &inferencev1.ChatMessage{Role: "user", Content: "hi"}
		if extra {
			withUnknown(m)
		}
		return &inferencev1.ChatMessages{Messages: []*inferencev1.ChatMessage{m}}
	}
	tests := []struct {
		name string
		req  proto.Message
		want error
	}{
		{"generate", &inferencev1.GenerateRequest{Model: "m", Prompt: &inferencev1.GenerateRequest_Text{Text: "x"}}, nil},
		{"generate with an unknown field", withUnknown(&inferencev1.GenerateRequest{Model: "m"}), ErrUnsupported},
		{"generate chat", &inferencev1.GenerateRequest{Model: "m", Prompt: &inferencev1.GenerateRequest_Chat{Chat: msgs(false)}}, nil},
		{"unknown field in a chat message", &inferencev1.GenerateRequest{Model: "m", Prompt: &inferencev1.GenerateRequest_Chat{Chat: msgs(true)}}, ErrUnsupported},
		{"tokenize with an unknown field", withUnknown(&inferencev1.TokenizeRequest{Model: "m"}), ErrUnsupported},
		{"tokenize chat with an unknown field", &inferencev1.TokenizeRequest{Model: "m", Input: &inferencev1.TokenizeRequest_Chat{Chat: msgs(true)}}, ErrUnsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Through the wire encoding, as the server receives it.
			b, err := proto.Marshal(tt.req)
			if err != nil {
				t.Fatal(err)
			}
			got := tt.req.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(b, got); err != nil {
				t.Fatal(err)
			}
			err = checkProtoFields(got)
			if !errors.Is(err, tt.want) || (tt.want == nil) != (err == nil) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
}
