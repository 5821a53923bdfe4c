package engine

import (
	"context"
	"crypto/sha256"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// disagg wires a decode engine to an in-process prefill node: separate pools
// and arenas, the verified-transfer protocol through transfer.Local.
type disagg struct {
	*rig
	prefill  *PrefillRunner
	calls    int // remote prefills started
	mu       sync.Mutex
	failures []transfer.Failure
}

func (d *disagg) arenaOf(a any) kernels.Arena { return a.(kernels.Arena) }

func newDisagg(t *testing.T, l *loaded, placeholder bool) *disagg {
	t.Helper()
	key, err := transfer.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := transfer.NewKeyRing(key)
	digest := transfer.Digest(sha256.Sum256([]byte("test-model")))
	d := &disagg{}
	// The prefill node's pool and arena.
	ppages := 64
	if placeholder {
		ppages = 4 // 64 tokens: smaller than the decode node's pool, as in 2026
	}
	ppool, _ := isolation.NewPool(isolation.Config{Pages: ppages, PageTokens: 16})
	for _, tn := range []cloison.TenantID{"a", "b"} {
		ppool.AddTenant(isolation.TenantConfig{ID: tn})
	}
	parena, err := l.b.NewArena(l.m.ArenaConfig(ppages, 16, kernels.KVF32))
	if err != nil {
		t.Fatal(err)
	}
	sender, err := transfer.NewSender(transfer.SenderConfig{Pool: ppool, Arena: parena, Keys: keys, Model: digest})
	if err != nil {
		t.Fatal(err)
	}
	var recv *transfer.Receiver
	d.prefill = &PrefillRunner{Model: l.m, Pool: ppool, Arena: parena, Sender: sender, Chunk: 24}
	rc := rigConfig{pool: isolation.Config{Pages: 64, PageTokens: 16}, tenants: []isolation.TenantConfig{{ID: "a"}, {ID: "b"}}}
	rc.remote = func(pool *isolation.Pool, arena any) *Remote {
		var err error
		recv, err = transfer.NewReceiver(transfer.ReceiverConfig{Pool: pool, Arena: d.arenaOf(arena), Keys: keys, Model: digest,
			OnVerificationFailed: func(f transfer.Failure) { d.mu.Lock(); d.failures = append(d.failures, f); d.mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		d.prefill.Dialer = transfer.Local(recv, 0)
		return &Remote{Receiver: recv, Prefill: func(ctx context.Context, tn cloison.TenantID, req cloison.RequestID, toks []int32, to transfer.Target) error {
			d.mu.Lock()
			d.calls++
			d.mu.Unlock()
			return d.prefill.Prefill(ctx, tn, req, toks, to)
		}}
	}
	d.rig = newRig(t, l, rc)
	return d
}

// Disaggregated prefill gives the same tokens as one node, for several
// tenants at once, and every pool ends clean.
func TestRemotePrefillMatchesSingleNode(t *testing.T) {
	l := randomModel(t)
	d := newDisagg(t, l, false)
	type job struct {
		id     cloison.RequestID
		tenant cloison.TenantID
		prompt []int32
	}
	jobs := []job{{"r1", "a", prompt(40, 1)}, {"r2", "b", prompt(17, 2)}, {"r3", "a", prompt(1, 3)}, {"r4", "b", prompt(65, 4)}}
	var wg sync.WaitGroup
	got := make([][]int32, len(jobs))
	errs := make([]error, len(jobs))
	for i, j := range jobs {
		s, err := d.e.Submit(context.Background(), GenerateRequest{ID: j.id, Tenant: j.tenant, Prompt: j.prompt, MaxTokens: 6, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); got[i], _, errs[i] = collect(t, s) }()
	}
	wg.Wait()
	for i, j := range jobs {
		if errs[i] != nil {
			t.Fatalf("%s: %v", j.id, errs[i])
		}
		if want := greedyDirect(t, l, j.prompt, 6); !reflect.DeepEqual(got[i], want) {
			t.Fatalf("%s: disaggregated %v, single node %v", j.id, got[i], want)
		}
	}
	d.close()
	for _, p := range []*isolation.Pool{d.pool, d.prefill.Pool} {
		if err := p.Check(); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.Leased != 0 || st.Draining != 0 {
			t.Fatalf("pages left leased or draining: %+v", st)
		}
	}
	if len(d.failures) != 0 {
		t.Fatalf("verification failures: %+v", d.failures)
	}
	if d.calls != 3 { // the one-token prompt has nothing to prefill remotely
		t.Fatalf("%d remote prefills, want 3", d.calls)
	}
}

// A prefill call that ends with its own deadline error just before the
// engine's context deadline closes (gRPC's transport runs its own timer on
// the same deadline and may answer first) is still a stall: the refusal is
// reported as stalled, with its incident, and the client gets
// deadline_exceeded. Without the check of the error's code and of the
// deadline's time, the engine took it for a plain cancellation and no
// incident was opened.
func TestRemoteDeadlineErrorBeforeContextIsStall(t *testing.T) {
	l := randomModel(t)
	key, err := transfer.NewKey("k1")
	if err != nil {
		t.Fatal(err)
	}
	keys, _ := transfer.NewKeyRing(key)
	digest := transfer.Digest(sha256.Sum256([]byte("test-model")))
	var mu sync.Mutex
	var failures []transfer.Failure
	rc := rigConfig{pool: isolation.Config{Pages: 64, PageTokens: 16}, tenants: []isolation.TenantConfig{{ID: "a"}}}
	rc.remote = func(pool *isolation.Pool, arena any) *Remote {
		recv, err := transfer.NewReceiver(transfer.ReceiverConfig{Pool: pool, Arena: arena.(kernels.Arena), Keys: keys, Model: digest,
			OnVerificationFailed: func(f transfer.Failure) { mu.Lock(); failures = append(failures, f); mu.Unlock() }})
		if err != nil {
			t.Fatal(err)
		}
		return &Remote{Receiver: recv, Timeout: 300 * time.Millisecond,
			Prefill: func(ctx context.Context, _ cloison.TenantID, _ cloison.RequestID, _ []int32, _ transfer.Target) error {
				// Just before the transfer's deadline (Remote.Timeout).
				select {
				case <-time.After(300*time.Millisecond - 20*time.Millisecond):
				case <-ctx.Done():
				}
				return cloison.NewError(cloison.CodeDeadlineExceeded, "prefill node: deadline exceeded")
			}}
	}
	r := newRig(t, l, rc)
	s, err := r.e.Submit(context.Background(), GenerateRequest{ID: "r1", Tenant: "a", Prompt: prompt(40, 1), MaxTokens: 4, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = collect(t, s)
	if cloison.ErrorCode(err) != cloison.CodeDeadlineExceeded {
		t.Fatalf("got %v (code %q), want deadline_exceeded", err, cloison.ErrorCode(err))
	}
	r.close()
	mu.Lock()
	defer mu.Unlock()
	if len(failures) != 1 || failures[0].Reason != transfer.ReasonStalled {
		t.Fatalf("verification failures %+v, want one stalled", failures)
	}
}
