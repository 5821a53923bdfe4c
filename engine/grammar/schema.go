package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// member is one key of a JSON object, in document order.
type member struct {
	key string
	val any
}

// object is a JSON object that keeps its key order (properties are
// generated in the order the schema lists them).
type object []member

func (o object) get(k string) (any, bool) {
	for _, m := range o {
		if m.key == k {
			return m.val, true
		}
	}
	return nil, false
}

// maxSchemaDepth bounds the nesting of a schema document.
const maxSchemaDepth = 64

// parseJSON decodes b into object, []any, string, json.Number, bool or nil.
func parseJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := parseValue(dec, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the schema")
	}
	return v, nil
}

func parseValue(dec *json.Decoder, depth int) (any, error) {
	if depth > maxSchemaDepth {
		return nil, fmt.Errorf("nested deeper than %d", maxSchemaDepth)
	}
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := t.(type) {
	case json.Delim:
		switch t {
		case '{':
			o := object{}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				if _, dup := o.get(k); dup {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				o = append(o, member{k, v})
			}
			_, err := dec.Token()
			return o, err
		case '[':
			a := []any{}
			for dec.More() {
				v, err := parseValue(dec, depth+1)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := dec.Token()
			return a, err
		}
		return nil, errors.New("unexpected delimiter")
	default:
		return t, nil
	}
}

// encodeJSON writes v compactly, keys in their order: the exact bytes an
// enum or const value is generated as.
func encodeJSON(w *strings.Builder, v any) {
	switch v := v.(type) {
	case object:
		w.WriteByte('{')
		for i, m := range v {
			if i > 0 {
				w.WriteByte(',')
			}
			encodeString(w, m.key)
			w.WriteByte(':')
			encodeJSON(w, m.val)
		}
		w.WriteByte('}')
	case []any:
		w.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				w.WriteByte(',')
			}
			encodeJSON(w, x)
		}
		w.WriteByte(']')
	case string:
		encodeString(w, v)
	case json.Number:
		w.WriteString(v.String())
	case bool:
		w.WriteString(strconv.FormatBool(v))
	case nil:
		w.WriteString("null")
	}
}

func encodeString(w *strings.Builder, s string) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	w.Write(bytes.TrimRight(b.Bytes(), "\n"))
}

// annotations never change which instances a schema accepts.
var annotations = map[string]bool{
	"title": true, "description": true, "$comment": true, "examples": true, "default": true,
	"$schema": true, "$id": true, "deprecated": true, "readOnly": true, "writeOnly": true,
}

// keywords this package enforces (in their place: "items" needs an array
// type, and so on). Any other keyword is refused, naming it.
var keywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true, "minLength": true, "maxLength": true,
	"enum": true, "const": true, "anyOf": true, "$ref": true, "$defs": true, "definitions": true,
}

// maxRepeat bounds minItems, maxItems, minLength and maxLength: each
// bounded repetition costs a rule per count.
const maxRepeat = 1024

// schemaCompiler compiles one schema document into rules of b.
type schemaCompiler struct {
	b    *builder
	root object
	defs map[string]int // "#/$defs/x" → rule (made on first use; recursion allowed)
	// rootRule is the rule of "#" (set before the root is compiled).
	rootRule int
}

func unsupported(path, format string, args ...any) error {
	return ErrUnsupportedSchema.Withf("%s at %s", fmt.Sprintf(format, args...), path)
}

func bad(path, format string, args ...any) error {
	return ErrBadSchema.Withf("%s at %s", fmt.Sprintf(format, args...), path)
}

// compileSchema adds the rules of schema document doc to b; returns its rule.
func compileSchema(b *builder, doc []byte) (int, error) {
	v, err := parseJSON(doc)
	if err != nil {
		return 0, ErrBadSchema.Withf("not JSON: %v", err)
	}
	c := &schemaCompiler{b: b, defs: map[string]int{}}
	if o, ok := v.(object); ok {
		c.root = o
	}
	c.rootRule = b.reserve("#")
	r, err := c.node(v, "#")
	if err != nil {
		return 0, err
	}
	b.set(c.rootRule, one(ref(r)))
	return c.rootRule, nil
}

func (c *schemaCompiler) node(v any, path string) (int, error) {
	switch v := v.(type) {
	case bool:
		if v {
			return c.b.value(), nil
		}
		return 0, bad(path, "the schema false admits no value")
	case object:
		return c.object(v, path)
	}
	return 0, bad(path, "a schema must be an object or a boolean")
}

func (c *schemaCompiler) object(s object, path string) (int, error) {
	keys := make([]string, 0, len(s))
	for _, m := range s {
		if annotations[m.key] {
			continue
		}
		if !keywords[m.key] {
			return 0, unsupported(path, "keyword %q", m.key)
		}
		keys = append(keys, m.key)
	}
	// Definitions are read where $ref resolves them, from the root only.
	kept := keys[:0]
	for _, k := range keys {
		if k == "$defs" || k == "definitions" {
			if path != "#" {
				return 0, unsupported(path, "%q below the root", k)
			}
			continue
		}
		kept = append(kept, k)
	}
	keys = kept
	has := func(k string) bool { _, ok := s.get(k); return ok }
	if r, ok := s.get("$ref"); ok {
		for _, k := range keys {
			if k != "$ref" {
				return 0, unsupported(path, "%q beside $ref", k)
			}
		}
		return c.ref(r, path)
	}
	if a, ok := s.get("anyOf"); ok {
		for _, k := range keys {
			if k != "anyOf" {
				return 0, unsupported(path, "%q beside anyOf", k)
			}
		}
		list, ok := a.([]any)
		if !ok || len(list) == 0 {
			return 0, bad(path, "anyOf must be a non-empty array")
		}
		var alts [][]elem
		for i, x := range list {
			r, err := c.node(x, fmt.Sprintf("%s/anyOf/%d", path, i))
			if err != nil {
				return 0, err
			}
			alts = append(alts, one(ref(r)))
		}
		return c.b.add(path, alts...), nil
	}
	if cv, ok := s.get("const"); ok {
		for _, k := range keys {
			if k != "const" && k != "type" {
				return 0, unsupported(path, "%q beside const", k)
			}
		}
		if t, ok := s.get("type"); ok && !typeAdmits(t, cv) {
			return 0, bad(path, "const is not of the schema's type")
		}
		var w strings.Builder
		encodeJSON(&w, cv)
		return c.b.literal(w.String()), nil
	}
	if ev, ok := s.get("enum"); ok {
		for _, k := range keys {
			if k != "enum" && k != "type" {
				return 0, unsupported(path, "%q beside enum", k)
			}
		}
		list, ok := ev.([]any)
		if !ok || len(list) == 0 {
			return 0, bad(path, "enum must be a non-empty array")
		}
		if len(list) > maxStacks { // every value a live parse at once: more would fail inside the matcher
			return 0, unsupported(path, "an enum of more than %d values", maxStacks)
		}
		var alts [][]elem
		for _, x := range list {
			if t, ok := s.get("type"); ok && !typeAdmits(t, x) {
				continue // an enum value of another type is not valid
			}
			var w strings.Builder
			encodeJSON(&w, x)
			alts = append(alts, lit(w.String()))
		}
		if len(alts) == 0 {
			return 0, bad(path, "no enum value has the schema's type")
		}
		return c.b.add(path, alts...), nil
	}
	var types []string
	switch t, _ := s.get("type"); t := t.(type) {
	case nil:
		if has("type") {
			return 0, bad(path, "type must be a string or an array of strings")
		}
	case string:
		types = []string{t}
	case []any:
		for _, x := range t {
			ts, ok := x.(string)
			if !ok {
				return 0, bad(path, "type must be a string or an array of strings")
			}
			types = append(types, ts)
		}
		if len(types) == 0 {
			return 0, bad(path, "type must not be empty")
		}
	default:
		return 0, bad(path, "type must be a string or an array of strings")
	}
	if types == nil {
		// No type: the keywords present say which type is meant.
		switch {
		case has("properties") || has("additionalProperties") || has("required"):
			types = []string{"object"}
		case has("items") || has("minItems") || has("maxItems"):
			types = []string{"array"}
		case has("minLength") || has("maxLength"):
			types = []string{"string"}
		default:
			return c.b.value(), nil // no assertion: any value
		}
	}
	used := map[string]bool{"type": true}
	var alts [][]elem
	for _, t := range types {
		var r int
		var err error
		switch t {
		case "object":
			r, err = c.objectType(s, path, used)
		case "array":
			r, err = c.arrayType(s, path, used)
		case "string":
			var lo, hi int
			if lo, hi, err = bounds(s, path, "minLength", "maxLength"); err == nil {
				r = c.b.str(lo, hi)
			}
			used["minLength"], used["maxLength"] = true, true
		case "number":
			r = c.b.number()
		case "integer":
			r = c.b.integer()
		case "boolean":
			r = c.b.add(path+"/boolean", lit("true"), lit("false"))
		case "null":
			r = c.b.literal("null")
		default:
			return 0, bad(path, "unknown type %q", t)
		}
		if err != nil {
			return 0, err
		}
		alts = append(alts, one(ref(r)))
	}
	for _, k := range keys {
		if !used[k] {
			return 0, unsupported(path, "%q with type %s", k, strings.Join(types, ", "))
		}
	}
	if len(alts) == 1 {
		return alts[0][0].ref, nil
	}
	return c.b.add(path, alts...), nil
}

// typeAdmits reports whether JSON value x has one of the types t names.
func typeAdmits(t any, x any) bool {
	var names []string
	switch t := t.(type) {
	case string:
		names = []string{t}
	case []any:
		for _, n := range t {
			if s, ok := n.(string); ok {
				names = append(names, s)
			}
		}
	}
	for _, n := range names {
		switch x := x.(type) {
		case object:
			if n == "object" {
				return true
			}
		case []any:
			if n == "array" {
				return true
			}
		case string:
			if n == "string" {
				return true
			}
		case bool:
			if n == "boolean" {
				return true
			}
		case nil:
			if n == "null" {
				return true
			}
		case json.Number:
			if n == "number" {
				return true
			}
			if n == "integer" && isInteger(x) {
				return true
			}
		}
	}
	return false
}

func isInteger(n json.Number) bool {
	s := n.String()
	if _, err := strconv.ParseInt(s, 10, 64); err == nil {
		return true
	}
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f == float64(int64(f))
}

// bounds reads a min/max keyword pair (non-negative integers, min ≤ max,
// at most maxRepeat); max -1 when absent.
func bounds(s object, path, minK, maxK string) (int, int, error) {
	get := func(k string, def int) (int, error) {
		v, ok := s.get(k)
		if !ok {
			return def, nil
		}
		n, isNum := v.(json.Number)
		i, err := strconv.Atoi(string(n))
		if !isNum || err != nil || i < 0 {
			return 0, bad(path, "%s must be a non-negative integer", k)
		}
		if i > maxRepeat {
			return 0, unsupported(path, "%s above %d", k, maxRepeat)
		}
		return i, nil
	}
	lo, err := get(minK, 0)
	if err != nil {
		return 0, 0, err
	}
	hi, err := get(maxK, -1)
	if err != nil {
		return 0, 0, err
	}
	if hi >= 0 && hi < lo {
		return 0, 0, bad(path, "%s is above %s", minK, maxK)
	}
	return lo, hi, nil
}

func (c *schemaCompiler) ref(r any, path string) (int, error) {
	s, ok := r.(string)
	if !ok {
		return 0, bad(path, "$ref must be a string")
	}
	if s == "#" {
		return c.rootRule, nil
	}
	var dir string
	switch {
	case strings.HasPrefix(s, "#/$defs/"):
		dir = "$defs"
	case strings.HasPrefix(s, "#/definitions/"):
		dir = "definitions"
	default:
		return 0, unsupported(path, "$ref %q (only #, #/$defs/… and #/definitions/… are resolved)", s)
	}
	name := s[len("#/"+dir+"/"):]
	if strings.Contains(name, "/") {
		return 0, unsupported(path, "$ref %q into a nested definition", s)
	}
	if rr, ok := c.defs[s]; ok {
		return rr, nil
	}
	key := strings.ReplaceAll(strings.ReplaceAll(name, "~1", "/"), "~0", "~")
	defs, _ := c.root.get(dir)
	do, _ := defs.(object)
	target, ok := do.get(key)
	if !ok {
		return 0, bad(path, "$ref %q names no definition", s)
	}
	rr := c.b.reserve(s)
	c.defs[s] = rr
	body, err := c.node(target, s)
	if err != nil {
		return 0, err
	}
	c.b.set(rr, one(ref(body)))
	return rr, nil
}

func (c *schemaCompiler) objectType(s object, path string, used map[string]bool) (int, error) {
	used["properties"], used["required"], used["additionalProperties"] = true, true, true
	var props object
	if p, ok := s.get("properties"); ok {
		if props, ok = p.(object); !ok {
			return 0, bad(path, "properties must be an object")
		}
	}
	required := map[string]bool{}
	if r, ok := s.get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return 0, bad(path, "required must be an array of strings")
		}
		for _, x := range list {
			name, ok := x.(string)
			if !ok {
				return 0, bad(path, "required must be an array of strings")
			}
			if _, ok := props.get(name); !ok {
				return 0, unsupported(path, "required property %q that properties does not define", name)
			}
			required[name] = true
		}
	}
	ws := ref(c.b.ws())
	addl, hasAddl := s.get("additionalProperties")
	if len(props) == 0 {
		switch a := addl.(type) {
		case bool:
			if !a {
				return c.b.add(path, cat(lit("{"), one(ws), lit("}"))), nil
			}
			return c.b.object(), nil
		case object:
			v, err := c.node(a, path+"/additionalProperties")
			if err != nil {
				return 0, err
			}
			return c.b.mapOf(path, v), nil
		case nil:
			if hasAddl {
				return 0, bad(path, "additionalProperties must be a boolean or a schema")
			}
			return c.b.object(), nil
		}
		return 0, bad(path, "additionalProperties must be a boolean or a schema")
	}
	switch addl.(type) {
	case bool, object, nil:
	default:
		return 0, bad(path, "additionalProperties must be a boolean or a schema")
	}
	// With properties the object holds declared properties only, in their
	// order: valid whatever additionalProperties says (false, as OpenAI's
	// strict mode requires, or extra keys allowed and never produced).
	kv := make([]int, len(props))
	for i, m := range props {
		v, err := c.node(m.val, path+"/properties/"+m.key)
		if err != nil {
			return 0, err
		}
		var key strings.Builder
		encodeString(&key, m.key)
		kv[i] = c.b.add(path+"/"+m.key, cat(lit(key.String()), []elem{ws, terms(':', ':'), ws, ref(v)}))
	}
	// seq(i, comma): properties i.. in order, optional ones skippable;
	// comma says whether one was already written (so a separator leads).
	memo := map[[2]int]int{}
	var seq func(i int, comma bool) int
	seq = func(i int, comma bool) int {
		k := [2]int{i, 0}
		if comma {
			k[1] = 1
		}
		if r, ok := memo[k]; ok {
			return r
		}
		if i == len(props) {
			r := c.b.add(path+"/end", nil)
			memo[k] = r
			return r
		}
		var lead []elem
		if comma {
			lead = c.b.sep()
		}
		alts := [][]elem{cat(lead, []elem{ref(kv[i]), ref(seq(i+1, true))})}
		if !required[props[i].key] {
			alts = append(alts, one(ref(seq(i+1, comma))))
		}
		r := c.b.add(fmt.Sprintf("%s/seq%d", path, i), alts...)
		memo[k] = r
		return r
	}
	body := seq(0, false)
	return c.b.add(path, cat(lit("{"), []elem{ws, ref(body), ws}, lit("}"))), nil
}

func (c *schemaCompiler) arrayType(s object, path string, used map[string]bool) (int, error) {
	used["items"], used["minItems"], used["maxItems"] = true, true, true
	lo, hi, err := bounds(s, path, "minItems", "maxItems")
	if err != nil {
		return 0, err
	}
	item := c.b.value()
	if it, ok := s.get("items"); ok {
		if _, isList := it.([]any); isList {
			return 0, unsupported(path, "items as an array (tuples)")
		}
		if item, err = c.node(it, path+"/items"); err != nil {
			return 0, err
		}
	}
	return c.b.array(path, item, lo, hi), nil
}
