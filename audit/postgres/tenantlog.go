package postgres

import (
	"context"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// tenantLog builds tenant t's log (audit.TenantVisible entries, in ledger
// order) from the committed ledger, on the scan pool, in one pass. at, when
// non-zero, asks for the payload of that position too.
//
// It reads the whole ledger: a tenant log is derived, not stored, so that
// it is by construction the tenant's part of the global log (an auditor
// holding the ledger recomputes it) and no writer has anything more to do.
func (s *Store) tenantLog(ctx context.Context, t cloison.TenantID, at uint64) (*audit.MemTree, audit.Name, []byte, error) {
	origin, err := audit.TenantOrigin(s.cfg.Origin, t)
	if err != nil {
		return nil, "", nil, err
	}
	tree := &audit.MemTree{}
	var payload []byte
	err = s.Scan(ctx, 1, 0, func(r audit.Record) error {
		if !audit.TenantVisible(r, t) {
			return nil
		}
		pos, err := tree.Append(r.Payload)
		if pos == at {
			payload = r.Payload
		}
		return err
	})
	if err != nil {
		return nil, "", nil, err
	}
	return tree, origin, payload, nil
}

// TenantCheckpoint signs and returns the head of tenant t's log as it is
// now: a C2SP checkpoint note with origin audit.TenantOrigin(Origin, t),
// signed by the log key (the note verifier key of TreeVerifierKey checks
// it). Ed25519 signatures are deterministic, so the same tenant log always
// gets the same note; nothing is stored.
//
// Errors: ErrNoSigningKey; audit.ErrEmptyLedger when the tenant has no
// entry; audit.ErrInvalidEvent for a tenant id that is not an identifier;
// the database errors of Scan.
func (s *Store) TenantCheckpoint(ctx context.Context, t cloison.TenantID) ([]byte, error) {
	if s.signer == nil {
		return nil, ErrNoSigningKey
	}
	tree, origin, _, err := s.tenantLog(ctx, t, 0)
	if err != nil {
		return nil, err
	}
	h, err := tree.Head(origin, tree.Size())
	if err != nil {
		return nil, err
	}
	return audit.SignTenantHead(s.signer, t, h)
}

// TenantInclusionProof returns the payload of the entry at position pos
// (1-based, among tenant t's entries: the positions of the tenant's ledger
// view) and the proof that it is leaf pos-1 of t's log of size size.
//
// Errors: audit.ErrEmptyLedger when the tenant has no entry; ErrOutOfRange
// when pos is 0 or beyond size, or size beyond the tenant's log; the
// errors of tenantLog.
func (s *Store) TenantInclusionProof(ctx context.Context, t cloison.TenantID, pos, size uint64) ([]byte, tlog.RecordProof, error) {
	tree, _, payload, err := s.tenantLog(ctx, t, pos)
	if err != nil {
		return nil, nil, err
	}
	if err := tenantRange(tree, pos, size); err != nil {
		return nil, nil, err
	}
	p, err := tree.ProveRecord(pos, size)
	if err != nil {
		return nil, nil, err
	}
	return payload, p, nil
}

// TenantConsistencyProof returns the proof that tenant t's log of size
// newSize extends its log of size oldSize.
//
// Errors: as TenantInclusionProof, for oldSize in place of pos.
func (s *Store) TenantConsistencyProof(ctx context.Context, t cloison.TenantID, oldSize, newSize uint64) (tlog.TreeProof, error) {
	tree, _, _, err := s.tenantLog(ctx, t, 0)
	if err != nil {
		return nil, err
	}
	if err := tenantRange(tree, oldSize, newSize); err != nil {
		return nil, err
	}
	return tree.ProveTree(oldSize, newSize)
}

// tenantRange checks 1 ≤ lo ≤ size ≤ the tenant log's size.
func tenantRange(tree *audit.MemTree, lo, size uint64) error {
	if tree.Size() == 0 {
		return audit.ErrEmptyLedger
	}
	if lo == 0 || lo > size || size > tree.Size() {
		return fmt.Errorf("%w: %d in a tenant log of size %d (of %d)", ErrOutOfRange, lo, size, tree.Size())
	}
	return nil
}
