package main

import (
	"strings"
	"testing"
)

// TestParseModelArg: --model is PATH or PATH,id=ALIAS; anything else is
// refused, never ignored.
func TestParseModelArg(t *testing.T) {
	for _, tt := range []struct {
		in       string
		path, id string
		ok       bool
	}{
		{"a.gguf", "a.gguf", "", true},
		{"/m/b.gguf,id=coder", "/m/b.gguf", "coder", true},
		{"", "", "", false},
		{",id=x", "", "", false},
		{"a.gguf,id=", "", "", false},
		{"a.gguf,name=x", "", "", false},
		{"a.gguf,id=x,id=y", "", "", false},
		{"a.gguf,pages=4", "", "", false},
	} {
		m, err := parseModelArg(tt.in)
		if (err == nil) != tt.ok || (tt.ok && (m.path != tt.path || m.id != tt.id)) {
			t.Errorf("%q: got %+v, %v; want path %q id %q ok %v", tt.in, m, err, tt.path, tt.id, tt.ok)
		}
	}
}

// TestRepeatedModelFlag: the first --model is the node's main model, the
// others further ones, in order.
func TestRepeatedModelFlag(t *testing.T) {
	c, err := parseFlagsInto([]string{"--database-url", "postgres://x", "--dev", "--model", "a.gguf,id=chat", "--model", "b.gguf", "--model", "c.gguf,id=cc"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.modelPath != "a.gguf" || c.modelName != "chat" || len(c.models) != 2 || c.models[0].path != "b.gguf" || c.models[1].id != "cc" {
		t.Fatalf("got main %q (%q), further %+v", c.modelPath, c.modelName, c.models)
	}
	// A split node serves several models too; a prefill node's are its
	// --model files, never loaded at run time.
	for _, role := range []string{"prefill", "decode"} {
		if _, err := parseFlagsInto([]string{"--database-url", "postgres://x", "--dev", "--model", "a.gguf", "--model", "b.gguf", "--role", role}, nil); err != nil && strings.Contains(err.Error(), "model") {
			t.Fatalf("a %s node with two models: got %v", role, err)
		}
	}
	if _, err := parseFlagsInto([]string{"--database-url", "postgres://x", "--dev", "--model-dir", "m", "--role", "prefill"}, nil); err == nil || !strings.Contains(err.Error(), "run time") {
		t.Fatalf("a prefill node with --model-dir: got %v", err)
	}
}

func FuzzParseModelArg(f *testing.F) {
	for _, s := range []string{"a.gguf", "a.gguf,id=x", ",", "a,id=b,id=c", "a,=", "a,id"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := parseModelArg(s)
		if err != nil {
			return
		}
		if m.path == "" || strings.Contains(m.path, ",") || strings.Contains(m.id, ",") {
			t.Fatalf("%q parsed as %+v", s, m)
		}
	})
}
