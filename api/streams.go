package api

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/cloison/cloison"
)

// Compliance streams (ledger ranges, exports, verifications) read the whole
// ledger at the pace of a client. They run on the ledger's scan pool, never
// the request path's (audit/postgres Config.ScanPool), hold no connection
// while a client reads (keyset pages), and are bounded here: at most
// StreamLimits.Max at once on this node and StreamLimits.PerTenant per
// tenant, the last StreamLimits.Reserved of the node's slots kept for the
// operator (admin scope: tenants holding every other slot never lock the
// operator's own verifications and exports out), and a stream whose client does not take a message within
// StreamLimits.SendTimeout is cut off.

// Errors of compliance streams.
var (
	// ErrTooManyComplianceStreams: the node or the tenant already runs as many
	// compliance streams as allowed (HTTP 429, gRPC RESOURCE_EXHAUSTED).
	ErrTooManyComplianceStreams = cloison.NewError(cloison.CodeRateLimited, "too many concurrent compliance streams; retry when one has finished")
	// ErrSlowReader: the client did not read the stream within the send
	// timeout; the stream is cut off (gRPC DEADLINE_EXCEEDED).
	ErrSlowReader = cloison.NewError(cloison.CodeDeadlineExceeded, "the client stopped reading; stream cut off")
)

// StreamLimits bounds compliance streams. Zero fields take the defaults.
type StreamLimits struct {
	Max         int           // concurrent streams on this node (default 8)
	PerTenant   int           // concurrent streams of one tenant (default 2)
	Reserved    int           // of Max, the streams only the operator may take (default 2; at most Max-1)
	SendTimeout time.Duration // longest wait for a client to take one message, on compliance streams and gRPC Generate (default 10 s)
}

func (l StreamLimits) withDefaults() StreamLimits {
	if l.Max <= 0 {
		l.Max = 8
	}
	if l.PerTenant <= 0 {
		l.PerTenant = 2
	}
	if l.PerTenant > l.Max {
		l.PerTenant = l.Max
	}
	if l.Reserved <= 0 {
		l.Reserved = 2
	}
	if l.Reserved >= l.Max {
		l.Reserved = l.Max - 1
	}
	if l.SendTimeout <= 0 {
		l.SendTimeout = 10 * time.Second
	}
	return l
}

// complianceGate counts the compliance streams running, in all and per tenant.
type complianceGate struct {
	lim StreamLimits

	mu       sync.Mutex
	total    int                      // guarded by mu
	byTenant map[cloison.TenantID]int // guarded by mu
}

func newComplianceGate(l StreamLimits) *complianceGate {
	return &complianceGate{lim: l.withDefaults(), byTenant: map[cloison.TenantID]int{}}
}

// acquire admits one stream of tenant, or returns ErrTooManyComplianceStreams at
// once (a caller never queues behind other tenants' streams). A tenant's
// stream may take Max-Reserved slots in all; the operator's, every one.
// release must be called exactly once when the stream ends.
func (g *complianceGate) acquire(tenant cloison.TenantID, operator bool) (release func(), err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	limit := g.lim.Max
	if !operator {
		limit -= g.lim.Reserved
	}
	if g.total >= limit || g.byTenant[tenant] >= g.lim.PerTenant {
		return nil, gateError{ErrTooManyComplianceStreams} // Retry-After one second
	}
	g.total++
	g.byTenant[tenant]++
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			defer g.mu.Unlock()
			g.total--
			if g.byTenant[tenant]--; g.byTenant[tenant] == 0 {
				delete(g.byTenant, tenant)
			}
		})
	}, nil
}

// sendWithin runs send (one gRPC stream.Send) and returns its error, or
// ErrSlowReader when it has not returned within the send timeout. A Send
// blocks while the client's flow-control window is full; once the handler
// returns ErrSlowReader, gRPC ends the stream, which cancels the stream's
// context and so releases the blocked Send.
func (g *complianceGate) sendWithin(ctx context.Context, send func() error) error {
	done := make(chan error, 1)
	go func() { done <- send() }()
	t := time.NewTimer(g.lim.SendTimeout)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		select {
		case err := <-done: // returned just as the timer fired
			return err
		default:
		}
		return ErrSlowReader
	case <-ctx.Done():
		return ctx.Err()
	}
}

// writeWithin sets the connection's write deadline for the next write of
// an HTTP stream, so that a client that stops reading fails the write (and
// ends the scan) within the send timeout. The caller clears it
// (clearWriteDeadline) when the stream ends: net/http resets write
// deadlines per request only when the server has a WriteTimeout.
func (g *complianceGate) writeWithin(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(g.lim.SendTimeout))
}

func clearWriteDeadline(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
}
