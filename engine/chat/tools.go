package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Tool is a function the model may call (an OpenAI function tool). The
// template sees it as {"type": "function", "function": {"name",
// "description", "parameters"}}, as Hugging Face templates expect.
type Tool struct {
	Name        string
	Description string
	// Parameters is the function's JSON schema (an object), or empty.
	Parameters json.RawMessage
}

// ToolCall is a call the assistant made, in an assistant message.
type ToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall is a call's function: its name and its arguments, a JSON
// object as text (as the OpenAI API carries them). The template sees the
// arguments parsed (a dict), as llama.cpp, vLLM and transformers pass them.
type FunctionCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// idPattern is what a tool call id (and a tool message's tool_call_id) may
// be. Ids are written where the template puts them without being masked
// (Mistral's templates check their length), so they are held to characters
// that can never spell a control token.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// NamePattern is what a function name may be (the OpenAI API's rule).
var NamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

// maskFunc returns what the template sees for a client string: the string
// itself (rendering the text) or a placeholder (rendering the shape).
type maskFunc func(string) string

func identity(s string) string { return s }

// schemaKeywords are the JSON-schema keys a template may look up by name;
// they are passed as they are. Any other key of a schema (a property name,
// an unknown keyword) is client text and is masked like a value.
var schemaKeywords = map[string]bool{
	"type": true, "description": true, "properties": true, "required": true, "items": true, "enum": true,
	"const": true, "default": true, "anyOf": true, "oneOf": true, "allOf": true, "not": true, "$ref": true,
	"$defs": true, "definitions": true, "additionalProperties": true, "format": true, "minimum": true,
	"maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "minLength": true, "maxLength": true,
	"minItems": true, "maxItems": true, "uniqueItems": true, "pattern": true, "title": true, "examples": true,
	"nullable": true, "prefixItems": true, "patternProperties": true, "multipleOf": true, "$schema": true,
	"$id": true, "propertyNames": true, "minProperties": true, "maxProperties": true, "strict": true,
}

// schemaMaps are the schema keywords whose value maps client-chosen names
// to schemas.
var schemaMaps = map[string]bool{"properties": true, "$defs": true, "definitions": true, "patternProperties": true}

// schemaTypes are the values of "type" that are passed as they are
// (templates compare them: {% if param.type == "string" %}).
var schemaTypes = map[string]bool{"string": true, "number": true, "integer": true, "boolean": true, "object": true, "array": true, "null": true}

// jsonKind says how a JSON value's strings are masked.
type jsonKind int

const (
	anyJSON    jsonKind = iota // arguments: every key and string is client text
	schemaJSON                 // a schema: keywords and type names pass, the rest is masked
	schemaMap                  // a map from names (masked) to schemas
)

// jsonValue converts one JSON value to a template value, keeping the order
// of object keys (a template's tojson must print them as the client sent
// them, as Python and JavaScript do). Strings go through mask as kind says.
func jsonValue(raw []byte, kind jsonKind, mask maskFunc) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	v, err := jsonNext(dec, kind, mask, 0)
	if err != nil {
		return jinja.Value{}, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jinja.Value{}, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

// maxJSONDepth bounds the nesting of a tool's schema or a call's arguments.
const maxJSONDepth = 64

func jsonNext(dec *json.Decoder, kind jsonKind, mask maskFunc, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Value{}, fmt.Errorf("JSON nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			d := jinja.NewDict()
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				key := kt.(string)
				ck := kind
				switch kind {
				case schemaJSON:
					if schemaKeywords[key] {
						if schemaMaps[key] {
							ck = schemaMap
						}
					} else {
						key, ck = mask(key), anyJSON
					}
				case schemaMap:
					key, ck = mask(key), schemaJSON
				default:
					key = mask(key)
				}
				var v jinja.Value
				if kind == schemaJSON && kt.(string) == "type" {
					v, err = jsonType(dec, mask)
				} else if kind == schemaJSON && (kt.(string) == "required" || kt.(string) == "enum") {
					v, err = jsonNext(dec, anyJSON, mask, depth+1)
				} else {
					v, err = jsonNext(dec, ck, mask, depth+1)
				}
				if err != nil {
					return jinja.Value{}, err
				}
				d.AsDict().Set(key, v)
			}
			_, err := dec.Token() // '}'
			return d, err
		case '[':
			var items []jinja.Value
			for dec.More() {
				ik := kind
				if kind == schemaMap {
					ik = anyJSON
				}
				v, err := jsonNext(dec, ik, mask, depth+1)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, v)
			}
			_, err := dec.Token() // ']'
			return jinja.NewList(items), err
		}
	case string:
		if t == "" {
			return jinja.NewString(""), nil
		}
		return jinja.NewString(mask(t)), nil
	case json.Number:
		return jinja.FromGoValue(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Value{}, fmt.Errorf("unexpected JSON token %v", tok)
}

// jsonType reads a schema's "type": a known type name passes as it is,
// anything else is masked.
func jsonType(dec *json.Decoder, mask maskFunc) (jinja.Value, error) {
	typeMask := func(s string) string {
		if schemaTypes[s] {
			return s
		}
		return mask(s)
	}
	return jsonNext(dec, anyJSON, typeMask, 0)
}

// toolsValue is the template's tools variable.
func toolsValue(tools []Tool, mask maskFunc) (jinja.Value, error) {
	list := make([]jinja.Value, len(tools))
	for i, tl := range tools {
		if !NamePattern.MatchString(tl.Name) {
			return jinja.Value{}, ErrMessages.Withf("tools[%d]: the function name must be 1 to 64 letters, digits, '_', '-' or '.'", i)
		}
		fn := jinja.NewDict()
		fn.AsDict().Set("name", jinja.NewString(mask(tl.Name)))
		if tl.Description != "" {
			fn.AsDict().Set("description", jinja.NewString(mask(tl.Description)))
		}
		if len(bytes.TrimSpace(tl.Parameters)) > 0 && string(bytes.TrimSpace(tl.Parameters)) != "null" {
			p, err := jsonValue(tl.Parameters, schemaJSON, mask)
			if err != nil || !p.IsDict() {
				return jinja.Value{}, ErrMessages.Withf("tools[%d]: parameters must be a JSON object", i)
			}
			fn.AsDict().Set("parameters", p)
		}
		d := jinja.NewDict()
		d.AsDict().Set("type", jinja.NewString("function"))
		d.AsDict().Set("function", fn)
		list[i] = d
	}
	return jinja.NewList(list), nil
}

// toolCallsValue is an assistant message's tool_calls.
func toolCallsValue(i int, calls []ToolCall, mask maskFunc) (jinja.Value, error) {
	list := make([]jinja.Value, len(calls))
	for j, c := range calls {
		if !idPattern.MatchString(c.ID) {
			return jinja.Value{}, ErrMessages.Withf("messages[%d].tool_calls[%d]: the id must be 1 to 64 letters, digits, '_' or '-'", i, j)
		}
		if c.Type != "" && c.Type != "function" {
			return jinja.Value{}, ErrMessages.Withf("messages[%d].tool_calls[%d]: type must be \"function\"", i, j)
		}
		if !NamePattern.MatchString(c.Function.Name) {
			return jinja.Value{}, ErrMessages.Withf("messages[%d].tool_calls[%d]: the function name must be 1 to 64 letters, digits, '_', '-' or '.'", i, j)
		}
		args, err := jsonValue([]byte(c.Function.Arguments), anyJSON, mask)
		if err != nil || !args.IsDict() {
			return jinja.Value{}, ErrMessages.Withf("messages[%d].tool_calls[%d]: arguments must be a JSON object", i, j)
		}
		fn := jinja.NewDict()
		fn.AsDict().Set("name", jinja.NewString(mask(c.Function.Name)))
		fn.AsDict().Set("arguments", args)
		d := jinja.NewDict()
		d.AsDict().Set("id", jinja.NewString(c.ID))
		d.AsDict().Set("type", jinja.NewString("function"))
		d.AsDict().Set("function", fn)
		list[j] = d
	}
	return jinja.NewList(list), nil
}

// jsonEscaped returns s as tojson writes it inside quotes, without and
// with HTML escaping (ardanlabs/jinja's tojson with indent escapes it).
func jsonEscaped(s string) []string {
	var out []string
	for _, html := range []bool{false, true} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(html)
		_ = enc.Encode(s)
		e := strings.TrimSuffix(b.String(), "\n")
		out = append(out, e[1:len(e)-1])
	}
	return out
}

// TakesTools reports whether the template reads the tools variable, that
// is whether tools given to Prompt can reach the model at all.
func (t *Template) TakesTools() bool { return strings.Contains(t.src, "tools") }

// tojson is the template's tojson filter. It replaces ardanlabs/jinja's
// (whose indent form goes through a Go map, so it sorts keys and escapes
// HTML) with one that keeps the keys in order and escapes nothing beyond
// JSON, as Python's json.dumps and JavaScript's JSON.stringify print it:
// Llama 3.x and Granite print tools with tojson(indent=4).
func tojson(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.NewString(""), nil
	}
	item, key := ", ", ": "
	if sep, ok := kwargs["separators"]; ok && sep.IsList() {
		it := sep.AsList().Items
		if len(it) != 2 || !it[0].IsString() || !it[1].IsString() {
			return jinja.Undefined(), fmt.Errorf("tojson: separators must contain two strings")
		}
		item, key = it[0].AsString(), it[1].AsString()
	}
	indent := ""
	if in, ok := kwargs["indent"]; ok && in.IsInt() {
		indent = strings.Repeat(" ", int(max(in.AsInt(), 0)))
		if _, ok := kwargs["separators"]; !ok {
			item = ","
		}
	} else if ok && in.IsString() {
		indent = in.AsString()
		if _, ok := kwargs["separators"]; !ok {
			item = ","
		}
	}
	_, hasIndent := kwargs["indent"]
	hasIndent = hasIndent && !kwargs["indent"].IsNone() && !kwargs["indent"].IsUndefined()
	var b strings.Builder
	if err := writeJSON(&b, args[0], item, key, indent, hasIndent, 0); err != nil {
		return jinja.Undefined(), err
	}
	return jinja.NewString(b.String()), nil
}

func writeJSON(b *strings.Builder, v jinja.Value, item, key, indent string, pretty bool, level int) error {
	nl := func(l int) {
		if pretty {
			b.WriteByte('\n')
			b.WriteString(strings.Repeat(indent, l))
		}
	}
	switch {
	case v.IsUndefined() || v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		if v.AsBool() {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		f := v.AsFloat()
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("tojson: cannot encode %v", f)
		}
		b.WriteString(strconv.FormatFloat(f, 'g', -1, 64))
	case v.IsString():
		b.WriteByte('"')
		b.WriteString(jsonEscaped(v.AsString())[0])
		b.WriteByte('"')
	case v.IsList():
		items := v.AsList().Items
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteString(item)
			}
			nl(level + 1)
			if err := writeJSON(b, it, item, key, indent, pretty, level+1); err != nil {
				return err
			}
		}
		if len(items) > 0 {
			nl(level)
		}
		b.WriteByte(']')
	case v.IsDict():
		d := v.AsDict()
		b.WriteByte('{')
		for i, k := range d.Keys {
			if i > 0 {
				b.WriteString(item)
			}
			nl(level + 1)
			b.WriteByte('"')
			b.WriteString(jsonEscaped(k)[0])
			b.WriteByte('"')
			b.WriteString(key)
			if err := writeJSON(b, d.Data[k], item, key, indent, pretty, level+1); err != nil {
				return err
			}
		}
		if len(d.Keys) > 0 {
			nl(level)
		}
		b.WriteByte('}')
	default:
		b.WriteString("null")
	}
	return nil
}
