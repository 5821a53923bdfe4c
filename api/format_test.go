package api

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/engine/grammar"
)

// response_format and logit_bias: what DecodeChat accepts (and whether it
// constrains), and what it refuses with which code, the message naming the
// field or schema feature.
func TestResponseFormatAndLogitBias(t *testing.T) {
	const msgs = `"model":"m","messages":[{"role":"user","content":"x"}]`
	obj := `{"type":"object","properties":{"a":{"type":"string"}},"required":["a"],"additionalProperties":false}`
	tests := []struct {
		name      string
		extra     string
		constrain bool
		code      cloison.Code // "" accepted
		msg       string
	}{
		{"absent", ``, false, "", ""},
		{"null", `,"response_format":null`, false, "", ""},
		{"text", `,"response_format":{"type":"text"}`, false, "", ""},
		{"json_object", `,"response_format":{"type":"json_object"}`, true, "", ""},
		{"json_schema strict", `,"response_format":{"type":"json_schema","json_schema":{"name":"answer","schema":` + obj + `,"strict":true}}`, true, "", ""},
		{"json_schema not strict is enforced too", `,"response_format":{"type":"json_schema","json_schema":{"name":"a_b-1","description":"d","schema":` + obj + `}}`, true, "", ""},
		{"no type", `,"response_format":{}`, false, cloison.CodeInvalid, "with a type"},
		{"unknown type", `,"response_format":{"type":"regex"}`, false, cloison.CodeUnsupported, `"regex"`},
		{"json_schema missing", `,"response_format":{"type":"json_schema"}`, false, cloison.CodeInvalid, "json_schema is required"},
		{"json_schema on json_object", `,"response_format":{"type":"json_object","json_schema":{"name":"n","schema":{}}}`, false, cloison.CodeInvalid, "only for type json_schema"},
		{"name missing", `,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}`, false, cloison.CodeInvalid, "name"},
		{"name with a space", `,"response_format":{"type":"json_schema","json_schema":{"name":"a b","schema":{}}}`, false, cloison.CodeInvalid, "name"},
		{"schema missing", `,"response_format":{"type":"json_schema","json_schema":{"name":"n"}}`, false, cloison.CodeInvalid, "schema is required"},
		{"schema feature refused", `,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"string","pattern":"^(?=a)"}}}`, false, cloison.CodeUnsupported, `"pattern"`},
		{"schema invalid", `,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"kaboom"}}}`, false, cloison.CodeInvalid, "kaboom"},
		{"strict not a bool", `,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{},"strict":"yes"}}`, false, cloison.CodeInvalid, "strict"},
		{"logit_bias", `,"logit_bias":{"12":-100,"7":42.5}`, false, "", ""},
		{"logit_bias above 100", `,"logit_bias":{"12":101}`, false, cloison.CodeInvalid, "[-100, 100]"},
		{"logit_bias key not an id", `,"logit_bias":{"abc":1}`, false, cloison.CodeInvalid, `"abc"`},
		{"logit_bias negative id", `,"logit_bias":{"-3":1}`, false, cloison.CodeInvalid, "token ids"},
		{"logit_bias not a number", `,"logit_bias":{"3":"x"}`, false, cloison.CodeInvalid, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := DecodeChat(strings.NewReader(`{`+msgs+tt.extra+`}`), DefaultMaxBody)
			if err == nil && req.Schema != nil {
				// The schema is compiled after admission (service.Constraint).
				_, err = grammar.FromSchema(req.Schema)
			}
			if tt.code == "" {
				if err != nil {
					t.Fatalf("got %v, want accepted", err)
				}
				if (req.Schema != nil) != tt.constrain {
					t.Fatalf("schema %s, want constrained=%v", req.Schema, tt.constrain)
				}
				return
			}
			code, wire, msg := Describe(err)
			if code != tt.code || wire.HTTP != http.StatusBadRequest {
				t.Fatalf("got %s %d (%v), want %s 400", code, wire.HTTP, err, tt.code)
			}
			if !strings.Contains(msg, tt.msg) {
				t.Fatalf("got message %q, want it to contain %q", msg, tt.msg)
			}
		})
	}
	req, err := DecodeChat(strings.NewReader(`{`+msgs+`,"logit_bias":{"12":-100,"7":42.5}}`), DefaultMaxBody)
	if err != nil {
		t.Fatal(err)
	}
	if lb := req.Sampling(false, 0).LogitBias; len(lb) != 2 || lb[12] != -100 || lb[7] != 42.5 {
		t.Fatalf("sampling logit bias %v", lb)
	}
}

// The gRPC fields take the HTTP rules: the same grammar, the same errors.
func TestGRPCResponseFormatAndLogitBias(t *testing.T) {
	s := &Server{}
	base := func() *inferencev1.GenerateRequest {
		return &inferencev1.GenerateRequest{Model: "m", Prompt: &inferencev1.GenerateRequest_TokenIds{TokenIds: &inferencev1.TokenIds{Ids: []int32{1, 2}}}}
	}
	r := base()
	r.LogitBias = map[int32]float64{5: -100}
	r.ResponseFormat = &inferencev1.ResponseFormat{Type: "json_schema", JsonSchema: &inferencev1.JsonSchema{Name: "n", Schema: `{"enum":["a","b"]}`, Strict: true}}
	in, err := s.grpcInference(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	g, err := grammar.FromSchema(in.constraint.Schema)
	if err != nil || !g.Match([]byte(`"b"`)) || g.Match([]byte(`"c"`)) {
		t.Fatalf("the schema's grammar: %v", err)
	}
	if lb := in.common.Sampling(false, 0).LogitBias; lb[5] != -100 {
		t.Fatalf("logit bias %v", lb)
	}
	for _, tc := range []struct {
		name string
		set  func(*inferencev1.GenerateRequest)
		want error
	}{
		{"bias out of range", func(r *inferencev1.GenerateRequest) { r.LogitBias = map[int32]float64{5: -101} }, ErrBadField},
		{"negative id", func(r *inferencev1.GenerateRequest) { r.LogitBias = map[int32]float64{-1: 1} }, ErrBadField},
		{"unknown type", func(r *inferencev1.GenerateRequest) { r.ResponseFormat = &inferencev1.ResponseFormat{Type: "xml"} }, ErrUnsupported},
		{"schema not JSON", func(r *inferencev1.GenerateRequest) {
			r.ResponseFormat = &inferencev1.ResponseFormat{Type: "json_schema", JsonSchema: &inferencev1.JsonSchema{Name: "n", Schema: `{`}}
		}, grammar.ErrBadSchema},
		{"schema feature", func(r *inferencev1.GenerateRequest) {
			r.ResponseFormat = &inferencev1.ResponseFormat{Type: "json_schema", JsonSchema: &inferencev1.JsonSchema{Name: "n", Schema: `{"type":"string","format":"uri-reference"}`}}
		}, grammar.ErrUnsupportedSchema},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			tc.set(r)
			in, err := s.grpcInference(context.Background(), r)
			if err == nil && in.constraint.Schema != nil {
				// The schema is compiled after admission (service.Constraint).
				_, err = grammar.FromSchema(in.constraint.Schema)
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}
