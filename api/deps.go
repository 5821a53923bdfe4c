package api

import (
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/service"
)

// What the server uses of the engine and the ledger. The request path and
// the operations declare theirs in package service, where they are used;
// the server adds only what its own routes read of the engine. A request's
// tenant crosses into the engine once, through EnsureTenant; the server
// holds no KV pool.

// Engine is what the server asks of the inference engine (*engine.Engine):
// the request path's (service.Engine), the admin operations' (service.Pool)
// and the admission figures the metrics read at scrape time.
type Engine interface {
	service.Engine
	service.Pool
	Admission() *engine.Admission
}

// Placement is a decode node's view of its prefill nodes
// (*prefillrpc.Client): service.Placement.
type Placement = service.Placement

// Ledger is all the server hands the service of the audit ledger
// (*postgres.Store): service.Ledger.
type Ledger = service.Ledger

var _ Engine = (*engine.Engine)(nil)
