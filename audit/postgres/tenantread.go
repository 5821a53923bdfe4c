package postgres

import (
	"bytes"
	"context"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Reading and proving the stored tenant logs: checkpoints, inclusion and
// consistency proofs, and the tenant's own listing. Each call either
// brings the index to the ledger's head first or reads sizes a checkpoint
// already fixed, and holds what it reads to the stored leaf hashes.

// tenantReader is a tlog.HashReader over one tenant's stored tree.
type tenantReader struct {
	ctx context.Context
	q   querier
	t   cloison.TenantID
}

func (r tenantReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	rows, err := r.q.Query(r.ctx, `SELECT index, hash FROM tenant_log_hashes WHERE tenant = $1 AND index = ANY($2)`, string(r.t), indexes)
	if err != nil {
		return nil, err
	}
	got := make(audit.HashMap, len(indexes))
	for rows.Next() {
		var x int64
		var h []byte
		if err := rows.Scan(&x, &h); err != nil {
			rows.Close()
			return nil, err
		}
		got[x] = tlog.Hash(h)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out, err := got.ReadHashes(indexes)
	if err != nil {
		// The stored tree lacks a hash its size needs.
		return nil, fmt.Errorf("%w: %v", ErrSchema, err)
	}
	return out, nil
}

// tenantSize returns the number of leaves of t's stored log.
func tenantSize(ctx context.Context, q querier, t cloison.TenantID) (uint64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT coalesce(max(pos), 0) FROM tenant_log_entries WHERE tenant = $1`, string(t)).Scan(&n)
	return uint64(n), err
}

// signTenantHead signs h, a head of tenant t's log, with the log key
// under the note key name h.Origin (audit.TenantSigner).
func (s *Store) signTenantHead(t cloison.TenantID, h audit.TreeHead) ([]byte, error) {
	if s.signer == nil {
		return nil, ErrNoSigningKey
	}
	ts, err := audit.TenantSigner(s.cfg.Origin, s.cfg.SigningKey, t)
	if err != nil {
		return nil, err
	}
	return audit.SignTenantHead(ts, t, h)
}

// TenantCheckpoint indexes the ledger up to its head (IndexTenantLogs),
// then signs and returns the head of tenant t's log: a C2SP checkpoint note
// with origin audit.TenantOrigin(Origin, t), signed by the log key under
// that origin as key name (audit.TenantSigner; audit.OpenTenantHead checks
// it with the key of TreeVerifierKey). Ed25519 signatures are
// deterministic, so the same tenant log always gets the same note. Each
// note is kept in tenant_checkpoints (migration 00023, append-only) before
// it is returned, so that Verify holds the log to every size it served.
//
// Errors: ErrNoSigningKey; *SignRefusedError (ErrSigningRefused) when the
// global tree contradicts a checkpoint known outside the database (sign.go);
// audit.ErrEmptyLedger when the tenant has no entry; audit.ErrInvalidEvent for a tenant id that is not an identifier;
// audit.ErrSmallerTree when the log is smaller than a checkpoint already
// served (a rollback), audit.ErrFork when a served size had another root:
// neither is signed; the errors of IndexTenantLogs.
func (s *Store) TenantCheckpoint(ctx context.Context, t cloison.TenantID) ([]byte, error) {
	if s.signer == nil {
		return nil, ErrNoSigningKey
	}
	// A tenant log is derived from the global one: nothing is signed of
	// a global tree that contradicts the log's past (sign.go).
	if err := s.proveCommitted(ctx); err != nil {
		return nil, err
	}
	origin, err := audit.TenantOrigin(s.cfg.Origin, t)
	if err != nil {
		return nil, err
	}
	// Read before indexing: any checkpoint served so far was signed from
	// an index the one below reaches, so only a rollback leaves the log
	// smaller (another node serving a larger one meanwhile does not).
	var served *int64
	if err := s.pool.QueryRow(ctx, `SELECT max(size) FROM tenant_checkpoints WHERE tenant = $1`, string(t)).Scan(&served); err != nil {
		return nil, translate(err)
	}
	if err := s.Sync(ctx); err != nil { // the tenant's staged entries first
		return nil, err
	}
	if _, err := s.IndexTenantLogs(ctx); err != nil {
		return nil, err
	}
	n, err := tenantSize(ctx, s.scan, t)
	if err != nil {
		return nil, translate(err)
	}
	if served != nil && uint64(*served) > n {
		// The log was rolled back below a checkpoint the tenant holds.
		return nil, fmt.Errorf("%w: a tenant log of size %d was served at size %d", audit.ErrSmallerTree, n, *served)
	}
	if n == 0 {
		return nil, audit.ErrEmptyLedger
	}
	root, err := tlog.TreeHash(int64(n), tenantReader{ctx: ctx, q: s.scan, t: t})
	if err != nil {
		return nil, translate(err)
	}
	msg, err := s.signTenantHead(t, audit.TreeHead{Origin: origin, Size: n, Root: root})
	if err != nil {
		return nil, err
	}
	// Kept before it is served (migration 00023); a size served before
	// with another root is a fork, never served.
	var kept []byte
	if err := s.pool.QueryRow(ctx, `WITH ins AS (INSERT INTO tenant_checkpoints (tenant, size, root, note) VALUES ($1, $2, $3, $4)
		ON CONFLICT (tenant, size) DO NOTHING RETURNING root)
		SELECT root FROM ins UNION ALL SELECT root FROM tenant_checkpoints WHERE tenant = $1 AND size = $2 LIMIT 1`,
		string(t), int64(n), root[:], string(msg)).Scan(&kept); err != nil {
		return nil, translate(err)
	}
	if !bytes.Equal(kept, root[:]) {
		return nil, fmt.Errorf("%w: a tenant log of size %d was served with another root", audit.ErrFork, n)
	}
	return msg, nil
}

// TenantInclusionProof returns the leaf at position pos (1-based, among
// tenant t's log: the entry's canonical payload, or its audit.TenantView
// when it names other tenants too) and the proof that it is leaf pos-1 of
// t's log of size size. It reads O(log size) stored rows and the one
// ledger entry, and checks the leaf it recomputes from that entry against
// the stored leaf hash.
//
// Errors: audit.ErrEmptyLedger when the tenant has no entry; audit.ErrOutOfRange
// when pos is 0 or beyond size, or size beyond the tenant's stored log;
// audit.ErrChainBroken when the stored log does not match the ledger; the
// translated database errors.
func (s *Store) TenantInclusionProof(ctx context.Context, t cloison.TenantID, pos, size uint64) ([]byte, tlog.RecordProof, error) {
	if err := s.tenantRange(ctx, t, pos, size); err != nil {
		return nil, nil, err
	}
	var seq int64
	if err := s.scan.QueryRow(ctx, `SELECT seq FROM tenant_log_entries WHERE tenant = $1 AND pos = $2`, string(t), int64(pos)).Scan(&seq); err != nil {
		return nil, nil, translate(err)
	}
	var rec *audit.Record
	if err := scanRows(ctx, s.scan, uint64(seq), uint64(seq), 1, func(r audit.Record) error { rec = &r; return nil }); err != nil {
		return nil, nil, translate(err)
	}
	r := tenantReader{ctx: ctx, q: s.scan, t: t}
	var payload []byte
	if rec != nil {
		payload, _ = audit.TenantLeaf(*rec, t)
	}
	stored, err := r.ReadHashes([]int64{tlog.StoredHashIndex(0, int64(pos)-1)})
	if err != nil {
		return nil, nil, translate(err)
	}
	if payload == nil || tlog.RecordHash(payload) != stored[0] {
		return nil, nil, &audit.BreakError{Seq: uint64(seq), Reason: audit.ReasonTenantLog,
			Detail: fmt.Sprintf("position %d of a tenant log is not the leaf its ledger entry gives", pos)}
	}
	p, err := tlog.ProveRecord(int64(size), int64(pos)-1, r)
	if err != nil {
		return nil, nil, translate(err)
	}
	return payload, p, nil
}

// TenantEntries hands fn the leaves of tenant t's log at positions from
// through to (from 0: 1; to 0 or past the end: the log's end) in position
// order: the tenant's listing IS its log, so a row's position is the one
// TenantInclusionProof proves and its Leaf the bytes the proof covers.
// Like TenantCheckpoint it sequences staged events (Sync) and indexes the
// ledger to its head (IndexTenantLogs) first, then reads
// tenant_log_entries in keyset pages of ScanPage positions on the scan
// pool, each page joined to its ledger entries and level-0 stored hashes
// in two short queries and handed to fn after the connection is back in
// the pool (a client that stops reading holds none). Each leaf is
// recomputed from its entry (audit.TenantLeaf) and held to the stored leaf
// hash, so what is listed is what the tenant checkpoint covers. A call
// costs the entries appended since the last index plus the rows listed,
// never a ledger scan.
//
// Errors: those of audit.TenantOrigin (invalid argument) for a tenant id
// that is not an identifier; audit.ErrOutOfRange when to is before from; *audit.BreakError with
// audit.ReasonTenantLog when a stored position or leaf hash is not the one
// the ledger gives; the errors of Sync and IndexTenantLogs; fn's error,
// returned as is. A tenant with no entry, or from past the end, gets no
// call of fn and no error.
func (s *Store) TenantEntries(ctx context.Context, t cloison.TenantID, from, to uint64, fn func(audit.TenantLogEntry) error) error {
	if _, err := audit.TenantOrigin(s.cfg.Origin, t); err != nil {
		return err
	}
	if from == 0 {
		from = 1
	}
	if to != 0 && to < from {
		return fmt.Errorf("%w: to %d is before from %d", audit.ErrOutOfRange, to, from)
	}
	if err := s.Sync(ctx); err != nil {
		return err
	}
	if _, err := s.IndexTenantLogs(ctx); err != nil {
		return err
	}
	n, err := tenantSize(ctx, s.scan, t)
	if err != nil {
		return translate(err)
	}
	if to == 0 || to > n {
		to = n
	}
	page := make([]audit.TenantLogEntry, 0, s.cfg.ScanPage)
	for from <= to {
		page = page[:0]
		last := min(to, from+uint64(s.cfg.ScanPage)-1)
		if err := s.tenantPage(ctx, t, from, last, func(e audit.TenantLogEntry) { page = append(page, e) }); err != nil {
			return err
		}
		for _, e := range page {
			if err := fn(e); err != nil {
				return err
			}
		}
		from = last + 1
	}
	return nil
}

// tenantPage reads positions from..to (all stored) of t's log, checks each
// leaf against its entry and stored hash, and hands them to add in order.
func (s *Store) tenantPage(ctx context.Context, t cloison.TenantID, from, to uint64, add func(audit.TenantLogEntry)) error {
	want := int(to - from + 1)
	recs := make([]audit.Record, 0, want)
	rows, err := s.scan.Query(ctx, `SELECT p.pos, a.seq, a.prev_hash, a.hash, a.kind, a.tenant, a.actor, a.occurred_at, a.recorded_at, a.payload
		FROM tenant_log_entries p JOIN audit_events a ON a.seq = p.seq
		WHERE p.tenant = $1 AND p.pos BETWEEN $2 AND $3 ORDER BY p.pos`, string(t), int64(from), int64(to))
	if err != nil {
		return translate(err)
	}
	var pos []uint64
	for rows.Next() {
		var (
			p, seq              int64
			prev, hash, payload []byte
			kind, actor         string
			tenant              *string
			r                   audit.Record
		)
		if err := rows.Scan(&p, &seq, &prev, &hash, &kind, &tenant, &actor, &r.OccurredAt, &r.RecordedAt, &payload); err != nil {
			rows.Close()
			return translate(err)
		}
		r.Seq, r.Kind, r.Actor, r.Payload = uint64(seq), audit.Kind(kind), audit.Name(actor), payload
		copy(r.PrevHash[:], prev)
		copy(r.Hash[:], hash)
		if tenant != nil {
			r.Tenant = cloison.TenantID(*tenant)
		}
		recs, pos = append(recs, r), append(pos, uint64(p))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return translate(err)
	}
	indexes := make([]int64, want)
	for i := range indexes {
		indexes[i] = tlog.StoredHashIndex(0, int64(from)+int64(i)-1)
	}
	stored, err := tenantReader{ctx: ctx, q: s.scan, t: t}.ReadHashes(indexes)
	if err != nil {
		return translate(err)
	}
	for i := 0; i < want; i++ {
		p := from + uint64(i)
		if i >= len(recs) || pos[i] != p {
			// A position the stored size counts has no row, or its entry
			// is gone from the ledger.
			return &audit.BreakError{Reason: audit.ReasonTenantLog,
				Detail: fmt.Sprintf("position %d of a tenant log has no ledger entry", p)}
		}
		leaf, ok := audit.TenantLeaf(recs[i], t)
		if !ok || tlog.RecordHash(leaf) != stored[i] {
			return &audit.BreakError{Seq: recs[i].Seq, Reason: audit.ReasonTenantLog,
				Detail: fmt.Sprintf("position %d of a tenant log is not the leaf its ledger entry gives", p)}
		}
		e := audit.TenantLogEntry{Pos: p, Leaf: leaf}
		if v, ok := audit.DecodeTenantView(leaf); ok {
			e.Kind, e.Actor = v.Kind, v.Actor
		} else if env, err := audit.DecodeEnvelope(leaf); err == nil {
			e.Kind, e.Actor = env.Kind, env.Actor
		}
		add(e)
	}
	return nil
}

// TenantConsistencyProof returns the proof that tenant t's log of size
// newSize extends its log of size oldSize (O(log newSize) stored rows).
//
// Errors: as TenantInclusionProof, for oldSize in place of pos.
func (s *Store) TenantConsistencyProof(ctx context.Context, t cloison.TenantID, oldSize, newSize uint64) (tlog.TreeProof, error) {
	if err := s.tenantRange(ctx, t, oldSize, newSize); err != nil {
		return nil, err
	}
	p, err := tlog.ProveTree(int64(newSize), int64(oldSize), tenantReader{ctx: ctx, q: s.scan, t: t})
	return p, translate(err)
}

// tenantRange checks 1 ≤ lo ≤ size ≤ the size of t's stored log. A size
// the stored log does not reach yet (a checkpoint signed by another node
// that indexed further, or no checkpoint fetched since the entries were
// appended) brings the index to the head first.
func (s *Store) tenantRange(ctx context.Context, t cloison.TenantID, lo, size uint64) error {
	if _, err := audit.TenantOrigin(s.cfg.Origin, t); err != nil {
		return err
	}
	n, err := tenantSize(ctx, s.scan, t)
	if err != nil {
		return translate(err)
	}
	if size > n {
		if _, err := s.IndexTenantLogs(ctx); err != nil {
			return err
		}
		if n, err = tenantSize(ctx, s.scan, t); err != nil {
			return translate(err)
		}
	}
	if n == 0 {
		return audit.ErrEmptyLedger
	}
	if lo == 0 || lo > size || size > n {
		return fmt.Errorf("%w: %d in a tenant log of size %d (of %d)", audit.ErrOutOfRange, lo, size, n)
	}
	return nil
}
