package testwait

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTB records a Fatalf and ends the goroutine, as testing.T does.
type fakeTB struct {
	testing.TB
	failed string
}

func (f *fakeTB) Helper() {}

func (f *fakeTB) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fakeTB on a goroutine of its own and returns the
// failure it reported ("" when none).
func run(fn func(tb testing.TB)) string {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f.failed
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	if msg := run(func(tb testing.TB) {
		Eventually(tb, time.Minute, func() bool { return calls.Add(1) == 5 }, "five calls")
	}); msg != "" {
		t.Fatalf("failed: %s", msg)
	}
	if calls.Load() != 5 {
		t.Errorf("cond called %d times, want 5 (no call after it held)", calls.Load())
	}
}

func TestEventuallyFailsAtTheDeadline(t *testing.T) {
	logs := 0
	start := time.Now()
	msg := run(func(tb testing.TB) {
		var last error
		Eventually(tb, 30*time.Millisecond, func() bool { last = errors.New("row missing"); return false }, "the row of %s: %v\n%s", "acme",
			Lazy(func() string { return last.Error() }), Lazy(func() string { logs++; return "child logs" }))
	})
	if time.Since(start) < 30*time.Millisecond {
		t.Errorf("gave up after %v, before the deadline", time.Since(start))
	}
	for _, want := range []string{"not within 30ms", "the row of acme", "child logs", "acme: row missing"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q lacks %q", msg, want)
		}
	}
	if logs != 1 {
		t.Errorf("Lazy computed %d times, want once (on failure only)", logs)
	}
	if msg := run(func(tb testing.TB) { Eventually(tb, 10*time.Millisecond, func() bool { return false }, "never") }); !strings.Contains(msg, "never") {
		t.Errorf("bool form: got %q", msg)
	}
}

func TestReceive(t *testing.T) {
	ch := make(chan int, 1)
	ch <- 7
	var got int
	if msg := run(func(tb testing.TB) { got = Receive(tb, time.Minute, ch, "a value") }); msg != "" || got != 7 {
		t.Errorf("got %d, %q", got, msg)
	}
	closed := make(chan struct{})
	close(closed)
	if msg := run(func(tb testing.TB) { Receive(tb, time.Minute, closed, "close") }); msg != "" {
		t.Errorf("closed channel: %q", msg)
	}
	if msg := run(func(tb testing.TB) { Receive(tb, 10*time.Millisecond, make(chan struct{}), "the %s", "ack") }); !strings.Contains(msg, "the ack") {
		t.Errorf("got %q", msg)
	}
}
