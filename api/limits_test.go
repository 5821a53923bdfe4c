package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// reply is one HTTP answer, read in full.
type reply struct {
	status     int
	code       string
	decision   string
	request    string
	completion int
	finish     string
}

func ask(t *testing.T, p *platformtest.Platform, token, body string) reply {
	t.Helper()
	resp, b := send(t, "POST", p.URL+"/v1/completions", token, body)
	r := reply{status: resp.StatusCode, decision: resp.Header.Get("X-Cloison-Decision-Id"), request: resp.Header.Get("X-Request-Id")}
	var v struct {
		Error   struct{ Code string } `json:"error"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, b, err)
	}
	r.code, r.completion = v.Error.Code, v.Usage.CompletionTokens
	if len(v.Choices) > 0 {
		r.finish = v.Choices[0].FinishReason
	}
	return r
}

func completion(prompt string, maxTokens int) string {
	return fmt.Sprintf(`{"model":%q,"prompt":%q,"max_tokens":%d,"temperature":0}`, platformtest.Model, prompt, maxTokens)
}

// rows returns the ledger's records after seq from.
func rows(t *testing.T, p *platformtest.Platform, from uint64) []audit.Record {
	t.Helper()
	var out []audit.Record
	if err := p.Ledger.Scan(context.Background(), from+1, 0, func(r audit.Record) error {
		out = append(out, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// kinds summarises records for a failure message.
func kinds(recs []audit.Record) string {
	n := map[audit.Kind]int{}
	for _, r := range recs {
		n[r.Kind]++
	}
	return fmt.Sprint(n)
}

func head(t *testing.T, p *platformtest.Platform) uint64 {
	t.Helper()
	h, err := p.Ledger.Head(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return h.Seq
}

func refusalsOf(t *testing.T, r audit.Record) *audit.PolicyRefusals {
	t.Helper()
	env, err := audit.DecodeEnvelope(r.Payload)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := env.DecodePayload()
	if err != nil {
		t.Fatal(err)
	}
	return pl.(*audit.PolicyRefusals)
}

// Refusals cannot flood the ledger: a flood of refused requests — 429s and
// policy denials — from one tenant against the real server and ledger adds no
// row while it lasts, and one policy.refusals summary per flush: rows grow
// with flushes (every DefaultRefusalFlush), not with refusals.
func TestRefusalFloodBoundedLedgerRows(t *testing.T) {
	q := tenancy.Quotas{MaxConcurrent: 64, KVPages: 256, TokensPerMinute: 1000}
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"flood", "quiet"}, Quotas: &q})
	// A stopped clock: the bucket emptied below does not refill during the
	// flood, however long it takes.
	frozen := time.Now()
	p.Limiter.Now = func() time.Time { return frozen }
	tok := p.Token(t, "flood", tenancy.ScopeInfer)
	// Empty the flood tenant's bucket: a request of 1000 tokens that used
	// them all. From here on every request of it is rate limited.
	permit, err := p.Limiter.AdmitLease("flood", q, 1000, 1)
	if err != nil {
		t.Fatal(err)
	}
	permit.Release(1000)

	floods := []struct {
		name   string
		body   string
		n      int
		status int
		key    audit.RefusalCount // Count: n
	}{
		{"rate limited", completion("hello", 8), 300, 429, audit.RefusalCount{Stage: "quota", Code: cloison.CodeRateLimited}},
		{"over the tokens per minute", completion("hello", 1500), 100, 429, audit.RefusalCount{Stage: "quota", Code: cloison.CodeQuotaExceeded}},
		{"denied by policy", completion("hello", 5000), 100, 400, audit.RefusalCount{Stage: "policy", Code: cloison.CodeContextLengthExceeded}},
	}
	for round := range 2 {
		before := head(t, p)
		var wg sync.WaitGroup
		bad := make(chan string, 8)
		for _, f := range floods {
			for w := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < f.n; i += 4 {
						if r := ask(t, p, tok, f.body); r.status != f.status || r.decision == "" {
							select {
							case bad <- fmt.Sprintf("%s: got %d %s (decision %q), want %d", f.name, r.status, r.code, r.decision, f.status):
							default:
							}
							return
						}
					}
				}()
			}
		}
		wg.Wait()
		close(bad)
		for msg := range bad {
			t.Fatal(msg)
		}
		if got := head(t, p); got != before {
			t.Fatalf("round %d: the flood added %d ledger rows, want 0 before the flush", round, got-before)
		}
		if err := p.Server.FlushRefusals(context.Background()); err != nil {
			t.Fatal(err)
		}
		added := rows(t, p, before)
		if len(added) != 1 || added[0].Kind != audit.KindPolicyRefusals || added[0].Tenant != "flood" {
			t.Fatalf("round %d: got %d rows after the flush (%s), want 1 policy.refusals of tenant flood", round, len(added), kinds(added))
		}
		sum := refusalsOf(t, added[0])
		want := 0
		for _, f := range floods {
			want += f.n
			k := f.key
			k.Count = int64(f.n)
			found := false
			for _, c := range sum.Counts {
				found = found || c == k
			}
			if !found {
				t.Errorf("round %d: counts %+v lack %+v", round, sum.Counts, k)
			}
		}
		if sum.Total != int64(want) || len(sum.Counts) != len(floods) {
			t.Fatalf("round %d: got total %d in %d entries, want %d in %d", round, sum.Total, len(sum.Counts), want, len(floods))
		}
		if p.Server.PendingRefusals() != 0 {
			t.Fatalf("round %d: %d refusals still pending after the flush", round, p.Server.PendingRefusals())
		}
	}
	// A flush with nothing counted writes nothing.
	before := head(t, p)
	if err := p.Server.FlushRefusals(context.Background()); err != nil || head(t, p) != before {
		t.Fatalf("an empty flush: %v, %d rows added", err, head(t, p)-before)
	}
}

// The flush loop's last flush happens when its context ends, so the counts
// of a server that shuts down are in the ledger when RunRefusals returns.
func TestRefusalsFlushedAtShutdown(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"acme"}})
	tok := p.Token(t, "acme", tenancy.ScopeInfer)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Server.RunRefusals(ctx, time.Hour) }() // no periodic flush during the test
	before := head(t, p)
	for range 25 {
		if r := ask(t, p, tok, completion("hello", 5000)); r.status != 400 {
			t.Fatalf("got %d %s, want 400", r.status, r.code)
		}
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	added := rows(t, p, before)
	if len(added) != 1 || added[0].Kind != audit.KindPolicyRefusals || refusalsOf(t, added[0]).Total != 25 {
		t.Fatalf("got %s, want one policy.refusals of 25", kinds(added))
	}
}

// A flush the ledger cannot take keeps its counts for the next one, and the
// final flush of RunRefusals reports the loss: counts are never dropped
// silently.
func TestRefusalsKeptWhenTheLedgerFails(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"acme"}})
	tok := p.Token(t, "acme", tenancy.ScopeInfer)
	for range 10 {
		if r := ask(t, p, tok, completion("hello", 5000)); r.status != 400 {
			t.Fatalf("got %d %s, want 400", r.status, r.code)
		}
	}
	if err := p.Ledger.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Server.FlushRefusals(context.Background()); cloison.ErrorCode(err) != cloison.CodeUnavailable {
		t.Fatalf("flush with the ledger closed: got %v, want unavailable", err)
	}
	if got := p.Server.PendingRefusals(); got != 10 {
		t.Fatalf("got %d pending refusals, want 10", got)
	}
	ctx, stop := context.WithCancel(context.Background())
	stop()
	if err := p.Server.RunRefusals(ctx, time.Hour); cloison.ErrorCode(err) != cloison.CodeUnavailable {
		t.Fatalf("final flush with the ledger closed: got %v, want unavailable", err)
	}
}

// No service without a recorded decision: an allowed request's
// policy.decision row (its id is the one the client got) is in the ledger
// before its request.completed row.
func TestAllowedRequestDecisionLedgeredBeforeService(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"acme"}})
	before := head(t, p)
	r := ask(t, p, p.Token(t, "acme", tenancy.ScopeInfer), completion("hello", 4))
	if r.status != 200 {
		t.Fatalf("got %d %s, want 200", r.status, r.code)
	}
	var decisionSeq, completedSeq uint64
	for _, rec := range rows(t, p, before) {
		env, err := audit.DecodeEnvelope(rec.Payload)
		if err != nil {
			t.Fatal(err)
		}
		pl, err := env.DecodePayload()
		if err != nil {
			t.Fatal(err)
		}
		switch v := pl.(type) {
		case *audit.PolicyDecision:
			if string(v.Decision) == r.decision && v.Allowed {
				decisionSeq = rec.Seq
			}
		case *audit.RequestCompleted:
			if string(v.Request) == r.request {
				completedSeq = rec.Seq
			}
		}
	}
	if decisionSeq == 0 || completedSeq == 0 || decisionSeq > completedSeq {
		t.Fatalf("got decision at seq %d, completion at seq %d; want both, the decision first", decisionSeq, completedSeq)
	}
}

// limitsBundle is the shipped bundle with the decision's limits replaced by
// limits (a Rego object expression); the shipped Rego tests, which pin the
// shipped limits, are left out.
func limitsBundle(t *testing.T, limits string) map[string]string {
	t.Helper()
	src := policies.Shipped()
	delete(src, "policy_test.rego")
	dec := src["decision.rego"]
	i := strings.Index(dec, "limits := {")
	if i < 0 {
		t.Fatal("decision.rego has no limits object")
	}
	src["decision.rego"] = dec[:i] + "limits := " + limits + "\n"
	return src
}

// A policy's word is applied, not advisory: every limit a decision returns is
// applied — tighter than the tenant's quotas here, so that only the decision's
// value can explain the outcome (the tenant has 64 concurrent requests, every
// page, 10,000,000 tokens per minute). max_tokens clamps the completion;
// max_context and kv_pages refuse what they cannot hold; max_concurrent,
// tokens_per_minute and kv_pages in flight are the Limiter's.
func TestDecisionLimitsApplied(t *testing.T) {
	// with is the shipped limits with one replaced; each value is held to
	// the tenant's quota with min so that the bundle passes Reload's probes.
	with := func(field, value string) string {
		lim := map[string]string{"max_context": "max_context", "max_tokens": "max_tokens", "kv_pages": "input.tenant.quotas.kv_pages",
			"max_concurrent": "input.tenant.quotas.max_concurrent", "tokens_per_minute": "input.tenant.quotas.tokens_per_minute"}
		lim[field] = fmt.Sprintf("min({%s, %s})", value, lim[field])
		var parts []string
		for _, k := range []string{"max_context", "max_tokens", "kv_pages", "max_concurrent", "tokens_per_minute"} {
			parts = append(parts, fmt.Sprintf("%q: %s", k, lim[k]))
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	tests := []struct {
		name   string
		limits string
		hold   func(t *testing.T, p *platformtest.Platform) // requests already in flight
		body   string
		status int
		code   string
		tokens int // completion tokens of a served request
	}{
		{name: "max_tokens clamps the completion", limits: with("max_tokens", "3"),
			body: completion("abcabc", 10), status: 200, tokens: 3},
		{name: "max_context refuses", limits: with("max_context", "8"),
			body: completion("abcabc", 10), status: 400, code: "context_length_exceeded"},
		{name: "kv_pages bounds the lease", limits: with("kv_pages", "1"),
			body: completion("abcabc", 20), status: 400, code: "context_length_exceeded"},
		{name: "kv_pages fits", limits: with("kv_pages", "1"),
			body: completion("abcabc", 4), status: 200, tokens: 4},
		{name: "kv_pages in flight", limits: with("kv_pages", "4"),
			hold: func(t *testing.T, p *platformtest.Platform) {
				holdPermit(t, p, tenancy.Quotas{MaxConcurrent: 64, KVPages: 4, TokensPerMinute: 1 << 30}, 1, 4)
			},
			body: completion("abcabc", 4), status: 429, code: "quota_exceeded"},
		{name: "max_concurrent bounds requests in flight", limits: with("max_concurrent", "1"),
			hold: func(t *testing.T, p *platformtest.Platform) {
				holdPermit(t, p, tenancy.Quotas{MaxConcurrent: 1, KVPages: 256, TokensPerMinute: 1 << 30}, 1, 1)
			},
			body: completion("abcabc", 4), status: 429, code: "quota_exceeded"},
		{name: "max_concurrent admits below it", limits: with("max_concurrent", "2"),
			hold: func(t *testing.T, p *platformtest.Platform) {
				holdPermit(t, p, tenancy.Quotas{MaxConcurrent: 2, KVPages: 256, TokensPerMinute: 1 << 30}, 1, 1)
			},
			body: completion("abcabc", 4), status: 200, tokens: 4},
		{name: "tokens_per_minute: never fits", limits: with("tokens_per_minute", "10"),
			body: completion("abcabc", 20), status: 429, code: "quota_exceeded"},
		{name: "tokens_per_minute: bucket short", limits: with("tokens_per_minute", "40"),
			hold: func(t *testing.T, p *platformtest.Platform) {
				// Spend 30 of the 40 tokens of the bucket the decision sizes.
				holdPermit(t, p, tenancy.Quotas{MaxConcurrent: 64, KVPages: 256, TokensPerMinute: 40}, 30, 1).Release(30)
			},
			body: completion("abcabc", 20), status: 429, code: "rate_limit_exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"acme"}})
			if _, err := p.Decider.Reload(context.Background(), limitsBundle(t, tt.limits)); err != nil {
				t.Fatal(err)
			}
			if tt.hold != nil {
				tt.hold(t, p)
			}
			r := ask(t, p, p.Token(t, "acme", tenancy.ScopeInfer), tt.body)
			if r.status != tt.status || r.code != tt.code {
				t.Fatalf("got %d %q, want %d %q", r.status, r.code, tt.status, tt.code)
			}
			if r.status == 200 && (r.completion != tt.tokens || r.finish != "length") {
				t.Fatalf("got %d completion tokens (finish %q), want %d (length)", r.completion, r.finish, tt.tokens)
			}
		})
	}
}

// holdPermit admits one request of tenant acme in the server's Limiter
// under q, as a request in flight would be, and releases it at the end of
// the test.
func holdPermit(t *testing.T, p *platformtest.Platform, q tenancy.Quotas, tokens, pages int) *tenancy.Permit {
	t.Helper()
	permit, err := p.Limiter.AdmitLease("acme", q, tokens, pages)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { permit.Release(tokens) })
	return permit
}
