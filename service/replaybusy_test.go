package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
)

// The replay engine's slot is shared fairly: a tenant has one replay
// waiting or running at a time (a second is refused at once, 429 with
// Retry-After), another tenant's replay waits behind at most the one
// running and takes the slot before the first tenant's next one; a replay
// that waits too long is refused 503 with Retry-After.
func TestReplayGateSharesTheSlotFairly(t *testing.T) {
	g := newReplayGate(1, time.Minute)
	leaveA, err := g.enter("tenant:a")
	if err != nil {
		t.Fatal(err)
	}
	releaseA, err := g.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.enter("tenant:a")
	if !errors.Is(err, ErrReplayTenantBusy) || cloison.ErrorCode(err) != cloison.CodeRateLimited || cloison.RetryAfter(err) != time.Second {
		t.Fatalf("a's second replay: got %v (retry %v), want ErrReplayTenantBusy with a 1 s hint", err, cloison.RetryAfter(err))
	}
	leaveB, err := g.enter("tenant:b")
	if err != nil {
		t.Fatalf("b's replay refused while a holds the slot: %v", err)
	}
	got := make(chan string, 2)
	go func() {
		release, err := g.acquire(context.Background())
		if err != nil {
			got <- "b: " + err.Error()
			return
		}
		got <- "b"
		release()
	}()
	for { // b is waiting
		g.mu.Lock()
		n := len(g.waiters)
		g.mu.Unlock()
		if n == 1 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	// a's replay ends and a asks again at once: b goes first.
	releaseA()
	leaveA()
	if _, err := g.enter("tenant:a"); err != nil {
		t.Fatal(err)
	}
	release, err := g.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got <- "a"
	if first, second := <-got, <-got; first != "b" || second != "a" {
		t.Fatalf("slot order %s then %s, want b then a", first, second)
	}
	leaveB()
	// The slot held: a waiter gives up after the gate's wait.
	short := &replayGate{wait: 10 * time.Millisecond, callers: map[string]bool{}}
	_, err = short.acquire(context.Background())
	if !errors.Is(err, ErrReplayBusy) || cloison.ErrorCode(err) != cloison.CodeCapacityExhausted || cloison.RetryAfter(err) != time.Second {
		t.Fatalf("got %v, want ErrReplayBusy with a 1 s hint", err)
	}
	release()
}

// A replay refused because the replay engine stays busy says when to come
// back (503 with Retry-After), as every capacity refusal does.
func TestReplayBusyCarriesRetryAfter(t *testing.T) {
	r := NewResponses(ResponsesDeps{Config: ResponseConfig{ReplayWait: 10 * time.Millisecond}})
	hold, err := r.replays.acquire(context.Background()) // another replay is running
	if err != nil {
		t.Fatal(err)
	}
	defer hold()
	_, _, err = r.runReplay(context.Background(), engine.GenerateRequest{})
	if !errors.Is(err, ErrReplayBusy) || cloison.ErrorCode(err) != cloison.CodeCapacityExhausted {
		t.Fatalf("got %v, want ErrReplayBusy", err)
	}
	if d := cloison.RetryAfter(err); d != time.Second {
		t.Fatalf("got a retry hint of %v, want 1s", d)
	}
}
