package service

import (
	"context"
	"sync"
	"time"
)

// DefaultReplayWait is how long a replay waits for a slot of the replay
// engine before it is refused with ErrReplayBusy (ResponseConfig.ReplayWait).
const DefaultReplayWait = 30 * time.Second

// replayGate shares the replay engine's slots (ResponseConfig.ReplaySlots)
// between callers fairly: each caller (a tenant, or an operator) has at
// most one replay waiting or running (enter; a second is refused at once
// with ErrReplayTenantBusy), and the waiters take free slots in arrival
// order. With one waiter per caller, arrival order is round robin between
// callers: however many replays one tenant sends, another tenant's waits
// for at most one of them per slot. A replay of n choices takes a slot per
// choice, so its choices interleave with other callers' replays.
type replayGate struct {
	wait time.Duration

	mu      sync.Mutex
	free    int             // slots free, guarded by mu
	waiters []chan struct{} // FIFO; closed when handed a slot, guarded by mu
	callers map[string]bool // callers with a replay waiting or running, guarded by mu
}

func newReplayGate(slots int, wait time.Duration) *replayGate {
	return &replayGate{wait: wait, free: max(slots, 1), callers: map[string]bool{}}
}

// enter admits caller's one replay; leave must be called when it is over.
// Errors: ErrReplayTenantBusy (Retry-After: replayBusyRetry).
func (g *replayGate) enter(caller string) (leave func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.callers[caller] {
		return nil, retryIn{ErrReplayTenantBusy, replayBusyRetry}
	}
	g.callers[caller] = true
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		delete(g.callers, caller)
	}, nil
}

// acquire takes a slot, waiting behind the earlier waiters at most the
// gate's wait. Errors: ErrReplayBusy (Retry-After: replayBusyRetry) when
// no slot came in time or ctx ended.
func (g *replayGate) acquire(ctx context.Context) (release func(), err error) {
	g.mu.Lock()
	if g.free > 0 && len(g.waiters) == 0 {
		g.free--
		g.mu.Unlock()
		return g.release, nil
	}
	ready := make(chan struct{})
	g.waiters = append(g.waiters, ready)
	g.mu.Unlock()
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	select {
	case <-ready:
		return g.release, nil
	case <-ctx.Done():
	case <-timer.C:
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, w := range g.waiters {
		if w == ready {
			g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
			return nil, retryIn{ErrReplayBusy, replayBusyRetry}
		}
	}
	// Handed a slot as the wait ended: give it to the next one.
	g.releaseLocked()
	return nil, retryIn{ErrReplayBusy, replayBusyRetry}
}

// release returns a slot: to the first waiter, or to the free ones.
func (g *replayGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.releaseLocked()
}

func (g *replayGate) releaseLocked() {
	if len(g.waiters) > 0 {
		close(g.waiters[0])
		g.waiters = g.waiters[1:]
		return
	}
	g.free++
}
