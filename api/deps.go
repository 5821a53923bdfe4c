package api

import (
	"context"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/service"
)

// What the server uses of the engine and the ledger, declared where it is
// used (the implementations are *engine.Engine and *auditpg.Store): the
// request path's part in package service, the rest here. A request's
// tenant crosses into the engine once, through EnsureTenant; the server
// holds no KV pool.

// Engine is what the server asks of the inference engine (*engine.Engine):
// the request path's (service.Engine) and what the routes of this package
// read.
type Engine interface {
	service.Engine
	// Load, Admission and PoolStats feed metrics and the pool status.
	Load() (running, waiting int)
	Admission() *engine.Admission
	PoolStats() isolation.Stats
	// AddTenant creates a tenant's KV partition (admin).
	AddTenant(isolation.TenantConfig) error
}

// Placement is a decode node's view of its prefill nodes
// (*prefillrpc.Client): service.Placement.
type Placement = service.Placement

// Recorder is the ledger on the request path: service.Recorder.
type Recorder = service.Recorder

// Register is the Loi 25 incident register the compliance operations keep.
type Register = service.RegisterStore

// Log is the ledger read and proven: ranges, verification, exports,
// checkpoints and the proofs of the transparency log (tlog.go).
type Log interface {
	Scan(ctx context.Context, from, to uint64, fn func(audit.Record) error) error
	Verify(ctx context.Context, opts auditpg.VerifyOptions) (audit.Result, error)
	Export(ctx context.Context, opts auditpg.ExportOptions) (export.Manifest, error)
	TreeCheckpoint(ctx context.Context) ([]byte, error)
	TreeVerifierKey() (string, error)
	CosignedCheckpoint(ctx context.Context, min int) ([]byte, error)
	InclusionProof(ctx context.Context, seq, treeSize uint64) (tlog.RecordProof, error)
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) (tlog.TreeProof, error)
	TenantCheckpoint(ctx context.Context, t cloison.TenantID) ([]byte, error)
	TenantInclusionProof(ctx context.Context, t cloison.TenantID, pos, size uint64) ([]byte, tlog.RecordProof, error)
	TenantConsistencyProof(ctx context.Context, t cloison.TenantID, oldSize, newSize uint64) (tlog.TreeProof, error)
	TenantEntries(ctx context.Context, t cloison.TenantID, from, to uint64, fn func(auditpg.TenantLogEntry) error) error
}

// Served is what the response operations keep: a tenant's own request
// entry proven in its log, reports, replays, stored responses.
type Served = service.Served

// Ledger is all the server uses of the audit ledger (*auditpg.Store).
type Ledger interface {
	Recorder
	Register
	Log
	Served
}

var (
	_ Engine = (*engine.Engine)(nil)
	_ Ledger = (*auditpg.Store)(nil)
)
