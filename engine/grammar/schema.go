package grammar

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"math/bits"
	"slices"
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

// keywords this package enforces (in their place: "items" needs an array
// type, and so on).
var keywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "prefixItems": true, "additionalItems": true, "minItems": true, "maxItems": true, "minLength": true, "maxLength": true,
	"enum": true, "const": true, "anyOf": true, "$ref": true, "$defs": true, "definitions": true,
	"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true,
	"oneOf": true, "allOf": true, "patternProperties": true, "minProperties": true, "maxProperties": true, "pattern": true, "format": true,
}

// assertions are the keywords of JSON Schema (draft-04 to 2020-12) that
// constrain an instance and that this package does not enforce: each is
// refused by name. Every other keyword asserts nothing — annotations
// (title, examples, readOnly, …), vendor extensions (x-*), misspellings and
// keywords of other vocabularies — and JSON Schema says a validator ignores
// what it does not know, so the grammar does too.
var assertions = map[string]bool{
	"not": true, "if": true, "then": true, "else": true,
	"dependentSchemas": true, "dependencies": true, "dependentRequired": true,
	"contains": true, "minContains": true, "maxContains": true,
	"uniqueItems": true, "unevaluatedItems": true, "unevaluatedProperties": true,
	"propertyNames": true,
	"multipleOf":    true,
	"$dynamicRef":   true, "$recursiveRef": true,
	// draft-03's assertions, which validators still implement
	"extends": true, "disallow": true, "divisibleBy": true,
}

// appliesTo names the one instance type a keyword constrains; on an
// instance of another type it is vacuous, so a schema whose type excludes
// that one needs no enforcement of it. Keywords absent here apply to every
// type.
var appliesTo = map[string]string{
	"properties": "object", "required": "object", "additionalProperties": "object",
	"patternProperties": "object", "propertyNames": "object", "minProperties": "object",
	"maxProperties": "object", "dependencies": "object", "dependentRequired": "object",
	"dependentSchemas": "object", "unevaluatedProperties": "object",
	"items": "array", "prefixItems": "array", "additionalItems": "array", "contains": "array", "minContains": "array",
	"maxContains": "array", "minItems": "array", "maxItems": "array", "uniqueItems": "array",
	"unevaluatedItems": "array",
	"minLength":        "string", "maxLength": "string", "pattern": "string", "format": "string",
	"minimum": "number", "maximum": "number", "exclusiveMinimum": "number",
	"exclusiveMaximum": "number", "multipleOf": "number",
}

// stringKeyword: the keywords that constrain strings; beside enum or
// const they filter the values.
var stringKeyword = map[string]bool{"pattern": true, "format": true, "minLength": true, "maxLength": true}

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
	// nestedID is the place of an $id below the root, refRef that of a
	// $ref: together they are refused (the $ref might resolve elsewhere).
	nestedID, usedRef string
	// merged: allOf schemas compiled (by content) → rule.
	merged map[string]int
	// nodes counts subschemas compiled (bounded by maxNodes).
	nodes int
	// textBytes counts the schema text of allOf memo keys (bounded by
	// maxMergeText).
	textBytes int
}

// maxMergeText bounds the schema text that allOf merges of one document
// read.
const maxMergeText = 4 << 20

// maxNodes bounds the subschemas one document compiles to (allOf merges
// and anyOf distribution copy subschemas).
const maxNodes = 20_000

// declaredTypes is the set of types the schema's "type" allows ("integer"
// counted as "number" too), nil when it has none.
func declaredTypes(s object, path string) (map[string]bool, error) {
	t, ok := s.get("type")
	if !ok {
		return nil, nil
	}
	var names []string
	switch t := t.(type) {
	case string:
		names = []string{t}
	case []any:
		for _, x := range t {
			ts, ok := x.(string)
			if !ok {
				return nil, bad(path, "type must be a string or an array of strings")
			}
			names = append(names, ts)
		}
	default:
		return nil, bad(path, "type must be a string or an array of strings")
	}
	set := map[string]bool{}
	for _, n := range names {
		set[n] = true
		if n == "integer" {
			set["number"] = true
		}
	}
	return set, nil
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
	c := &schemaCompiler{b: b, defs: map[string]int{}, merged: map[string]int{}}
	if o, ok := v.(object); ok {
		c.root = o
	}
	c.rootRule = b.reserve("#")
	r, err := c.node(v, "#")
	if err != nil {
		return 0, err
	}
	b.set(c.rootRule, one(ref(r)))
	if c.nestedID != "" && c.usedRef != "" {
		return 0, unsupported(c.usedRef, "$ref with an $id below the root (at %s)", c.nestedID)
	}
	return c.rootRule, nil
}

func (c *schemaCompiler) node(v any, path string) (int, error) {
	c.nodes++
	if c.nodes > maxNodes || c.b.tooBig {
		return 0, unsupported(path, "a schema that compiles to more than %d subschemas or %d rules", maxNodes, maxRules)
	}
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
	if _, ref := s.get("$ref"); ref && c.refSiblingsIgnored() {
		// siblings of a $ref that the draft ignores: not read at all
		s = without(s, "if", "then", "else", "not")
	} else {
		var err error
		if s, err = c.reduceIf(s, path); err != nil {
			return 0, err
		}
		if s, err = c.reduceNot(s, path); err != nil {
			return 0, err
		}
		if s, err = reduceConstEnum(s, path); err != nil {
			return 0, err
		}
	}
	declared, err := declaredTypes(s, path)
	if err != nil {
		return 0, err
	}
	keys := make([]string, 0, len(s))
	for _, m := range s {
		if m.key == "$id" || m.key == "id" {
			// An identifier below the root moves the base that a $ref
			// inside it resolves against; refs resolve from the root only.
			if id, ok := m.val.(string); ok && path != "#" && !strings.HasPrefix(id, "#") {
				c.nestedID = path
			}
			continue
		}
		if !keywords[m.key] && !assertions[m.key] {
			continue // asserts nothing
		}
		if t, ok := appliesTo[m.key]; ok && declared != nil && !declared[t] {
			continue // vacuous on every type the schema allows
		}
		if m.key == "additionalItems" {
			it, _ := s.get("items")
			_, list := it.([]any)
			_, prefix := s.get("prefixItems")
			if !list && !prefix {
				continue // it applies past items given as an array only
			}
		}
		if m.key == "uniqueItems" {
			switch m.val {
			case false:
				continue // asserts nothing
			case true:
				keys = append(keys, m.key) // arrayType reads it
				continue
			}
			return 0, bad(path, "uniqueItems must be a boolean")
		}
		if m.key == "propertyNames" {
			if vacuousOnKeys(m.val) {
				continue // it accepts every key
			}
			keys = append(keys, m.key) // objectType reads it
			continue
		}
		if assertions[m.key] && !objectAssertion(m.key, m.val) {
			return 0, unsupported(path, "keyword %q", m.key)
		}
		if m.key == "$defs" || m.key == "definitions" {
			continue // read where a $ref resolves them
		}
		keys = append(keys, m.key)
	}
	has := func(k string) bool { _, ok := s.get(k); return ok }
	if has("allOf") && !(has("$ref") && c.refSiblingsIgnored()) {
		// Memoized by content, as a $ref is: a merge that inlines a
		// recursive definition meets the same allOf again.
		if c.textBytes > maxMergeText {
			return 0, unsupported(path, "keyword %q whose merges exceed %d bytes of schema", "allOf", maxMergeText)
		}
		key := c.text(s)
		if c.textBytes > maxMergeText {
			return 0, unsupported(path, "keyword %q whose merges exceed %d bytes of schema", "allOf", maxMergeText)
		}
		if r, ok := c.merged[key]; ok {
			return r, nil
		}
		r := c.b.reserve(path + "/allOf")
		c.merged[key] = r
		m, err := c.mergeAllOf(s, path)
		body := 0
		if err == nil {
			body, err = c.object(m, path)
		}
		if err != nil {
			// the caller fails, or drops this branch: the rule stays,
			// matching nothing
			c.b.set(r, one(terms()))
			delete(c.merged, key)
			return 0, err
		}
		c.b.set(r, one(ref(body)))
		return r, nil
	}
	if r, ok := s.get("$ref"); ok {
		// Up to draft-07 a $ref's siblings are ignored; from 2019-09 on
		// they apply with it, which is enforced only where redundant.
		if !c.refSiblingsIgnored() {
			for _, k := range keys {
				if k != "$ref" && !(k == "type" && c.typeRedundant(s, r)) {
					return 0, unsupported(path, "%q beside $ref", k)
				}
			}
		}
		return c.ref(r, path)
	}
	unionKW := "anyOf" // the keyword the union's branches are placed under
	if o, ok := s.get("oneOf"); ok {
		// oneOf is anyOf when no value can match two branches: their
		// types are pairwise disjoint. Otherwise "exactly one" is not
		// enforced, and refused.
		if _, both := s.get("anyOf"); both {
			return 0, unsupported(path, "%q beside anyOf", "oneOf")
		}
		list, ok := o.([]any)
		if !ok || len(list) == 0 {
			return 0, bad(path, "oneOf must be a non-empty array")
		}
		if !c.disjoint(list) {
			return 0, unsupported(path, "keyword %q with branches whose types overlap", "oneOf")
		}
		s = append(object{{"anyOf", o}}, s...)
		kept := keys[:0]
		for _, k := range keys {
			if k != "oneOf" {
				kept = append(kept, k)
			}
		}
		keys = append(kept, "anyOf")
		unionKW = "oneOf"
	}
	if a, ok := s.get("anyOf"); ok {
		// Keywords beside anyOf apply to every branch: each branch is
		// compiled as allOf of them and itself (A and (B or C) is
		// (A and B) or (A and C)).
		var rest object
		for _, k := range keys {
			if k != "anyOf" && !(k == "type" && c.typeRedundant(s, s)) {
				v, _ := s.get(k)
				rest = append(rest, member{k, v})
			}
		}
		list, ok := a.([]any)
		if !ok || len(list) == 0 {
			return 0, bad(path, "anyOf must be a non-empty array")
		}
		var alts [][]elem
		for i, x := range list {
			if len(rest) > 0 {
				x = object{{"allOf", []any{rest, x}}}
			}
			r, err := c.node(x, fmt.Sprintf("%s/%s/%d", path, unionKW, i))
			var u unsatisfiable
			if len(rest) > 0 && errors.As(err, &u) {
				continue // no value satisfies this branch beside the rest
			}
			if err != nil {
				return 0, err
			}
			alts = append(alts, one(ref(r)))
		}
		if len(alts) == 0 {
			return 0, bad(path, "no anyOf branch can be satisfied beside the keywords next to it")
		}
		return c.b.add(path, alts...), nil
	}
	if cv, ok := s.get("const"); ok {
		for _, k := range keys {
			if k != "const" && k != "type" && !stringKeyword[k] {
				return 0, unsupported(path, "%q beside const", k)
			}
		}
		if t, ok := s.get("type"); ok && !typeAdmits(t, cv) {
			return 0, bad(path, "const is not of the schema's type")
		}
		sc, err := c.readString(s, path)
		if err != nil {
			return 0, err
		}
		if !enumString(sc, cv) {
			return 0, bad(path, "const does not satisfy the string keywords beside it")
		}
		var w strings.Builder
		encodeJSON(&w, cv)
		return c.b.literal(w.String()), nil
	}
	if ev, ok := s.get("enum"); ok {
		for _, k := range keys {
			if k != "enum" && k != "type" && !stringKeyword[k] {
				return 0, unsupported(path, "%q beside enum", k)
			}
		}
		sc, err := c.readString(s, path)
		if err != nil {
			return 0, err
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
			if !enumString(sc, x) {
				continue // nor one the string keywords refuse
			}
			var w strings.Builder
			encodeJSON(&w, x)
			alts = append(alts, lit(w.String()))
		}
		if len(alts) == 0 {
			return 0, bad(path, "no enum value has the schema's type and satisfies its keywords")
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
		if len(keys) == 0 {
			return c.b.value(), nil // no assertion: any value
		}
		// No type: every type is allowed, each keyword constraining
		// only its own (properties says nothing of a string).
		types = []string{"object", "array", "string", "number", "boolean", "null"}
	}
	used := map[string]bool{"type": true}
	var alts [][]elem
	notRequired := notRequiredForm(s) // {"not":{"required":[…]}} (objectAssertion)
	if notStrings(s) != nil {
		used["not"] = true // strings excluded: stringType's, vacuous on other types
	}
	for _, t := range types {
		var r int
		var err error
		if notRequired && t != "object" {
			continue // "required" holds of any other type, so "not" fails
		}
		if mv, ok := s.get("multipleOf"); ok && (t == "number" || t == "integer") {
			used["multipleOf"] = true
			if k := wholeDivisor(mv); k > 1 {
				if n, ok := numericBound(s); ok {
					return 0, unsupported(path, "%q beside %q", "multipleOf", n)
				}
				alts = append(alts, one(ref(c.b.multipleOfInt(k))))
				continue
			}
			t = "integer" // multipleOf 1: the integers
		}
		switch t {
		case "object":
			r, err = c.objectType(s, path, used)
		case "array":
			r, err = c.arrayType(s, path, used)
		case "string":
			r, err = c.stringType(s, path)
			used["minLength"], used["maxLength"], used["pattern"], used["format"] = true, true, true, true
		case "number":
			if n, ok := numericBound(s); ok && declared["integer"] {
				return 0, unsupported(path, "%q with types integer and number", n)
			} else if ok {
				used["minimum"], used["maximum"], used["exclusiveMinimum"], used["exclusiveMaximum"] = true, true, true, true
				r, err = c.numberRange(s, path)
			} else {
				r = c.b.number()
			}
		case "integer":
			used["minimum"], used["maximum"], used["exclusiveMinimum"], used["exclusiveMaximum"] = true, true, true, true
			var lo, hi *big.Int
			if lo, hi, err = intBounds(s, path); err == nil {
				if lo == nil && hi == nil {
					r = c.b.integer()
				} else {
					r, err = c.b.intRange(path, lo, hi)
				}
			}
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
	if len(alts) == 0 {
		return 0, unsatisfiable{bad(path, "not with required admits objects only, which type excludes")}
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
	return boundsUpTo(s, path, minK, maxK, maxRepeat)
}

// boundsUpTo is bounds with limit in place of maxRepeat (-1: none).
func boundsUpTo(s object, path, minK, maxK string, limit int) (int, int, error) {
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
		if limit >= 0 && i > limit {
			return 0, unsupported(path, "%s above %d", k, limit)
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
	c.usedRef = path
	if s == "#" {
		return c.rootRule, nil
	}
	if !strings.HasPrefix(s, "#/") {
		return 0, unsupported(path, "$ref %q (only # and JSON pointers into this document, #/…, are resolved)", s)
	}
	if rr, ok := c.defs[s]; ok {
		return rr, nil
	}
	// Resolve the pointer through the document, whatever it passes
	// ($defs at any depth, a property's schema, an anyOf branch).
	var target any = c.root
	for _, tok := range strings.Split(s[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		if strings.Contains(tok, "%") {
			return 0, unsupported(path, "$ref %q with percent-encoding", s)
		}
		switch t := target.(type) {
		case object:
			v, ok := t.get(tok)
			if !ok {
				return 0, bad(path, "$ref %q names nothing in the document", s)
			}
			target = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return 0, bad(path, "$ref %q names nothing in the document", s)
			}
			target = t[i]
		default:
			return 0, bad(path, "$ref %q names nothing in the document", s)
		}
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
	used["properties"], used["required"], used["additionalProperties"], used["patternProperties"] = true, true, true, true
	var props object
	if p, ok := s.get("properties"); ok {
		if props, ok = p.(object); !ok {
			return 0, bad(path, "properties must be an object")
		}
	}
	used["propertyNames"] = true
	var kn *keyNames
	if pn, ok := s.get("propertyNames"); ok {
		var err error
		if kn, err = c.readKeyNames(pn, path); err != nil {
			return 0, err
		}
		if kn != nil && kn.finite {
			return c.finiteKeyObject(s, props, kn.values, path, used)
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
	if kn != nil {
		// declared properties whose names the language refuses never come
		var kept object
		for _, m := range props {
			if kn.admitsName(m.key) {
				kept = append(kept, m)
			} else if required[m.key] {
				return 0, unsatisfiable{bad(path, "required property %q that propertyNames excludes", m.key)}
			}
		}
		props = kept
	}
	used["minProperties"], used["maxProperties"] = true, true
	minP, maxP, err := bounds(s, path, "minProperties", "maxProperties")
	if err != nil {
		return 0, err
	}
	counted := minP > 0 || maxP >= 0
	used["dependencies"], used["dependentRequired"], used["not"] = true, true, true
	addl, hasAddl := s.get("additionalProperties")
	cons, err := readObjectRules(s, props, addl, path)
	if err != nil {
		return 0, err
	}
	if _, ok := s.get("patternProperties"); ok {
		if counted {
			return 0, unsupported(path, "minProperties or maxProperties beside patternProperties")
		}
		if cons.present {
			return 0, unsupported(path, "dependencies, dependentRequired or not beside patternProperties")
		}
		return c.patternObject(s, props, required, path, kn)
	}
	if cons.present && minP > 0 {
		return 0, unsupported(path, "minProperties beside dependencies, dependentRequired or not")
	}
	anyKey := c.b.str(0, -1)
	if kn != nil {
		if anyKey, err = c.keyRule(kn, "", path); err != nil {
			return 0, err
		}
		if anyKey < 0 {
			// no key at all: the object is empty
			return c.finiteKeyObject(s, nil, nil, path, used)
		}
	}
	ws := ref(c.b.ws())
	if len(props) == 0 && counted {
		// Undeclared keys only: members up to maxProperties (a repeated
		// key counts once, so fewer is all it can make); minProperties
		// above 1 cannot be kept by members whose keys may repeat (1 can:
		// one member is one key).
		if minP > 1 {
			return 0, unsupported(path, "minProperties above 1 on an object without declared properties")
		}
		val := c.b.value()
		switch a := addl.(type) {
		case bool:
			if !a {
				if minP > 0 {
					return 0, unsatisfiable{bad(path, "minProperties on an object that admits no property")}
				}
				return c.b.add(path, cat(lit("{"), one(ws), lit("}"))), nil
			}
		case object:
			if val, err = c.node(a, path+"/additionalProperties"); err != nil {
				return 0, err
			}
		case nil:
		default:
			return 0, bad(path, "additionalProperties must be a boolean or a schema")
		}
		if maxP == 0 {
			return c.b.add(path, cat(lit("{"), one(ws), lit("}"))), nil
		}
		member := c.b.add(path+"-member", []elem{ref(anyKey), ws, terms(':', ':'), ws, ref(val)})
		members := c.b.repeat(path+"-members", one(ref(member)), c.b.sep(), 1, maxP)
		some := cat(lit("{"), []elem{ws, ref(members), ws}, lit("}"))
		if minP > 0 {
			return c.b.add(path, some), nil
		}
		return c.b.add(path, cat(lit("{"), one(ws), lit("}")), some), nil
	}
	if minP > len(props) {
		return 0, unsupported(path, "minProperties above the number of declared properties")
	}
	if len(props) == 0 {
		switch a := addl.(type) {
		case bool:
			if !a {
				return c.b.add(path, cat(lit("{"), one(ws), lit("}"))), nil
			}
			if kn != nil {
				return c.b.mapOfKeys(path, anyKey, c.b.value()), nil
			}
			return c.b.object(), nil
		case object:
			v, err := c.node(a, path+"/additionalProperties")
			if err != nil {
				return 0, err
			}
			return c.b.mapOfKeys(path, anyKey, v), nil
		case nil:
			if hasAddl {
				return 0, bad(path, "additionalProperties must be a boolean or a schema")
			}
			if kn != nil {
				return c.b.mapOfKeys(path, anyKey, c.b.value()), nil
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
	// With properties the declared ones come in their order. Where
	// additionalProperties allows more (absent, true or a schema), members
	// of other keys may stand between them (extraMember: a key that can
	// equal no declared one); with false, or declared keys this package
	// cannot exclude, the object holds declared properties only, which is
	// valid whatever additionalProperties says.
	extra := -1
	if a, isBool := addl.(bool); !isBool || a {
		val := -1
		if ao, ok := addl.(object); ok {
			v, err := c.node(ao, path+"/additionalProperties")
			if err != nil {
				return 0, err
			}
			val = v
		} else {
			val = c.b.value()
		}
		if kn != nil {
			// a key of the language that spells no declared name
			key, err := c.keyRule(kn, "", path, names(props)...)
			if err != nil {
				return 0, err
			}
			if key >= 0 {
				extra = c.b.add(path+"-extra", []elem{ref(key), ws, terms(':', ':'), ws, ref(val)})
			}
		} else {
			extra = c.extraMember(path, props, val)
		}
	}
	return c.declaredObject(props, required, path, extra, minP, maxP, cons)
}

// declaredObject: an object of the declared properties props in any
// order, each at most once, the required ones always; members of rule
// extra (when ≥ 0) may stand before, between and after them. Declared
// properties written number at least minP; all members, extra ones
// included, at most maxP (maxP < 0: any). An extra member's key may repeat
// another's, which a validator counts once: counting it again only makes
// the grammar stricter, so minP counts declared properties only.
func (c *schemaCompiler) declaredObject(props object, required map[string]bool, path string, extra, minP, maxP int, cons objectRules) (int, error) {
	ws := ref(c.b.ws())
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
	body := anyOrder(c.b.grown, kv, required, props, path, c.b.sep(), extra, minP, maxP, cons)
	if body < 0 {
		return 0, unsatisfiable{bad(path, "maxProperties below the required properties or minProperties")}
	}
	return c.b.add(path, cat(lit("{"), []elem{ws, ref(body), ws}, lit("}"))), nil
}

// anyOrder: the members kv of the declared properties in any order, each
// at most once, the required ones always, members of rule extra (when ≥ 0)
// around them; counted as declaredObject says. Its rules are grown (one
// per set of properties written, made where a parse first reaches it), so
// an object of n properties costs rules for the orders written, not 2^n.
// set(done, extras, comma) is the rest of the object once the properties
// in done and extras extra members were written; comma says whether a
// separator leads.
func anyOrder(add func(string, grower) int, kv []int, required map[string]bool, props object, path string, sep []elem, extra, minP, maxP int, cons objectRules) int {
	n := len(kv)
	words := (n + 63) / 64
	need := make([]uint64, words)
	for i, m := range props {
		if required[m.key] {
			need[i/64] |= 1 << (i % 64)
		}
	}
	type key struct {
		done   string
		extras int
		comma  bool
	}
	memo := map[key]int{}
	name := path + "/members"
	// alive: the object can still be completed once done and extras
	// were written (the required ones and minP fit under maxP).
	// With dependencies, the least completion is done and need closed
	// under them; it must hold no forbidden set.
	alive := func(done []uint64, extras int) bool {
		closure := make([]uint64, words)
		for w := range done {
			closure[w] = done[w] | need[w]
		}
		cons.close(closure)
		if cons.forbids(closure) {
			return false
		}
		if maxP < 0 {
			return true
		}
		n := 0
		for _, w := range closure {
			n += bits.OnesCount64(w)
		}
		return extras+max(n, minP) <= maxP
	}
	var set func(add func(string, grower) int, done []uint64, extras int, comma bool) int
	set = func(add func(string, grower) int, done []uint64, extras int, comma bool) int {
		k := key{bitsKey(done), extras, comma}
		if r, ok := memo[k]; ok {
			return r
		}
		r := add(name, func(add func(string, grower) int) [][]elem {
			var lead []elem
			if comma {
				lead = sep
			}
			written, complete := 0, cons.holds(done)
			for w := range done {
				written += bits.OnesCount64(done[w])
				if done[w]&need[w] != need[w] {
					complete = false
				}
			}
			var alts [][]elem
			if complete && written >= minP {
				alts = append(alts, nil)
			}
			room := maxP < 0 || written+extras < maxP
			for i := 0; i < n && room; i++ {
				if done[i/64]&(1<<(i%64)) != 0 {
					continue
				}
				next := slices.Clone(done)
				next[i/64] |= 1 << (i % 64)
				if alive(next, extras) {
					alts = append(alts, cat(lead, []elem{ref(kv[i]), ref(set(add, next, extras, true))}))
				}
			}
			if extra >= 0 && room {
				more := extras
				if maxP >= 0 {
					more++ // counted only where maxProperties needs it
				}
				if alive(done, more) {
					alts = append(alts, cat(lead, []elem{ref(extra), ref(set(add, done, more, true))}))
				}
			}
			return alts
		})
		memo[k] = r
		return r
	}
	if !alive(make([]uint64, words), 0) {
		return -1
	}
	return set(add, make([]uint64, words), 0, false)
}

// bitsKey is a map key for a bitset.
func bitsKey(b []uint64) string {
	out := make([]byte, 0, 8*len(b))
	for _, w := range b {
		out = binary.LittleEndian.AppendUint64(out, w)
	}
	return string(out)
}

func (c *schemaCompiler) arrayType(s object, path string, used map[string]bool) (int, error) {
	used["items"], used["minItems"], used["maxItems"] = true, true, true
	used["prefixItems"], used["additionalItems"] = true, true
	lo, hi, err := bounds(s, path, "minItems", "maxItems")
	if err != nil {
		return 0, err
	}
	it, hasItems := s.get("items")
	used["uniqueItems"] = true
	if u, _ := s.get("uniqueItems"); u == true && (hi < 0 || hi > 1) {
		_, tuple := s.get("prefixItems")
		if _, list := it.([]any); list || tuple {
			return 0, unsupported(path, "keyword %q beside a tuple", "uniqueItems")
		}
		vals, ok, err := c.uniqueValues(it, path)
		if err != nil {
			return 0, err
		}
		if !ok {
			return 0, unsupported(path, "keyword %q beside items that are not a finite set of at most %d scalar values", "uniqueItems", maxUniqueValues)
		}
		return c.uniqueArray(path, vals, lo, hi)
	}
	if pi, ok := s.get("prefixItems"); ok {
		list, isList := pi.([]any)
		if !isList || len(list) == 0 {
			return 0, bad(path, "prefixItems must be a non-empty array")
		}
		if c.draft() == "old" {
			return 0, unsupported(path, "%q under a draft before 2020-12 (where it is not a keyword)", "prefixItems")
		}
		if _, ok := it.([]any); ok {
			return 0, unsupported(path, "%q beside items as an array", "prefixItems")
		}
		if _, ok := s.get("additionalItems"); ok {
			return 0, unsupported(path, "%q beside %q", "additionalItems", "prefixItems")
		}
		var rest any = true
		if hasItems {
			rest = it
		}
		return c.tuple(path, list, "/prefixItems/", rest, "/items", lo, hi)
	}
	if list, ok := it.([]any); ok {
		if len(list) == 0 {
			return 0, bad(path, "items as an array must not be empty")
		}
		if c.draft() == "2020-12" {
			return 0, unsupported(path, "items as an array under draft 2020-12 (use prefixItems)")
		}
		rest, ok := s.get("additionalItems")
		if !ok {
			rest = true
		}
		return c.tuple(path, list, "/items/", rest, "/additionalItems", lo, hi)
	}
	item := c.b.value()
	if hasItems {
		if item, err = c.node(it, path+"/items"); err != nil {
			return 0, err
		}
	}
	return c.b.array(path, item, lo, hi), nil
}

// draft is "old" when the document's $schema names draft-04 to 2019-09,
// "2020-12" when it names 2020-12, "" otherwise.
func (c *schemaCompiler) draft() string {
	v, _ := c.root.get("$schema")
	d, _ := v.(string)
	for _, old := range []string{"draft-04/", "draft-06/", "draft-07/", "draft/2019-09/"} {
		if strings.Contains(d, old) {
			return "old"
		}
	}
	if strings.Contains(d, "draft/2020-12/") {
		return "2020-12"
	}
	return ""
}

// tuple is a rule for an array whose item i is valid for prefix[i] and
// whose items past the prefix are valid for rest (false: none), with
// lo..hi items (hi -1: unbounded). Past minItems each further item is
// optional, in order: item i+1 only after item i.
func (c *schemaCompiler) tuple(path string, prefix []any, prefixAt string, rest any, restAt string, lo, hi int) (int, error) {
	b := c.b
	n := len(prefix)
	if n > maxRepeat {
		return 0, unsupported(path, "a tuple of more than %d items", maxRepeat)
	}
	restRule := -1
	if f, ok := rest.(bool); !ok || f {
		r, err := c.node(rest, path+restAt)
		if err != nil {
			return 0, err
		}
		restRule = r
	}
	top := hi
	if restRule < 0 && (top < 0 || top > n) {
		top = n
	}
	if lo > top && top >= 0 {
		return 0, unsupported(path, "minItems above the %d items the tuple allows", top)
	}
	items := make([]int, n)
	for i, x := range prefix {
		r, err := c.node(x, fmt.Sprintf("%s%s%d", path, prefixAt, i))
		if err != nil {
			return 0, err
		}
		items[i] = r
	}
	sep := b.sep()
	// after(i): the items from index i on, i ≥ 1 items already written.
	var after func(i int) int
	after = func(i int) int {
		name := fmt.Sprintf("%s/tuple%d", path, i)
		if top >= 0 && i >= top {
			return b.add(name, nil)
		}
		if i >= n {
			mn, mx := max(lo-i, 0), -1
			if top >= 0 {
				mx = top - i
			}
			return b.repeat(name, cat(sep, one(ref(restRule))), nil, mn, mx)
		}
		alts := [][]elem{cat(sep, []elem{ref(items[i]), ref(after(i + 1))})}
		if i >= lo {
			alts = append(alts, nil)
		}
		return b.add(name, alts...)
	}
	ws := ref(b.ws())
	var alts [][]elem
	if top != 0 {
		alts = append(alts, cat(lit("["), []elem{ws, ref(items[0]), ref(after(1)), ws}, lit("]")))
	}
	if lo == 0 {
		alts = append(alts, cat(lit("["), one(ws), lit("]")))
	}
	return b.add(path, alts...), nil
}

// extraMember is a rule for one member `key ws : ws value` whose key
// cannot be any declared property's name, so that the member never
// escapes that property's schema; -1 when the names cannot be excluded
// (a name with a byte outside printable ASCII, a quote or a backslash).
// The key is walked through a trie of the declared names: a byte leaving
// the trie frees the rest of the key; closing it is allowed only where no
// name ends; an escape is not allowed while inside the trie (it could spell
// a declared name's next character).
func (c *schemaCompiler) extraMember(path string, props object, val int) int {
	type node struct {
		kids map[byte]*node
		end  bool
	}
	root := &node{kids: map[byte]*node{}}
	// A name that JSON must escape ('"', '\\', control characters) cannot
	// be spelled by a key without escapes: where there are such names, the
	// key has none, and only the other names enter the trie.
	escaped := func(name string) bool {
		for i := 0; i < len(name); i++ {
			if ch := name[i]; ch < 0x20 || ch == '"' || ch == '\\' {
				return true
			}
		}
		return false
	}
	raw := false
	for _, m := range props {
		raw = raw || escaped(m.key)
	}
	for _, m := range props {
		if escaped(m.key) {
			continue // never spelled by a key that holds no '"', '\\' or control character
		}
		n := root
		for i := 0; i < len(m.key); i++ {
			ch := m.key[i]
			if ch < 0x20 || ch > 0x7E || ch == '"' || ch == '\\' {
				return -1
			}
			k, ok := n.kids[ch]
			if !ok {
				k = &node{kids: map[byte]*node{}}
				n.kids[ch] = k
			}
			n = k
		}
		n.end = true
	}
	b := c.b
	suffix := ""
	if raw {
		suffix = "-raw"
	}
	rest, ok := b.shared["key-rest"+suffix]
	if !ok {
		char := b.char()
		if raw {
			// any character but '"', '\\' and control characters
			char = (&reCompiler{b: b}).class([]rune{0x20, 0x21, 0x23, 0x5B, 0x5D, 0x10FFFF}, false)
		}
		chars := b.repeat("key-rest-chars"+suffix, one(ref(char)), nil, 0, -1)
		rest = b.add("key-rest"+suffix, cat(one(ref(chars)), lit(`"`)))
		b.rules[rest].leaf = true
		b.shared["key-rest"+suffix] = rest
	}
	// A non-ASCII character leaves the trie (declared names are ASCII):
	// one shared rule, then the rest of the key.
	leaveMB := b.once("key-leave-multibyte"+suffix, false, func(int) [][]elem {
		cont := terms(0x80, 0xBF)
		return [][]elem{
			{terms(0xC2, 0xDF), cont, ref(rest)},
			{terms(0xE0, 0xE0), terms(0xA0, 0xBF), cont, ref(rest)},
			{terms(0xE1, 0xEC, 0xEE, 0xEF), cont, cont, ref(rest)},
			{terms(0xED, 0xED), terms(0x80, 0x9F), cont, ref(rest)},
			{terms(0xF0, 0xF0), terms(0x90, 0xBF), cont, cont, ref(rest)},
			{terms(0xF1, 0xF3), cont, cont, cont, ref(rest)},
			{terms(0xF4, 0xF4), terms(0x80, 0x8F), cont, cont, ref(rest)},
		}
	})
	// Past a whole declared name with no longer one: any further
	// character makes the key another name.
	afterName := b.once("key-after-name"+suffix, false, func(int) [][]elem {
		return [][]elem{{terms(0x20, 0x21, 0x23, 0x5B, 0x5D, 0x7F), ref(rest)}, one(ref(leaveMB))}
	})
	var walk func(n *node, depth int) int
	walk = func(n *node, depth int) int {
		if n.end && len(n.kids) == 0 {
			return afterName
		}
		var alts [][]elem
		if !n.end {
			alts = append(alts, lit(`"`))
		}
		// ASCII characters that leave the trie: printable, not a quote,
		// not a backslash, not a child's byte.
		var ranges []int
		start := -1
		for ch := 0x20; ch <= 0x80; ch++ {
			free := ch < 0x80 && ch != '"' && ch != '\\' && n.kids[byte(ch)] == nil
			if free && start < 0 {
				start = ch
			}
			if !free && start >= 0 {
				ranges = append(ranges, start, ch-1)
				start = -1
			}
		}
		if len(ranges) > 0 {
			alts = append(alts, []elem{terms(ranges...), ref(rest)})
		}
		alts = append(alts, one(ref(leaveMB)))
		for ch := 0x20; ch < 0x7F; ch++ { // in byte order: rules are deterministic
			if k := n.kids[byte(ch)]; k != nil {
				alts = append(alts, []elem{terms(ch, ch), ref(walk(k, depth+1))})
			}
		}
		return b.add(fmt.Sprintf("%s/extra-key%d", path, depth), alts...)
	}
	key := walk(root, 0)
	ws := ref(b.ws())
	return b.add(path+"/extra", cat(lit(`"`), []elem{ref(key), ws, terms(':', ':'), ws, ref(val)}))
}

// refSiblingsIgnored: the document declares a draft (04, 06 or 07) in
// which keywords beside $ref are ignored.
func (c *schemaCompiler) refSiblingsIgnored() bool {
	v, _ := c.root.get("$schema")
	d, _ := v.(string)
	for _, old := range []string{"draft-04/", "draft-06/", "draft-07/"} {
		if strings.Contains(d, old) {
			return true
		}
	}
	return false
}

// typeRedundant: the "type" of s allows every type that x (a $ref string
// or a schema with anyOf) can admit, so the type asserts nothing more.
func (c *schemaCompiler) typeRedundant(s object, x any) bool {
	t, _ := s.get("type")
	var allowed []string
	switch t := t.(type) {
	case string:
		allowed = []string{t}
	case []any:
		for _, n := range t {
			if n, ok := n.(string); ok {
				allowed = append(allowed, n)
			}
		}
	}
	if r, ok := x.(string); ok {
		x = c.resolve(r)
	} else if o, ok := x.(object); ok {
		a, _ := o.get("anyOf")
		x = object{{"anyOf", a}}
	}
	implied := c.impliedTypes(x, 0)
	if implied == nil {
		return false
	}
	for n := range implied {
		ok := false
		for _, a := range allowed {
			if a == n || a == "number" && n == "integer" {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// resolve follows a JSON pointer $ref through the document (nil if it
// names nothing there).
func (c *schemaCompiler) resolve(ref string) any {
	if ref == "#" {
		return c.root
	}
	if !strings.HasPrefix(ref, "#/") {
		return nil
	}
	var target any = c.root
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch t := target.(type) {
		case object:
			v, ok := t.get(tok)
			if !ok {
				return nil
			}
			target = v
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(t) {
				return nil
			}
			target = t[i]
		default:
			return nil
		}
	}
	return target
}

// impliedTypes is the set of JSON types schema x can admit at most, nil
// when it cannot say (no type, a cycle too deep).
func (c *schemaCompiler) impliedTypes(x any, depth int) map[string]bool {
	o, ok := x.(object)
	if !ok || depth > 8 {
		return nil
	}
	if r, ok := o.get("$ref"); ok {
		rs, _ := r.(string)
		return c.impliedTypes(c.resolve(rs), depth+1)
	}
	if a, ok := o.get("anyOf"); ok {
		list, _ := a.([]any)
		out := map[string]bool{}
		for _, b := range list {
			t := c.impliedTypes(b, depth+1)
			if t == nil {
				return nil
			}
			for n := range t {
				out[n] = true
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	if t, ok := o.get("type"); ok {
		out := map[string]bool{}
		switch t := t.(type) {
		case string:
			out[t] = true
		case []any:
			for _, n := range t {
				if n, ok := n.(string); ok {
					out[n] = true
				}
			}
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	var vals []any
	if v, ok := o.get("const"); ok {
		vals = []any{v}
	} else if e, ok := o.get("enum"); ok {
		vals, _ = e.([]any)
	}
	if len(vals) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, v := range vals {
		switch v := v.(type) {
		case object:
			out["object"] = true
		case []any:
			out["array"] = true
		case string:
			out["string"] = true
		case bool:
			out["boolean"] = true
		case nil:
			out["null"] = true
		case json.Number:
			// 2.0 is an integer from draft-06 on, not in draft-04: only
			// a plain numeral counts as one here.
			if _, err := strconv.ParseInt(v.String(), 10, 64); err == nil {
				out["integer"] = true
			} else {
				out["number"] = true
			}
		}
	}
	return out
}

// disjoint: no JSON value can match two of the branches, because the
// types each admits (impliedTypes) share none ("integer" overlapping
// "number").
// Failing that, two object branches are disjoint when a property both
// require has string const or enum values that share none (a
// discriminator).
func (c *schemaCompiler) disjoint(branches []any) bool {
	sets := make([]map[string]bool, len(branches))
	for i, b := range branches {
		sets[i] = c.impliedTypes(b, 0)
	}
	for i := range branches {
		for j := 0; j < i; j++ {
			if !typesDisjoint(sets[i], sets[j]) && !c.discriminated(branches[i], branches[j]) && !c.apart(branches[i], branches[j]) {
				return false
			}
		}
	}
	return true
}

func typesDisjoint(t, u map[string]bool) bool {
	if t == nil || u == nil {
		return false
	}
	for n := range t {
		if u[n] || n == "integer" && u["number"] || n == "number" && u["integer"] {
			return false
		}
	}
	return true
}

// discriminated: objects valid against a and b differ in a property both
// require, whose string values (const or enum) share none.
func (c *schemaCompiler) discriminated(a, b any) bool {
	oa, ob := c.deref(a), c.deref(b)
	if oa == nil || ob == nil {
		return false
	}
	ra, rb := requiredSet(oa), requiredSet(ob)
	pa, _ := oa.get("properties")
	pb, _ := ob.get("properties")
	propsA, _ := pa.(object)
	propsB, _ := pb.(object)
	for name := range ra {
		if !rb[name] {
			continue
		}
		sa, _ := propsA.get(name)
		sb, _ := propsB.get(name)
		va, vb := c.stringValues(sa), c.stringValues(sb)
		if va == nil || vb == nil {
			continue
		}
		shared := false
		for v := range va {
			if vb[v] {
				shared = true
			}
		}
		if !shared {
			return true
		}
	}
	return false
}

// deref follows $refs (a few) to an object schema; nil if it cannot.
func (c *schemaCompiler) deref(x any) object {
	for i := 0; i < 8; i++ {
		o, ok := x.(object)
		if !ok {
			return nil
		}
		r, ok := o.get("$ref")
		if !ok {
			return o
		}
		rs, _ := r.(string)
		x = c.resolve(rs)
	}
	return nil
}

func requiredSet(o object) map[string]bool {
	out := map[string]bool{}
	r, _ := o.get("required")
	list, _ := r.([]any)
	for _, x := range list {
		if s, ok := x.(string); ok {
			out[s] = true
		}
	}
	return out
}

// stringValues: the values a schema's const or enum allows, when all are
// strings; nil otherwise.
func (c *schemaCompiler) stringValues(x any) map[string]bool {
	vals := c.finiteValues(x)
	if len(vals) == 0 {
		return nil
	}
	out := map[string]bool{}
	for _, v := range vals {
		s, ok := v.(string)
		if !ok {
			return nil
		}
		out[s] = true
	}
	return out
}

// finiteValues: the values a schema's const (one) or enum lists, its $refs
// followed; nil when it has neither.
func (c *schemaCompiler) finiteValues(x any) []any {
	o := c.deref(x)
	if o == nil {
		return nil
	}
	if v, ok := o.get("const"); ok {
		return []any{v}
	}
	e, _ := o.get("enum")
	vals, _ := e.([]any)
	return vals
}
