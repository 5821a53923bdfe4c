package testwait

import (
	"fmt"
	"testing"
	"time"
)

// Pauses between two calls of a condition: short at first, so a condition
// that holds soon is seen soon, then growing, so a slow one (a database
// query, an HTTP call to a child process) is not hammered.
const (
	firstPause = time.Millisecond
	maxPause   = 50 * time.Millisecond
)

// Eventually calls cond until it returns true and fails tb (Fatalf, so
// call it from the test's goroutine) when timeout passes first, with the
// message format and args. cond is called at once, then after pauses
// growing from 1 ms to 50 ms.
func Eventually(tb testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	tb.Helper()
	deadline := time.Now().Add(timeout)
	for pause := firstPause; !cond(); pause = min(2*pause, maxPause) {
		if time.Now().After(deadline) {
			tb.Fatalf("not within %v: %s", timeout, fmt.Sprintf(format, args...))
			return
		}
		time.Sleep(pause)
	}
}

// Receive returns the next value from ch (the zero value once ch is
// closed), failing tb (Fatalf) when timeout passes first. The message is
// format and args.
func Receive[T any](tb testing.TB, timeout time.Duration, ch <-chan T, format string, args ...any) T {
	tb.Helper()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case v := <-ch:
		return v
	case <-t.C:
		tb.Fatalf("not within %v: %s", timeout, fmt.Sprintf(format, args...))
		var zero T
		return zero
	}
}

// Lazy is a message argument computed only when a failure is reported: fmt
// calls its String method then.
type Lazy func() string

func (l Lazy) String() string { return l() }
