package transfer

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cloison/cloison"
	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/internal/testwait"
	"github.com/cloison/cloison/isolation"
)

// gate stops the sender before frame `at` until open is closed; reached is
// closed when it gets there.
type gate struct {
	at      int
	reached chan struct{}
	open    chan struct{}
}

func newGate(at int) *gate {
	return &gate{at: at, reached: make(chan struct{}), open: make(chan struct{})}
}

func (g *gate) fn(i int, f *transferv1.Frame) []*transferv1.Frame {
	if i == g.at {
		close(g.reached)
		<-g.open
	}
	return []*transferv1.Frame{f}
}

func waitClaimed(t *testing.T, r *Receiver, tk *Ticket) {
	t.Helper()
	testwait.Eventually(t, 20*time.Second, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return tk.claimed
	}, "the receiver to take the stream")
}

// Layer 5, free-while-in-flight (the #35049 / GLM-5 failure): an abort during
// a transfer keeps the pages held, on both nodes, until the transfer's
// cancellation is acknowledged; only then are they quarantined and scrubbed.
// Until commit, nothing of the transfer is readable on the decode node.
func TestAbortDuringTransfer(t *testing.T) {
	tests := []struct {
		name      string
		transport string
		// abort runs while the sender is stopped mid-stream; it returns
		// the errors the sender and the receiver must end with.
		abort      func(t *testing.T, p *pair, from, dl isolation.Lease, tk *Ticket, cancelSend context.CancelFunc)
		sendErr    error
		waitErr    error
		wantFailed Reason // hook; "" for none
	}{
		{name: "decode aborts (engine releases the reservation)", transport: "grpc",
			abort: func(t *testing.T, p *pair, from, dl isolation.Lease, tk *Ticket, _ context.CancelFunc) {
				if err := p.decode.pool.Release(dl); err != nil {
					t.Fatal(err)
				}
				if st := p.decode.pool.Stats(); st.Draining != 4 || st.Leased != 0 {
					t.Fatalf("decode pool after the abort, before the ack: %+v, want 4 draining", st)
				}
				if work := p.decode.pool.ScrubWork(); len(work) != 0 {
					t.Fatalf("held pages handed out for scrubbing: %v", work)
				}
				tk.Cancel()
			},
			sendErr: ErrCanceled, waitErr: ErrCanceled},
		{name: "decode timeout (Wait's deadline): a stall", transport: "local",
			abort: func(t *testing.T, p *pair, from, dl isolation.Lease, tk *Ticket, _ context.CancelFunc) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
				defer cancel()
				var v *VerificationError
				if _, err := tk.Wait(ctx); !errors.As(err, &v) || v.Reason != ReasonStalled {
					t.Fatalf("Wait past its deadline: got %v, want a stalled refusal", err)
				}
			},
			sendErr: ErrVerification, waitErr: ErrVerification, wantFailed: ReasonStalled},
		{name: "client gone (Wait's context cancelled)", transport: "grpc",
			abort: func(t *testing.T, p *pair, from, dl isolation.Lease, tk *Ticket, _ context.CancelFunc) {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if _, err := tk.Wait(ctx); !errors.Is(err, ErrCanceled) {
					t.Fatalf("Wait with its context cancelled: got %v, want ErrCanceled", err)
				}
			},
			sendErr: ErrCanceled, waitErr: ErrCanceled},
		{name: "prefill aborts (engine releases the prefill lease, cancels the send)", transport: "grpc",
			abort: func(t *testing.T, p *pair, from, dl isolation.Lease, tk *Ticket, cancelSend context.CancelFunc) {
				if err := p.prefill.pool.Release(from); err != nil {
					t.Fatal(err)
				}
				if st := p.prefill.pool.Stats(); st.Draining != 4 {
					t.Fatalf("prefill pool after the abort, before the ack: %+v, want 4 draining", st)
				}
				if work := p.prefill.pool.ScrubWork(); len(work) != 0 {
					t.Fatalf("held pages handed out for scrubbing: %v", work)
				}
				cancelSend()
			},
			sendErr: ErrCanceled, waitErr: ErrVerification, wantFailed: ReasonTruncated},
		{name: "sender killed mid-transfer", transport: "local",
			abort: func(t *testing.T, p *pair, from, dl isolation.Lease, tk *Ticket, cancelSend context.CancelFunc) {
				cancelSend()
			},
			sendErr: ErrCanceled, waitErr: ErrVerification, wantFailed: ReasonTruncated},
		{name: "second stream for the reservation", transport: "grpc",
			abort: func(t *testing.T, p *pair, from, dl isolation.Lease, tk *Ticket, _ context.CancelFunc) {
				_, err := p.sender.Send(context.Background(), p.grpc.dial(t, p.grpc.ca), from, tk.Target())
				if !isVerification(err) {
					t.Fatalf("second stream: got %v, want ErrVerification", err)
				}
			},
			sendErr: ErrVerification, waitErr: ErrVerification, wantFailed: ReasonDuplicateStream},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPair(t, 3000)
			var d Dialer = Local(p.recv, 2)
			if tt.transport == "grpc" {
				d = p.grpc.dial(t, p.grpc.ca)
			}
			g := newGate(6) // page 0 copied in, page 1 partly
			from, _ := p.prefillLease(t, "a", "r", prompt(promptLen, 5))
			dl, tk := p.reserve(t, "a", "r", promptLen)
			ctx, cancelSend := context.WithCancel(context.Background())
			defer cancelSend()
			sent := make(chan error, 1)
			go func() {
				_, err := p.sender.Send(ctx, tamperDialer{d: d, fn: g.fn}, from, tk.Target())
				sent <- err
			}()
			testwait.Receive(t, 20*time.Second, g.reached, "the sender to stop mid-stream")
			// The receiver took the stream (frames before the gate may
			// still be in flight: a stream cancelled before the receiver
			// ever saw it leaves the reservation to Wait's deadline, see
			// TestReservationNeverServed).
			waitClaimed(t, p.recv, tk)
			// Staged, not committed: nothing is readable, nothing written.
			var v *isolation.ViolationError
			if _, err := p.decode.pool.BlockTable(dl, 1); !errors.As(err, &v) || v.Reason != isolation.ReasonUnwritten {
				t.Fatalf("read during the transfer: got %v, want an unwritten-slot violation", err)
			}
			if n, _ := p.decode.pool.Written(dl); n != 0 {
				t.Fatalf("got %d tokens written during the transfer, want 0", n)
			}
			tt.abort(t, p, from, dl, tk, cancelSend)
			testwait.Receive(t, 20*time.Second, tk.Done(), "the receiver to acknowledge")
			if _, err := tk.Wait(context.Background()); !errors.Is(err, tt.waitErr) {
				t.Fatalf("receiver: got %v, want %v", err, tt.waitErr)
			}
			// Acknowledged on the decode node: the hold is gone, the
			// staged pages go to scrubbing whatever the mode.
			if st := p.decode.pool.Stats(); st.Draining != 0 || st.Leased != 0 {
				t.Fatalf("decode pool after the ack: %+v", st)
			}
			if got := p.decode.scrub(t); got != 4 {
				t.Fatalf("got %d decode pages scrubbed, want 4", got)
			}
			close(g.open)
			err := <-sent
			if !errors.Is(err, tt.sendErr) {
				t.Fatalf("sender: got %v (code %s), want %v", err, cloison.ErrorCode(err), tt.sendErr)
			}
			// The sender's hold ended with its stream.
			if st := p.prefill.pool.Stats(); st.Draining != 0 {
				t.Fatalf("prefill pool after the send returned: %+v", st)
			}
			p.prefill.pool.Release(from) // ErrStaleLease if already released
			p.prefill.scrub(t)
			p.prefill.check(t)
			p.decode.check(t)
			fs := p.hook.failures()
			switch {
			case tt.wantFailed == "" && len(fs) != 0:
				t.Fatalf("hook: got %+v, want no verification failure for an abort", fs)
			case tt.wantFailed != "" && (len(fs) != 1 || fs[0].Reason != tt.wantFailed || fs[0].Lease != dl):
				t.Fatalf("hook: got %+v, want one %s failure for %s", fs, tt.wantFailed, dl)
			}
		})
	}
}

// A reservation that no stream ever reaches (prefill crashed before
// connecting, or its path stalls) ends at Wait's deadline: discarded, the
// hold released, and reported as stalled (an incident on a real node).
func TestReservationNeverServed(t *testing.T) {
	p := newPair(t, 0)
	dl, tk := p.reserve(t, "a", "r", promptLen)
	if _, err := p.recv.Expect(dl, promptLen); !errors.Is(err, ErrInvalid) {
		t.Fatalf("second Expect for one lease: got %v, want ErrInvalid", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Millisecond)
	defer cancel()
	var v *VerificationError
	if _, err := tk.Wait(ctx); !errors.As(err, &v) || v.Reason != ReasonStalled {
		t.Fatalf("got %v, want a stalled refusal", err)
	}
	if st := p.decode.pool.Stats(); st.Leased != 0 || st.Draining != 0 {
		t.Fatalf("decode pool: %+v", st)
	}
	p.decode.check(t)
	// A later stream for it finds nothing.
	from, _ := p.prefillLease(t, "a", "r", prompt(promptLen, 6))
	if _, err := p.sender.Send(context.Background(), Local(p.recv, 0), from, tk.Target()); !isVerification(err) {
		t.Fatalf("stream for an ended reservation: got %v, want ErrVerification", err)
	}
	if fs := p.hook.failures(); len(fs) != 2 || fs[0].Reason != ReasonStalled || fs[0].Lease != dl || fs[1].Reason != ReasonUnknownReservation {
		t.Fatalf("hook: got %+v, want a stalled failure for %s, then an unknown-reservation one", fs, dl)
	}
}

func TestExpectRefuses(t *testing.T) {
	p := newPair(t, 0)
	pool := p.decode.pool
	small, _ := pool.Allocate("a", "small", 16)
	written, _ := pool.Allocate("a", "written", promptLen)
	pool.Write(written, 1)
	toks := prompt(40, 8)
	pub, _, _ := pool.AllocatePrefix("b", "pub", 40, toks)
	pool.Write(pub, 40)
	pool.Publish(pub, toks)
	prefixed, cached, err := pool.AllocatePrefix("b", "prefixed", 41, append(toks, 7))
	if err != nil || cached == 0 {
		t.Fatalf("prefix lease: %d cached, %v", cached, err)
	}
	tests := []struct {
		name   string
		lease  isolation.Lease
		tokens int
		want   error
	}{
		{"no tokens", small, 0, ErrInvalid},
		{"more tokens than the lease holds", small, 17, isolation.ErrInvalidArgument},
		{"lease already written", written, promptLen, ErrInvalid},
		{"cached prefix pages", prefixed, 41, ErrInvalid},
		{"stale lease", isolation.Lease{Tenant: "a", Request: "gone", Epoch: 99}, 4, isolation.ErrStaleLease},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := p.recv.Expect(tt.lease, tt.tokens); !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if st := pool.Stats(); st.Draining != 0 {
				t.Fatalf("a refused Expect left a hold: %+v", st)
			}
			p.decode.check(t)
		})
	}
	// A refused Expect holds nothing and stages nothing: releasing
	// returns the pages without a scrub.
	for _, l := range []isolation.Lease{small, written, prefixed, pub} {
		if err := pool.Release(l); err != nil {
			t.Fatal(err)
		}
	}
	if st := pool.Stats(); st.Leased != 0 || st.Draining != 0 {
		t.Fatalf("decode pool: %+v", st)
	}
	if work := pool.ScrubWork(); len(work) != 0 {
		t.Fatalf("got %d pages to scrub after refused Expects, want 0", len(work))
	}
	p.decode.check(t)
}
