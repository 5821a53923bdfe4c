package api

import (
	"context"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/service"
)

// Refusals are counted by the request path (service.Requests.Refuse) and
// written as per-tenant policy.refusals summaries; the Server's methods
// below are the node's handle on them.

// DefaultRefusalFlush is how often RunRefusals writes the refusal summaries.
const DefaultRefusalFlush = service.DefaultRefusalFlush

// stageCapacity is the refusal stage of the transports' own caps
// (connections per tenant).
const stageCapacity = service.StageCapacity

// refuse counts err, the refusal of one request of tenant t at stage, and
// returns it unchanged for the client.
func (s *Server) refuse(t cloison.TenantID, stage audit.Name, err error) error {
	return s.req.Refuse(t, stage, err)
}

// PendingRefusals returns how many refused requests are counted and not yet
// written to the ledger.
func (s *Server) PendingRefusals() int64 { return s.req.PendingRefusals() }

// FlushRefusals writes the refusals counted since the last flush to the
// ledger (service.Requests.FlushRefusals). Errors: ErrLedgerUnavailable.
func (s *Server) FlushRefusals(ctx context.Context) error { return s.req.FlushRefusals(ctx) }

// RunRefusals flushes the refusal counts every interval until ctx ends,
// then once more (service.Requests.RunRefusals). Stop accepting requests
// BEFORE ending ctx, so that no refusal comes after the last flush.
// Errors: ErrLedgerUnavailable.
func (s *Server) RunRefusals(ctx context.Context, interval time.Duration) error {
	return s.req.RunRefusals(ctx, interval)
}
