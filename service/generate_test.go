package service

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/gguf"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/engine/synth"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/kernels/cpu"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

// tracingObserver records the observer calls of one request, in order.
type tracingObserver struct {
	NopObserver
	mu    sync.Mutex
	calls []string
	sums  []engine.Summary
}

func (o *tracingObserver) OnTokens(context.Context, int, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "tokens")
}

func (o *tracingObserver) OnDenied(context.Context, cloison.TenantID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "denied")
}

func (o *tracingObserver) OnSequenceEnd(sum engine.Summary, _ bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, "sequence")
	o.sums = append(o.sums, sum)
}

// newEngineRequests is Requests over a real engine (the context-bag model
// on the CPU backend, its own pool), the shipped policy bundle and an
// in-memory ledger: the request path with no transport at all.
func newEngineRequests(t *testing.T, l *fakeLedger, obs Observer) *Requests {
	t.Helper()
	w, err := synth.ContextBag(synth.BagConfig{Vocab: 320, Context: 512})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	be, err := cpu.New(kernels.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(be, f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close(); be.Close() })
	const pages, pt = 64, 16
	pool, err := isolation.NewPool(isolation.Config{Pages: pages, PageTokens: pt})
	if err != nil {
		t.Fatal(err)
	}
	arena, err := be.NewArena(m.ArenaConfig(pages, pt, kernels.KVF32))
	if err != nil {
		t.Fatal(err)
	}
	att, err := attest.Capacity(attest.Config{ModelContext: m.Context, ServedContext: min(m.Context, pages*pt), PoolPages: pages, PageTokens: pt,
		Zeroing: isolation.ZeroCrossTenant})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Config{Model: m, Tokenizer: tok, Pool: pool, Arena: arena, Attestation: att})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- eng.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	dec, err := policies.New(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Config{Engine: eng, ModelName: "context-bag", Verifier: &tenancy.Verifier{}, Limiter: tenancy.NewLimiter(), Decider: dec,
		Ledger: l, Node: "node-1", Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func acme(models ...string) tenancy.Principal {
	tn := tenancy.Tenant{ID: "acme", Name: "Acme", Status: tenancy.StatusActive, Tier: isolation.TierShared,
		Zeroing: isolation.ZeroCrossTenant, Classification: tenancy.ClassInternal,
		Quotas:        tenancy.Quotas{MaxConcurrent: 4, KVPages: 64, TokensPerMinute: 60000, MaxContext: 1024},
		AllowedModels: models}
	return tenancy.Principal{Subject: "svc", Tenant: "acme", Scopes: []tenancy.Scope{tenancy.ScopeInfer}, TenantRecord: tn}
}

// Generate without a transport: the decision is ledgered BEFORE the
// engine starts (sink.Started), request.completed BEFORE Generate returns,
// every choice's tokens reach the sink, and the observer hears the prompt,
// each sequence's end and the final counts.
func TestGenerateLedgersAroundService(t *testing.T) {
	l := &fakeLedger{}
	obs := &tracingObserver{}
	s := newEngineRequests(t, l, obs)
	var decided string
	var kindsAtStart []audit.Kind
	tokens := map[int]int{}
	sink := Sink{
		Decided: func(id string) { decided = id },
		Started: func() {
			l.mu.Lock()
			for _, e := range l.events {
				kindsAtStart = append(kindsAtStart, e.Kind())
			}
			l.mu.Unlock()
		},
		Token: func(choice int, tok engine.Token) {
			if tok.ID >= 0 {
				tokens[choice]++
			}
		},
	}
	q := Request{ID: "req-svc-1", Model: "context-bag", Prompt: []int32{10, 11, 12, 13}, MaxTokens: 5, N: 2,
		Sampling: sample.Params{Temperature: 0}, Seeded: true}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Generate(ctx, acme("context-bag"), q, sink)
	if err != nil {
		t.Fatal(err)
	}
	if decided == "" {
		t.Error("sink.Decided not called with the decision's id")
	}
	if len(kindsAtStart) != 1 || kindsAtStart[0] != audit.KindPolicyDecision {
		t.Fatalf("ledger when the engine started: %v, want [policy.decision]", kindsAtStart)
	}
	if len(l.events) != 2 || l.events[1].Kind() != audit.KindRequestCompleted {
		t.Fatalf("ledger after Generate: %d events, want policy.decision then request.completed", len(l.events))
	}
	done := l.events[1].Payload.(audit.RequestCompleted)
	if done.Request != q.ID || done.CompletionTokens != int64(res.Completion) || done.PromptTokens != 4 || done.Placement == nil {
		t.Fatalf("request.completed %+v, result %+v", done, res)
	}
	if len(res.Finishes) != 2 || res.Prompt != 4 || tokens[0]+tokens[1] != res.Completion || tokens[0] == 0 || tokens[1] == 0 {
		t.Fatalf("result %+v, tokens per choice %v", res, tokens)
	}
	if res.Receipt != "receipt:"+string(q.ID) {
		t.Fatalf("receipt %q, want the ledger's receipt of request.completed", res.Receipt)
	}
	// The prompt counted first; the final counts, then one end per choice
	// (summed into request.completed).
	if want := []string{"tokens", "tokens", "sequence", "sequence"}; !slices.Equal(obs.calls, want) {
		t.Fatalf("observer calls %v, want %v", obs.calls, want)
	}
}

// No receipt, no success: when the log key cannot sign request.completed's
// receipt, the request fails as if the ledger were down (the entry is
// written; the client is never told it was served).
func TestGenerateFailsWithoutReceipt(t *testing.T) {
	l := &fakeLedger{noReceipt: true}
	s := newEngineRequests(t, l, &tracingObserver{})
	q := Request{ID: "req-svc-norcpt", Model: "context-bag", Prompt: []int32{10, 11, 12}, MaxTokens: 3, Seeded: true}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.Generate(ctx, acme("context-bag"), q, Sink{})
	if !errors.Is(err, ErrLedgerUnavailable) || res.Receipt != "" {
		t.Fatalf("got %+v, %v; want ErrLedgerUnavailable and no receipt", res, err)
	}
}

// A request the policy denies is counted, never ledgered one row each,
// never reaches the engine; the observer hears the denial.
func TestGenerateDeniedIsCounted(t *testing.T) {
	l := &fakeLedger{}
	obs := &tracingObserver{}
	s := newEngineRequests(t, l, obs)
	started := false
	q := Request{ID: "req-svc-2", Model: "context-bag", Prompt: []int32{10, 11}, MaxTokens: 5}
	denied := acme("context-bag")
	denied.TenantRecord.Classification = "unheard-of" // the policy denies it
	_, err := s.Generate(context.Background(), denied, q, Sink{Started: func() { started = true }})
	if err == nil || cloison.ErrorCode(err) != cloison.CodePermissionDenied {
		t.Fatalf("got %v, want permission denied", err)
	}
	if started || len(l.events) != 0 {
		t.Fatalf("started %v, %d ledger events; want neither", started, len(l.events))
	}
	if got := s.PendingRefusals(); got != 1 {
		t.Fatalf("pending refusals %d, want 1", got)
	}
	if want := []string{"tokens", "denied"}; !slices.Equal(obs.calls, want) {
		t.Fatalf("observer calls %v, want %v", obs.calls, want)
	}
	if _, err := s.Generate(context.Background(), acme("context-bag"), Request{ID: "req-svc-3", Model: "other"}, Sink{}); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("got %v, want ErrUnknownModel", err)
	}
	// A served model the tenant may not use gets the same answer, before
	// any decision: nothing tells it the node serves that model.
	if _, err := s.Generate(context.Background(), acme("another-model"), q, Sink{}); !errors.Is(err, ErrUnknownModel) {
		t.Fatalf("got %v, want ErrUnknownModel for a model the tenant may not use", err)
	}
	if got := s.PendingRefusals(); got != 1 {
		t.Fatalf("pending refusals %d, want still 1", got)
	}
}
