package engine

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/sample"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/isolation"
)

func TestStateMachine(t *testing.T) {
	all := []State{Queued, Admitted, Prefilling, Decoding, Finished, Rejected, Aborted, Failed}
	for _, to := range all {
		if Rejected.CanBecome(to) {
			t.Errorf("Rejected → %s is possible; a rejection must be terminal", to)
		}
		if Queued.CanBecome(to) && (to == Prefilling || to == Decoding) {
			t.Errorf("Queued → %s skips the lease", to)
		}
	}
	for _, s := range []State{Finished, Rejected, Aborted, Failed} {
		if !s.Terminal() {
			t.Errorf("%s is not terminal", s)
		}
	}
	for _, from := range all {
		if from.CanBecome(Rejected) {
			t.Errorf("%s → Rejected: rejection happens only before the scheduler", from)
		}
	}
}

func TestEnqueueNeedsATicket(t *testing.T) {
	pool, _ := isolation.NewPool(isolation.Config{Pages: 4})
	s := NewScheduler(pool, SchedulerConfig{})
	if err := s.Enqueue(Ticket{}); !errors.Is(err, ErrNoTicket) {
		t.Fatalf("got %v, want ErrNoTicket", err)
	}
	if !s.Idle() {
		t.Fatal("a request without a ticket entered the scheduler")
	}
}

func TestEngineMatchesDirectGreedy(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	p := prompt(37, 1)
	want := greedyDirect(t, l, p, 12)
	s, err := r.e.Submit(context.Background(), GenerateRequest{ID: "r1", Tenant: "a", Prompt: p, MaxTokens: 12, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := collect(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("engine produced %v, direct greedy %v", got, want)
	}
	if s.Finish() != FinishLength {
		t.Fatalf("finish %q, want length", s.Finish())
	}
	r.close()
	sum := r.summaries()
	if len(sum) != 1 || sum[0].Prompt != 37 || sum[0].Generated != 12 || sum[0].State != Finished || sum[0].FirstToken <= 0 {
		t.Fatalf("summary %+v", sum)
	}
}

// Reject before allocate: an over-long prompt gets its original error, and
// no page, lease, queue entry or token ever exists for it.
func TestRejectBeforeAllocate(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 16}, tenants: []isolation.TenantConfig{{ID: "a"}, {ID: "b", Reserved: 4}}})
	before := r.pool.Stats()
	cases := []struct {
		name string
		req  GenerateRequest
		want error
		code cloison.Code
	}{
		{"over the served context", GenerateRequest{Prompt: prompt(250, 1), MaxTokens: 10}, ErrContextLength, cloison.CodeContextLengthExceeded},
		{"served context + 1", GenerateRequest{Prompt: prompt(200, 1), MaxTokens: 57}, ErrContextLength, cloison.CodeContextLengthExceeded},
		{"over the tenant's capacity (others' reservations)", GenerateRequest{Prompt: prompt(190, 1), MaxTokens: 10}, ErrContextLength, cloison.CodeContextLengthExceeded},
		{"huge max tokens", GenerateRequest{Prompt: prompt(5, 1), MaxTokens: 1 << 62}, ErrContextLength, cloison.CodeContextLengthExceeded},
		{"empty prompt", GenerateRequest{MaxTokens: 10}, ErrEmptyPrompt, cloison.CodeInvalid},
		{"zero max tokens", GenerateRequest{Prompt: prompt(5, 1)}, ErrMaxTokens, cloison.CodeInvalid},
		{"negative max tokens", GenerateRequest{Prompt: prompt(5, 1), MaxTokens: -3}, ErrMaxTokens, cloison.CodeInvalid},
		{"token outside the vocabulary", GenerateRequest{Prompt: []int32{1, 320}, MaxTokens: 3}, ErrBadToken, cloison.CodeInvalid},
		{"bad sampling", GenerateRequest{Prompt: prompt(5, 1), MaxTokens: 3, Sampling: sample.Params{Temperature: 9}}, sample.ErrInvalidParams, cloison.CodeInvalid},
		{"too many stops", GenerateRequest{Prompt: prompt(5, 1), MaxTokens: 3, StopStrings: []string{"a", "b", "c", "d", "e"}}, ErrBadStop, cloison.CodeInvalid},
	}
	for i, c := range cases {
		c.req.ID, c.req.Tenant = cloison.RequestID(fmt.Sprint("x", i)), "a"
		_, err := r.e.Submit(context.Background(), c.req)
		if !errors.Is(err, c.want) || cloison.ErrorCode(err) != c.code {
			t.Errorf("%s: got %v (%s), want %v (%s)", c.name, err, cloison.ErrorCode(err), c.want, c.code)
		}
	}
	// The exact served context is accepted.
	if _, err := r.e.Submit(context.Background(), GenerateRequest{ID: "ok", Tenant: "b", Prompt: prompt(200, 2), MaxTokens: 56, IgnoreEOS: true}); err != nil {
		t.Fatalf("exact-capacity request: %v", err)
	}
	if before.Leased != 0 {
		t.Fatal("pages leased before any request")
	}
	r.close()
	for _, s := range r.summaries() {
		if s.ID != "ok" {
			t.Fatalf("a rejected request reached the scheduler: %+v", s)
		}
	}
	rej := r.e.Admission().Rejections()["a"]
	if rej[cloison.CodeContextLengthExceeded] != 4 || rej[cloison.CodeInvalid] != 4 {
		t.Fatalf("rejection counters %v", rej)
	}
}

func TestCancelAndDeadline(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	ctx, cancel := context.WithCancel(context.Background())
	s1, err := r.e.Submit(ctx, GenerateRequest{ID: "c", Tenant: "a", Prompt: prompt(20, 1), MaxTokens: 500, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s1.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, _, err := collect(t, s1); !errors.Is(err, ErrCanceled) {
		t.Fatalf("got %v, want ErrCanceled", err)
	}
	s2, _ := r.e.Submit(context.Background(), GenerateRequest{ID: "d", Tenant: "a", Prompt: prompt(20, 2), MaxTokens: 1000, IgnoreEOS: true, Deadline: time.Now().Add(20 * time.Millisecond)})
	if _, _, err := collect(t, s2); !errors.Is(err, ErrDeadline) {
		t.Fatalf("got %v, want ErrDeadline", err)
	}
	// Both leases are gone.
	testwait.Eventually(t, 5*time.Second, func() bool { return r.pool.Stats().Leased == 0 }, "pages still leased after cancel and deadline")
	testwait.Eventually(t, 5*time.Second, func() bool { run, wait := r.e.Load(); return run == 0 && wait == 0 },
		"Load() to show an idle engine (%s)", testwait.Lazy(func() string { run, wait := r.e.Load(); return fmt.Sprintf("%d running, %d waiting", run, wait) }))
	if err := r.pool.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestStopStrings(t *testing.T) {
	a := &active{req: GenerateRequest{StopStrings: []string{"END", "xyz"}}}
	var out string
	stopped := false
	for _, piece := range []string{"hel", "lo E", "N", "xx", " E", "ND tail"} {
		s, stop := a.appendText([]byte(piece))
		out += s
		if stop {
			stopped = true
			break
		}
	}
	if !stopped || out != "hello ENxx " {
		t.Fatalf("got %q (stopped %v), want %q", out, stopped, "hello ENxx ")
	}
	// Incomplete UTF-8 is held back until complete.
	b := &active{}
	s1, _ := b.appendText([]byte{'a', 0xC3})
	s2, _ := b.appendText([]byte{0xA9})
	if s1 != "a" || s2 != "é" {
		t.Fatalf("got %q then %q", s1, s2)
	}
}

// A bug in the scheduler's own books stops the engine and fails every live
// request closed, instead of running on (no panic in the loop).
func TestSchedulerBugStopsTheEngine(t *testing.T) {
	pool, _ := isolation.NewPool(isolation.Config{Pages: 4})
	s := NewScheduler(pool, SchedulerConfig{})
	q := &seq{req: Request{ID: "r"}, state: Finished}
	s.set(q, Decoding)
	if q.state != Finished || !errors.Is(s.Err(), errInternal) {
		t.Fatalf("illegal transition: state %s, err %v", q.state, s.Err())
	}
	s2 := NewScheduler(pool, SchedulerConfig{})
	s2.confirm(Ready{Scrub: []int32{3}}) // never handed out by ScrubWork
	if !errors.Is(s2.Err(), errInternal) {
		t.Fatalf("refused scrub confirmation: err %v", s2.Err())
	}
}

// Admission on a decode node bounds prompts by the prefill nodes' pools
// before anything is reserved.
func TestAdmissionPrefillCapacity(t *testing.T) {
	pool, err := isolation.NewPool(isolation.Config{Pages: 1 << 16, PageTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.AddTenant(isolation.TenantConfig{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	a := NewAdmission(AdmissionConfig{ServedContext: 1 << 20, Vocab: 300, Pool: pool, PrefillCapacity: 681280})
	for _, c := range []struct {
		prompt int
		ok     bool
	}{{681280, true}, {681281, false}, {1 << 19, true}, {900000, false}} {
		_, err := a.Admit(Request{ID: "r", Tenant: "a", Prompt: make([]int32, c.prompt), MaxTokens: 1})
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrContextLength)) {
			t.Errorf("prompt of %d: %v, want ok=%v", c.prompt, err, c.ok)
		}
	}
	if st := pool.Stats(); st.Leased != 0 {
		t.Fatalf("admission allocated: %+v", st)
	}
}

// min_tokens: a stop token the model would sample first is never sampled
// before MinTokens tokens (its logit is -inf), and ends the request once
// they are; a stop string before MinTokens does not end it.
func TestMinTokensSuppressesStops(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	defer r.close()
	p := prompt(37, 1)
	greedy := greedyDirect(t, l, p, 1)
	run := func(id string, min int) []int32 {
		s, err := r.e.Submit(context.Background(), GenerateRequest{ID: cloison.RequestID(id), Tenant: "a", Prompt: p, MaxTokens: 12,
			IgnoreEOS: true, StopTokens: []int32{greedy[0]}, MinTokens: min})
		if err != nil {
			t.Fatal(err)
		}
		got, _, err := collect(t, s)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := run("plain", 0); len(got) != 1 || got[0] != greedy[0] {
		t.Fatalf("without min_tokens: %v, want the stop token %d alone", got, greedy[0])
	}
	got := run("min", 4)
	if len(got) < 4 {
		t.Fatalf("min_tokens 4 gave %d tokens: %v", len(got), got)
	}
	for i, tok := range got[:4] {
		if tok == greedy[0] {
			t.Fatalf("stop token %d sampled at %d, before min_tokens: %v", tok, i, got)
		}
	}
	a := &active{req: GenerateRequest{StopStrings: []string{"E"}, MinTokens: 2}}
	s1, stop1 := a.appendText([]byte("aE"))
	a.generated++
	s2, stop2 := a.appendText([]byte("bE"))
	if stop1 || !stop2 || s1+s2 != "aEb" {
		t.Fatalf("stop strings under min_tokens 2: %q %v, %q %v", s1, stop1, s2, stop2)
	}
}
