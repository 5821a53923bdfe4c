package audit

import (
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"testing"
)

// RFC 8785 section 3.2.3 (the worked example) and Appendix B (numbers).
func TestCanonicalizeRFC8785(t *testing.T) {
	tests := []struct{ name, in, want string }{
		{"rfc example",
			`{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001], "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/", "literals": [null, true, false]}`,
			`{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		{"sorting by utf-16",
			`{"\u20ac":"Euro Sign","\r":"Carriage Return","\ufb33":"Hebrew Letter Dalet With Dagesh","1":"One","\ud83d\ude00":"Emoji: Grinning Face","\u0080":"Control","\u00f6":"Latin Small Letter O With Diaeresis"}`,
			"{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\",\"\u20ac\":\"Euro Sign\",\"\U0001F600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"},
		{"nested whitespace", " { \"b\" : [ 1 , { \"z\":1, \"a\":2 } ] , \"a\" : \"x\" } ", `{"a":"x","b":[1,{"a":2,"z":1}]}`},
		{"no html escaping", `"<&>\u2028"`, "\"<&>\u2028\""},
		{"minus zero", `-0.0`, `0`},
		{"empty containers", `[{},[]]`, `[{},[]]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonicalize([]byte(tt.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

func TestFormatNumberAppendixB(t *testing.T) {
	tests := []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x44b52d02c7e14af7, "1.0000000000000001e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
		{0x43143ff3c1cb0959, "1424953923781206.2"},
	}
	for _, tt := range tests {
		if got := FormatNumber(math.Float64frombits(tt.bits)); got != tt.want {
			t.Errorf("%016x: got %s, want %s", tt.bits, got, tt.want)
		}
	}
}

func TestCanonicalizeRefuses(t *testing.T) {
	for _, in := range []string{
		``, `{`, `{"a":1,"a":2}`, `"\ud800"`, `"\udc00x"`, "\"\xff\"", `[1,]`, `01`, `1.`, `1e`, `1e999`,
		`{"a" 1}`, `[1] x`, `"a` + "\x01" + `"`, `nul`, `"\x"`, `+1`, `.5`, `NaN`,
	} {
		if _, err := Canonicalize([]byte(in)); !errors.Is(err, ErrNotCanonical) {
			t.Errorf("Canonicalize(%q): got %v, want ErrNotCanonical", in, err)
		}
	}
}

// FuzzCanonicalize: whatever parses canonicalizes to a fixed point that
// encoding/json reads as the same value.
func FuzzCanonicalize(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[true,null,"x\u0000"]}`, `1e30`, `-0.000001`, `"\ud83d\ude00"`, `{"\u00e9":{"":[]}}`, `123456789012345678901234567890`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := Canonicalize(in)
		if err != nil {
			return
		}
		c2, err := Canonicalize(c)
		if err != nil || string(c2) != string(c) {
			t.Fatalf("not a fixed point: %q -> %q -> %q (%v)", in, c, c2, err)
		}
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Fatalf("canonicalized input encoding/json refuses: %v", err)
		}
		if err := json.Unmarshal(c, &b); err != nil {
			t.Fatalf("encoding/json refuses canonical output %q: %v", c, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("value changed: %q -> %q", in, c)
		}
	})
}
