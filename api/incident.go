package api

import (
	"context"

	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/service"
)

// The engine's and the transfer receiver's hooks are wired to the Server
// (the node assembly holds it); the request path writes the incidents
// (service.Requests: ledgered, then opened in the register, retried until
// Close).

// RecordIncident is the engine's OnIncident hook
// (service.Requests.RecordIncident).
func (s *Server) RecordIncident(in engine.Incident) { s.req.RecordIncident(in) }

// RecordTransferFailure is a transfer.Receiver's OnVerificationFailed hook
// (service.Requests.RecordTransferFailure).
func (s *Server) RecordTransferFailure(f transfer.Failure) { s.req.RecordTransferFailure(f) }

// CountUnauthenticatedTransfer is a transfer.Receiver's OnUnauthenticated
// hook: every stream refused before its header authenticated is counted.
func (s *Server) CountUnauthenticatedTransfer(peer string, reason transfer.Reason) {
	s.metrics.transferUnauth.WithLabelValues(string(reason)).Inc()
}

// ErrIncidentsPending: Close's deadline passed with incident writes not yet
// durable (each is logged and counted in cloison_incident_writes_lost_total).
var ErrIncidentsPending = service.ErrIncidentsPending

// Close waits for the report notices in flight, then until every incident
// write started so far is in the ledger, retrying failed writes, until ctx
// ends (service.Requests.Close). Call it after the engine and the transfer
// server stopped (they are what report incidents); an incident reported
// after Close is written in its caller.
//
// Errors: ErrIncidentsPending (ctx ended first; the count is in the text).
func (s *Server) Close(ctx context.Context) error {
	s.resp.webhooks.Wait() // report notices in flight (each bounded by its timeout)
	return s.req.Close(ctx)
}
