package transfer

import (
	"context"
	"errors"
	"io"
	"sync"

	transferv1 "github.com/cloison/cloison/engine/transfer/proto/cloison/transfer/v1"
)

// Local returns a Dialer that delivers streams to r (a Receiver or a
// Router) in this process, without a network: for engine tests and a
// single process running both roles. depth bounds the frames in flight
// (flow control); 0 means 8.
func Local(r Service, depth int) Dialer {
	if depth <= 0 {
		depth = 8
	}
	return localDialer{r: r, depth: depth}
}

type localDialer struct {
	r     Service
	depth int
}

func (d localDialer) Open(ctx context.Context) (Stream, error) {
	p := &pipe{ctx: ctx, frames: make(chan *transferv1.Frame, d.depth), closed: make(chan struct{}), done: make(chan struct{})}
	go func() {
		p.rc, p.err = d.r.Serve(ctx, p)
		close(p.done)
	}()
	return p, nil
}

// pipe is one in-process stream. Send and CloseAndRecv run on the sender's
// goroutine, Recv on the receiver's.
type pipe struct {
	ctx       context.Context
	frames    chan *transferv1.Frame
	closeOnce sync.Once
	closed    chan struct{} // the sender is done sending
	done      chan struct{} // Serve returned; rc and err are set
	rc        *transferv1.Receipt
	err       error
}

var errPipeDone = errors.New("transfer: receiver ended the stream")

func (p *pipe) Send(f *transferv1.Frame) error {
	select {
	case <-p.done:
		return errPipeDone
	case <-p.ctx.Done():
		return p.ctx.Err()
	default:
	}
	select {
	case p.frames <- f:
		return nil
	case <-p.done:
		return errPipeDone
	case <-p.ctx.Done():
		return p.ctx.Err()
	}
}

// CloseAndRecv closes the sending side and waits for the receiver to end:
// after a cancellation, that is its acknowledgement.
func (p *pipe) CloseAndRecv() (*transferv1.Receipt, error) {
	p.closeOnce.Do(func() { close(p.closed) })
	<-p.done
	return p.rc, p.err
}

func (p *pipe) Recv() (*transferv1.Frame, error) {
	select {
	case f := <-p.frames:
		return f, nil
	default:
	}
	select {
	case f := <-p.frames:
		return f, nil
	case <-p.closed:
		// Every Send happened before the close: drain, then EOF.
		select {
		case f := <-p.frames:
			return f, nil
		default:
			return nil, io.EOF
		}
	case <-p.ctx.Done():
		return nil, p.ctx.Err()
	}
}
