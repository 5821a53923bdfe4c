package service

import (
	"errors"
	"strings"
	"testing"

	"github.com/cloison/cloison/engine/chat"
	"github.com/cloison/cloison/engine/toolcall"
	"github.com/cloison/cloison/tenancy"
)

// TestToolStreamFeed: calls are numbered from 0 with fresh ids, text around
// them is content, and without Parallel only the first call is returned.
func TestToolStreamFeed(t *testing.T) {
	text := `Let me check.<tool_call>{"name": "f", "arguments": {"a": 1}}</tool_call><tool_call>{"name": "g", "arguments": {}}</tool_call>`
	for _, parallel := range []bool{true, false} {
		ts := NewToolStream(&ToolUse{Format: toolcall.Hermes, Names: []string{"f", "g"}, Parallel: parallel})
		var content strings.Builder
		var calls []ToolCall
		for _, piece := range []string{text[:20], text[20:], ""} {
			c, got := ts.Feed(piece, piece == "")
			content.WriteString(c)
			calls = append(calls, got...)
		}
		want := 2
		if !parallel {
			want = 1
		}
		if content.String() != "Let me check." || len(calls) != want || len(ts.Calls()) != want {
			t.Fatalf("parallel %v: content %q, calls %+v", parallel, content.String(), calls)
		}
		for i, c := range calls {
			if c.Index != i || !strings.HasPrefix(c.ID, "call_") || c.Arguments == "" {
				t.Fatalf("call %d: %+v", i, c)
			}
		}
		if calls[0].Name != "f" {
			t.Fatalf("first call %+v", calls[0])
		}
	}
}

// TestMistralID: only 9 letters and digits are ids Mistral's templates
// take back.
func TestMistralID(t *testing.T) {
	for id, want := range map[string]bool{"abcDEF123": true, "abcDEF12": false, "abcDEF12_": false, "call_abcdefgh": false} {
		if mistralID(id) != want {
			t.Errorf("mistralID(%q) = %v", id, !want)
		}
	}
}

// TestRequestConstraint: a response_format and a tool grammar never
// combine; either alone is the request's constraint.
func TestRequestConstraint(t *testing.T) {
	format, tools := JSONObjectSchema, &ToolUse{Force: "required"}
	if c, err := RequestConstraint(format, nil); err != nil || c.Tools != nil || string(c.Schema) != string(format) {
		t.Fatalf("format alone: %+v %v", c, err)
	}
	if c, err := RequestConstraint(format, &ToolUse{}); err != nil || c.Tools != nil || string(c.Schema) != string(format) {
		t.Fatalf("unconstrained tools: %+v %v", c, err)
	}
	if c, err := RequestConstraint(nil, tools); err != nil || c.Tools != tools || c.Schema != nil {
		t.Fatalf("tools alone: %+v %v", c, err)
	}
	if _, err := RequestConstraint(format, tools); !errors.Is(err, ErrInvalidField) {
		t.Fatalf("both: %v", err)
	}
	if (*ToolUse)(nil).TemplateTools() != nil {
		t.Fatal("no tool use offers tools")
	}
}

// TestConversationMessages: the instructions lead as a system message,
// then the previous conversation, then the request's input.
func TestConversationMessages(t *testing.T) {
	hist := []chat.Message{{Role: "user", Content: "a"}, {Role: "assistant", Content: "b"}}
	in := []chat.Message{{Role: "user", Content: "c"}}
	got := ConversationMessages("be brief", hist, in)
	if len(got) != 4 || got[0].Role != "system" || got[0].Content != "be brief" || got[1].Content != "a" || got[3].Content != "c" {
		t.Fatalf("got %+v", got)
	}
	if got := ConversationMessages("", nil, in); len(got) != 1 || got[0].Content != "c" {
		t.Fatalf("without instructions: %+v", got)
	}
}

// TestCheckModel: another model and a model the tenant may not use get
// the same answer; an empty model names this node's.
func TestCheckModel(t *testing.T) {
	q := &Requests{cfg: Config{ModelName: "m"}}
	allowed := tenancy.Principal{TenantRecord: tenancy.Tenant{AllowedModels: []string{"m"}}}
	if err := q.CheckModel(allowed, ""); err != nil {
		t.Fatal(err)
	}
	if err := q.CheckModel(allowed, "m"); err != nil {
		t.Fatal(err)
	}
	if err := q.CheckModel(allowed, strings.Repeat("x", 100)); !errors.Is(err, ErrUnknownModel) || strings.Contains(err.Error(), strings.Repeat("x", 65)) {
		t.Fatalf("another model: %v", err)
	}
	if err := q.CheckModel(tenancy.Principal{}, "m"); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("a model the tenant may not use: %v", err)
	}
}
