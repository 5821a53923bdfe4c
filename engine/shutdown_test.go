package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
)

// A shutdown racing Submit ends every published request: Submit sets the
// request's cancel hooks before the loop can see it (when it did not, the
// loop's finish called a nil stopCtx: a panic, and a data race under -race).
func TestSubmitRacesShutdown(t *testing.T) {
	l := randomModel(t)
	for round := range 8 {
		r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}})
		var wg sync.WaitGroup
		streams := make(chan *Stream, 64)
		for g := range 4 {
			wg.Go(func() {
				for i := range 16 {
					id := cloison.RequestID(string(rune('a'+g)) + string(rune('a'+i)))
					s, err := r.e.Submit(context.Background(), GenerateRequest{ID: id, Tenant: "a", Prompt: prompt(4, i), MaxTokens: 2})
					if err != nil {
						if !errors.Is(err, ErrStopped) {
							t.Errorf("round %d: Submit: got %v, want nil or ErrStopped", round, err)
						}
						continue
					}
					streams <- s
				}
			})
		}
		r.close() // shutdown while the Submits run
		wg.Wait()
		close(streams)
		for s := range streams {
			// Every accepted stream ends: finished before the stop, or stopped.
			if _, _, err := collect(t, s); err != nil && !errors.Is(err, ErrStopped) {
				t.Fatalf("round %d: stream %s: got %v, want nil or ErrStopped", round, s.ID, err)
			}
		}
	}
}

// After Run returned, nothing posts into the loop blocks: a stream cancelled
// more times than the control queue holds returns (before the fix the
// 1025th Cancel blocked forever).
func TestPostAfterRunDoesNotBlock(t *testing.T) {
	l := randomModel(t)
	r := newRig(t, l, rigConfig{pool: isolation.Config{Pages: 64}, tenants: []isolation.TenantConfig{{ID: "a"}}})
	s, err := r.e.Submit(context.Background(), GenerateRequest{ID: "x", Tenant: "a", Prompt: prompt(4, 1), MaxTokens: 1000, IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	r.close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 4 * cap(r.e.ctl) {
			s.Cancel()
		}
	}()
	// A deadlock guard, not a speed assertion.
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatalf("got Cancel blocked after Run returned, want it to return")
	}
	if ok := r.e.post(func() {}); ok {
		t.Fatalf("got post accepted after Run returned, want refused")
	}
}
