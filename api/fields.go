package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// Request fields: every field of an OpenAI completions or chat completions
// request is in one of these tables, and what Cloison does with it is
// stated here once. A field that is not implemented is refused with
// ErrUnsupported naming it — never accepted and silently ignored, because a
// client that sends tools relies on the output changing. A field not listed at all is refused the same way: an
// unknown field may change the output just as well (fail closed). The
// exceptions are the fields listed as ignored: they are known not to
// change the output (user, metadata, service_tier, ...), and OpenAI SDKs
// send them routinely. The Responses API's fields are in respapi.go's
// tables, under the same rules.

// fieldRule is what the API does with one request field.
type fieldRule int

const (
	// implemented: decoded and honoured (its value checked by validate).
	implemented fieldRule = iota
	// ignored: accepted without effect, because it cannot change the
	// output of this server.
	ignored
	// refused: ErrUnsupported unless the value is null or one of the
	// field's neutral values (those that ask for what the server does
	// anyway, such as "tools": [] or "response_format": {"type":"text"}).
	refused
)

// field is one request field's rule; neutral holds compact JSON values that
// mean the same as an absent field.
type field struct {
	rule    fieldRule
	neutral []string
	note    string // a limit on an implemented field's values, for docs/api.md's table
}

// commonFields are the fields of both endpoints.
var commonFields = map[string]field{
	"model":                 {rule: implemented},
	"max_tokens":            {rule: implemented},
	"max_completion_tokens": {rule: implemented},
	"temperature":           {rule: implemented},
	"top_p":                 {rule: implemented},
	"frequency_penalty":     {rule: implemented},
	"presence_penalty":      {rule: implemented},
	"seed":                  {rule: implemented},
	"stop":                  {rule: implemented},
	"stream":                {rule: implemented},
	"stream_options":        {rule: implemented},                                   // streamOptionsFields
	"n":                     {rule: implemented, note: "1 to --max-n (default 8)"}, // (validate, checkN)
	// Sampling extensions of vLLM, SGLang and llama.cpp.
	"top_k":              {rule: implemented},
	"min_p":              {rule: implemented},
	"repetition_penalty": {rule: implemented},
	// Stopping extensions of vLLM (Common.stopping), with its semantics.
	"ignore_eos":                 {rule: implemented, note: "generates past the model's end-of-generation tokens"},
	"min_tokens":                 {rule: implemented, note: "EOS, stop_token_ids and stop strings suppressed until then; at most max_tokens"},
	"stop_token_ids":             {rule: implemented, note: "at most 64"},
	"include_stop_str_in_output": {rule: implemented, note: "the matched stop string kept in the text"},
	// Detokenization: control tokens give no text unless
	// skip_special_tokens is false. vLLM's spaces_between_special_tokens
	// (default true) changes nothing with the fast tokenizers vLLM uses
	// by default, nor here; false asks for a slow tokenizer's spacing.
	"skip_special_tokens":           {rule: implemented, note: "false: control tokens written as text"},
	"spaces_between_special_tokens": {rule: refused, neutral: []string{`true`}, note: "no spacing between special tokens is added, as with vLLM's fast tokenizers"},
	// A client priority would let one tenant's requests jump others':
	// the scheduler shares the node fairly between tenants instead.
	"priority": {rule: refused, neutral: []string{`0`}, note: "the scheduler's order is fair sharing between tenants, never the client's"},
	// vLLM's (and SGLang's) structured output (dialect.go).
	"structured_outputs":         {rule: implemented},
	"guided_choice":              {rule: implemented, note: "as structured_outputs.choice"},
	"guided_json":                {rule: implemented, note: "as structured_outputs.json"},
	"guided_regex":               {rule: implemented, note: "as structured_outputs.regex"},
	"guided_grammar":             {rule: implemented, note: "as structured_outputs.grammar"},
	"guided_decoding_backend":    {rule: refused, note: "one grammar engine, engine/grammar"},
	"guided_whitespace_pattern":  {rule: refused, note: "whitespace policies only: structured_outputs.disable_any_whitespace"},
	"regex":                      {rule: implemented, note: "SGLang's: as structured_outputs.regex"},
	"ebnf":                       {rule: implemented, note: "SGLang's: a GBNF grammar, as structured_outputs.grammar"},
	"return_tokens_as_token_ids": {rule: implemented, note: "logprobs' tokens as token_id:<id>"},
	// vLLM's prompt_logprobs: the prompt scored at prefill (as echo with
	// logprobs), answered in vLLM's shape.
	"prompt_logprobs":        {rule: implemented, note: "0 to 20 alternatives; not with stream, nor on a disaggregated deployment"},
	"truncate_prompt_tokens": {rule: implemented, note: "at least 1: the prompt's last tokens kept"},
	// vLLM's per-request prefix-cache salt: mixed into the tenant's own
	// key chain, so it only narrows what a request shares (with the
	// tenant's requests of the same salt), never widens it to another
	// tenant (isolation.Pool.AllocatePrefixSalted).
	"cache_salt": {rule: implemented, note: "1 to 1,024 bytes: prefix-cache pages shared only with this tenant's requests of the same salt"},
	// An end-user id for the provider's abuse monitoring: no effect on the
	// output, and never stored (the ledger keeps no client text).
	"user":              {rule: ignored},
	"safety_identifier": {rule: ignored},
	// Token id → bias in [-100, 100] (validate; ids checked against the
	// model's vocabulary by the engine).
	"logit_bias": {rule: implemented},
}

// completionFields are /v1/completions' own fields.
var completionFields = withCommon(map[string]field{
	"prompt":   {rule: implemented},
	"logprobs": {rule: implemented},
	"echo":     {rule: implemented, note: "with logprobs: the prompt tokens scored"},
	"suffix":   {rule: implemented, note: "models with fill-in-the-middle tokens"},
	"best_of":  {rule: refused, neutral: []string{`1`}},
})

// chatFields are /v1/chat/completions' own fields.
var chatFields = withCommon(map[string]field{
	"messages":     {rule: implemented},
	"logprobs":     {rule: implemented},
	"top_logprobs": {rule: implemented},
	// Function tools (tools.go): tool_choice none, auto, required and a
	// named function (the last two forced by constrained decoding).
	"tools":               {rule: implemented},
	"tool_choice":         {rule: implemented},
	"parallel_tool_calls": {rule: implemented},
	// The deprecated function-calling fields (use tools).
	"functions":     {rule: refused, neutral: []string{`[]`}},
	"function_call": {rule: refused, neutral: []string{`"none"`}},
	// text, json_object or json_schema, enforced by constrained decoding
	// (ResponseFormat); its own fields are checked the same way.
	"response_format":  {rule: implemented},
	"modalities":       {rule: refused, neutral: []string{`["text"]`}},
	"audio":            {rule: refused},
	"prediction":       {rule: refused},
	"reasoning_effort": {rule: implemented, note: "minimal, low, medium or high: the template variable reasoning_effort, where the template reads it"},
	// vLLM's rendering fields (dialect.go, templateOptions).
	"chat_template_kwargs":   {rule: implemented, note: "booleans, numbers and null, for variables the template reads"},
	"add_generation_prompt":  {rule: implemented},
	"continue_final_message": {rule: implemented, note: "the last assistant message continued; without add_generation_prompt"},
	"chat_template":          {rule: refused, note: "the model's own template only: a client template would write its own control tokens"},
	"verbosity":              {rule: refused},
	"web_search_options":     {rule: refused},
	// store asks the provider to keep the completion; Cloison never stores
	// prompt or completion text, so store: true cannot be honoured.
	"store": {rule: refused, neutral: []string{`false`}},
	// metadata only labels stored completions; service_tier and
	// prompt_cache_key choose latency and caching, never the output (the
	// prefix cache is namespaced per tenant whatever the client says).
	"metadata":         {rule: ignored},
	"service_tier":     {rule: ignored},
	"prompt_cache_key": {rule: ignored},
})

// messageFields are the fields of one chat message. A message's name or
// refusal would change what the template renders.
var messageFields = map[string]field{
	"role":          {rule: implemented},
	"content":       {rule: implemented}, // a string, or a list of text parts (flattenContent; other part types refused)
	"name":          {rule: refused, neutral: []string{`""`}},
	"tool_calls":    {rule: implemented}, // an assistant's calls (toolCallFields)
	"tool_call_id":  {rule: implemented}, // the call a tool message answers
	"function_call": {rule: refused},
	"refusal":       {rule: refused},
	"audio":         {rule: refused},
}

// toolFields and functionFields are the fields of one entry of tools;
// toolCallFields and callFunctionFields those of one entry of a message's
// tool_calls.
var (
	toolFields     = map[string]field{"type": {rule: implemented}, "function": {rule: implemented}}
	functionFields = map[string]field{
		"name": {rule: implemented}, "description": {rule: implemented}, "parameters": {rule: implemented},
		"strict": {rule: implemented, note: "true: enforced; under auto, on each call the model opens"}, // toolUse
	}
	toolCallFields     = map[string]field{"id": {rule: implemented}, "type": {rule: implemented}, "function": {rule: implemented}}
	callFunctionFields = map[string]field{"name": {rule: implemented}, "arguments": {rule: implemented}}
)

// fieldTables are every field table with the object it checks, in the order
// docs/api.md's field table lists them (TestREADMEFieldTable: a table
// missing here, or a page out of date, fails; make config-doc rewrites the
// page's table).
var fieldTables = []struct {
	name, object string // the variable's name; what it checks
	table        map[string]field
}{
	{"completionFields", "`POST /v1/completions`", completionFields},
	{"chatFields", "`POST /v1/chat/completions`", chatFields},
	{"messageFields", "chat message (`messages[]`)", messageFields},
	{"textPartFields", "content part (`content[]`)", textPartFields},
	{"toolFields", "tool (`tools[]`)", toolFields},
	{"functionFields", "tool function (`tools[].function`)", functionFields},
	{"toolCallFields", "tool call (`messages[].tool_calls[]`)", toolCallFields},
	{"callFunctionFields", "tool call function (`tool_calls[].function`)", callFunctionFields},
	{"streamOptionsFields", "`stream_options`", streamOptionsFields},
	{"structuredFields", "`structured_outputs`", structuredFields},
	{"responseFormatFields", "`response_format`", responseFormatFields},
	{"jsonSchemaFields", "`response_format.json_schema`", jsonSchemaFields},
	{"respFields", "`POST /v1/responses`", respFields},
	{"respTextFields", "responses `text`", respTextFields},
	{"respFormatFields", "responses `text.format`", respFormatFields},
	{"respToolFields", "responses tool (`tools[]`)", respToolFields},
	{"respCustomFields", "responses custom tool (`tools[]` of type custom)", respCustomFields},
	{"respCustomFormatFields", "responses custom tool `format`", respCustomFormatFields},
	{"respMessageFields", "responses input message item", respMessageFields},
	{"respTextPartFields", "responses input content part", respTextPartFields},
	{"respCallFields", "responses input `function_call` item", respCallFields},
	{"respCustomCallFields", "responses input `custom_tool_call` item", respCustomCallFields},
	{"respOutputFields", "responses input `function_call_output` (and `custom_tool_call_output`) item", respOutputFields},
	{"respReasoningFields", "responses input `reasoning` item", respReasoningFields},
	{"respReasoningPartFields", "responses input `reasoning` content part", respReasoningPartFields},
	{"tokenizeFields", "`POST /tokenize`", tokenizeFields},
	{"detokenizeFields", "`POST /detokenize`", detokenizeFields},
	{"embeddingFields", "`POST /v1/embeddings`", embeddingFields},
	{"rerankFields", "`POST /v1/rerank`", rerankFields},
	{"scoreFields", "`POST /v1/score`", scoreFields},
}

// FieldTableMarkdown renders fieldTables as docs/api.md's field table:
// per object, the fields implemented, those ignored (no effect on the
// output) and those refused unless null or a neutral value (given). Any
// field not listed is refused as unknown.
func FieldTableMarkdown() string {
	var b strings.Builder
	b.WriteString("| object | implemented | ignored (cannot change the output) | refused unless null or the value given |\n|---|---|---|---|\n")
	for _, ft := range fieldTables {
		var cols [3][]string
		names := make([]string, 0, len(ft.table))
		for n := range ft.table {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			f := ft.table[n]
			s := "`" + n + "`"
			if f.rule == refused && len(f.neutral) > 0 {
				s += " (`" + strings.Join(f.neutral, "`, `") + "`)"
			}
			if f.note != "" {
				s += " (" + f.note + ")"
			}
			cols[f.rule] = append(cols[f.rule], s)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", ft.object, cellOf(cols[implemented]), cellOf(cols[ignored]), cellOf(cols[refused]))
	}
	return b.String()
}

func cellOf(names []string) string {
	if len(names) == 0 {
		return "—"
	}
	return strings.Join(names, ", ")
}

// checkNested applies table to each element of the list at name in the
// object obj, and inner to each element's "function" object.
func checkNested(obj []byte, name string, table, inner map[string]field, where string) error {
	var v map[string]json.RawMessage
	if json.Unmarshal(obj, &v) != nil {
		return nil
	}
	var list []json.RawMessage
	if json.Unmarshal(v[name], &list) != nil {
		return nil // decoding reports a value that is not a list
	}
	for i, item := range list {
		at := fmt.Sprintf("%s%s[%d].", where, name, i)
		if err := checkFields(item, table, at); err != nil {
			return err
		}
		var fn struct {
			Function json.RawMessage `json:"function"`
		}
		if json.Unmarshal(item, &fn) == nil && len(fn.Function) > 0 {
			if err := checkFields(fn.Function, inner, at+"function."); err != nil {
				return err
			}
		}
	}
	return nil
}

func withCommon(own map[string]field) map[string]field {
	for k, v := range commonFields {
		own[k] = v
	}
	return own
}

// maxFieldName bounds how much of an unknown field name an error repeats.
const maxFieldName = 64

// checkFields refuses, with ErrUnsupported naming the field, any field of
// the JSON object body that table does not list or lists as refused with a
// value other than null or a neutral one. Fields are checked in sorted
// order, so that the error is deterministic. A body that is not an object
// passes: decoding reports it.
func checkFields(body []byte, table map[string]field, where string) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		f, known := table[name]
		if !known {
			if len(name) > maxFieldName {
				name = name[:maxFieldName] + "..."
			}
			return ErrUnsupported.Withf("%s%q is not a field this server knows", where, name)
		}
		if f.rule == refused && !neutral(obj[name], f.neutral) {
			return ErrUnsupported.Withf("%s%q is not implemented", where, name)
		}
	}
	return nil
}

// checkObject applies table to the object at name in the JSON object body
// (absent or null: nothing to check; not an object: decoding reports it).
func checkObject(body []byte, name string, table map[string]field) error {
	var obj map[string]json.RawMessage
	if json.Unmarshal(body, &obj) != nil {
		return nil
	}
	return checkFields(obj[name], table, name+".")
}

// checkMessages applies messageFields to each element of a chat request's
// messages (decoding reports a messages value that is not a list).
func checkMessages(body []byte) error {
	var req struct {
		Messages []json.RawMessage `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil
	}
	for i, m := range req.Messages {
		where := fmt.Sprintf("messages[%d].", i)
		if err := checkFields(m, messageFields, where); err != nil {
			return err
		}
		if err := checkNested(m, "tool_calls", toolCallFields, callFunctionFields, where); err != nil {
			return err
		}
	}
	return checkNested(body, "tools", toolFields, functionFields, "")
}

func neutral(v json.RawMessage, values []string) bool {
	var b bytes.Buffer
	if json.Compact(&b, v) != nil {
		return false
	}
	if b.String() == "null" {
		return true
	}
	for _, n := range values {
		if b.String() == n {
			return true
		}
	}
	return false
}

// checkProtoFields refuses a gRPC request that carries fields unknown to
// this server's schema (a client built from a newer .proto), anywhere in
// the message: the same rule as unknown JSON fields. Every field the
// inference .proto defines is implemented.
func checkProtoFields(m proto.Message) error {
	if m == nil {
		return nil
	}
	return unknownIn(m.ProtoReflect(), string(m.ProtoReflect().Descriptor().Name()))
}

func unknownIn(m protoreflect.Message, path string) error {
	if len(m.GetUnknown()) > 0 {
		return ErrUnsupported.Withf("%s has fields this server does not know", path)
	}
	var err error
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		if fd.Message() == nil || fd.IsMap() {
			return true
		}
		p := path + "." + string(fd.Name())
		if fd.IsList() {
			l := v.List()
			for i := 0; i < l.Len() && err == nil; i++ {
				err = unknownIn(l.Get(i).Message(), fmt.Sprintf("%s[%d]", p, i))
			}
		} else {
			err = unknownIn(v.Message(), p)
		}
		return err == nil
	})
	return err
}
