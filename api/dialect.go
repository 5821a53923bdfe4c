package api

import (
	"bytes"
	"encoding/json"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/grammar"
	"github.com/cloison/cloison/service"
)

// vLLM's structured output fields: structured_outputs (its current form)
// and the older guided_choice, guided_json, guided_regex and
// guided_grammar, on both endpoints, and SGLang's regex and ebnf. A choice
// is a grammar of literal alternatives; json is the schema path of
// response_format (service.SchemaGrammar, the same subset and refusals);
// regex is a regular expression the whole output matches, grammar a GBNF
// grammar when it defines a rule with ::= and else a Lark one (as vLLM
// tells them apart), ebnf a GBNF one, structural_tag XGrammar's structural
// tag object as JSON text (textgrammar.go). None of vLLM's
// knobs of its own backends is taken; disable_any_whitespace picks the
// JSON whitespace policy (textgrammar.go).
var structuredFields = map[string]field{
	"choice":                        {rule: implemented, note: "1 to 256 non-empty strings of at most 1 KiB"},
	"json":                          {rule: implemented, note: "a JSON schema, as response_format json_schema"},
	"json_object":                   {rule: refused, neutral: []string{`false`}, note: "use response_format json_object"},
	"regex":                         {rule: implemented, note: "the whole output matches it (ECMAScript syntax; backreferences and lookaround refused)"},
	"grammar":                       {rule: implemented, note: "GBNF (llama.cpp) if it has ::=, else Lark (OpenAI's subset); at most 64 KiB"},
	"structural_tag":                {rule: implemented, note: "XGrammar's structural tag object as JSON text: free text, triggers opening tags whose JSON a schema constrains"},
	"disable_any_whitespace":        {rule: implemented, note: "true: compact JSON; false: whitespace allowed even under a strict json_schema"},
	"disable_additional_properties": {rule: refused, neutral: []string{`false`}, note: "additionalProperties is the schema's to say"},
	"whitespace_pattern":            {rule: refused, note: "whitespace policies only: disable_any_whitespace"},
}

// Bounds of a choice constraint.
const (
	maxChoices     = 256
	maxChoiceBytes = 1024
)

// Structured is a request's vLLM (and SGLang) structured-output fields.
type Structured struct {
	StructuredOutputs json.RawMessage `json:"structured_outputs"`
	GuidedChoice      []string        `json:"guided_choice"`
	GuidedJSON        json.RawMessage `json:"guided_json"`
	GuidedRegex       *string         `json:"guided_regex"`
	GuidedGrammar     *string         `json:"guided_grammar"`
	// SGLang's spellings of regex and grammar (GBNF).
	Regex *string `json:"regex"`
	EBNF  *string `json:"ebnf"`
}

// constraint returns the constraint the fields ask for (a schema, a
// choice or a grammar written as text, checked, compiled after
// admission), the zero one when none; its Whitespace is left to the
// caller (whitespace).
// Errors: ErrBadField (two constraints, a bad choice list, a json that is
// not JSON, a grammar too long), ErrUnsupported (a refused sub-field).
func (s *Structured) constraint() (service.Constraint, error) {
	choice, schema := s.GuidedChoice, s.GuidedJSON
	var texts []textConstraint
	asked := 0
	if s.GuidedChoice != nil {
		asked++
	}
	if !isNull(s.GuidedJSON) {
		asked++
	}
	texts = appendText(texts, "guided_regex", grammar.Regex, s.GuidedRegex)
	texts = appendText(texts, "guided_grammar", "", s.GuidedGrammar)
	texts = appendText(texts, "regex", grammar.Regex, s.Regex)
	texts = appendText(texts, "ebnf", grammar.GBNF, s.EBNF)
	if !isNull(s.StructuredOutputs) {
		if err := checkFields(s.StructuredOutputs, structuredFields, "structured_outputs."); err != nil {
			return service.Constraint{}, err
		}
		so, err := s.outputs()
		if err != nil {
			return service.Constraint{}, err
		}
		if so.Choice != nil {
			choice = so.Choice
			asked++
		}
		if !isNull(so.JSON) {
			schema = so.JSON
			asked++
		}
		texts = appendText(texts, "structured_outputs.regex", grammar.Regex, so.Regex)
		texts = appendText(texts, "structured_outputs.grammar", "", so.Grammar)
		texts = appendText(texts, "structured_outputs.structural_tag", grammar.StructuralTag, so.StructuralTag)
	}
	asked += len(texts)
	switch {
	case asked == 0:
		return service.Constraint{}, nil
	case asked > 1:
		return service.Constraint{}, ErrBadField.Withf("one structured output constraint at a time (choice, json, regex, grammar or structural_tag)")
	case choice != nil:
		return checkChoice(choice)
	case len(texts) == 1:
		return texts[0].constraint()
	}
	var v any
	if json.Unmarshal(schema, &v) != nil {
		return service.Constraint{}, ErrBadField.Withf("the json constraint must be a JSON schema")
	}
	if str, ok := v.(string); ok {
		schema = []byte(str) // vLLM takes the schema as JSON text too
	}
	return service.Constraint{Schema: schema}, nil
}

// checkChoice bounds a choice constraint (compiled after admission, as
// every constraint: service.Constraint).
func checkChoice(choices []string) (service.Constraint, error) {
	if len(choices) == 0 || len(choices) > maxChoices {
		return service.Constraint{}, ErrBadField.Withf("choice must list 1 to %d strings", maxChoices)
	}
	for i, c := range choices {
		if c == "" || len(c) > maxChoiceBytes || !utf8.ValidString(c) {
			return service.Constraint{}, ErrBadField.Withf("choice[%d] must be 1 to %d bytes", i, maxChoiceBytes)
		}
	}
	return service.Constraint{Choice: choices}, nil
}

func isNull(raw json.RawMessage) bool { return len(raw) == 0 || string(raw) == "null" }

// Template variables a request may set (chat_template_kwargs,
// reasoning_effort).
const maxTemplateVars = 32

var (
	varName          = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,63}$`)
	reasoningEfforts = map[string]bool{"minimal": true, "low": true, "medium": true, "high": true}
)

// templateOptions is how the request asks its chat rendered (chat.Options):
// the generation prompt (add_generation_prompt, default true),
// continue_final_message, and the template variables of
// chat_template_kwargs and reasoning_effort. A variable's value is a
// boolean, a number or null: a string would be written as the template's
// own text, where control tokens are parsed, so only reasoning_effort's
// fixed words are taken. With tpl set, a variable the template never
// names is refused (it could change nothing: refused, never ignored).
// Errors: ErrBadField, ErrUnsupported.
func (r *ChatRequest) templateOptions(tpl *chat.Template) (chat.Options, error) {
	o := chat.Options{GenerationPrompt: true, ContinueFinal: r.ContinueFinal}
	if r.AddGenerationPrompt != nil {
		o.GenerationPrompt = *r.AddGenerationPrompt
	}
	if o.ContinueFinal && r.AddGenerationPrompt == nil {
		o.GenerationPrompt = false // vLLM asks the client to turn it off; continuing implies it
	}
	if o.ContinueFinal && o.GenerationPrompt {
		return o, ErrBadField.Withf("continue_final_message and add_generation_prompt are exclusive")
	}
	if len(r.ChatTemplateKwargs) > maxTemplateVars {
		return o, ErrBadField.Withf("chat_template_kwargs: at most %d variables", maxTemplateVars)
	}
	vars := map[string]any{}
	for k, raw := range r.ChatTemplateKwargs {
		if !varName.MatchString(k) {
			return o, ErrBadField.Withf("chat_template_kwargs: %q is not a variable name", truncate(k, maxFieldName))
		}
		var v any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		if err := dec.Decode(&v); err != nil {
			return o, ErrBadField.Withf("chat_template_kwargs.%s is not JSON", k)
		}
		switch x := v.(type) {
		case nil, bool:
			vars[k] = x
		case json.Number:
			if i, err := x.Int64(); err == nil {
				vars[k] = i
			} else if f, err := x.Float64(); err == nil {
				vars[k] = f
			} else {
				return o, ErrBadField.Withf("chat_template_kwargs.%s: a number out of range", k)
			}
		case string:
			if k != "reasoning_effort" {
				return o, ErrUnsupported.Withf("chat_template_kwargs.%s: a string value (the template would write it as its own text, where control tokens are parsed); booleans, numbers and null are taken", k)
			}
			vars[k] = x
		default:
			return o, ErrUnsupported.Withf("chat_template_kwargs.%s: lists and objects are not taken", k)
		}
	}
	if r.ReasoningEffort != nil {
		if _, both := vars["reasoning_effort"]; both {
			return o, ErrBadField.Withf("reasoning_effort both as a field and in chat_template_kwargs")
		}
		vars["reasoning_effort"] = *r.ReasoningEffort
	}
	if e, ok := vars["reasoning_effort"].(string); ok && !reasoningEfforts[e] {
		return o, ErrBadField.Withf("reasoning_effort must be minimal, low, medium or high")
	}
	if tpl != nil {
		for k := range vars {
			if !strings.Contains(tpl.Source(), k) {
				return o, ErrUnsupported.Withf("%s: the model's chat template reads no variable of that name", k)
			}
		}
	}
	if len(vars) > 0 {
		o.Vars = vars
	}
	return o, nil
}
