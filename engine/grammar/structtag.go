package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"unicode/utf8"
)

// Structural tags (XGrammar's, as vLLM and SGLang take them in
// response_format {"type": "structural_tag", …}): free text in which a
// trigger opens a tag, the tag's begin text, a JSON value its schema
// accepts and its end text, then free text again. The whole is one
// context-free grammar, not a lazy one: the free text is the language of
// the trigger scanner (buildDFA), a rule per scanner state whose
// alternatives are a byte class and the next state, or, on the byte that
// completes a trigger, the rest of one of its tags and then the free text
// from the start. So a token may end free text, open a tag and begin its
// JSON, or end a tag and go on with free text: the masks are exact across
// every boundary, and a grammar of this syntax may stand after a
// reasoning marker (After) as any other.

// StructuralTag is the syntax of FromText that reads a structural tag
// object: the legacy form {"type": "structural_tag", "structures":
// [{"begin", "schema", "end"}…], "triggers": […]}, or the format form
// {"type": "structural_tag", "format": {"type": "triggered_tags",
// "triggers", "tags": [{"type": "tag", "begin", "content": {"type":
// "json_schema", "json_schema"} | {"type": "const_string", "value"},
// "end"}…], "at_least_one", "stop_after_first"}}.
const StructuralTag Syntax = "structural_tag"

// Bounds of a structural tag object.
const (
	maxTags     = 64
	maxTagText  = 1024 // a begin or end text
	maxTriggers = 16
)

// tagDef is one tag: begin, a value (a schema's JSON, or a literal), end.
type tagDef struct {
	begin, end string
	schema     json.RawMessage // nil: literal
	literal    string
}

// structTag is a structural tag object, read and checked.
type structTag struct {
	tags           []tagDef
	triggers       []string
	atLeastOne     bool
	stopAfterFirst bool
}

// parseStructTag reads a structural tag object. Every key is known or
// refused, every bound checked. Errors: ErrBadGrammar (a bad shape, named),
// ErrUnsupportedGrammar (a format type or content type not taken, named).
func parseStructTag(src string) (*structTag, error) {
	top, err := objectOf([]byte(src), "structural_tag", "type", "structures", "triggers", "format")
	if err != nil {
		return nil, err
	}
	var typ string
	if err := stringOf(top, "type", "structural_tag", &typ, true); err != nil {
		return nil, err
	}
	if typ != "structural_tag" {
		return nil, ErrBadGrammar.Withf("structural_tag.type must be \"structural_tag\"")
	}
	st := &structTag{}
	if f, ok := top["format"]; ok {
		if _, ok := top["structures"]; ok {
			return nil, ErrBadGrammar.Withf("a structural tag has either format or structures and triggers")
		}
		if _, ok := top["triggers"]; ok {
			return nil, ErrBadGrammar.Withf("a structural tag has either format or structures and triggers")
		}
		if err := st.readFormat(f); err != nil {
			return nil, err
		}
	} else {
		var structures []json.RawMessage
		if err := listOf(top, "structures", "structural_tag", &structures); err != nil {
			return nil, err
		}
		for i, raw := range structures {
			where := fmt.Sprintf("structures[%d]", i)
			o, err := objectOf(raw, where, "begin", "schema", "end")
			if err != nil {
				return nil, err
			}
			var t tagDef
			if err := stringOf(o, "begin", where, &t.begin, true); err != nil {
				return nil, err
			}
			if err := stringOf(o, "end", where, &t.end, true); err != nil {
				return nil, err
			}
			s, ok := o["schema"]
			if !ok || isJSONNull(s) {
				return nil, ErrBadGrammar.Withf("%s.schema is required", where)
			}
			t.schema = s
			st.tags = append(st.tags, t)
		}
		if err := st.readTriggers(top, "structural_tag"); err != nil {
			return nil, err
		}
	}
	return st, st.check()
}

// readFormat reads the format form: triggered_tags only.
func (st *structTag) readFormat(raw json.RawMessage) error {
	o, err := objectOf(raw, "format", "type", "triggers", "tags", "at_least_one", "stop_after_first")
	if err != nil {
		return err
	}
	var typ string
	if err := stringOf(o, "type", "format", &typ, true); err != nil {
		return err
	}
	if typ != "triggered_tags" {
		return ErrUnsupportedGrammar.Withf("structural tag format type %q (triggered_tags is taken)", truncateText(typ))
	}
	for _, k := range []string{"at_least_one", "stop_after_first"} {
		v, ok := o[k]
		if !ok || isJSONNull(v) {
			continue
		}
		var b bool
		if json.Unmarshal(v, &b) != nil {
			return ErrBadGrammar.Withf("format.%s must be a boolean", k)
		}
		if k == "at_least_one" {
			st.atLeastOne = b
		} else {
			st.stopAfterFirst = b
		}
	}
	var tags []json.RawMessage
	if err := listOf(o, "tags", "format", &tags); err != nil {
		return err
	}
	for i, raw := range tags {
		where := fmt.Sprintf("format.tags[%d]", i)
		to, err := objectOf(raw, where, "type", "begin", "content", "end")
		if err != nil {
			return err
		}
		if _, ok := to["type"]; ok {
			var tt string
			if err := stringOf(to, "type", where, &tt, true); err != nil {
				return err
			}
			if tt != "tag" {
				return ErrBadGrammar.Withf("%s.type must be \"tag\"", where)
			}
		}
		var t tagDef
		if err := stringOf(to, "begin", where, &t.begin, true); err != nil {
			return err
		}
		if err := stringOf(to, "end", where, &t.end, true); err != nil {
			return err
		}
		c, ok := to["content"]
		if !ok {
			return ErrBadGrammar.Withf("%s.content is required", where)
		}
		cw := where + ".content"
		co, err := objectOf(c, cw, "type", "json_schema", "value")
		if err != nil {
			return err
		}
		var ct string
		if err := stringOf(co, "type", cw, &ct, true); err != nil {
			return err
		}
		switch ct {
		case "json_schema":
			if _, ok := co["value"]; ok {
				return ErrBadGrammar.Withf("%s.value is only for type const_string", cw)
			}
			s, ok := co["json_schema"]
			if !ok || isJSONNull(s) {
				return ErrBadGrammar.Withf("%s.json_schema is required", cw)
			}
			t.schema = s
		case "const_string":
			if _, ok := co["json_schema"]; ok {
				return ErrBadGrammar.Withf("%s.json_schema is only for type json_schema", cw)
			}
			if err := stringOf(co, "value", cw, &t.literal, true); err != nil {
				return err
			}
		default:
			return ErrUnsupportedGrammar.Withf("%s.type %q (json_schema and const_string are taken)", cw, truncateText(ct))
		}
		st.tags = append(st.tags, t)
	}
	return st.readTriggers(o, "format")
}

func (st *structTag) readTriggers(o map[string]json.RawMessage, where string) error {
	var trig []json.RawMessage
	if err := listOf(o, "triggers", where, &trig); err != nil {
		return err
	}
	if len(trig) > maxTriggers {
		return ErrBadGrammar.Withf("%s: at most %d triggers", where, maxTriggers)
	}
	for i, raw := range trig {
		var s string
		if json.Unmarshal(raw, &s) != nil || s == "" || len(s) > maxTrigger {
			return ErrBadGrammar.Withf("%s: triggers[%d] must be a string of 1 to %d bytes", where, i, maxTrigger)
		}
		st.triggers = append(st.triggers, s)
	}
	return nil
}

// check bounds the tags and ties each to the trigger that opens it.
func (st *structTag) check() error {
	if len(st.tags) == 0 || len(st.tags) > maxTags {
		return ErrBadGrammar.Withf("a structural tag lists 1 to %d structures (tags)", maxTags)
	}
	if len(st.triggers) == 0 {
		return ErrBadGrammar.Withf("a structural tag lists 1 to %d triggers", maxTriggers)
	}
	for i, t := range st.tags {
		for _, s := range []string{t.begin, t.end, t.literal} {
			if len(s) > maxTagText || !utf8.ValidString(s) {
				return ErrBadGrammar.Withf("tag %d: begin, end and value of at most %d bytes of UTF-8", i, maxTagText)
			}
		}
	}
	_, err := st.assign()
	return err
}

// assign returns, for each trigger, the tags it opens: a tag belongs to
// the trigger that the free-text scanner sees complete first in its begin
// text, which must complete exactly at that trigger's end (the begin text
// starts with the trigger, and no other trigger completes before it).
// Errors: ErrBadGrammar for a tag no trigger opens, or a trigger that
// opens no tag (it would be a trigger of nothing).
func (st *structTag) assign() ([][]int, error) {
	dfa := buildDFA(st.triggers)
	opens := make([][]int, len(st.triggers))
	for i, t := range st.tags {
		s, k := int32(0), -1
		for j := 0; j < len(t.begin); j++ {
			n := dfa[int(s)*256+int(t.begin[j])]
			if n < 0 {
				if j+1 == len(st.triggers[-n-1]) {
					k = int(-n - 1)
				}
				break
			}
			s = n
		}
		if k < 0 {
			return nil, ErrBadGrammar.Withf("tag %d: its begin %q does not start with a trigger", i, truncateText(t.begin))
		}
		opens[k] = append(opens[k], i)
	}
	for k, o := range opens {
		if len(o) == 0 {
			return nil, ErrBadGrammar.Withf("trigger %q opens no tag (no begin starts with it)", truncateText(st.triggers[k]))
		}
	}
	return opens, nil
}

// tagPart is a structural tag as a Part: free text with triggered tags.
type tagPart struct{ st *structTag }

func (p tagPart) emit(b *builder) (int, error) {
	st := p.st
	opens, err := st.assign()
	if err != nil {
		return 0, err
	}
	// Each trigger's tags, from the byte after the trigger.
	rest := make([]int, len(st.triggers))
	for k, tags := range opens {
		alts := make([][]elem, 0, len(tags))
		for _, i := range tags {
			t := st.tags[i]
			var val int
			if t.schema != nil {
				if val, err = compileSchema(b, t.schema); err != nil {
					return 0, err
				}
			} else {
				val = b.literal(t.literal)
			}
			alts = append(alts, cat(lit(t.begin[len(st.triggers[k]):]), one(ref(val)), lit(t.end)))
		}
		rest[k] = b.add("tag"+fmt.Sprint(k), alts...)
	}
	// Free text: a rule per scanner state, before the first tag (first)
	// and after one (again); at_least_one takes the end of the output away
	// from the first, stop_after_first ends the output after a tag.
	dfa := buildDFA(st.triggers)
	n := len(dfa) / 256
	free := func(name string) []int {
		r := make([]int, n)
		for s := range r {
			r[s] = b.reserve(fmt.Sprintf("%s%d", name, s))
		}
		return r
	}
	first := free("free")
	again := first
	if st.atLeastOne {
		again = free("again")
	}
	fill := func(rules []int, final bool) {
		for s, r := range rules {
			next := map[int32]*byteSet{}
			var order []int32
			for c := 0; c < 256; c++ {
				to := dfa[s*256+c]
				if next[to] == nil {
					next[to] = &byteSet{}
					order = append(order, to)
				}
				next[to].add(byte(c))
			}
			sort.Slice(order, func(i, j int) bool { return order[i] < order[j] })
			var alts [][]elem
			for _, to := range order {
				e := elem{ref: -1, term: *next[to]}
				switch {
				case to >= 0:
					alts = append(alts, []elem{e, ref(rules[to])})
				case st.stopAfterFirst:
					alts = append(alts, []elem{e, ref(rest[-to-1])})
				default:
					alts = append(alts, []elem{e, ref(rest[-to-1]), ref(again[0])})
				}
			}
			if final {
				alts = append(alts, nil)
			}
			b.set(r, alts...)
		}
	}
	fill(first, !st.atLeastOne)
	if st.atLeastOne {
		fill(again, true)
	}
	return first[0], nil
}

// fromStructTag compiles a structural tag object (FromText).
func fromStructTag(src string) (*Grammar, error) { return StructuralTagWith(src, Indent) }

// StructuralTagWith is FromText(StructuralTag, src) with the whitespace
// policy ws between the JSON tokens of its tags' values. Errors: as
// FromText.
func StructuralTagWith(src string, ws Whitespace) (*Grammar, error) {
	if len(src) > MaxTextBytes {
		return nil, ErrBadGrammar.Withf("a %s grammar of more than %d bytes", StructuralTag, MaxTextBytes)
	}
	if !utf8.ValidString(src) {
		return nil, ErrBadGrammar.Withf("a %s grammar that is not UTF-8", StructuralTag)
	}
	st, err := parseStructTag(src)
	if err != nil {
		return nil, err
	}
	return CompileWith(tagPart{st}, ws)
}

// objectOf reads raw as a JSON object whose keys are all in keys.
func objectOf(raw []byte, where string, keys ...string) (map[string]json.RawMessage, error) {
	var o map[string]json.RawMessage
	if json.Unmarshal(raw, &o) != nil || o == nil {
		return nil, ErrBadGrammar.Withf("%s must be a JSON object", where)
	}
	for k := range o {
		known := false
		for _, w := range keys {
			known = known || k == w
		}
		if !known {
			return nil, ErrBadGrammar.Withf("%s: unknown key %q (%s)", where, truncateText(k), strings.Join(keys, ", "))
		}
	}
	return o, nil
}

func stringOf(o map[string]json.RawMessage, key, where string, out *string, required bool) error {
	v, ok := o[key]
	if !ok {
		if required {
			return ErrBadGrammar.Withf("%s.%s is required", where, key)
		}
		return nil
	}
	if json.Unmarshal(v, out) != nil {
		return ErrBadGrammar.Withf("%s.%s must be a string", where, key)
	}
	return nil
}

func listOf(o map[string]json.RawMessage, key, where string, out *[]json.RawMessage) error {
	v, ok := o[key]
	if !ok {
		return ErrBadGrammar.Withf("%s.%s is required", where, key)
	}
	if json.Unmarshal(v, out) != nil || *out == nil {
		return ErrBadGrammar.Withf("%s.%s must be a list", where, key)
	}
	return nil
}

func isJSONNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// truncateText shortens a client's text quoted in an error.
func truncateText(s string) string {
	if len(s) <= 64 {
		return s
	}
	for i := 64; i > 0; i-- {
		if utf8.RuneStart(s[i]) {
			return s[:i] + "…"
		}
	}
	return ""
}
