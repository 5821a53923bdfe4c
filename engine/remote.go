package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
)

// Remote connects a decode node's engine to prefill nodes (disaggregated
// prefill and decode). For every admitted request with more than one prompt
// token, the engine reserves the request's pages in its own pool, expects a
// verified transfer of all but the last prompt token into them
// (Receiver.Expect holds and stages the pages; nothing is readable or
// recorded until every page is verified), asks a prefill node to compute and
// send that KV (Prefill), and decodes only after Ticket.Wait succeeded: the
// last prompt token is computed locally, so sampling stays here. A refused
// or failed transfer fails the request (never a 200); the receiver discards
// the reservation and reports the refusal (OnVerificationFailed).
type Remote struct {
	Receiver *transfer.Receiver
	// Prefill asks a prefill node to compute the KV of tokens (positions
	// 0…len−1) for (tenant, request) and send it to target. It runs on its
	// own goroutine and returns when the prefill node is done or failed.
	Prefill func(ctx context.Context, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, target transfer.Target) error
	// Timeout bounds one remote prefill, transfer included; default 2 min.
	Timeout time.Duration
	// Capacity is the smallest prefill node's pool in tokens
	// (attest.Prefill); admission rejects longer prompts. 0: no bound.
	Capacity int
	// Unsafe (faults builds only: SkipCountCheck) makes the engine decode
	// without checking that the pool recorded every reserved token after
	// the transfer (the receiver's own count check is transfer.ReceiverUnsafe).
	Unsafe Unsafe
	// Tracer (optional) records a "transfer" span per remote prefill, from
	// the reservation to the verified KV, child of the request's span
	// (Submit's context); Prefill gets the span in its context, to send on
	// (internal/tracing). nil: no spans.
	Tracer trace.Tracer
}

func prefillCapacity(r *Remote) int {
	if r == nil {
		return 0
	}
	return r.Capacity
}

// ErrTransferIncomplete: a transfer was committed but the pool does not hold
// every reserved token of the prompt. The request fails closed with an
// incident: decoding would read positions nobody verified.
var ErrTransferIncomplete = cloison.NewError(cloison.CodeIsolationViolation, "transferred tokens differ from the reservation")

// ErrRemotePrefill wraps a prefill node's failure before any transfer.
var ErrRemotePrefill = cloison.NewError(cloison.CodeUnavailable, "remote prefill failed")

// ErrRemoteTimeout: no verified transfer arrived within Remote.Timeout (a
// stalled prefill node or path); the refusal is also reported as stalled.
var ErrRemoteTimeout = cloison.NewError(cloison.CodeDeadlineExceeded, "remote prefill timed out")

// remoteStallGrace is how long a remote prefill call outlives its
// transfer's deadline (see startRemote).
const remoteStallGrace = time.Second

// startRemote reserves a transfer for it and starts the prefill; it runs on
// the loop goroutine, the waiting on its own.
func (e *Engine) startRemote(it RemoteItem) {
	r := e.cfg.Remote
	tk, err := r.Receiver.Expect(it.Lease, len(it.Tokens))
	if err != nil {
		e.handle(e.sched.RemoteDone(it.ID, it.Lease, 0, err))
		return
	}
	e.tickets[it.ID] = tk
	tokens := slices.Clone(it.Tokens)
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	parent := context.Background()
	e.mu.Lock()
	if a := e.active[it.ID]; a != nil && a.trace != nil {
		parent = a.trace
	}
	e.mu.Unlock()
	tracer := r.Tracer
	if tracer == nil {
		tracer = tracing.Tracer(nil)
	}
	sctx, span := tracer.Start(parent, "transfer", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.AttrRequest.String(string(it.ID)), tracing.AttrTenant.String(string(it.Tenant)), attribute.Int("cloison.transfer_tokens", len(tokens))))
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		// The prefill call outlives the transfer's deadline by a grace: at
		// the deadline the ticket is refused as stalled first, and only
		// then is the prefill node's call (and so its sending stream)
		// cancelled. Cut at the same instant, the prefill node's stream
		// could end first and the stall be reported as a truncation.
		pctx, pcancel := context.WithTimeout(sctx, timeout+remoteStallGrace)
		perr := make(chan error, 1)
		werr := make(chan error, 1)
		go func() { perr <- r.Prefill(pctx, it.Tenant, it.ID, tokens, tk.Target()) }()
		go func() { _, err := tk.Wait(ctx); werr <- err }()
		var err error
		prefillEnded := false
		defer func() {
			if prefillEnded || err != nil {
				pcancel()
				return
			}
			// The KV is verified but the prefill node's call has not
			// returned yet (it answers once its transfer committed): let it
			// end by itself rather than cut it, so that the prefill node
			// records a success, not a cancellation (bounded by pctx).
			go func() { <-perr; pcancel() }()
		}()
		select {
		case err = <-werr:
			var v *transfer.VerificationError
			if errors.As(err, &v) && v.Reason == transfer.ReasonStalled {
				err = fmt.Errorf("%w: %w", ErrRemoteTimeout, err)
			}
		case err = <-perr:
			prefillEnded = true
			if err == nil {
				err = <-werr
			} else {
				// The prefill node gave up before its transfer committed.
				// The path failing (rather than the prefill node refusing
				// the prompt) is an incident: past the deadline, a stall;
				// a transport failure once KV began to arrive, a lost node.
				// The deadline is judged by its time and the error's code
				// too: gRPC's transport runs its own timer on the same
				// deadline and may answer before ctx is done.
				dl, _ := ctx.Deadline()
				pastDeadline := errors.Is(ctx.Err(), context.DeadlineExceeded) ||
					cloison.ErrorCode(err) == cloison.CodeDeadlineExceeded || !time.Now().Before(dl)
				switch {
				case pastDeadline:
					tk.Refuse(transfer.ReasonStalled, "no verified transfer before the deadline: "+err.Error())
				case cloison.ErrorCode(err) == cloison.CodeUnavailable && tk.Started():
					tk.Refuse(transfer.ReasonTruncated, "the prefill node was lost during its transfer: "+err.Error())
				default:
					tk.Cancel()
				}
				if werr := <-werr; werr == nil {
					err = nil // committed meanwhile: the KV is verified
				} else {
					// The prefill node's own error comes first, so the
					// client gets its original code (e.g. context_length_exceeded).
					err = fmt.Errorf("%w (%w)", err, ErrRemotePrefill)
				}
			}
		}
		if err == nil && !r.Unsafe.skipCountCheck() {
			// Decode verifies transferred == reserved itself, whatever the
			// receiver concluded: 2026's decode node checked "finished" only.
			if w, werr := e.cfg.Pool.Written(it.Lease); werr != nil || w != len(tokens) {
				err = fmt.Errorf("%w: the pool holds %d of the %d reserved tokens (%v)", ErrTransferIncomplete, w, len(tokens), werr)
			}
		}
		if err != nil {
			tk.Cancel()
			<-tk.Done() // the reservation is discarded and its hold released
		}
		tracing.Fail(span, err)
		span.End()
		e.post(func() {
			delete(e.tickets, it.ID)
			e.handle(e.sched.RemoteDone(it.ID, it.Lease, len(tokens), err))
		})
	}()
}

// PrefillRunner is a prefill node's half: it computes a prompt's KV in its
// own pool and arena and sends it to the decode node that reserved pages for
// it. Reject before allocate holds here too: a prompt its pool can never hold
// is refused before any page is taken.
type PrefillRunner struct {
	Model  *model.Model
	Pool   *isolation.Pool
	Arena  kernels.Arena
	Sender *transfer.Sender
	Dialer transfer.Dialer
	Chunk  int // prefill chunk in tokens; default 256

	mu sync.Mutex // serialises scrubbing of the pool
	// Unsafe (faults builds only: Placeholder) emulates the 2026 bug on the
	// prefill side: a prompt its pool cannot hold is not rejected but
	// replaced by a one-token placeholder lease, whose KV alone is computed
	// and sent as the whole prompt (with a Sender whose Unsafe claims the
	// reservation, its one page is announced as the whole reservation, as
	// in 2026). Prompts that fit are served normally.
	Unsafe Unsafe
	// Tracer (optional) records "prefill.compute" and "transfer.send"
	// spans, children of the span in Prefill's context.
	Tracer trace.Tracer
}

// Prefill computes tokens' KV and sends it to target; it is Remote.Prefill
// for an in-process or RPC-driven prefill node.
func (r *PrefillRunner) Prefill(ctx context.Context, tenant cloison.TenantID, req cloison.RequestID, tokens []int32, target transfer.Target) error {
	n := len(tokens)
	if n < 1 || n != target.Tokens || target.Tenant != tenant || target.Request != req {
		return fmt.Errorf("%w: %d tokens for a reservation of %d (%s/%s)", ErrBadToken, n, target.Tokens, target.Tenant, target.Request)
	}
	compute := n
	lease, err := r.allocate(tenant, req, n)
	if errors.Is(err, isolation.ErrTooLarge) && r.Unsafe.placeholder() {
		lease, err = r.allocate(tenant, req, 1)
		compute = 1
	}
	if err != nil {
		return err
	}
	defer r.release(lease)
	chunk := r.Chunk
	if chunk <= 0 {
		chunk = 256
	}
	tracer := r.Tracer
	if tracer == nil {
		tracer = tracing.Tracer(nil)
	}
	_, span := tracer.Start(ctx, "prefill.compute", trace.WithAttributes(tracing.AttrRequest.String(string(req)), attribute.Int("cloison.prefill_tokens", compute)))
	if err := r.compute(lease, tokens, compute, chunk); err != nil {
		tracing.Fail(span, err)
		span.End()
		return err
	}
	span.End()
	sctx, span := tracer.Start(ctx, "transfer.send", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(tracing.AttrRequest.String(string(req))))
	_, err = r.Sender.Send(sctx, r.Dialer, lease, target)
	tracing.Fail(span, err)
	span.End()
	return err
}

// compute runs the forward passes over tokens[:n] into lease, chunk by chunk.
func (r *PrefillRunner) compute(lease isolation.Lease, tokens []int32, n, chunk int) error {
	compute := n
	for pos := 0; pos < compute; pos += chunk {
		k := min(chunk, compute-pos)
		if err := r.Pool.Write(lease, k); err != nil {
			return err
		}
		bt, err := r.Pool.BlockTable(lease, pos+k)
		if err != nil {
			return err
		}
		if _, err := r.Model.Forward(r.Arena, []model.Seq{{Table: bt, Pos: pos, Tokens: tokens[pos : pos+k]}}, false); err != nil {
			return err
		}
	}
	return nil
}

func (r *PrefillRunner) allocate(tenant cloison.TenantID, req cloison.RequestID, n int) (isolation.Lease, error) {
	for tries := 0; ; tries++ {
		lease, err := r.Pool.Allocate(tenant, req, n)
		if !errors.Is(err, isolation.ErrScrubPending) || tries == 3 {
			return lease, err
		}
		if err := r.scrub(); err != nil {
			return lease, err
		}
	}
}

func (r *PrefillRunner) release(l isolation.Lease) {
	_ = r.Pool.Release(l)
	_ = r.scrub()
}

// scrub zeroes the pages the pool asks for BEFORE confirming them.
func (r *PrefillRunner) scrub() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	work := r.Pool.ScrubWork()
	if len(work) == 0 {
		return nil
	}
	if err := r.Arena.ZeroPages(work); err != nil {
		return err
	}
	return r.Pool.ConfirmScrub(work)
}
