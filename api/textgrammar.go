package api

import (
	"encoding/json"
	"strings"

	inferencev1 "github.com/cloison/cloison/api/proto/cloison/inference/v1"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/service"
)

// Grammars written as text (regex, GBNF, Lark) and the JSON whitespace
// policy, as the request fields of dialect.go ask for them.

// structuredOutputs is structured_outputs' object.
type structuredOutputs struct {
	Choice               []string        `json:"choice"`
	JSON                 json.RawMessage `json:"json"`
	Regex                *string         `json:"regex"`
	Grammar              *string         `json:"grammar"`
	StructuralTag        *string         `json:"structural_tag"`
	DisableAnyWhitespace *bool           `json:"disable_any_whitespace"`
}

// outputs decodes structured_outputs (its fields checked by the caller).
func (s *Structured) outputs() (structuredOutputs, error) {
	var so structuredOutputs
	if isNull(s.StructuredOutputs) {
		return so, nil
	}
	if err := json.Unmarshal(s.StructuredOutputs, &so); err != nil {
		return so, ErrBadField.Withf("structured_outputs must be an object (choice: a list of strings, json: a schema, regex, grammar and structural_tag: strings, disable_any_whitespace: a boolean)")
	}
	return so, nil
}

// whitespace is the JSON whitespace policy of the request's schema:
// structured_outputs.disable_any_whitespace when set (true: compact;
// false: indentation allowed), else compact under a strict json_schema (as
// OpenAI's strict structured outputs are written) and indentation allowed
// otherwise; each bounded (grammar.Whitespace).
func (s *Structured) whitespace(strict bool) grammar.Whitespace {
	so, err := s.outputs()
	switch {
	case err == nil && so.DisableAnyWhitespace != nil && *so.DisableAnyWhitespace:
		return grammar.Compact
	case err == nil && so.DisableAnyWhitespace != nil:
		return grammar.Indent
	case strict:
		return grammar.Compact
	}
	return grammar.Indent
}

// textConstraint is one request field holding a grammar written as text.
type textConstraint struct {
	field  string
	syntax grammar.Syntax // "": GBNF or Lark, told apart by ::=
	src    string
}

func appendText(list []textConstraint, field string, syntax grammar.Syntax, src *string) []textConstraint {
	if src == nil {
		return list
	}
	return append(list, textConstraint{field, syntax, *src})
}

// grammarSyntax tells a vLLM grammar's syntax apart as vLLM does: GBNF
// (EBNF with ::=) when a rule is defined with ::=, else Lark.
func grammarSyntax(src string) grammar.Syntax {
	if strings.Contains(src, "::=") {
		return grammar.GBNF
	}
	return grammar.Lark
}

// constraint bounds the text (it is parsed and compiled after admission,
// as every constraint: service.Constraint). Errors: ErrBadField.
func (t textConstraint) constraint() (service.Constraint, error) {
	if len(t.src) > grammar.MaxTextBytes {
		return service.Constraint{}, ErrBadField.Withf("%s: at most %d bytes", t.field, grammar.MaxTextBytes)
	}
	syntax := t.syntax
	if syntax == "" {
		syntax = grammarSyntax(t.src)
	}
	return service.Constraint{Syntax: syntax, Grammar: t.src}, nil
}

// formatStrict reports whether a response_format is a json_schema with
// strict true (ResponseFormat has checked it).
func formatStrict(raw json.RawMessage) bool {
	var rf struct {
		Type       string `json:"type"`
		JSONSchema struct {
			Strict *bool `json:"strict"`
		} `json:"json_schema"`
	}
	return json.Unmarshal(raw, &rf) == nil && rf.Type == "json_schema" && rf.JSONSchema.Strict != nil && *rf.JSONSchema.Strict
}

// grpcWhitespace is the JSON whitespace policy of a gRPC response_format:
// compact under a strict json_schema, as over HTTP.
func grpcWhitespace(rf *inferencev1.ResponseFormat) grammar.Whitespace {
	if rf.GetType() == "json_schema" && rf.GetJsonSchema().GetStrict() {
		return grammar.Compact
	}
	return grammar.Indent
}

// structuralTagFormat returns a response_format of type structural_tag
// (vLLM's and SGLang's: XGrammar's structural tag object, the whole
// value) as the text grammar.FromText reads, "" for any other type. The
// object is read and checked when compiled, after admission, as every
// grammar written as text. Errors: ErrBadField (not an object, too long).
func structuralTagFormat(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var rf struct {
		Type *string `json:"type"`
	}
	if json.Unmarshal(raw, &rf) != nil || rf.Type == nil || *rf.Type != "structural_tag" {
		return "", nil // ResponseFormat says what is wrong with it
	}
	if len(raw) > grammar.MaxTextBytes {
		return "", ErrBadField.Withf("response_format: a structural tag of at most %d bytes", grammar.MaxTextBytes)
	}
	return string(raw), nil
}
