package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/service"
)

// Request-decoding errors (HTTP 400 or 413 through the error table).
var (
	ErrBadJSON      = cloison.NewError(cloison.CodeInvalid, "the request body is not valid JSON")
	ErrBadUTF8      = cloison.NewError(cloison.CodeInvalid, "the request body is not valid UTF-8")
	ErrBodyTooLarge = cloison.NewError(cloison.CodeInvalid, "the request body is too large")
	// ErrBadField: a field the request cannot have (service.ErrInvalidField,
	// one value so errors.Is matches whether the transport or the service
	// refused it); the message names the field.
	ErrBadField = service.ErrInvalidField
	// ErrUnsupported: a request field (or value) Cloison does not
	// implement; the message names the field (fields.go).
	ErrUnsupported = service.ErrUnsupported
)

// DefaultMaxBody bounds request bodies (1 MiB).
const DefaultMaxBody = 1 << 20

// StringOrList is a JSON string or list of strings ("stop", "prompt").
type StringOrList []string

// UnmarshalJSON accepts a string, a list of strings or null.
func (s *StringOrList) UnmarshalJSON(b []byte) error {
	if bytes.Equal(b, []byte("null")) {
		*s = nil
		return nil
	}
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*s = StringOrList{one}
		return nil
	}
	var many []string
	if err := json.Unmarshal(b, &many); err != nil {
		return fmt.Errorf("want a string or a list of strings")
	}
	*s = many
	return nil
}

// Prompt is a completion prompt: text, or pre-tokenized ids; or, for a
// batch (vLLM's list of prompts), the prompts in Batch.
type Prompt struct {
	Text   string
	Tokens []int32
	IsIDs  bool
	// Batch holds the prompts of a list of two or more (each text or ids,
	// never a batch); nil for one prompt.
	Batch []Prompt
}

// MaxBatchPrompts bounds the prompts of one /v1/completions batch.
const MaxBatchPrompts = 64

// UnmarshalJSON accepts a string, a list of token ids, or a list of
// strings or of token-id lists: one element is that prompt, several a
// batch (Batch, at most MaxBatchPrompts).
func (p *Prompt) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*p = Prompt{Text: s}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err == nil {
		if len(list) == 0 {
			return ErrBadField.Withf("prompt must not be an empty list")
		}
		if len(list) > MaxBatchPrompts {
			return ErrBadField.Withf("prompt: a batch of %d prompts, at most %d", len(list), MaxBatchPrompts)
		}
		*p = Prompt{Text: list[0]}
		if len(list) > 1 {
			p.Batch = make([]Prompt, len(list))
			for i, s := range list {
				p.Batch[i] = Prompt{Text: s}
			}
		}
		return nil
	}
	var batch [][]int64
	if json.Unmarshal(b, &batch) == nil && len(batch) > 0 {
		if len(batch) > MaxBatchPrompts {
			return ErrBadField.Withf("prompt: a batch of %d prompts, at most %d", len(batch), MaxBatchPrompts)
		}
		out := make([]Prompt, len(batch))
		for i, ids := range batch {
			var err error
			if out[i], err = idsPrompt(ids); err != nil {
				return err
			}
		}
		*p = out[0]
		if len(out) > 1 {
			p.Batch = out
		}
		return nil
	}
	var ids []int64
	if err := json.Unmarshal(b, &ids); err != nil {
		return ErrBadField.Withf("prompt: want a string, a list of token ids, or a list of strings or of token-id lists")
	}
	var err error
	*p, err = idsPrompt(ids)
	return err
}

// idsPrompt is a prompt of token ids, checked to be int32.
func idsPrompt(ids []int64) (Prompt, error) {
	p := Prompt{IsIDs: true, Tokens: make([]int32, len(ids))}
	for i, id := range ids {
		if id < 0 || id > math.MaxInt32 {
			return Prompt{}, ErrBadField.Withf("prompt: token id %d out of range", id)
		}
		p.Tokens[i] = int32(id)
	}
	return p, nil
}

// Common holds the fields shared by /v1/completions and /v1/chat/completions.
type Common struct {
	Model             string       `json:"model"`
	MaxTokens         *int64       `json:"max_tokens"`
	MaxCompletion     *int64       `json:"max_completion_tokens"`
	Temperature       *float64     `json:"temperature"`
	TopP              *float64     `json:"top_p"`
	TopK              *int         `json:"top_k"`
	MinP              *float64     `json:"min_p"`
	FrequencyPenalty  *float64     `json:"frequency_penalty"`
	PresencePenalty   *float64     `json:"presence_penalty"`
	RepetitionPenalty *float64     `json:"repetition_penalty"`
	Seed              *int64       `json:"seed"`
	Stop              StringOrList `json:"stop"`
	Stream            bool         `json:"stream"`
	// StreamOptions: include_usage (a last chunk with the usage) and vLLM's
	// continuous_usage_stats (every chunk with the usage so far); any
	// other sub-key is refused (streamOptionsFields).
	StreamOptions *StreamOptions `json:"stream_options"`
	N             *int           `json:"n"`
	User          string         `json:"user"`
	// LogitBias maps token ids (decimal strings, as OpenAI sends them) to
	// a bias in [-100, 100]; -100 bans the token.
	LogitBias map[string]float64 `json:"logit_bias"`
	// vLLM's extensions (engine.GenerateRequest): IgnoreEOS generates past
	// the model's end-of-generation tokens; MinTokens suppresses them, the
	// stop tokens and the stop strings until that many tokens are out;
	// StopTokenIDs end the completion like EOS; IncludeStop keeps the
	// matched stop string in the text.
	IgnoreEOS    bool    `json:"ignore_eos"`
	MinTokens    *int64  `json:"min_tokens"`
	StopTokenIDs []int64 `json:"stop_token_ids"`
	IncludeStop  bool    `json:"include_stop_str_in_output"`
	// SkipSpecial: control tokens give no text (the default, true); false
	// writes them as text.
	SkipSpecial *bool `json:"skip_special_tokens"`
	// TruncatePrompt keeps the last k tokens of the prompt (vLLM's
	// truncate_prompt_tokens, left truncation; its -1 is not taken).
	TruncatePrompt *int64 `json:"truncate_prompt_tokens"`
	// CacheSalt is vLLM's cache_salt: the request shares prefix-cache
	// pages only with the tenant's requests of the same salt
	// (service.Request.CacheSalt); it never reaches another tenant's.
	CacheSalt *string `json:"cache_salt"`
	// PromptLogprobs is vLLM's prompt_logprobs: each prompt token's
	// logprob (the first null) with that many alternatives, in vLLM's
	// shape (PromptLogprob); not with stream.
	PromptLogprobs *int `json:"prompt_logprobs"`
	// TokenIDs names logprobs' tokens "token_id:<id>" (vLLM's
	// return_tokens_as_token_ids).
	TokenIDs bool `json:"return_tokens_as_token_ids"`
	// Structured holds vLLM's structured-output fields (dialect.go).
	Structured
}

// truncated is prompt cut to its last truncate_prompt_tokens tokens.
func (c *Common) truncated(prompt []int32) []int32 {
	if c.TruncatePrompt != nil && int64(len(prompt)) > *c.TruncatePrompt {
		return prompt[int64(len(prompt))-*c.TruncatePrompt:]
	}
	return prompt
}

// StreamOptions is a request's stream_options.
type StreamOptions struct {
	IncludeUsage    bool `json:"include_usage"`
	ContinuousUsage bool `json:"continuous_usage_stats"`
}

// streamOptionsFields are stream_options' sub-keys.
var streamOptionsFields = map[string]field{
	"include_usage":          {rule: implemented},
	"continuous_usage_stats": {rule: implemented, note: "every chunk carries the usage so far"},
}

// maxStopTokens bounds stop_token_ids.
const maxStopTokens = 64

// maxLogitBias bounds how many tokens one request may bias.
const maxLogitBias = 1024

// CompletionRequest is a /v1/completions body.
type CompletionRequest struct {
	Common
	Prompt   *Prompt `json:"prompt"`
	Logprobs *int    `json:"logprobs"`
	Echo     bool    `json:"echo"`
	// Suffix is the text after the completion (fill-in-the-middle), for a
	// model with FIM tokens only; "" or null: none.
	Suffix *string `json:"suffix"`
	// Constraint is structured_outputs' (or guided_*), checked and not
	// compiled: Generate compiles it after admission.
	Constraint service.Constraint `json:"-"`
}

// ChatRequest is a /v1/chat/completions body.
type ChatRequest struct {
	Common
	Messages    []chat.Message `json:"messages"`
	Logprobs    bool           `json:"logprobs"`
	TopLogprobs *int           `json:"top_logprobs"`
	// Tools are the functions the model may call; ToolChoice and
	// ParallelToolCalls as OpenAI defines them (tools.go).
	Tools             []ToolDef       `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ResponseFormat    json.RawMessage `json:"response_format"`
	// Schema is response_format's JSON schema, checked and not compiled
	// (nil for text or absent): Generate compiles it after admission.
	Schema []byte `json:"-"`
	// Choice is structured_outputs' (guided_choice) list, checked and not
	// compiled: the output is exactly one of them.
	Choice []string `json:"-"`
	// Syntax and Grammar are structured_outputs' regex or grammar (or
	// guided_regex, guided_grammar, regex, ebnf), checked and not
	// compiled: the whole output matches it (service.Constraint).
	Syntax  grammar.Syntax `json:"-"`
	Grammar string         `json:"-"`
	// Whitespace is the JSON whitespace policy of Schema (Structured.whitespace).
	Whitespace grammar.Whitespace `json:"-"`
	// How the template renders the chat (dialect.go, templateOptions):
	// vLLM's chat_template_kwargs, add_generation_prompt and
	// continue_final_message, and OpenAI's reasoning_effort as the
	// template variable of that name.
	ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
	ContinueFinal       bool                       `json:"continue_final_message"`
	ReasoningEffort     *string                    `json:"reasoning_effort"`
}

// Fields of response_format and of its json_schema object: anything else
// is refused, like an unknown request field.
var (
	responseFormatFields = map[string]field{"type": {rule: implemented}, "json_schema": {rule: implemented},
		"structures": {rule: implemented, note: "type structural_tag (chat): tags, each begin, schema and end"},
		"triggers":   {rule: implemented, note: "type structural_tag (chat): texts that open a tag"},
		"format":     {rule: implemented, note: "type structural_tag (chat): XGrammar's triggered_tags"}}
	jsonSchemaFields = map[string]field{"name": {rule: implemented}, "description": {rule: ignored},
		"schema": {rule: implemented}, "strict": {rule: implemented}}
	schemaName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
)

// ResponseFormat decodes an OpenAI response_format value into the JSON
// schema that constrains decoding: nil for absent, null or
// {"type":"text"}; any JSON object for json_object; the schema for
// json_schema (strict or not: the schema is always enforced). It compiles
// nothing: the service compiles the schema after admission, and refuses a
// feature the grammar cannot enforce then (grammar.ErrUnsupportedSchema,
// never relaxed). Errors: ErrBadField, ErrUnsupported.
func ResponseFormat(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if tag, err := structuralTagFormat(raw); err != nil || tag != "" {
		if err == nil {
			err = ErrUnsupported.Withf("response_format.type \"structural_tag\" here (chat completions take it)")
		}
		return nil, err
	}
	if err := checkFields(raw, responseFormatFields, "response_format."); err != nil {
		return nil, err
	}
	var rf struct {
		Type       *string         `json:"type"`
		JSONSchema json.RawMessage `json:"json_schema"`
	}
	if err := json.Unmarshal(raw, &rf); err != nil || rf.Type == nil {
		return nil, ErrBadField.Withf("response_format must be an object with a type")
	}
	var tagKeys map[string]json.RawMessage
	_ = json.Unmarshal(raw, &tagKeys)
	for _, k := range []string{"structures", "triggers", "format"} {
		if _, ok := tagKeys[k]; ok {
			return nil, ErrBadField.Withf("response_format.%s is only for type structural_tag", k)
		}
	}
	if *rf.Type != "json_schema" && len(rf.JSONSchema) > 0 && string(rf.JSONSchema) != "null" {
		return nil, ErrBadField.Withf("response_format.json_schema is only for type json_schema")
	}
	switch *rf.Type {
	case "text":
		return nil, nil
	case "json_object":
		return service.JSONObjectSchema, nil
	case "json_schema":
	default:
		return nil, ErrUnsupported.Withf("response_format.type %q (text, json_object or json_schema; structural_tag on chat completions)", *rf.Type)
	}
	if len(rf.JSONSchema) == 0 || string(rf.JSONSchema) == "null" {
		return nil, ErrBadField.Withf("response_format.json_schema is required for type json_schema")
	}
	if err := checkFields(rf.JSONSchema, jsonSchemaFields, "response_format.json_schema."); err != nil {
		return nil, err
	}
	var js struct {
		Name   *string         `json:"name"`
		Schema json.RawMessage `json:"schema"`
		Strict *bool           `json:"strict"`
	}
	if err := json.Unmarshal(rf.JSONSchema, &js); err != nil {
		return nil, ErrBadField.Withf("response_format.json_schema must be an object with name (string), schema (object) and strict (boolean)")
	}
	if js.Name == nil || !schemaName.MatchString(*js.Name) {
		return nil, ErrBadField.Withf("response_format.json_schema.name must be 1-64 letters, digits, _ or -")
	}
	if len(js.Schema) == 0 || string(js.Schema) == "null" {
		return nil, ErrBadField.Withf("response_format.json_schema.schema is required")
	}
	return js.Schema, nil
}

// decode reads at most limit bytes of JSON into v, checking UTF-8 first.
func decode(r io.Reader, limit int64, v any) error { return decodeFields(r, limit, nil, v) }

// decodeFields is decode that also checks that every field is one fields
// allows (checkFields; nil: no check), and for a chat request every
// message field too.
func decodeFields(r io.Reader, limit int64, fields map[string]field, v any) error {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return ErrBadJSON.Withf("%v", err)
	}
	if int64(len(body)) > limit {
		return ErrBodyTooLarge.Withf("more than %d bytes", limit)
	}
	if !utf8.Valid(body) {
		return ErrBadUTF8
	}
	if fields != nil {
		if err := checkFields(body, fields, ""); err != nil {
			return err
		}
		if _, ok := fields["stream_options"]; ok {
			if err := checkObject(body, "stream_options", streamOptionsFields); err != nil {
				return err
			}
		}
		if _, ok := fields["messages"]; ok {
			if err := checkMessages(body); err != nil {
				return err
			}
			if body, err = flattenContent(body); err != nil {
				return err
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var ute *json.UnmarshalTypeError
		if errors.As(err, &ute) {
			return ErrBadField.Withf("%s: want %s", ute.Field, ute.Type)
		}
		if errors.Is(err, ErrUnsupported) || errors.Is(err, ErrBadField) {
			return err // a field's own decoder (Prompt) said what is wrong
		}
		return ErrBadJSON.Withf("%v", err)
	}
	if dec.More() {
		return ErrBadJSON.Withf("trailing data after the JSON object")
	}
	return nil
}

// DecodeCompletion reads and validates a /v1/completions body.
// Errors: ErrBodyTooLarge, ErrBadUTF8, ErrBadJSON, ErrBadField,
// ErrUnsupported (a field completionFields refuses or does not know),
// sample.ErrInvalidParams.
func DecodeCompletion(r io.Reader, limit int64) (*CompletionRequest, error) {
	var req CompletionRequest
	if err := decodeFields(r, limit, completionFields, &req); err != nil {
		return nil, err
	}
	if req.Prompt == nil {
		return nil, ErrBadField.Withf("prompt is required")
	}
	if req.Suffix != nil && *req.Suffix != "" {
		if req.Prompt.Batch != nil {
			return nil, ErrUnsupported.Withf(`"suffix" with a list of prompts`)
		}
		if req.Echo {
			return nil, ErrUnsupported.Withf(`"suffix" with "echo"`)
		}
		if req.Prompt.IsIDs {
			return nil, ErrUnsupported.Withf(`"suffix" with a prompt of token ids (send the prefix as text)`)
		}
	}
	if req.Echo && req.TruncatePrompt != nil {
		return nil, ErrUnsupported.Withf(`"truncate_prompt_tokens" with "echo" (the echo would not be the prompt scored)`)
	}
	if req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > 20) {
		return nil, ErrBadField.Withf("logprobs must be in [0, 20]")
	}
	// max_tokens 0 with echo: the prompt alone, scored (lm-eval-harness's
	// loglikelihood requests).
	minTokens := 1
	if req.Echo {
		minTokens = 0
	}
	if err := req.Common.validateFrom(minTokens); err != nil {
		return nil, err
	}
	c, err := req.Structured.constraint()
	if err != nil {
		return nil, err
	}
	c.Whitespace = req.Structured.whitespace(false)
	req.Constraint = c
	return &req, nil
}

// DecodeChat reads and validates a /v1/chat/completions body.
// Errors: as DecodeCompletion, with chatFields and messageFields.
func DecodeChat(r io.Reader, limit int64) (*ChatRequest, error) {
	var req ChatRequest
	if err := decodeFields(r, limit, chatFields, &req); err != nil {
		return nil, err
	}
	if len(req.Messages) == 0 {
		return nil, ErrBadField.Withf("messages must not be empty")
	}
	if req.TopLogprobs != nil && (*req.TopLogprobs < 0 || *req.TopLogprobs > 20) {
		return nil, ErrBadField.Withf("top_logprobs must be in [0, 20]")
	}
	if err := req.Common.validate(); err != nil {
		return nil, err
	}
	if _, err := req.toolUse(); err != nil {
		return nil, err
	}
	tag, err := structuralTagFormat(req.ResponseFormat)
	if err != nil {
		return nil, err
	}
	var schema []byte
	if tag == "" {
		if schema, err = ResponseFormat(req.ResponseFormat); err != nil {
			return nil, err
		}
	}
	sc, err := req.Structured.constraint()
	if err != nil {
		return nil, err
	}
	if tag != "" {
		req.Syntax, req.Grammar = grammar.StructuralTag, tag
	}
	if !sc.IsZero() {
		if schema != nil || tag != "" {
			return nil, ErrBadField.Withf("response_format and structured_outputs (guided_*) are exclusive")
		}
		schema, req.Choice = sc.Schema, sc.Choice
		req.Syntax, req.Grammar = sc.Syntax, sc.Grammar
	}
	req.Schema = schema
	req.Whitespace = req.Structured.whitespace(formatStrict(req.ResponseFormat))
	if _, err := req.templateOptions(nil); err != nil {
		return nil, err
	}
	return &req, nil
}

func (c *Common) validate() error { return c.validateFrom(1) }

// validateFrom is validate with max_tokens at least minTokens.
// maxCacheSalt bounds cache_salt.
const maxCacheSalt = 1024

func (c *Common) validateFrom(minTokens int) error {
	if c.Model == "" {
		return ErrBadField.Withf("model is required")
	}
	if c.N != nil && *c.N < 1 {
		return ErrBadField.Withf("n must be at least 1 (got %d)", *c.N)
	}
	mt := c.MaxTokens
	if c.MaxCompletion != nil {
		mt = c.MaxCompletion
	}
	if mt != nil && *mt < int64(minTokens) {
		if minTokens == 0 {
			return ErrBadField.Withf("max_tokens must be at least 0 (got %d)", *mt)
		}
		return ErrBadField.Withf("max_tokens must be at least 1 (got %d; 0 only on /v1/completions with echo)", *mt)
	}
	if c.MinTokens != nil {
		if *c.MinTokens < 0 {
			return ErrBadField.Withf("min_tokens must be at least 0 (got %d)", *c.MinTokens)
		}
		if mt != nil && *c.MinTokens > *mt {
			return ErrBadField.Withf("min_tokens (%d) must not exceed max_tokens (%d)", *c.MinTokens, *mt)
		}
	}
	if c.TruncatePrompt != nil && *c.TruncatePrompt < 1 {
		return ErrBadField.Withf("truncate_prompt_tokens must be at least 1 (got %d; -1, the model's length, is not taken: name a count)", *c.TruncatePrompt)
	}
	if c.PromptLogprobs != nil {
		if *c.PromptLogprobs < 0 || *c.PromptLogprobs > 20 {
			return ErrBadField.Withf("prompt_logprobs must be in [0, 20]")
		}
		if c.Stream {
			return ErrUnsupported.Withf(`"prompt_logprobs" with "stream"`)
		}
	}
	if c.CacheSalt != nil && (*c.CacheSalt == "" || len(*c.CacheSalt) > maxCacheSalt) {
		return ErrBadField.Withf("cache_salt must be 1 to %d bytes", maxCacheSalt)
	}
	if len(c.StopTokenIDs) > maxStopTokens {
		return ErrBadField.Withf("at most %d stop_token_ids", maxStopTokens)
	}
	for _, id := range c.StopTokenIDs {
		if id < 0 || id > math.MaxInt32 {
			return ErrBadField.Withf("stop_token_ids: token id %d out of range", id)
		}
	}
	if len(c.Stop) > 4 {
		return ErrBadField.Withf("at most 4 stop sequences")
	}
	if len(c.LogitBias) > maxLogitBias {
		return ErrBadField.Withf("logit_bias biases at most %d tokens", maxLogitBias)
	}
	for k, v := range c.LogitBias {
		id, err := strconv.ParseInt(k, 10, 32)
		if err != nil || id < 0 {
			return ErrBadField.Withf("logit_bias keys must be token ids (got %q)", truncate(k, maxFieldName))
		}
		if !(v >= -100 && v <= 100) {
			return ErrBadField.Withf("logit_bias for token %d must be in [-100, 100]", id)
		}
	}
	return c.Sampling(false, 0).Validate()
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// MaxNew returns the requested max new tokens, saturated to the int range
// so that admission can reject it by length; math.MaxInt32 if absent (no
// bound asked: the service gives the default, DefaultMax).
func (c *Common) MaxNew() int {
	mt := c.MaxTokens
	if c.MaxCompletion != nil {
		mt = c.MaxCompletion
	}
	if mt == nil {
		return math.MaxInt32
	}
	return int(min(*mt, math.MaxInt32))
}

// DefaultMax reports whether the request names no max_tokens (nor
// max_completion_tokens): the completion then gets the rest of the
// context, capped by --default-max-tokens and the tenant's limits
// (service.Request.DefaultMax).
func (c *Common) DefaultMax() bool { return c.MaxTokens == nil && c.MaxCompletion == nil }

// stopping returns the request's stop tokens, ignore_eos, min_tokens and
// include_stop_str_in_output as the service takes them (validated).
func (c *Common) stopping() (ids []int32, ignoreEOS bool, minTokens int, include bool) {
	for _, id := range c.StopTokenIDs {
		ids = append(ids, int32(id))
	}
	if c.MinTokens != nil {
		minTokens = int(min(*c.MinTokens, math.MaxInt32))
	}
	return ids, c.IgnoreEOS, minTokens, c.IncludeStop
}

// Sampling returns the sampling parameters the request asks for.
func (c *Common) Sampling(logprobs bool, top int) sample.Params {
	p := sample.Params{Temperature: 1, Logprobs: logprobs, TopLogprobs: top}
	if c.Temperature != nil {
		p.Temperature = *c.Temperature
	}
	if c.TopP != nil {
		p.TopP = *c.TopP
	}
	if c.TopK != nil {
		p.TopK = *c.TopK
	}
	if c.MinP != nil {
		p.MinP = *c.MinP
	}
	if c.FrequencyPenalty != nil {
		p.FrequencyPenalty = *c.FrequencyPenalty
	}
	if c.PresencePenalty != nil {
		p.PresencePenalty = *c.PresencePenalty
	}
	if c.RepetitionPenalty != nil {
		p.RepetitionPenalty = *c.RepetitionPenalty
	}
	if c.Seed != nil {
		p.Seed = uint64(*c.Seed)
	}
	if len(c.LogitBias) > 0 {
		p.LogitBias = make(map[int32]float64, len(c.LogitBias))
		for k, v := range c.LogitBias {
			if id, err := strconv.ParseInt(k, 10, 32); err == nil {
				p.LogitBias[int32(id)] = v // validate refused any other key
			}
		}
	}
	return p
}
