package transfer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/transfer/pki"
	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"google.golang.org/protobuf/proto"
)

// A holder of a cluster certificate without the cluster key
// cannot claim, and so abort, another tenant's reservation. The receiver
// authenticates the header BEFORE it claims the reservation the header
// names; the real transfer that follows still succeeds.
func TestUnauthenticatedHeaderCannotAbort(t *testing.T) {
	p := newPair(t, 0)
	otherKeys, _ := keyRing(t, "k1") // same id, another secret
	rogueKeys, _ := keyRing(t, "k9")
	flipMAC := func(i int, f *transferv1.Frame) []*transferv1.Frame {
		if h := f.GetHeader(); h != nil {
			h.HeaderMac[0] ^= 1
		}
		return []*transferv1.Frame{f}
	}
	tests := []struct {
		name   string
		keys   *KeyRing
		tamper func(int, *transferv1.Frame) []*transferv1.Frame
		reason Reason
	}{
		{name: "header MAC flipped", keys: p.keys, tamper: flipMAC, reason: ReasonHeaderMAC},
		{name: "another cluster's key", keys: otherKeys, reason: ReasonHeaderMAC},
		{name: "key not in the ring", keys: rogueKeys, reason: ReasonUnknownKey},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := cloison.RequestID("victim-" + tt.name)
			toks := prompt(promptLen, 5)
			from, _ := p.prefillLease(t, "b", req, toks)
			defer p.prefill.pool.Release(from)
			dl, tk := p.reserve(t, "b", req, promptLen)
			defer p.decode.pool.Release(dl)
			// The attacker: a valid cluster certificate, the victim's
			// target (epoch and nonce), no cluster key.
			cfg := p.sender.cfg
			cfg.Keys = tt.keys
			attacker, err := NewSender(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var d Dialer = p.grpc.dialAs(t, p.grpc.ca, "prefill-attacker", pki.RolePrefill)
			if tt.tamper != nil {
				d = tamperDialer{d: d, fn: tt.tamper}
			}
			before := len(p.hook.failures())
			if _, err := attacker.Send(context.Background(), d, from, tk.Target()); !isVerification(err) {
				t.Fatalf("attacker: got %v, want a transfer_verification_failed error", err)
			}
			if tk.Started() {
				t.Fatalf("got the reservation claimed by an unauthenticated stream, want it untouched")
			}
			select {
			case <-tk.Done():
				_, err := tk.Wait(context.Background())
				t.Fatalf("got the reservation ended by an unauthenticated stream (%v), want it pending", err)
			default:
			}
			fs := p.hook.failures()[before:]
			if len(fs) != 1 || !fs[0].Unauthenticated || fs[0].Reason != tt.reason || fs[0].Lease.Request != "" {
				t.Fatalf("hook: got %+v, want one unauthenticated %s refusal bound to no reservation", fs, tt.reason)
			}
			// The real prefill node's transfer still succeeds.
			o := p.transfer(context.Background(), p.grpc.dial(t, p.grpc.ca), from, tk.Target(), tk)
			if o.sendErr != nil || o.waitErr != nil {
				t.Fatalf("real transfer after the attack: got send %v, wait %v, want both nil", o.sendErr, o.waitErr)
			}
			if n, _ := p.decode.pool.Written(dl); n != promptLen {
				t.Fatalf("got %d tokens written, want %d", n, promptLen)
			}
		})
	}
}

// A flood of unauthenticated streams is counted every time (OnUnauthenticated,
// a metric in cloisond) but reported (an incident) at most once per peer per
// window; after the window the next report carries the suppressed count.
func TestUnauthenticatedFloodBounded(t *testing.T) {
	p := newPair(t, 0)
	var mu sync.Mutex
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	h := &hook{}
	var counted atomic.Int64
	peers := map[string]int{}
	recv, err := NewReceiver(ReceiverConfig{Pool: p.decode.pool, Arena: p.decode.arena, Keys: p.keys, Model: p.digest, Now: clock,
		OnVerificationFailed: h.record, UnauthenticatedWindow: time.Hour,
		OnUnauthenticated: func(peer string, _ Reason) { counted.Add(1); mu.Lock(); peers[peer]++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	c := serveGRPC(t, recv)
	junk := []*transferv1.Frame{
		{Kind: &transferv1.Frame_Chunk{Chunk: &transferv1.Chunk{Data: []byte("junk")}}}, // not a header
		{Kind: &transferv1.Frame_Header{Header: &transferv1.Header{}}},                  // an empty header
		{Kind: &transferv1.Frame_Header{Header: &transferv1.Header{KeyId: "k1", HeaderMac: make([]byte, 32)}}},
	}
	send := func(d Dialer, i int) {
		st, err := d.Open(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_ = st.Send(junk[i%len(junk)])
		if _, err := st.CloseAndRecv(); err == nil {
			t.Fatalf("junk %d: got a receipt, want a refusal", i)
		}
	}
	one, two := c.dialAs(t, c.ca, "prefill-1", pki.RolePrefill), c.dialAs(t, c.ca, "prefill-2", pki.RolePrefill)
	const flood = 30
	for i := range flood {
		send(one, i)
	}
	for i := range 3 {
		send(two, i)
	}
	if got := counted.Load(); got != flood+3 {
		t.Fatalf("got %d unauthenticated refusals counted, want %d", got, flood+3)
	}
	fs := h.failures()
	if len(fs) != 2 || !fs[0].Unauthenticated || !fs[1].Unauthenticated || fs[0].Peer == fs[1].Peer || fs[0].Suppressed != 0 {
		t.Fatalf("reports: got %+v, want one unauthenticated report per peer", fs)
	}
	if len(peers) != 2 {
		t.Fatalf("got %d distinct peers, want 2 (peers are told apart by certificate)", len(peers))
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	send(one, 0)
	fs = h.failures()
	if len(fs) != 3 || fs[2].Peer != fs[0].Peer || fs[2].Suppressed != flood-1 {
		t.Fatalf("after the window: got %+v, want a third report of the first peer with %d suppressed", fs[2:], flood-1)
	}
	if st := p.decode.pool.Stats(); st.Leased != 0 {
		t.Fatalf("junk touched the pool: %+v", st)
	}
}

// Certificates are bound to roles: a decode-role certificate cannot push as
// a prefill node, a prefill-role certificate cannot serve as a decode node,
// and a certificate with no role is neither. Each is refused in the TLS
// handshake, before the receiver sees a frame; the right roles still work.
func TestCertificateRoles(t *testing.T) {
	p := newPair(t, 0)
	toks := prompt(promptLen, 7)
	from, _ := p.prefillLease(t, "a", "roles", toks)
	defer p.prefill.pool.Release(from)
	dl, tk := p.reserve(t, "a", "roles", promptLen)
	defer p.decode.pool.Release(dl)
	// A node serving Transfer with a prefill-role certificate (acting as
	// decode node).
	impostor := serveGRPCAs(t, p.recv, p.grpc.ca, pki.RolePrefill)
	tests := []struct {
		name string
		d    Dialer
	}{
		{"decode certificate pushing as prefill", p.grpc.dialAs(t, p.grpc.ca, "decode-1", pki.RoleDecode)},
		{"certificate without a role", p.grpc.dialAs(t, p.grpc.ca, "node-1", "")},
		{"prefill certificate serving as decode", impostor.dial(t, p.grpc.ca)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := p.sender.Send(ctx, tt.d, from, tk.Target()); !errors.Is(err, ErrUnavailable) {
				t.Fatalf("got %v, want ErrUnavailable (the handshake refused)", err)
			}
			if tk.Started() || len(p.hook.failures()) != 0 {
				t.Fatalf("got the receiver reached (started %v, failures %+v), want the handshake to refuse", tk.Started(), p.hook.failures())
			}
		})
	}
	o := p.transfer(context.Background(), p.grpc.dial(t, p.grpc.ca), from, tk.Target(), tk)
	if o.sendErr != nil || o.waitErr != nil {
		t.Fatalf("prefill to decode: got send %v, wait %v, want both nil", o.sendErr, o.waitErr)
	}
}

// recordDialer keeps the frames a sender sends and delivers none: its
// CloseAndRecv fails, so the sender gives up.
type recordDialer struct{ frames *[]*transferv1.Frame }

func (d recordDialer) Open(context.Context) (Stream, error) { return d, nil }

func (d recordDialer) Send(f *transferv1.Frame) error {
	*d.frames = append(*d.frames, proto.Clone(f).(*transferv1.Frame))
	return nil
}

func (d recordDialer) CloseAndRecv() (*transferv1.Receipt, error) {
	return nil, errors.New("recorded, not delivered")
}

// headerThenSilence hands the header, then blocks until the test ends:
// a prefill node lost right after its header arrived.
type headerThenSilence struct {
	header *transferv1.Frame
	sent   bool
	end    <-chan struct{}
}

func (s *headerThenSilence) Recv() (*transferv1.Frame, error) {
	if !s.sent {
		s.sent = true
		return s.header, nil
	}
	<-s.end
	return nil, context.Canceled
}

// A sender that goes away after its authenticated header is a truncated
// transfer of the header's reservation — its tenant's incident, the ticket
// ended — never an unauthenticated stream "before the header", however the
// receiver's goroutines are scheduled against the stream's end.
func TestTruncatedAfterHeaderIsTheReservations(t *testing.T) {
	p := newPair(t, 0)
	end := make(chan struct{})
	defer close(end)
	gone, cancel := context.WithCancel(context.Background())
	cancel() // the stream's context is already done when Serve looks
	for i := range 20 {
		req := cloison.RequestID(fmt.Sprintf("lost-%d", i))
		toks := prompt(promptLen, int32(i))
		from, _ := p.prefillLease(t, "b", req, toks)
		dl, tk := p.reserve(t, "b", req, promptLen)
		var frames []*transferv1.Frame
		if _, err := p.sender.Send(context.Background(), recordDialer{&frames}, from, tk.Target()); err == nil || len(frames) == 0 || frames[0].GetHeader() == nil {
			t.Fatalf("recording the sender: got %d frames, err %v; want a header first and an error", len(frames), err)
		}
		p.prefill.pool.Release(from)
		before := len(p.hook.failures())
		_, err := p.recv.Serve(gone, &headerThenSilence{header: frames[0], end: end})
		var v *VerificationError
		if !errors.As(err, &v) || v.Reason != ReasonTruncated {
			t.Fatalf("round %d: Serve got %v, want a truncated transfer", i, err)
		}
		wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err = tk.Wait(wctx)
		wcancel()
		if !isVerification(err) {
			t.Fatalf("round %d: ticket got %v, want it ended by the verification failure", i, err)
		}
		fs := p.hook.failures()[before:]
		if len(fs) != 1 || fs[0].Unauthenticated || fs[0].Lease.Request != req || fs[0].Reason != ReasonTruncated {
			t.Fatalf("round %d: hook got %+v, want one truncated transfer bound to %s", i, fs, req)
		}
		p.decode.pool.Release(dl)
		p.prefill.scrub(t)
		p.decode.scrub(t)
	}
}
