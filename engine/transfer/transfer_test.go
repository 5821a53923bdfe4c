package transfer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/transfer/pki"
	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

const (
	pageTokens = 16
	promptLen  = 53 // 4 pages, the last one partial
	decodeLen  = 6
)

// pair is a prefill node and a decode node of one cluster.
type pair struct {
	m       *model.Model
	digest  Digest
	keys    *KeyRing
	key     Key
	prefill *node
	decode  *node
	sender  *Sender
	recv    *Receiver
	hook    *hook
	grpc    *cluster
}

func newPair(t testing.TB, chunk int) *pair {
	t.Helper()
	m, digest := testModel(t)
	p := &pair{m: m, digest: digest, hook: &hook{}}
	p.keys, p.key = keyRing(t, "k1")
	ac := m.ArenaConfig(16, pageTokens, kernels.KVF32)
	p.prefill = newNode(t, m.Backend(), ac, "a", "b")
	p.decode = newNode(t, m.Backend(), ac, "a", "b")
	var err error
	p.sender, err = NewSender(SenderConfig{Pool: p.prefill.pool, Arena: p.prefill.arena, Keys: p.keys, Model: digest, ChunkBytes: chunk})
	if err != nil {
		t.Fatal(err)
	}
	p.recv, err = NewReceiver(ReceiverConfig{Pool: p.decode.pool, Arena: p.decode.arena, Keys: p.keys, Model: digest, OnVerificationFailed: p.hook.record, VerifyWorkers: 3})
	if err != nil {
		t.Fatal(err)
	}
	p.grpc = serveGRPC(t, p.recv)
	return p
}

// prefillLease runs the prompt on the prefill node and returns its lease and
// the first token (greedy).
func (p *pair) prefillLease(t testing.TB, tenant cloison.TenantID, req cloison.RequestID, toks []int32) (isolation.Lease, int32) {
	t.Helper()
	l, err := p.prefill.pool.Allocate(tenant, req, len(toks))
	if err != nil {
		t.Fatal(err)
	}
	return l, argmax(p.prefill.forward(t, p.m, l, 0, toks))
}

// reserve allocates exactly the prompt on the decode node and expects its
// transfer.
func (p *pair) reserve(t testing.TB, tenant cloison.TenantID, req cloison.RequestID, tokens int) (isolation.Lease, *Ticket) {
	t.Helper()
	l, err := p.decode.pool.Allocate(tenant, req, tokens)
	if err != nil {
		t.Fatal(err)
	}
	tk, err := p.recv.Expect(l, tokens)
	if err != nil {
		t.Fatal(err)
	}
	return l, tk
}

type outcome struct {
	rc      Receipt
	sendErr error
	res     Result
	waitErr error
}

// transfer sends and waits on both sides.
func (p *pair) transfer(ctx context.Context, d Dialer, from isolation.Lease, to Target, tk *Ticket) outcome {
	var o outcome
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		o.rc, o.sendErr = p.sender.Send(ctx, d, from, to)
	}()
	o.res, o.waitErr = tk.Wait(context.Background())
	wg.Wait()
	return o
}

// reference decodes the prompt on one node: the logits of decodeLen steps
// after the prompt, greedy.
func reference(t testing.TB, m *model.Model, toks []int32) [][]float32 {
	t.Helper()
	n := newNode(t, m.Backend(), m.ArenaConfig(16, pageTokens, kernels.KVF32), "a")
	l, err := n.pool.Allocate("a", "ref", len(toks)+decodeLen)
	if err != nil {
		t.Fatal(err)
	}
	next := argmax(n.forward(t, m, l, 0, toks))
	var out [][]float32
	for i := range decodeLen {
		lg := n.forward(t, m, l, len(toks)+i, []int32{next})
		out = append(out, lg)
		next = argmax(lg)
	}
	return out
}

// Layer 4: decode after a verified transfer is the single-node computation,
// bit for bit, over real gRPC with mutual TLS and in process.
func TestTransferBitExact(t *testing.T) {
	for _, chunk := range []int{0, 3000} {
		p := newPair(t, chunk)
		toks := prompt(promptLen, 1)
		want := reference(t, p.m, toks)
		for _, tr := range []struct {
			name string
			d    Dialer
		}{
			{"grpc-mtls", p.grpc.dial(t, p.grpc.ca)},
			{"local", Local(p.recv, 0)},
		} {
			t.Run(fmt.Sprintf("%s/chunk=%d", tr.name, chunk), func(t *testing.T) {
				req := cloison.RequestID(tr.name)
				from, first := p.prefillLease(t, "a", req, toks)
				dl, tk := p.reserve(t, "a", req, promptLen)
				o := p.transfer(context.Background(), tr.d, from, tk.Target(), tk)
				if o.sendErr != nil || o.waitErr != nil {
					t.Fatalf("send: %v, wait: %v", o.sendErr, o.waitErr)
				}
				if o.rc.Tokens != promptLen || o.res.Tokens != promptLen || o.res.Pages != 4 || o.res.ManifestMAC != o.rc.ManifestMAC || o.res.SenderEpoch != from.Epoch {
					t.Fatalf("got receipt %+v, result %+v", o.rc, o.res)
				}
				if o.res.Bytes != int64(4*LayoutOf(p.decode.arena.Config()).PageBytes()) || o.res.Verify <= 0 || o.res.VerifyWait > o.res.Elapsed {
					t.Fatalf("got %d bytes, verify %v (wait %v) of %v", o.res.Bytes, o.res.Verify, o.res.VerifyWait, o.res.Elapsed)
				}
				if n, _ := p.decode.pool.Written(dl); n != promptLen {
					t.Fatalf("got %d tokens written after commit, want %d", n, promptLen)
				}
				if err := p.decode.pool.Extend(dl, promptLen+decodeLen); err != nil {
					t.Fatal(err)
				}
				next := first
				for i := range decodeLen {
					got := p.decode.forward(t, p.m, dl, promptLen+i, []int32{next})
					if !slices.Equal(got, want[i]) {
						t.Fatalf("step %d: logits differ from the single-node run", i)
					}
					next = argmax(got)
				}
				for _, n := range []*node{p.prefill, p.decode} {
					if st := n.pool.Stats(); st.Draining != 0 {
						t.Fatalf("got %d draining pages after the transfer, want 0", st.Draining)
					}
					n.check(t)
				}
				p.prefill.pool.Release(from)
				p.decode.pool.Release(dl)
				if fs := p.hook.failures(); len(fs) != 0 {
					t.Fatalf("verification failures on the happy path: %+v", fs)
				}
			})
		}
	}
}

// reMAC re-signs a tampered header and trailer with the cluster key: a
// faulty prefill node that holds the key but binds the wrong things.
func reMAC(t testing.TB, keys *KeyRing, hdr *transferv1.Header) {
	t.Helper()
	h, err := headerFromWire(hdr)
	if err != nil {
		t.Fatal(err)
	}
	mac, err := keys.HeaderMAC(&h)
	if err != nil {
		t.Fatal(err)
	}
	hdr.HeaderMac = mac[:]
}

// Fault injection (a peer or network that truncates, corrupts, stalls or
// drops a transfer must never yield a decode): every fault ends in a typed error on both ends,
// no token recorded, the reservation discarded and scrubbed, and one
// verification failure reported to the hook.
func TestTransferFaults(t *testing.T) {
	p := newPair(t, 3000) // 3 chunks per page, 12 chunks in all
	toks := prompt(promptLen, 2)
	const (
		header  = 0
		trailer = 13
	)
	chunkOf := func(f *transferv1.Frame) *transferv1.Chunk { return f.GetChunk() }
	var held *transferv1.Frame
	var page1 []*transferv1.Frame
	otherKeys, _ := keyRing(t, "k1") // same id, another secret
	rogueKeys, _ := keyRing(t, "k9")
	tests := []struct {
		name    string
		reason  Reason
		tenant  cloison.TenantID // of the prefill lease; "a" if empty
		request cloison.RequestID
		target  func(Target) Target
		tamper  func(i int, f *transferv1.Frame) []*transferv1.Frame
		keys    *KeyRing
		model   *Digest
		// The reservation named is discarded; false: none matched, or the
		// header did not authenticate (then no reservation is touched).
		discard bool
	}{
		{name: "truncated stream", reason: ReasonTruncated, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i > 5 {
					return nil
				}
				return []*transferv1.Frame{f}
			}},
		{name: "duplicated chunk", reason: ReasonChunkOrder, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i == 4 {
					return []*transferv1.Frame{f, f}
				}
				return []*transferv1.Frame{f}
			}},
		{name: "duplicated page", reason: ReasonChunkOrder, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				// Frames 4-6 are page 1: send it twice.
				if i == 4 {
					page1 = nil
				}
				if i >= 4 && i <= 6 {
					page1 = append(page1, f)
				}
				if i == 6 {
					return append(slices.Clone(page1), page1...)
				}
				if i > 4 && i < 6 {
					return nil
				}
				return []*transferv1.Frame{f}
			}},
		{name: "reordered chunks", reason: ReasonChunkOrder, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				switch i {
				case 4:
					held = f
					return nil
				case 5:
					return []*transferv1.Frame{f, held}
				}
				return []*transferv1.Frame{f}
			}},
		{name: "missing chunk", reason: ReasonChunkOrder, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i == 8 {
					return nil
				}
				return []*transferv1.Frame{f}
			}},
		{name: "missing last page", reason: ReasonPageCount, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i >= 10 && i < trailer {
					return nil
				}
				return []*transferv1.Frame{f}
			}},
		{name: "another request's manifest", reason: ReasonRequest, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i == header {
					f.GetHeader().Request = "r-other"
					reMAC(t, p.keys, f.GetHeader())
				}
				return []*transferv1.Frame{f}
			}},
		{name: "another request's lease", reason: ReasonRequest, discard: true, request: "r-other",
			target: func(to Target) Target { to.Request = "r-other"; return to }},
		{name: "another tenant's manifest", reason: ReasonTenant, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i == header {
					f.GetHeader().Tenant = "b"
					reMAC(t, p.keys, f.GetHeader())
				}
				return []*transferv1.Frame{f}
			}},
		{name: "another tenant's lease", reason: ReasonTenant, discard: true, tenant: "b",
			target: func(to Target) Target { to.Tenant = "b"; return to }},
		{name: "stale epoch", reason: ReasonUnknownReservation, discard: false,
			target: func(to Target) Target { to.Epoch--; return to }},
		{name: "stale reservation nonce", reason: ReasonReservation, discard: true,
			target: func(to Target) Target { to.Reservation[0] ^= 1; return to }},
		{name: "page digest mismatch", reason: ReasonDigest, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if c := chunkOf(f); c != nil && i == 7 {
					c.Data[17] ^= 0x40
				}
				return []*transferv1.Frame{f}
			}},
		{name: "manifest digest mismatch", reason: ReasonDigest, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if tr := f.GetTrailer(); tr != nil {
					tr.PageDigests[2][0] ^= 1
				}
				return []*transferv1.Frame{f}
			}},
		{name: "bad header MAC", reason: ReasonHeaderMAC, discard: false,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i == header {
					f.GetHeader().HeaderMac[3] ^= 1
				}
				return []*transferv1.Frame{f}
			}},
		{name: "bad manifest MAC", reason: ReasonManifestMAC, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if tr := f.GetTrailer(); tr != nil {
					tr.ManifestMac[0] ^= 1
				}
				return []*transferv1.Frame{f}
			}},
		{name: "key not in the ring", reason: ReasonUnknownKey, discard: false, keys: rogueKeys},
		{name: "another cluster's key", reason: ReasonHeaderMAC, discard: false, keys: otherKeys},
		{name: "another model", reason: ReasonModel, discard: true, model: &Digest{1}},
		{name: "another layout", reason: ReasonLayout, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i == header {
					f.GetHeader().Layout.KvHeads = 1
					reMAC(t, p.keys, f.GetHeader())
				}
				return []*transferv1.Frame{f}
			}},
		// Pages of another element type (f16 pages into an f32 arena: half
		// the bytes, another format) are refused before any is written,
		// even with a valid header MAC; so is an unknown type.
		{name: "another KV type", reason: ReasonKVType, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i == header {
					f.GetHeader().Layout.KvType = transferv1.KVType_KV_TYPE_F16
					reMAC(t, p.keys, f.GetHeader())
				}
				return []*transferv1.Frame{f}
			}},
		{name: "an unknown KV type", reason: ReasonKVType, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i == header {
					f.GetHeader().Layout.KvType = 7
					reMAC(t, p.keys, f.GetHeader())
				}
				return []*transferv1.Frame{f}
			}},
		{name: "KV type changed under the header MAC", reason: ReasonHeaderMAC, discard: false,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i == header {
					f.GetHeader().Layout.KvType = transferv1.KVType_KV_TYPE_F16
				}
				return []*transferv1.Frame{f}
			}},
		{name: "frame after the trailer", reason: ReasonMalformed, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				if i == trailer {
					return []*transferv1.Frame{f, f}
				}
				return []*transferv1.Frame{f}
			}},
		{
			// The 2026 incident: a rejected prompt replaced by a
			// one-token placeholder, its KV sent as "complete" into a
			// reservation for the whole prompt.
			name: "1-token placeholder for an N-token reservation", reason: ReasonTokenCount, discard: true,
			tamper: func(i int, f *transferv1.Frame) []*transferv1.Frame {
				switch {
				case i == header:
					f.GetHeader().Tokens, f.GetHeader().Pages = 1, 1
					reMAC(t, p.keys, f.GetHeader())
				case i > 3 && i < trailer:
					return nil
				}
				return []*transferv1.Frame{f}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tenant, req := cloison.TenantID("a"), cloison.RequestID("r-"+tt.name)
			if tt.tenant != "" {
				tenant = tt.tenant
			}
			if tt.request != "" {
				req = tt.request
			}
			from, _ := p.prefillLease(t, tenant, req, toks)
			defer p.prefill.pool.Release(from)
			dl, tk := p.reserve(t, "a", cloison.RequestID("r-"+tt.name), promptLen)
			to := tk.Target()
			if tt.target != nil {
				to = tt.target(to)
			}
			s := p.sender
			if tt.keys != nil || tt.model != nil {
				cfg := s.cfg
				if tt.keys != nil {
					cfg.Keys = tt.keys
				}
				if tt.model != nil {
					cfg.Model = *tt.model
				}
				s, _ = NewSender(cfg)
			}
			var d Dialer = p.grpc.dial(t, p.grpc.ca)
			if tt.tamper != nil {
				d = tamperDialer{d: d, fn: tt.tamper}
			}
			before := len(p.hook.failures())
			_, sendErr := s.Send(context.Background(), d, from, to)
			if !isVerification(sendErr) {
				t.Fatalf("sender: got %v (code %s), want a transfer_verification_failed error", sendErr, cloison.ErrorCode(sendErr))
			}
			if !tt.discard {
				// No reservation matched: the pending one is intact,
				// nothing written; end it as the engine would.
				if n, err := p.decode.pool.Written(dl); err != nil || n != 0 {
					t.Fatalf("untouched reservation: got %d written, %v", n, err)
				}
				tk.Cancel()
			}
			_, err := tk.Wait(context.Background())
			if tt.discard {
				var v *VerificationError
				if !errors.As(err, &v) || v.Reason != tt.reason || v.Lease != dl || cloison.ErrorCode(err) != cloison.CodeTransferVerification {
					t.Fatalf("receiver: got %v, want a %s verification error for %s", err, tt.reason, dl)
				}
			} else if !errors.Is(err, ErrCanceled) {
				t.Fatalf("receiver: got %v, want ErrCanceled", err)
			}
			fs := p.hook.failures()[before:]
			if len(fs) != 1 || fs[0].Reason != tt.reason || (tt.discard && fs[0].Lease != dl) {
				t.Fatalf("hook: got %+v, want one %s failure", fs, tt.reason)
			}
			// No token: the lease is gone and its pages are scrubbed
			// before any reuse.
			if _, err := p.decode.pool.Written(dl); !errors.Is(err, isolation.ErrStaleLease) {
				t.Fatalf("after the failure: got %v, want the lease discarded (ErrStaleLease)", err)
			}
			if got := p.decode.scrub(t); got != 4 {
				t.Fatalf("got %d pages scrubbed, want the reservation's 4", got)
			}
			p.decode.check(t)
			if st := p.decode.pool.Stats(); st.Leased != 0 || st.Draining != 0 || st.Quarantined != 0 {
				t.Fatalf("decode pool after the failure: %+v", st)
			}
			if st := p.prefill.pool.Stats(); st.Draining != 0 {
				t.Fatalf("prefill pool holds %d draining pages after the stream ended", st.Draining)
			}
		})
	}
}

// The sender's own defences: it never sends KV its lease did not write, nor
// for a reservation of another request.
func TestSenderRefuses(t *testing.T) {
	p := newPair(t, 0)
	d := Local(p.recv, 0)
	// The 2026 path on the prefill side: a placeholder wrote one token of
	// a lease reserved for the prompt.
	l, err := p.prefill.pool.Allocate("a", "placeholder", promptLen)
	if err != nil {
		t.Fatal(err)
	}
	p.prefill.forward(t, p.m, l, 0, []int32{5})
	dl, tk := p.reserve(t, "a", "placeholder", promptLen)
	_, err = p.sender.Send(context.Background(), d, l, tk.Target())
	var v *isolation.ViolationError
	if !errors.As(err, &v) || v.Reason != isolation.ReasonUnwritten {
		t.Fatalf("send of an unwritten prompt: got %v, want an unwritten-slot violation", err)
	}
	to := tk.Target()
	to.Request = "other"
	if _, err := p.sender.Send(context.Background(), d, l, to); !isVerification(err) {
		t.Fatalf("send for another request: got %v, want ErrVerification", err)
	}
	if st := p.prefill.pool.Stats(); st.Draining != 0 || st.Leased != 4 {
		t.Fatalf("prefill pool: %+v", st)
	}
	tk.Cancel()
	if _, err := tk.Wait(context.Background()); !errors.Is(err, ErrCanceled) || cloison.ErrorCode(err) != cloison.CodeCanceled {
		t.Fatalf("cancelled reservation: got %v, want ErrCanceled", err)
	}
	if _, err := p.decode.pool.Written(dl); !errors.Is(err, isolation.ErrStaleLease) {
		t.Fatalf("cancelled reservation: got %v, want the lease discarded", err)
	}
	p.prefill.check(t)
	p.decode.check(t)
}

// mTLS: a prefill node whose certificate the cluster CA did not sign cannot
// open a stream; the reservation is untouched.
func TestForeignCertificateRefused(t *testing.T) {
	p := newPair(t, 0)
	rogue, err := pki.NewCA("rogue")
	if err != nil {
		t.Fatal(err)
	}
	from, _ := p.prefillLease(t, "a", "r", prompt(promptLen, 3))
	dl, tk := p.reserve(t, "a", "r", promptLen)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = p.sender.Send(ctx, p.grpc.dial(t, rogue), from, tk.Target())
	if err == nil || !errors.Is(err, ErrUnavailable) {
		t.Fatalf("send with a foreign certificate: got %v, want ErrUnavailable", err)
	}
	if n, err := p.decode.pool.Written(dl); n != 0 || err != nil {
		t.Fatalf("reservation after a refused connection: %d written, %v", n, err)
	}
	if len(p.hook.failures()) != 0 {
		t.Fatalf("a refused TLS handshake reached the receiver: %+v", p.hook.failures())
	}
	// The cluster's own node still gets through.
	o := p.transfer(context.Background(), p.grpc.dial(t, p.grpc.ca), from, tk.Target(), tk)
	if o.sendErr != nil || o.waitErr != nil {
		t.Fatalf("send: %v, wait: %v", o.sendErr, o.waitErr)
	}
}

// Key rotation: a receiver accepts every key of its ring; a sender signs
// with its current key.
func TestKeyRotation(t *testing.T) {
	p := newPair(t, 0)
	next, err := NewKey("k2")
	if err != nil {
		t.Fatal(err)
	}
	rotated, err := NewKeyRing(next, p.key) // new current, old still accepted
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		send, rcv *KeyRing
		ok        bool
	}{
		{"sender rotated first", rotated, p.keys, false},
		{"receiver rotated first", p.keys, rotated, true},
		{"both rotated", rotated, rotated, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p.recv.cfg.Keys = tt.rcv
			s, _ := NewSender(SenderConfig{Pool: p.prefill.pool, Arena: p.prefill.arena, Keys: tt.send, Model: p.digest})
			req := cloison.RequestID(fmt.Sprint("rot", i))
			from, _ := p.prefillLease(t, "a", req, prompt(20, 4))
			defer p.prefill.pool.Release(from)
			dl, tk := p.reserve(t, "a", req, 20)
			defer p.decode.pool.Release(dl)
			var o outcome
			o.rc, o.sendErr = s.Send(context.Background(), Local(p.recv, 0), from, tk.Target())
			if !tt.ok {
				// An unknown key does not authenticate: refused before the
				// reservation is claimed, which stays pending.
				var v *VerificationError
				if !errors.As(o.sendErr, &v) || v.Reason != ReasonUnknownKey || tk.Started() {
					t.Fatalf("got %v (reservation claimed %v), want an unknown-key refusal of an unclaimed reservation", o.sendErr, tk.Started())
				}
				tk.Cancel()
			}
			o.res, o.waitErr = tk.Wait(context.Background())
			if got := o.sendErr == nil && o.waitErr == nil; got != tt.ok {
				t.Fatalf("got send %v, wait %v; want success %v", o.sendErr, o.waitErr, tt.ok)
			}
		})
	}
	p.recv.cfg.Keys = p.keys
}

func TestKeyRing(t *testing.T) {
	long := make([]byte, 32)
	tests := []struct {
		name  string
		cur   Key
		older []Key
		ok    bool
	}{
		{"one key", Key{"k", long}, nil, true},
		{"short secret", Key{"k", long[:31]}, nil, false},
		{"empty id", Key{"", long}, nil, false},
		{"duplicate id", Key{"k", long}, []Key{{"k", long}}, false},
		{"rotation", Key{"k2", long}, []Key{{"k1", long}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewKeyRing(tt.cur, tt.older...)
			if (err == nil) != tt.ok {
				t.Fatalf("got %v, want success %v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("got %v, want ErrInvalid", err)
			}
		})
	}
}

// The canonical encoding is injective on the fields that matter: moving a
// byte from one string to the next changes the MAC.
func TestHeaderMACBindsEveryField(t *testing.T) {
	keys, _ := keyRing(t, "k")
	base := Header{KeyID: "k", Tenant: "ab", Request: "c", SenderEpoch: 1, ReceiverEpoch: 2, Model: Digest{3},
		Layout: Layout{Layers: 2, KVHeads: 2, HeadDim: 16, PageTokens: 16}, Tokens: 53, Pages: 4}
	base.Reservation[0] = 9
	mutations := map[string]func(*Header){
		"tenant/request boundary": func(h *Header) { h.Tenant, h.Request = "a", "bc" },
		"sender epoch":            func(h *Header) { h.SenderEpoch++ },
		"receiver epoch":          func(h *Header) { h.ReceiverEpoch++ },
		"reservation":             func(h *Header) { h.Reservation[15] = 1 },
		"model":                   func(h *Header) { h.Model[31] = 1 },
		"layout":                  func(h *Header) { h.Layout.HeadDim = 8 },
		"tokens":                  func(h *Header) { h.Tokens = 1 },
		"pages":                   func(h *Header) { h.Pages = 1 },
	}
	want, _ := keys.HeaderMAC(&base)
	for name, mut := range mutations {
		t.Run(name, func(t *testing.T) {
			h := base
			mut(&h)
			if got, _ := keys.HeaderMAC(&h); got == want {
				t.Fatal("MAC unchanged")
			}
		})
	}
	m1 := Manifest{Header: base, Digests: []Digest{{1}, {2}}}
	m2 := Manifest{Header: base, Digests: []Digest{{2}, {1}}}
	a, _ := keys.ManifestMAC(&m1)
	b, _ := keys.ManifestMAC(&m2)
	if a == b || a == want {
		t.Fatal("manifest MAC does not bind the page order, or equals the header MAC")
	}
}
