package transfer

import (
	"context"
	"fmt"
	"sync"

	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
)

// Router is the Transfer service of a decode node that serves several
// models: each model has its own Receiver (its pool, arena and digest:
// ReceiverConfig.Model), and a stream goes to the receiver of the model
// its header names — after the header authenticated under the cluster key,
// so an unauthenticated stream picks no model. Lease epochs are per pool,
// so a transfer can only be judged against the reservations of the
// model it names; the receiver then checks every binding (model digest
// included) as it does alone.
//
// A transfer that names a model the node does not serve (never loaded,
// unloaded, or a forged digest) is refused with ReasonModel and reported
// to the first receiver's OnVerificationFailed, like every other refusal:
// it is never routed to another model's pool. A stream whose header does
// not parse or authenticate goes to the first receiver, which refuses it
// as it would alone (its per-peer window included).
//
// Ordering duties of the caller: Add a model's receiver BEFORE its engine
// reserves pages for a transfer; Remove it BEFORE its reservations are
// cancelled (its engine stops), so that no new stream reaches a receiver
// whose reservations are ending. A stream already routed when Remove runs
// ends with its ticket (committed, or cancelled and its lease discarded).
type Router struct {
	first *Receiver

	mu      sync.RWMutex
	byModel map[Digest]*Receiver // guarded by mu
}

// NewRouter returns a Router whose first model is first's.
func NewRouter(first *Receiver) *Router {
	return &Router{first: first, byModel: map[Digest]*Receiver{first.cfg.Model: first}}
}

// Add routes the transfers of r's model (ReceiverConfig.Model) to r.
// r must share the first receiver's key ring.
// Errors: ErrInvalid (a model already routed).
func (rt *Router) Add(r *Receiver) error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, dup := rt.byModel[r.cfg.Model]; dup {
		return fmt.Errorf("%w: model %x already receives transfers", ErrInvalid, r.cfg.Model[:8])
	}
	rt.byModel[r.cfg.Model] = r
	return nil
}

// Remove stops routing model's transfers: a later one is refused
// (ReasonModel). The first model is never removed.
func (rt *Router) Remove(model Digest) {
	if model == rt.first.cfg.Model {
		return
	}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	delete(rt.byModel, model)
}

// Serve receives one transfer into the reservation of the model its
// authenticated header names (Receiver.Serve).
func (rt *Router) Serve(ctx context.Context, src FrameSource) (*transferv1.Receipt, error) {
	f, err := src.Recv()
	replay := &replaySource{first: f, err: err, rest: src}
	if err != nil || f.GetHeader() == nil {
		return rt.first.Serve(ctx, replay)
	}
	h, herr := headerFromWire(f.GetHeader())
	if herr != nil || rt.first.authenticate(&h, f.GetHeader().GetHeaderMac()) != nil {
		return rt.first.Serve(ctx, replay) // refused there, unauthenticated
	}
	rt.mu.RLock()
	r := rt.byModel[h.Model]
	rt.mu.RUnlock()
	if r == nil {
		v := refuse(ReasonModel, "KV of model %x, which this node does not serve", h.Model[:8])
		v.Sender = h.SenderEpoch
		rt.first.report(v, PeerOf(ctx))
		return nil, v
	}
	return r.Serve(ctx, replay)
}

// replaySource hands back the frame the Router read, then the rest.
type replaySource struct {
	first *transferv1.Frame
	err   error
	done  bool
	rest  FrameSource
}

func (s *replaySource) Recv() (*transferv1.Frame, error) {
	if !s.done {
		s.done = true
		return s.first, s.err
	}
	return s.rest.Recv()
}
