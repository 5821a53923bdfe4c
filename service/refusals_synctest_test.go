package service

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cloison/cloison"
)

// RunRefusals writes the pending counts once per interval — not before —
// and a last summary when its context ends, so a node that stops loses no
// refusal. In a synctest bubble the ticker runs on the bubble's clock: the
// test steps time exactly to each edge instead of sleeping and hoping.
func TestRunRefusalsFlushesEachIntervalAndAtTheEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &fakeLedger{}
		s := newTestRequests(l, &countingObserver{})
		quota := cloison.NewError(cloison.CodeRateLimited, "quota")
		events := func() int {
			l.mu.Lock()
			defer l.mu.Unlock()
			return len(l.events)
		}

		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.RunRefusals(ctx, time.Minute) }()

		s.Refuse("a", StageQuota, quota)
		time.Sleep(time.Minute - time.Nanosecond)
		synctest.Wait()
		if got := events(); got != 0 {
			t.Fatalf("before the first interval: %d summaries written, want 0", got)
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if got, pending := events(), s.PendingRefusals(); got != 1 || pending != 0 {
			t.Fatalf("at the first interval: %d summaries, %d pending; want 1 and 0", got, pending)
		}

		// An interval with nothing refused writes nothing.
		time.Sleep(time.Minute)
		synctest.Wait()
		if got := events(); got != 1 {
			t.Fatalf("after an empty interval: %d summaries, want still 1", got)
		}

		// Counted after the last tick: written when the context ends.
		s.Refuse("b", StageQuota, quota)
		s.Refuse("b", StageQuota, quota)
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("RunRefusals: %v", err)
		}
		if got, pending := events(), s.PendingRefusals(); got != 2 || pending != 0 {
			t.Fatalf("after the context ended: %d summaries, %d pending; want 2 and 0", got, pending)
		}
		if l.events[1].Tenant != "b" {
			t.Fatalf("last summary for tenant %q, want b", l.events[1].Tenant)
		}
	})
}
