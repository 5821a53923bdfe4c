package service

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine"
)

// A replay refused because the node's replay slot is taken says when to
// come back (503 with Retry-After), as every capacity refusal does.
func TestReplayBusyCarriesRetryAfter(t *testing.T) {
	r := NewResponses(ResponsesDeps{})
	r.replaySlot <- struct{}{} // another replay is running
	_, _, err := r.runReplay(context.Background(), engine.GenerateRequest{})
	if !errors.Is(err, ErrReplayBusy) || cloison.ErrorCode(err) != cloison.CodeCapacityExhausted {
		t.Fatalf("got %v, want ErrReplayBusy", err)
	}
	if d := cloison.RetryAfter(err); d != time.Second {
		t.Fatalf("got a retry hint of %v, want 1s", d)
	}
}
