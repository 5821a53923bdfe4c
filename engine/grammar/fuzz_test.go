package grammar

import (
	"errors"
	"strconv"
	"testing"
)

// FuzzFromSchema: compiling any bytes never panics; it either fails with
// one of the documented errors or gives a grammar whose matcher runs.
func FuzzFromSchema(f *testing.F) {
	for _, tc := range schemaCases {
		f.Add([]byte(tc.schema))
	}
	f.Add([]byte(`{"$defs":{"a":{"$ref":"#/$defs/b"},"b":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`))
	for _, s := range append(append(append([]string{}, notSchemas...), ifSchemas...), uniqueItemsSchemas...) {
		f.Add([]byte(s))
	}
	for _, form := range propertyNamesForms {
		f.Add([]byte(`{"type":"object","propertyNames":` + form + `,"properties":{"a":{}},"patternProperties":{"^b":{}}}`))
	}
	f.Add([]byte(`{"type":"string","format":"email","pattern":"^[a-z]+@","maxLength":12,"not":{"const":"a@b.cd"}}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		g, err := FromSchema(doc)
		if err != nil {
			if !errors.Is(err, ErrUnsupportedSchema) && !errors.Is(err, ErrBadSchema) {
				t.Fatalf("undocumented error %v", err)
			}
			return
		}
		g.Match([]byte(`{"a":[1,"x",null]}`))
		g.MatchPrefix([]byte(`"abc`))
	})
}

func TestTooLarge(t *testing.T) {
	doc := []byte(`{"type":"object","properties":{`)
	for i := range 300 {
		if i > 0 {
			doc = append(doc, ',')
		}
		doc = append(doc, []byte(`"p`+string(rune('a'+i%26))+string(rune('a'+i/26))+`":{"type":"string","maxLength":`+strconv.Itoa(1000-i)+`}`)...)
	}
	doc = append(doc, "}}"...)
	if _, err := FromSchema(doc); !errors.Is(err, ErrUnsupportedSchema) {
		t.Fatalf("got %v, want ErrUnsupportedSchema (too many rules)", err)
	}
}
