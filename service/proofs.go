package service

import (
	"context"
	"errors"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/tenancy"
)

// The ledger's transparency log: its signed checkpoints and RFC 6962
// proofs, global and per tenant. Who may see what:
//   - the verifier key is public: it checks signatures, nothing more;
//   - the global log's proofs with payloads (inclusion by ledger seq,
//     consistency) are the operator's officers' and auditors' (the
//     transport requires the admin scope): a payload names its tenant; its
//     checkpoint, tiles and hashed entries are public (servedlog.go);
//   - a tenant log is its own tenant's (TenantLogOf): positions among its
//     own leaves (audit.TenantLeaf: its requests, its incidents and
//     notices, redacted where they name other tenants), proofs whose every
//     hash comes from those leaves. Naming another tenant is for an
//     operator only.

// ErrOtherTenantLog: a caller who is no operator named a tenant log other
// than its own.
var ErrOtherTenantLog = cloison.NewError(cloison.CodePermissionDenied, "a tenant log is readable by its own tenant only")

// TransparencyLog is the ledger's Merkle tree and tenant logs, signed and
// proven (*postgres.Store).
type TransparencyLog interface {
	Head(ctx context.Context) (audit.Head, error)
	Scan(ctx context.Context, from, to uint64, fn func(audit.Record) error) error
	TreeCheckpoint(ctx context.Context) ([]byte, error)
	TreeVerifierKey() (string, error)
	CosignedCheckpoint(ctx context.Context, min int) ([]byte, error)
	InclusionProof(ctx context.Context, seq, treeSize uint64) (tlog.RecordProof, error)
	ConsistencyProof(ctx context.Context, oldSize, newSize uint64) (tlog.TreeProof, error)
	TenantCheckpoint(ctx context.Context, t cloison.TenantID) ([]byte, error)
	TenantInclusionProof(ctx context.Context, t cloison.TenantID, pos, size uint64) ([]byte, tlog.RecordProof, error)
	TenantConsistencyProof(ctx context.Context, t cloison.TenantID, oldSize, newSize uint64) (tlog.TreeProof, error)
	Tile(ctx context.Context, level int, n int64, width int) ([]byte, error)
	EntryBundle(ctx context.Context, n int64, width int) ([]byte, error)
}

// TenantLogOf returns the tenant whose log p asks for: its own (named
// empty or its own), or, for an operator only, the one named.
// Errors: ErrInvalidField (p has no tenant and names none);
// ErrOtherTenantLog.
func TenantLogOf(p tenancy.Principal, named string) (cloison.TenantID, error) {
	if named == "" || cloison.TenantID(named) == p.Tenant {
		if p.Tenant == "" {
			return "", ErrInvalidField.Withf("tenant is required")
		}
		return p.Tenant, nil
	}
	if !Operator(p) {
		return "", ErrOtherTenantLog
	}
	return cloison.TenantID(named), nil
}

// ListedLog returns which log a ledger listing of p reads: "" for the
// global ledger (an operator naming no tenant), else the tenant log
// TenantLogOf gives. Errors: TenantLogOf's.
func ListedLog(p tenancy.Principal, named string) (cloison.TenantID, error) {
	if named == "" && Operator(p) {
		return "", nil
	}
	return TenantLogOf(p, named)
}

// VerifierKey returns the published note verifier key. Errors: the log's.
func (c *Compliance) VerifierKey() (string, error) { return c.d.Log.TreeVerifierKey() }

// Checkpoint returns the latest signed global checkpoint.
// Errors: audit.ErrEmptyLedger when there is none because the ledger is
// empty; audit.ErrNoCheckpoint when there is none otherwise; the log's.
func (c *Compliance) Checkpoint(ctx context.Context) ([]byte, error) {
	msg, err := c.d.Log.TreeCheckpoint(ctx)
	if errors.Is(err, audit.ErrNoCheckpoint) {
		if h, herr := c.d.Log.Head(ctx); herr == nil && h.Seq == 0 {
			return nil, audit.ErrEmptyLedger
		}
	}
	return msg, err
}

// Witnesses asks the log's witnesses (the node: audit/witness clients)
// rather than reading the cosignatures the log's database remembers.
type Witnesses interface {
	// WitnessedCheckpoint asks every witness for the latest checkpoint of
	// the log it cosigned, requires the log's tree to be consistent with
	// each answer, and returns one checkpoint carrying k fresh
	// cosignatures.
	WitnessedCheckpoint(ctx context.Context, k int) ([]byte, error)
}

// CosignedCheckpoint returns a checkpoint cosigned by at least k witnesses,
// the cosignature lines appended (audit.VerifyCosigned checks them). With
// Witnesses (a node configured with witnesses) they are asked now, and a
// witness whose cosigned tree the log contradicts fails the request with
// audit.ErrFork or audit.ErrSmallerTree: cosignatures remembered by a
// database survive its rollback. Without, the latest stored checkpoint
// with k cosignatures (verifiers bound their age).
//
// Errors: the witnesses' (audit.ErrTooFewCosignatures, audit.ErrFork,
// audit.ErrSmallerTree); the log's.
func (c *Compliance) CosignedCheckpoint(ctx context.Context, k int) ([]byte, error) {
	if c.d.Witnesses != nil {
		return c.d.Witnesses.WitnessedCheckpoint(ctx, k)
	}
	return c.d.Log.CosignedCheckpoint(ctx, k)
}

// TenantCheckpoint returns tenant t's log, signed now. Errors: the log's.
func (c *Compliance) TenantCheckpoint(ctx context.Context, t cloison.TenantID) ([]byte, error) {
	return c.d.Log.TenantCheckpoint(ctx, t)
}

// ParseCheckpoint returns the fields of a note this node signed (tenant
// t's log when t is set), read without trusting them to a client: the
// note itself is what a verifier checks. Errors: the verifier key's; a
// note that does not open under it.
func (c *Compliance) ParseCheckpoint(msg []byte, t cloison.TenantID) (audit.TreeHead, error) {
	k, err := c.VerifierKey()
	if err != nil {
		return audit.TreeHead{}, err
	}
	if t != "" {
		return audit.OpenTenantHead(msg, k, t)
	}
	return audit.OpenTreeHead(msg, k)
}

// Inclusion returns entry seq's payload (the leaf as hashed) and its proof
// in the tree of size (tenant t's log when t is set, seq then a position
// in it; the global log otherwise). Errors: the log's (a size or position
// beyond the log, an empty log).
func (c *Compliance) Inclusion(ctx context.Context, t cloison.TenantID, seq, size uint64) ([]byte, tlog.RecordProof, error) {
	if t != "" {
		return c.d.Log.TenantInclusionProof(ctx, t, seq, size)
	}
	proof, err := c.d.Log.InclusionProof(ctx, seq, size)
	if err != nil {
		return nil, nil, err
	}
	var payload []byte
	if err := c.d.Log.Scan(ctx, seq, seq, func(r audit.Record) error { payload = r.Payload; return nil }); err != nil {
		return nil, nil, err
	}
	return payload, proof, nil
}

// Consistency returns the proof that the tree of size old is a prefix of
// the tree of size (tenant t's log when t is set). Errors: the log's.
func (c *Compliance) Consistency(ctx context.Context, t cloison.TenantID, old, size uint64) (tlog.TreeProof, error) {
	if t != "" {
		return c.d.Log.TenantConsistencyProof(ctx, t, old, size)
	}
	return c.d.Log.ConsistencyProof(ctx, old, size)
}
