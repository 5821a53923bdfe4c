package transfer

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"time"

	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// ReceiverConfig wires a Receiver to the decode node's pool and arena.
type ReceiverConfig struct {
	Pool  *isolation.Pool
	Arena kernels.Arena
	Keys  *KeyRing
	Model Digest // the decode node's model: a transfer of another model's KV is refused
	// OnVerificationFailed is called once for every refused transfer whose
	// header authenticated, after the reservation was discarded (cmd wires
	// it to the ledger: transfer.verification_failed, and an incident), and
	// for at most one unauthenticated refusal per peer and
	// UnauthenticatedWindow (Failure.Unauthenticated). It must not block.
	OnVerificationFailed func(Failure)
	// OnUnauthenticated is called for every stream refused before its
	// header authenticated (junk, an unknown key, a header MAC that does not
	// verify): such a stream touched no reservation. For a metric; it must
	// not block.
	OnUnauthenticated func(peer string, reason Reason)
	// UnauthenticatedWindow bounds the incidents of unauthenticated
	// refusals: at most one per peer per window; 0 means 10 minutes.
	UnauthenticatedWindow time.Duration
	// VerifyWorkers is the number of goroutines hashing pages beside the
	// receiving loop, per transfer; 0 means GOMAXPROCS/4, at least 1.
	VerifyWorkers int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Unsafe switches single checks off in a build with the faults tag, so
	// that the 2026 regression suite can prove the other layers fail closed
	// without them; empty in the default build (unsafe.go).
	Unsafe ReceiverUnsafe
}

// Failure describes a refused transfer, for the ledger: identifiers and the
// reason, never KV.
type Failure struct {
	Time        time.Time
	Lease       isolation.Lease // the reservation; zero if no reservation matched
	SenderEpoch uint64
	Reason      Reason
	Err         error
	// Peer names the sender as its transport authenticated it (the TLS
	// client certificate's subject over gRPC; "local" in process).
	Peer string
	// Unauthenticated: the header did not authenticate under the cluster
	// key, so no reservation was touched. Suppressed counts the
	// unauthenticated refusals of Peer not reported since its last report
	// (the window's flood).
	Unauthenticated bool
	Suppressed      int
}

// Result describes a verified, committed transfer.
type Result struct {
	Tokens, Pages int
	Bytes         int64
	SenderEpoch   uint64
	ManifestMAC   [32]byte
	Elapsed       time.Duration // header to commit
	// Verify is the CPU time spent verifying: hashing pages, comparing
	// digests, checking MACs. Page hashing runs beside the receiving loop.
	Verify time.Duration
	// VerifyWait is the part of Elapsed that verification added: the
	// receiving loop waiting for the verifier (backpressure), the last
	// pages' verification and the MAC checks.
	VerifyWait time.Duration
}

// Receiver accepts transfers into reservations on the decode node. Safe for
// concurrent use.
type Receiver struct {
	cfg     ReceiverConfig
	layout  Layout
	now     func() time.Time
	workers int

	mu      sync.Mutex
	pending map[uint64]*Ticket     // guarded by mu; by the reservation lease's epoch
	unauth  map[string]*unauthSeen // guarded by mu; by peer
}

// unauthSeen is a peer's unauthenticated refusals in the current window.
type unauthSeen struct {
	reported   time.Time // last report to OnVerificationFailed
	suppressed int       // refusals since, not reported
}

// maxUnauthPeers bounds the window's memory: peers are certificate holders,
// but a bound keeps a misbehaving CA from growing the map without end.
const maxUnauthPeers = 4096

// NewReceiver checks cfg. Errors: ErrInvalid.
func NewReceiver(cfg ReceiverConfig) (*Receiver, error) {
	if cfg.Pool == nil || cfg.Arena == nil || cfg.Keys == nil {
		return nil, fmt.Errorf("%w: receiver needs a pool, an arena and keys", ErrInvalid)
	}
	if cfg.Arena.Config().PageTokens != cfg.Pool.PageTokens() {
		return nil, fmt.Errorf("%w: arena pages of %d tokens, pool pages of %d", ErrInvalid, cfg.Arena.Config().PageTokens, cfg.Pool.PageTokens())
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	workers := cfg.VerifyWorkers
	if workers <= 0 {
		workers = max(1, runtime.GOMAXPROCS(0)/4)
	}
	if cfg.UnauthenticatedWindow <= 0 {
		cfg.UnauthenticatedWindow = 10 * time.Minute
	}
	return &Receiver{cfg: cfg, layout: LayoutOf(cfg.Arena.Config()), now: now, workers: workers, pending: map[uint64]*Ticket{}, unauth: map[string]*unauthSeen{}}, nil
}

// Ticket is one reservation waiting for its transfer.
type Ticket struct {
	r      *Receiver
	lease  isolation.Lease
	tokens int
	id     ReservationID
	hold   isolation.HoldID
	table  isolation.BlockTable // staging: CopyIn only

	cancelOnce sync.Once
	cancel     chan struct{} // closed by Cancel or a duplicate stream
	done       chan struct{} // closed by finish

	// Guarded by r.mu.
	claimed  bool
	abortErr error  // why cancel was closed
	peer     string // the claiming stream's sender

	// Written by finish before done is closed.
	res Result
	err error
}

// Expect registers a reservation: lease (allocated by the decode node for
// exactly the prompt, nothing written) will receive tokens positions. Its
// pages are held from now until the transfer is committed, refused or its
// cancellation acknowledged, whatever happens to the lease meanwhile. Hand
// Target() to the prefill node.
//
// Errors: ErrInvalid (tokens < 1, a reservation for this lease already
// pending, a lease with written or cached slots), isolation errors
// (ErrStaleLease; ErrInvalidArgument when the lease holds fewer slots).
func (r *Receiver) Expect(lease isolation.Lease, tokens int) (*Ticket, error) {
	if tokens < 1 {
		return nil, fmt.Errorf("%w: reservation of %d tokens", ErrInvalid, tokens)
	}
	t := &Ticket{r: r, lease: lease, tokens: tokens, cancel: make(chan struct{}), done: make(chan struct{})}
	if _, err := rand.Read(t.id[:]); err != nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending[lease.Epoch] != nil {
		return nil, fmt.Errorf("%w: lease %s already awaits a transfer", ErrInvalid, lease)
	}
	// A reservation is a plain Allocate: nothing written, no cached prefix
	// pages (a transfer of a suffix only is not supported).
	if n, err := r.cfg.Pool.Written(lease); err != nil {
		return nil, err
	} else if n != 0 {
		return nil, fmt.Errorf("%w: lease %s already holds %d written or cached slots", ErrInvalid, lease, n)
	}
	hold, err := r.cfg.Pool.Hold(lease)
	if err != nil {
		return nil, err
	}
	// Staging now validates the reservation; nothing is recorded as
	// written until the transfer is verified.
	table, err := r.cfg.Pool.StagingTable(lease, tokens)
	if err != nil {
		r.cfg.Pool.Unhold(hold)
		return nil, err
	}
	t.hold, t.table = hold, table
	r.pending[lease.Epoch] = t
	return t, nil
}

// Target is what the prefill node needs to bind its transfer.
func (t *Ticket) Target() Target {
	return Target{Tenant: t.lease.Tenant, Request: t.lease.Request, Epoch: t.lease.Epoch, Reservation: t.id, Tokens: t.tokens}
}

// Done is closed when the ticket ended: committed, refused or cancelled.
func (t *Ticket) Done() <-chan struct{} { return t.done }

// Wait returns when the transfer was verified and committed (nil: Pool.Written
// of the lease is the reserved tokens; decode may start) or ended otherwise.
// If ctx ends first, Wait ends the transfer and returns only after that was
// acknowledged: past ctx's deadline (a decode timeout: a stalled prefill
// node or path) as a refusal with ReasonStalled, reported like any other;
// cancelled (the client went away) as a plain cancellation.
//
// Errors: *VerificationError (ErrVerification; the lease was discarded),
// ErrCanceled (Cancel, ctx, or the lease ended during the transfer; the
// lease, if live, was discarded).
func (t *Ticket) Wait(ctx context.Context) (Result, error) {
	select {
	case <-t.done:
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Refuse(ReasonStalled, "no verified transfer before the deadline")
		} else {
			t.Cancel()
		}
		<-t.done
	}
	return t.res, t.err
}

// Started reports whether a stream claimed the reservation (KV may have
// begun to arrive).
func (t *Ticket) Started() bool {
	t.r.mu.Lock()
	defer t.r.mu.Unlock()
	return t.claimed
}

// Refuse ends the transfer as a verification failure with reason: like
// Cancel, but the ticket ends with a *VerificationError that is reported to
// OnVerificationFailed (ledgered, an incident opened). The decode node uses
// it when the path failed rather than the client: a stalled transfer, or a
// prefill node lost after its stream began.
func (t *Ticket) Refuse(reason Reason, detail string) { t.abort(refuse(reason, "%s", detail)) }

// Cancel aborts the transfer (engine abort, decode timeout). It returns at
// once; Done closes when the receiving stream has stopped writing pages (or
// at once if none started), after the lease was discarded and its hold
// released.
func (t *Ticket) Cancel() { t.abort(nil) }

func (t *Ticket) abort(why error) {
	t.r.mu.Lock()
	claimed := t.claimed
	if !claimed {
		t.claimed = true
	}
	if t.abortErr == nil {
		t.abortErr = why
	}
	t.r.mu.Unlock()
	t.cancelOnce.Do(func() { close(t.cancel) })
	if !claimed {
		err := fmt.Errorf("%w: reservation %s cancelled before its transfer started", ErrCanceled, t.lease)
		if why != nil {
			err = why
		}
		t.finish(Result{}, err)
	}
}

// finish ends the ticket: on error the lease is discarded (unverified bytes
// may sit in its pages), then the hold is released. A verification failure
// is reported to the hook.
func (t *Ticket) finish(res Result, err error) {
	r := t.r
	r.mu.Lock()
	delete(r.pending, t.lease.Epoch)
	r.mu.Unlock()
	if err != nil {
		if derr := r.cfg.Pool.Discard(t.lease); derr != nil && !errors.Is(derr, isolation.ErrStaleLease) {
			err = errors.Join(err, derr)
		}
	}
	// Unhold AFTER the last CopyIn: finish runs on the goroutine that
	// copies, once it stopped.
	if uerr := r.cfg.Pool.Unhold(t.hold); uerr != nil {
		err = errors.Join(err, uerr)
	}
	var v *VerificationError
	if errors.As(err, &v) {
		v.Lease = t.lease
		r.report(v, t.peer)
	}
	t.res, t.err = res, err
	close(t.done)
}

func (r *Receiver) report(v *VerificationError, peer string) {
	if r.cfg.OnVerificationFailed != nil {
		r.cfg.OnVerificationFailed(Failure{Time: r.now(), Lease: v.Lease, SenderEpoch: v.Sender, Reason: v.Reason, Err: v, Peer: peer})
	}
}

// refuseUnauthenticated reports a stream refused before its header
// authenticated: counted every time, reported (an incident) at most once per
// peer and window, so that junk from a certificate holder without the
// cluster key cannot flood the incident register.
func (r *Receiver) refuseUnauthenticated(err error, peer string) error {
	var v *VerificationError
	if !errors.As(err, &v) {
		return err
	}
	if r.cfg.OnUnauthenticated != nil {
		r.cfg.OnUnauthenticated(peer, v.Reason)
	}
	now := r.now()
	r.mu.Lock()
	seen := r.unauth[peer]
	report := seen == nil || now.Sub(seen.reported) >= r.cfg.UnauthenticatedWindow
	suppressed := 0
	switch {
	case report && seen != nil:
		suppressed, seen.reported, seen.suppressed = seen.suppressed, now, 0
	case report:
		if len(r.unauth) >= maxUnauthPeers {
			for p, s := range r.unauth { // forget peers whose window ended
				if now.Sub(s.reported) >= r.cfg.UnauthenticatedWindow {
					delete(r.unauth, p)
				}
			}
		}
		if len(r.unauth) < maxUnauthPeers {
			r.unauth[peer] = &unauthSeen{reported: now}
		} else {
			report = false // still full: counted, not reported
		}
	default:
		seen.suppressed++
	}
	r.mu.Unlock()
	if report && r.cfg.OnVerificationFailed != nil {
		r.cfg.OnVerificationFailed(Failure{Time: now, SenderEpoch: v.Sender, Reason: v.Reason, Err: v, Peer: peer, Unauthenticated: true, Suppressed: suppressed})
	}
	return err
}

type frameOrErr struct {
	f   *transferv1.Frame
	err error
}

// Serve receives one transfer from src into the reservation its header
// names, verifies it and commits it. It returns the receipt to send back, or
// the error that ends the stream. ctx is the stream's: its end (the sender
// went away) is a truncated transfer.
//
// Decoding may start only after the ticket's Wait returned nil. Before that,
// in this order: the header's binding and MAC are checked before any page is
// copied; every page is copied in through the reservation's staging table
// (never readable); the manifest is complete, every page arrived exactly
// once and in order with its digest, and the manifest MAC verifies; only
// then Pool.Write records the tokens.
func (r *Receiver) Serve(ctx context.Context, src FrameSource) (*transferv1.Receipt, error) {
	// The header is read here, not through next: a header that arrived
	// before the sender went away is authenticated and its reservation ends
	// as a truncated transfer of its tenant, whatever the scheduling (a
	// select between it and the stream's end would pick either). Recv
	// returns when the stream ends.
	start := r.now()
	peer := PeerOf(ctx)
	first, err := src.Recv()
	if err != nil {
		return nil, r.refuseUnauthenticated(eofTruncated(streamErr(err), "before the header"), peer)
	}
	frames := make(chan frameOrErr, 2)
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			f, err := src.Recv()
			select {
			case frames <- frameOrErr{f, err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var cancel <-chan struct{} // the ticket's, once claimed
	next := func() (*transferv1.Frame, error) {
		select {
		case <-cancel:
			return nil, errCancel
		default:
		}
		select {
		case x := <-frames:
			if x.err != nil {
				return nil, streamErr(x.err)
			}
			return x.f, nil
		case <-cancel:
			return nil, errCancel
		case <-ctx.Done():
			return nil, refuse(ReasonTruncated, "sender went away: %v", context.Cause(ctx))
		}
	}

	wh := first.GetHeader()
	if wh == nil {
		return nil, r.refuseUnauthenticated(refuse(ReasonMalformed, "first frame is not a header"), peer)
	}
	h, err := headerFromWire(wh)
	if err != nil {
		return nil, r.refuseUnauthenticated(err.(*VerificationError), peer)
	}
	// Authenticate BEFORE touching a reservation: a certificate holder
	// without the cluster key must not claim (and so abort) a reservation
	// whose epoch it guessed or saw.
	if err := r.authenticate(&h, wh.GetHeaderMac()); err != nil {
		err.Sender = h.SenderEpoch
		return nil, r.refuseUnauthenticated(err, peer)
	}
	r.mu.Lock()
	t := r.pending[h.ReceiverEpoch]
	dup := t != nil && t.claimed
	if t != nil && !dup {
		t.claimed, t.peer = true, peer
	}
	r.mu.Unlock()
	switch {
	case t == nil:
		v := refuse(ReasonUnknownReservation, "no reservation with epoch %d pending", h.ReceiverEpoch)
		v.Sender = h.SenderEpoch
		r.report(v, peer)
		return nil, v
	case dup:
		// An authenticated second stream: a cluster-key holder misbehaves.
		// Fail closed: the reservation's own stream stops too.
		dupErr := func() *VerificationError {
			v := refuse(ReasonDuplicateStream, "a second stream for one reservation")
			v.Sender, v.Lease = h.SenderEpoch, t.lease
			return v
		}
		t.abort(dupErr()) // the owning stream reports it, once
		return nil, dupErr()
	}
	cancel = t.cancel
	res, err := r.receive(t, &h, wh.GetHeaderMac(), next)
	if err != nil {
		if errors.Is(err, errCancel) {
			r.mu.Lock()
			why := t.abortErr
			r.mu.Unlock()
			err = why
			if err == nil {
				err = fmt.Errorf("%w: reservation %s cancelled during its transfer", ErrCanceled, t.lease)
			}
		}
		var v *VerificationError
		if errors.As(err, &v) && v.Sender == 0 {
			v.Sender = h.SenderEpoch
		}
		t.finish(Result{}, err)
		return nil, err
	}
	res.Elapsed = r.now().Sub(start)
	t.finish(res, nil)
	return &transferv1.Receipt{CommittedTokens: uint64(res.Tokens), ManifestMac: res.ManifestMAC[:]}, nil
}

var errCancel = errors.New("transfer: ticket cancelled")

// streamErr is a FrameSource's Recv error as the receiver reports it:
// io.EOF (the sender closed its side) as is, any other a broken stream.
func streamErr(err error) error {
	if errors.Is(err, io.EOF) {
		return io.EOF
	}
	return refuse(ReasonTruncated, "stream broke: %v", err)
}

func eofTruncated(err error, where string) error {
	if errors.Is(err, io.EOF) {
		return refuse(ReasonTruncated, "stream ended %s", where)
	}
	return err
}

// authenticate checks the header's MAC under the cluster key ring.
func (r *Receiver) authenticate(h *Header, mac []byte) *VerificationError {
	want, err := r.cfg.Keys.HeaderMAC(h)
	switch {
	case err != nil:
		return refuse(ReasonUnknownKey, "key %q is not in the ring", h.KeyID)
	case !macEqual(want, mac):
		return refuse(ReasonHeaderMAC, "header MAC does not verify under key %q", h.KeyID)
	}
	return nil
}

// verifyHeader checks the binding against the reservation; every mismatch is
// refused before a byte of KV is copied.
func (r *Receiver) verifyHeader(t *Ticket, h *Header, mac []byte) (time.Duration, error) {
	start := time.Now()
	want, err := r.cfg.Keys.HeaderMAC(h)
	spent := time.Since(start)
	switch {
	case err != nil:
		return spent, refuse(ReasonUnknownKey, "key %q is not in the ring", h.KeyID)
	case !macEqual(want, mac):
		return spent, refuse(ReasonHeaderMAC, "header MAC does not verify under key %q", h.KeyID)
	case h.Tenant != t.lease.Tenant:
		return spent, refuse(ReasonTenant, "manifest for tenant %q, reservation of %q", h.Tenant, t.lease.Tenant)
	case h.Request != t.lease.Request:
		return spent, refuse(ReasonRequest, "manifest for request %q, reservation of %q", h.Request, t.lease.Request)
	case subtle.ConstantTimeCompare(h.Reservation[:], t.id[:]) != 1:
		return spent, refuse(ReasonReservation, "manifest names another reservation (stale or replayed)")
	case h.Model != r.cfg.Model:
		return spent, refuse(ReasonModel, "KV of model %x, this node serves %x", h.Model[:8], r.cfg.Model[:8])
	case h.Layout.KV != r.layout.KV:
		return spent, refuse(ReasonKVType, "pages of KV type %v, this node's arena stores %v", h.Layout.KV, r.layout.KV)
	case h.Layout != r.layout:
		return spent, refuse(ReasonLayout, "pages of layout %+v, this node's arena is %+v", h.Layout, r.layout)
	case r.cfg.Unsafe.skipCountCheck():
	case h.Tokens != t.tokens:
		return spent, refuse(ReasonTokenCount, "%d tokens transferred for a reservation of %d", h.Tokens, t.tokens)
	case h.Pages != t.table.Len():
		return spent, refuse(ReasonPageCount, "%d pages announced for %d tokens in pages of %d", h.Pages, h.Tokens, r.layout.PageTokens)
	}
	return spent, nil
}

// pageJob is one complete page handed to the verifier.
type pageJob struct {
	i      int
	buf    []byte
	digest []byte // the sender's, from the page's last chunk
	pooled bool   // buf returns to the free list after use
}

// verifier hashes complete pages on its own goroutine, so that verification
// overlaps with receiving and copying in the next pages. Pages are copied in
// through the staging table before their digest is checked: staged slots are
// unreadable until commit, and a refused transfer's pages are scrubbed.
type verifier struct {
	r      *Receiver
	t      *Ticket
	jobs   chan pageJob
	free   chan []byte
	done   chan struct{}
	once   sync.Once
	digest []Digest // written by the goroutine; read after stop

	mu  sync.Mutex
	err error         // guarded by mu: the first failure
	cpu time.Duration // guarded by mu: time spent hashing and comparing
}

func (r *Receiver) newVerifier(t *Ticket, pages int) *verifier {
	n := r.workers
	v := &verifier{r: r, t: t, jobs: make(chan pageJob, n+1), free: make(chan []byte, n+2), done: make(chan struct{}), digest: make([]Digest, pages)}
	for range cap(v.free) {
		v.free <- nil // allocated on first use
	}
	var wg sync.WaitGroup
	for range n {
		wg.Go(v.run)
	}
	go func() { wg.Wait(); close(v.done) }()
	return v
}

// run checks pages until the jobs end; workers write distinct digest slots.
func (v *verifier) run() {
	for j := range v.jobs {
		if v.failed() == nil {
			v.page(j)
		}
		if j.pooled {
			v.free <- j.buf
		}
	}
}

func (v *verifier) page(j pageJob) {
	start := time.Now()
	d := PageDigest(j.buf)
	ok := subtle.ConstantTimeCompare(d[:], j.digest) == 1
	v.mu.Lock()
	v.cpu += time.Since(start)
	v.mu.Unlock()
	if !ok && !v.r.cfg.Unsafe.skipDigestCheck() {
		v.fail(refuse(ReasonDigest, "page %d does not match its digest", j.i))
		return
	}
	v.digest[j.i] = d
}

func (v *verifier) fail(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err == nil {
		v.err = err
	}
}

func (v *verifier) failed() error {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.err
}

// stop waits until the verifier checked its last page. Idempotent.
func (v *verifier) stop() error {
	v.once.Do(func() { close(v.jobs) })
	<-v.done
	return v.failed()
}

func (r *Receiver) receive(t *Ticket, h *Header, hmac []byte, next func() (*transferv1.Frame, error)) (res Result, err error) {
	res = Result{Tokens: h.Tokens, Pages: h.Pages, SenderEpoch: h.SenderEpoch}
	spent, err := r.verifyHeader(t, h, hmac)
	res.Verify += spent
	if err != nil {
		return res, err
	}
	pb := r.layout.PageBytes()
	v := r.newVerifier(t, h.Pages)
	defer func() {
		if verr := v.stop(); err == nil && verr != nil {
			err = verr
		}
		v.mu.Lock()
		res.Verify += v.cpu
		v.mu.Unlock()
	}()
	var buf []byte
	pooled := false
	page, off := 0, 0
	for {
		if err := v.failed(); err != nil {
			return res, err
		}
		f, err := next()
		if err != nil {
			return res, eofTruncated(err, fmt.Sprintf("at page %d offset %d of %d pages", page, off, h.Pages))
		}
		if tr := f.GetTrailer(); tr != nil {
			switch {
			case off != 0:
				return res, refuse(ReasonChunkOrder, "trailer inside page %d", page)
			case page != h.Pages && !r.cfg.Unsafe.skipCountCheck():
				// Fewer pages than announced: transferred != reserved.
				return res, refuse(ReasonPageCount, "trailer after %d of %d pages", page, h.Pages)
			}
			ws := time.Now()
			verr := v.stop() // the last pages' verification is on the critical path
			res.VerifyWait += time.Since(ws)
			if verr != nil {
				return res, verr
			}
			return r.commit(t, &Manifest{Header: *h, Digests: v.digest}, page, tr, next, res)
		}
		c := f.GetChunk()
		switch {
		case c == nil:
			return res, refuse(ReasonMalformed, "unexpected frame at page %d", page)
		case int(c.GetPage()) != page || c.GetOffset() != uint64(off):
			return res, refuse(ReasonChunkOrder, "chunk of page %d offset %d, want page %d offset %d", c.GetPage(), c.GetOffset(), page, off)
		case page >= h.Pages:
			return res, refuse(ReasonChunkOrder, "page %d beyond the %d announced", page, h.Pages)
		case len(c.GetData()) == 0 || len(c.GetData()) > pb-off:
			return res, refuse(ReasonMalformed, "chunk of %d bytes at offset %d of a %d-byte page", len(c.GetData()), off, pb)
		}
		last := off+len(c.GetData()) == pb
		if last != (len(c.GetDigest()) != 0) {
			return res, refuse(ReasonMalformed, "page %d: digest on a chunk that is not the page's last, or missing on the last", page)
		}
		res.Bytes += int64(len(c.GetData()))
		ws := time.Now()
		switch {
		case off == 0 && last:
			// A whole page in one chunk: its bytes are ours already.
			buf, pooled = c.GetData(), false
		case off == 0:
			buf, pooled = <-v.free, true // waits while the verifier is behind
			if buf == nil {
				buf = make([]byte, pb)
			}
		}
		res.VerifyWait += time.Since(ws)
		if pooled {
			copy(buf[off:], c.GetData())
		}
		off += len(c.GetData())
		if !last {
			continue
		}
		// Staged, not verified: the arena holds the bytes, the pool
		// records nothing until commit.
		if err := r.cfg.Arena.CopyIn(t.table, page, buf); err != nil {
			if pooled {
				v.free <- buf
			}
			return res, err
		}
		ws = time.Now()
		v.jobs <- pageJob{i: page, buf: buf, digest: c.GetDigest(), pooled: pooled}
		res.VerifyWait += time.Since(ws)
		buf, pooled = nil, false
		page, off = page+1, 0
	}
}

// commit checks the trailer against the verified pages, then records the
// tokens as written: never more than the pages received hold, whatever the
// manifest claims (with every check on the two are equal).
func (r *Receiver) commit(t *Ticket, m *Manifest, received int, tr *transferv1.Trailer, next func() (*transferv1.Frame, error), res Result) (Result, error) {
	vs := time.Now()
	want, err := r.cfg.Keys.ManifestMAC(m)
	if err != nil {
		return res, refuse(ReasonUnknownKey, "%v", err)
	}
	ds := tr.GetPageDigests()
	okDigests := len(ds) == len(m.Digests)
	for i := 0; okDigests && i < len(ds); i++ {
		okDigests = subtle.ConstantTimeCompare(ds[i], m.Digests[i][:]) == 1
	}
	okMAC := macEqual(want, tr.GetManifestMac())
	if r.cfg.Unsafe.skipDigestCheck() {
		okDigests, okMAC = true, true
	}
	spent := time.Since(vs)
	res.Verify += spent
	res.VerifyWait += spent
	if !okDigests {
		return res, refuse(ReasonDigest, "manifest digests do not match the pages received")
	}
	if !okMAC {
		return res, refuse(ReasonManifestMAC, "manifest MAC does not verify under key %q", m.KeyID)
	}
	if f, err := next(); !errors.Is(err, io.EOF) {
		if err != nil {
			return res, err
		}
		return res, refuse(ReasonMalformed, "frame %T after the trailer", f.GetKind())
	}
	// Verified: only now are the positions recorded as written, and only
	// those the received pages hold (the fill counts are the receiver's
	// record of what arrived, not the sender's claim).
	tokens := min(m.Tokens, received*r.layout.PageTokens)
	if err := r.cfg.Pool.Write(t.lease, tokens); err != nil {
		return res, fmt.Errorf("%w: lease %s ended during its transfer: %w", ErrCanceled, t.lease, err)
	}
	res.Tokens = tokens
	res.ManifestMAC = want
	return res, nil
}
