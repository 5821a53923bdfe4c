package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/tenancy"
)

// bigSchema is a schema of n distinct properties: compiling it costs what
// its sender chose.
func bigSchema(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"type":"object","properties":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"p%d":{"type":"string","maxLength":%d}`, i, 1+i%7)
	}
	b.WriteString(`}}`)
	return []byte(b.String())
}

// A tenant over its token quota is refused 429 before its constraint is
// compiled: neither its schema (the grammar cache counts no compile) nor
// its tool calls (a ToolUse that would fail to compile is never reached).
// Within its quota the same schema compiles once and is then warm.
func TestOverQuotaTenantCompilesNothing(t *testing.T) {
	l := &fakeLedger{}
	s := newEngineRequests(t, l, nil)
	p := acme("context-bag")
	// A token a second: the bucket cannot refill during the test. Another
	// request of the tenant holds the whole minute's tokens.
	p.TenantRecord.Quotas.TokensPerMinute = 60
	held, err := s.cfg.Limiter.Admit(p.Tenant, p.TenantRecord.Quotas, p.TenantRecord.Quotas.TokensPerMinute)
	if err != nil {
		t.Fatal(err)
	}
	schema := bigSchema(400)
	for i, c := range []Constraint{{Schema: schema}, {Tools: &ToolUse{Force: "required", Names: []string{"f"}}}} {
		q := Request{ID: cloison.RequestID(fmt.Sprintf("req-quota-%d", i)), Model: "context-bag", Prompt: []int32{10, 11}, MaxTokens: 4, Constraint: c}
		_, err := s.Generate(context.Background(), p, q, Sink{})
		if !errors.Is(err, tenancy.ErrRateLimited) {
			t.Fatalf("constraint %d: got %v, want ErrRateLimited before any compile", i, err)
		}
		if d := cloison.RetryAfter(err); d <= 0 {
			t.Fatalf("constraint %d: retry hint %v, want the bucket's refill", i, d)
		}
	}
	if st := s.Grammars().Stats(); st.Compiles != 0 || st.Entries != 0 {
		t.Fatalf("grammar cache %+v after refusals, want no compile", st)
	}
	held.Release(0)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := range 2 {
		q := Request{ID: cloison.RequestID(fmt.Sprintf("req-quota-ok-%d", i)), Model: "context-bag", Prompt: []int32{10, 11}, MaxTokens: 4,
			Constraint: Constraint{Schema: schema}}
		if _, err := s.Generate(ctx, p, q, Sink{}); err != nil {
			t.Fatal(err)
		}
	}
	if st := s.Grammars().Stats(); st.Compiles != 1 || st.Hits != 1 || s.Grammars().OwnerBytes(string(p.Tenant)) == 0 {
		t.Fatalf("grammar cache %+v, want one compile then one hit, counted to acme", st)
	}
}
