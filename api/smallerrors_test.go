package api_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// An enum of more than 4,096 values is refused as an unsupported schema
// naming the bound (400), not left to fail inside the matcher (500).
func TestHugeEnumRefused(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{})
	tok := p.Token(t, "victim", tenancy.ScopeInfer)
	values := make([]string, 5000)
	for i := range values {
		values[i] = "v" + strconv.Itoa(i)
	}
	schema := map[string]any{"type": "string", "enum": values}
	body, err := json.Marshal(map[string]any{"model": platformtest.Model, "max_tokens": 8, "temperature": 0,
		"messages":        []map[string]string{{"role": "user", "content": "pick"}},
		"response_format": map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "n", "schema": schema}}})
	if err != nil {
		t.Fatal(err)
	}
	code, eb, b := call(t, p, "POST", "/v1/chat/completions", tok, string(body))
	if code != 400 || eb.Error.Code != string(cloison.CodeUnsupported) || !strings.Contains(eb.Error.Message, "4096") {
		t.Fatalf("got %d %s, want 400 unsupported naming the 4096 bound", code, b)
	}
}
