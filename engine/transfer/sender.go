package transfer

import (
	"context"
	"errors"
	"fmt"

	"github.com/cloison/cloison"
	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// Target is what a decode node tells the prefill node about its reservation
// (Ticket.Target): the transfer must be bound to exactly this.
type Target struct {
	Tenant      cloison.TenantID
	Request     cloison.RequestID
	Epoch       uint64 // the reservation lease's epoch on the decode node
	Reservation ReservationID
	Tokens      int // reserved tokens: exactly the prompt
}

// Receipt acknowledges a verified, committed transfer.
type Receipt struct {
	Tokens      int
	ManifestMAC [32]byte
}

// SenderConfig wires a Sender to the prefill node's pool and arena.
type SenderConfig struct {
	Pool  *isolation.Pool
	Arena kernels.Arena
	Keys  *KeyRing
	Model Digest // identity of the model the KV was computed with
	// ChunkBytes bounds the payload of one frame; 0 means 1 MiB. Pages
	// larger than that travel as several chunks.
	ChunkBytes int
	// Unsafe (faults builds only: ClaimReservation) reproduces the 2026
	// prefill node; empty in the default build.
	Unsafe SenderUnsafe
}

// Sender streams a prefill lease's pages to a decode node. Safe for
// concurrent use: each Send is independent.
type Sender struct {
	cfg    SenderConfig
	layout Layout
}

// NewSender checks cfg. Errors: ErrInvalid.
func NewSender(cfg SenderConfig) (*Sender, error) {
	if cfg.Pool == nil || cfg.Arena == nil || cfg.Keys == nil {
		return nil, fmt.Errorf("%w: sender needs a pool, an arena and keys", ErrInvalid)
	}
	if cfg.ChunkBytes == 0 {
		cfg.ChunkBytes = 1 << 20
	}
	if cfg.ChunkBytes < 1 || cfg.ChunkBytes > 4<<20-1024 {
		return nil, fmt.Errorf("%w: chunk of %d bytes (gRPC messages are at most 4 MiB)", ErrInvalid, cfg.ChunkBytes)
	}
	if cfg.Arena.Config().PageTokens != cfg.Pool.PageTokens() {
		return nil, fmt.Errorf("%w: arena pages of %d tokens, pool pages of %d", ErrInvalid, cfg.Arena.Config().PageTokens, cfg.Pool.PageTokens())
	}
	return &Sender{cfg: cfg, layout: LayoutOf(cfg.Arena.Config())}, nil
}

// Send streams the first to.Tokens positions of lease (written by prefill)
// to the reservation to names, through a stream d opens.
//
// Ordering: the lease's pages are held (Pool.Hold) BEFORE the first CopyOut
// and released (Unhold) only AFTER the stream ended: the receipt arrived, or
// the stream was cancelled and CloseAndRecv returned (the receiver's
// acknowledgement). An engine that aborts the request meanwhile may Release
// the lease: its pages stay draining until then (no free-while-in-flight).
//
// Errors: ErrVerification (the binding does not match the lease, or the
// receiver refused), ErrCanceled (ctx), ErrUnavailable (the stream broke),
// isolation errors (stale lease, *isolation.ViolationError: the lease did
// not write to.Tokens positions), kernel errors of CopyOut.
func (s *Sender) Send(ctx context.Context, d Dialer, lease isolation.Lease, to Target) (Receipt, error) {
	// Refuse a transfer this node could only get wrong: another request's
	// reservation, or a count that is not the prompt's.
	if lease.Tenant != to.Tenant || lease.Request != to.Request {
		return Receipt{}, fmt.Errorf("%w: lease %s is not for %s/%s", ErrVerification, lease, to.Tenant, to.Request)
	}
	if to.Tokens < 1 {
		return Receipt{}, fmt.Errorf("%w: transfer of %d tokens", ErrVerification, to.Tokens)
	}
	hold, err := s.cfg.Pool.Hold(lease)
	if err != nil {
		return Receipt{}, err
	}
	defer s.cfg.Pool.Unhold(hold) // last: after the stream ended, see below
	// The pool approves the read only if the lease wrote every position in
	// this epoch: a 1-token placeholder cannot be sent as an N-token prompt.
	send := to.Tokens
	if s.cfg.Unsafe.claimReservation() {
		if send, err = s.cfg.Pool.Written(lease); err != nil {
			return Receipt{}, err
		}
		send = min(send, to.Tokens)
	}
	bt, err := s.cfg.Pool.BlockTable(lease, send)
	if errors.Is(err, isolation.ErrInvalidArgument) {
		// A lease shorter than the reservation (a placeholder).
		return Receipt{}, fmt.Errorf("%w: %w", ErrVerification, err)
	}
	if err != nil {
		return Receipt{}, err
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := d.Open(sctx)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	rc, err := s.stream(st, bt, lease, to)
	if err != nil {
		// Cancel, then wait for the receiver to stop before the deferred
		// Unhold: the acknowledgement of the cancellation.
		cancel()
		st.CloseAndRecv()
		if ctx.Err() != nil {
			// The caller gave up (prefill abort, node shutdown): whatever
			// the receiver concluded from the broken stream, this is a
			// cancellation here.
			return Receipt{}, fmt.Errorf("%w: %w (receiver: %v)", ErrCanceled, ctx.Err(), err)
		}
		return Receipt{}, err
	}
	return rc, nil
}

func (s *Sender) stream(st Stream, bt isolation.BlockTable, lease isolation.Lease, to Target) (Receipt, error) {
	pb := s.layout.PageBytes()
	m := Manifest{Header: Header{
		KeyID: s.cfg.Keys.Current(), Tenant: to.Tenant, Request: to.Request,
		SenderEpoch: lease.Epoch, ReceiverEpoch: to.Epoch, Reservation: to.Reservation,
		Model: s.cfg.Model, Layout: s.layout, Tokens: to.Tokens, Pages: bt.Len(),
	}}
	if s.cfg.Unsafe.claimReservation() {
		m.Pages = (to.Tokens + s.layout.PageTokens - 1) / s.layout.PageTokens
	}
	hmac, err := s.cfg.Keys.HeaderMAC(&m.Header)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	if err := st.Send(&transferv1.Frame{Kind: &transferv1.Frame_Header{Header: headerToWire(&m.Header, hmac)}}); err != nil {
		return Receipt{}, sendErr(st, err)
	}
	m.Digests = make([]Digest, bt.Len())
	// Pages are copied out and hashed one or two pages ahead of the stream,
	// beside it.
	pages := make(chan outPage, 2)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(pages)
		for i := range bt.Len() {
			// A fresh buffer per page: the stream may hold it until sent.
			buf := make([]byte, pb)
			err := s.cfg.Arena.CopyOut(buf, bt, i)
			var d Digest
			if err == nil {
				d = PageDigest(buf)
			}
			select {
			case pages <- outPage{buf: buf, digest: d, err: err}:
			case <-stop:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// No CopyOut of this lease runs after stream returns.
	defer func() { close(stop); <-done }()
	i := 0
	for pg := range pages {
		if pg.err != nil {
			return Receipt{}, pg.err
		}
		m.Digests[i] = pg.digest
		for off := 0; off < pb; off += s.cfg.ChunkBytes {
			end := min(off+s.cfg.ChunkBytes, pb)
			c := &transferv1.Chunk{Page: uint32(i), Offset: uint64(off), Data: pg.buf[off:end]}
			if end == pb {
				c.Digest = m.Digests[i][:]
			}
			if err := st.Send(&transferv1.Frame{Kind: &transferv1.Frame_Chunk{Chunk: c}}); err != nil {
				return Receipt{}, sendErr(st, err)
			}
		}
		i++
	}
	mmac, err := s.cfg.Keys.ManifestMAC(&m)
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	tr := &transferv1.Trailer{PageDigests: make([][]byte, len(m.Digests)), ManifestMac: mmac[:]}
	for i := range m.Digests {
		tr.PageDigests[i] = m.Digests[i][:]
	}
	if err := st.Send(&transferv1.Frame{Kind: &transferv1.Frame_Trailer{Trailer: tr}}); err != nil {
		return Receipt{}, sendErr(st, err)
	}
	wr, err := st.CloseAndRecv()
	if err != nil {
		return Receipt{}, remoteErr(err)
	}
	if !s.cfg.Unsafe.claimReservation() && (int(wr.GetCommittedTokens()) != to.Tokens || !macEqual(mmac, wr.GetManifestMac())) {
		return Receipt{}, fmt.Errorf("%w: receipt for %d tokens does not acknowledge this manifest", ErrVerification, wr.GetCommittedTokens())
	}
	return Receipt{Tokens: to.Tokens, ManifestMAC: mmac}, nil
}

type outPage struct {
	buf    []byte
	digest Digest
	err    error
}

// sendErr turns a failed Send into the receiver's verdict when it gave one
// (gRPC reports the real status only from CloseAndRecv).
func sendErr(st Stream, err error) error {
	if _, rerr := st.CloseAndRecv(); rerr != nil {
		return remoteErr(rerr)
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}
