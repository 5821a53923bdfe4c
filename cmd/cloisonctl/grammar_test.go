package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestGrammarBench runs the MaskBench methodology over three files in its
// format: one passing, one refused at compile time, one whose valid
// instance the grammar refuses (properties out of the schema's order).
func TestGrammarBench(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"pass.json": `{"schema":{"type":"object","properties":{"a":{"type":"integer","minimum":0}},"x-vendor":1},
			"tests":[{"valid":true,"data":{"a":1,"b":"x"}},{"valid":false,"data":{"a":-1}}]}`,
		"refused.json": `{"schema":{"type":"string","pattern":"^(?=a)"},"tests":[{"valid":true,"data":"a"}]}`,
		"narrow.json":  `{"schema":{"type":"string","format":"date-time"},"tests":[{"valid":true,"data":"2024-01-01t00:00:00z"}]}`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := runGrammarBench(dir, grammarBenchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.schemas != 3 || rep.passing != 1 || rep.compileErrors != 1 || rep.validationErrors != 1 || rep.invalidationErrors != 0 {
		t.Fatalf("got %+v", rep)
	}
	var out strings.Builder
	rep.write(&out, 5, true)
	for _, want := range []string{`keyword "pattern"`, "valid instance refused: narrow.json", "passing                  1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, out.String())
		}
	}
}
