package postgres

import (
	"bytes"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Tenant logs, stored (migration 00013; doc.go, "Tenant logs"). Each
// tenant's log — the leaves audit.TenantLeaf gives, in ledger order — is
// kept as an RFC 6962 tree of its own: tenant_log_entries maps (tenant,
// position) to the ledger seq whose leaf it is, tenant_log_hashes holds
// the tree's stored hashes (tlog.StoredHashIndex) per tenant. They are
// derived from the committed ledger, never written by the append path, so
// appends pay nothing for them: indexTenantLogs reads the entries after
// the watermark (tenant_log_indexed) in seq order, a page per transaction
// under an advisory lock, and inserts their tenant rows and the new
// watermark together. Every tenant call brings the index to the head first
// (TenantCheckpoint) or reads what it already holds (the proofs, whose
// sizes come from a checkpoint), so a call costs the entries appended since
// the last one plus O(log n) rows, not a ledger scan. The same transaction
// inserts each request.completed leaf's request_entries row (migration
// 00021: tenant, request id → position, seq), which RequestEntry reads.
// VerifyTenantLogs (part of Verify) recomputes every row from the ledger.

// tenantIndexPage bounds the ledger entries one indexing transaction
// reads.
const tenantIndexPage = 4096

const tenantIndexLock = "SELECT pg_advisory_xact_lock(hashtextextended('cloison.tenant_logs', 0))"

// tenantRows are the rows one indexing page inserts.
type tenantRows struct {
	tenants []string // tenant_log_entries
	pos     []int64
	seqs    []int64
	hten    []string // tenant_log_hashes
	hindex  []int64
	hashes  [][]byte
	rten    []string // request_entries
	rreq    []string
	rpos    []int64
	rseqs   []int64
}

// tenantTrees is the frontier of each tenant tree a page touches: its size
// and the stored hashes the next append and its root read.
type tenantTrees struct {
	size     map[cloison.TenantID]int64
	frontier map[cloison.TenantID]hashMap
}

// hashMap is a tlog.HashReader over hashes held in memory; a missing hash
// is a schema error (the stored tree lacks a hash its size needs).
type hashMap map[int64]tlog.Hash

func (m hashMap) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		h, ok := m[x]
		if !ok {
			return nil, fmt.Errorf("%w: tenant tree hash %d is missing", ErrSchema, x)
		}
		out[i] = h
	}
	return out, nil
}

// frontierIndexes returns the stored-hash indexes of the complete subtrees
// of a tree of n leaves: all that appending to it and its root read.
func frontierIndexes(n int64) []int64 {
	var out []int64
	for l := 0; n>>uint(l) > 0; l++ {
		if (n>>uint(l))&1 == 1 {
			out = append(out, tlog.StoredHashIndex(l, n>>uint(l)-1))
		}
	}
	return out
}

// leaf is one tenant-log leaf of a ledger entry.
type leaf struct {
	tenant  cloison.TenantID
	seq     uint64
	data    []byte
	request cloison.RequestID // of a request.completed entry, in its tenant's log; "" otherwise
}

// leavesOf returns the tenant-log leaves of recs, in ledger order.
func leavesOf(recs []audit.Record) []leaf {
	var out []leaf
	for _, r := range recs {
		req, reqTenant := completedRequest(r)
		for _, l := range audit.TenantLeaves(r) {
			x := leaf{tenant: l.Tenant, seq: r.Seq, data: l.Leaf}
			if l.Tenant == reqTenant {
				x.request = req
			}
			out = append(out, x)
		}
	}
	return out
}

// completedRequest returns the request id and tenant of a request.completed
// entry, read from its hashed payload (the kind column only filters), and
// "" for any other entry.
func completedRequest(r audit.Record) (cloison.RequestID, cloison.TenantID) {
	if r.Kind != audit.KindRequestCompleted {
		return "", ""
	}
	env, err := audit.DecodeEnvelope(r.Payload)
	if err != nil || env.Kind != audit.KindRequestCompleted || env.Tenant == "" {
		return "", ""
	}
	p, err := env.DecodePayload()
	if err != nil {
		return "", ""
	}
	return p.(*audit.RequestCompleted).Request, env.Tenant
}

// loadTrees reads the size and frontier of each tenant in ls that trees
// does not hold yet, from q.
func (trees *tenantTrees) load(ctx context.Context, q querier, ls []leaf) error {
	var want []string
	for _, l := range ls {
		if _, ok := trees.size[l.tenant]; !ok && !slices.Contains(want, string(l.tenant)) {
			want = append(want, string(l.tenant))
		}
	}
	if len(want) == 0 {
		return nil
	}
	for _, t := range want {
		trees.size[cloison.TenantID(t)] = 0
		trees.frontier[cloison.TenantID(t)] = hashMap{}
	}
	rows, err := q.Query(ctx, `SELECT tenant, max(pos) FROM tenant_log_entries WHERE tenant = ANY($1) GROUP BY tenant`, want)
	if err != nil {
		return err
	}
	var kt []string
	var ki []int64
	for rows.Next() {
		var t string
		var n int64
		if err := rows.Scan(&t, &n); err != nil {
			rows.Close()
			return err
		}
		trees.size[cloison.TenantID(t)] = n
		for _, x := range frontierIndexes(n) {
			kt, ki = append(kt, t), append(ki, x)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(kt) == 0 {
		return nil
	}
	rows, err = q.Query(ctx, `SELECT h.tenant, h.index, h.hash FROM tenant_log_hashes h
		JOIN unnest($1::text[], $2::bigint[]) AS k(tenant, index) ON h.tenant = k.tenant AND h.index = k.index`, kt, ki)
	if err != nil {
		return err
	}
	got := 0
	for rows.Next() {
		var t string
		var x int64
		var h []byte
		if err := rows.Scan(&t, &x, &h); err != nil {
			rows.Close()
			return err
		}
		trees.frontier[cloison.TenantID(t)][x] = tlog.Hash(h)
		got++
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if got != len(kt) {
		return fmt.Errorf("%w: stored tenant trees lack %d frontier hashes", ErrSchema, len(kt)-got)
	}
	return nil
}

// add appends ls to their tenants' trees and returns the rows to insert.
func (trees *tenantTrees) add(ls []leaf) (tenantRows, error) {
	var out tenantRows
	for _, l := range ls {
		n := trees.size[l.tenant]
		fr := trees.frontier[l.tenant]
		hs, err := tlog.StoredHashes(n, l.data, fr)
		if err != nil {
			return tenantRows{}, err
		}
		base := tlog.StoredHashIndex(0, n)
		for j, h := range hs {
			fr[base+int64(j)] = h
			out.hten, out.hindex = append(out.hten, string(l.tenant)), append(out.hindex, base+int64(j))
			out.hashes = append(out.hashes, append([]byte(nil), h[:]...))
		}
		trees.size[l.tenant] = n + 1
		out.tenants, out.pos, out.seqs = append(out.tenants, string(l.tenant)), append(out.pos, n+1), append(out.seqs, int64(l.seq))
		if l.request != "" {
			out.rten, out.rreq = append(out.rten, string(l.tenant)), append(out.rreq, string(l.request))
			out.rpos, out.rseqs = append(out.rpos, n+1), append(out.rseqs, int64(l.seq))
		}
	}
	return out, nil
}

// prune keeps only each tree's frontier, so that memory stays O(tenants ×
// log n) over a whole ledger.
func (trees *tenantTrees) prune() {
	for t, fr := range trees.frontier {
		keep := hashMap{}
		for _, x := range frontierIndexes(trees.size[t]) {
			keep[x] = fr[x]
		}
		trees.frontier[t] = keep
	}
}

// IndexTenantLogs brings the stored tenant logs up to the ledger's
// committed head (read when it starts) and returns the seq they cover. It
// is safe to call from any number of goroutines and processes: indexing
// transactions take an advisory lock and start from the watermark they
// find. TenantCheckpoint calls it; so may a caller that wants the work done
// off the tenants' requests.
//
// Errors: ErrSchema when the ledger has a gap or the stored trees lack a
// hash; the translated database errors.
func (s *Store) IndexTenantLogs(ctx context.Context) (uint64, error) {
	var target, wm uint64
	for {
		var done bool
		err := pgx.BeginTxFunc(ctx, s.scan, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, tenantIndexLock); err != nil {
				return err
			}
			var m *int64
			if err := tx.QueryRow(ctx, `SELECT max(seq) FROM tenant_log_indexed`).Scan(&m); err != nil {
				return err
			}
			wm = 0
			if m != nil {
				wm = uint64(*m)
			}
			if target == 0 {
				h, err := headOn(ctx, tx)
				if err != nil {
					return err
				}
				target = h.Seq
			}
			if wm >= target {
				done = true
				return nil
			}
			page := make([]audit.Record, 0, tenantIndexPage)
			if err := scanRows(ctx, tx, wm+1, target, tenantIndexPage, func(r audit.Record) error {
				page = append(page, r)
				return nil
			}); err != nil {
				return err
			}
			if len(page) == 0 || page[0].Seq != wm+1 {
				return fmt.Errorf("%w: ledger gap after seq %d", ErrSchema, wm)
			}
			ls := leavesOf(page)
			trees := &tenantTrees{size: map[cloison.TenantID]int64{}, frontier: map[cloison.TenantID]hashMap{}}
			if err := trees.load(ctx, tx, ls); err != nil {
				return err
			}
			rows, err := trees.add(ls)
			if err != nil {
				return err
			}
			if len(rows.tenants) > 0 {
				if _, err := tx.Exec(ctx, `INSERT INTO tenant_log_entries (tenant, pos, seq) SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[])`,
					rows.tenants, rows.pos, rows.seqs); err != nil {
					return err
				}
				if _, err := tx.Exec(ctx, `INSERT INTO tenant_log_hashes (tenant, index, hash) SELECT * FROM unnest($1::text[], $2::bigint[], $3::bytea[])`,
					rows.hten, rows.hindex, rows.hashes); err != nil {
					return err
				}
			}
			if len(rows.rten) > 0 {
				if _, err := tx.Exec(ctx, `INSERT INTO request_entries (tenant, request, pos, seq) SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[])`,
					rows.rten, rows.rreq, rows.rpos, rows.rseqs); err != nil {
					return err
				}
			}
			last := page[len(page)-1].Seq
			if _, err := tx.Exec(ctx, `INSERT INTO tenant_log_indexed (seq) VALUES ($1)`, int64(last)); err != nil {
				return err
			}
			wm = last
			return nil
		})
		if err != nil {
			return wm, translate(err)
		}
		if done {
			return wm, nil
		}
	}
}

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
	got := make(hashMap, len(indexes))
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
	return got.ReadHashes(indexes)
}

// tenantSize returns the number of leaves of t's stored log.
func tenantSize(ctx context.Context, q querier, t cloison.TenantID) (uint64, error) {
	var n int64
	err := q.QueryRow(ctx, `SELECT coalesce(max(pos), 0) FROM tenant_log_entries WHERE tenant = $1`, string(t)).Scan(&n)
	return uint64(n), err
}

// TenantCheckpoint indexes the ledger up to its head (IndexTenantLogs),
// then signs and returns the head of tenant t's log: a C2SP checkpoint note
// with origin audit.TenantOrigin(Origin, t), signed by the log key (the
// note verifier key of TreeVerifierKey checks it). Ed25519 signatures are
// deterministic, so the same tenant log always gets the same note. Each
// note is kept in tenant_checkpoints (migration 00023, append-only) before
// it is returned, so that Verify holds the log to every size it served.
//
// Errors: ErrNoSigningKey; audit.ErrEmptyLedger when the tenant has no
// entry; audit.ErrInvalidEvent for a tenant id that is not an identifier;
// audit.ErrSmallerTree when the log is smaller than a checkpoint already
// served (a rollback), audit.ErrFork when a served size had another root:
// neither is signed; the errors of IndexTenantLogs.
func (s *Store) TenantCheckpoint(ctx context.Context, t cloison.TenantID) ([]byte, error) {
	if s.signer == nil {
		return nil, ErrNoSigningKey
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
	msg, err := audit.SignTenantHead(s.signer, t, audit.TreeHead{Origin: origin, Size: n, Root: root})
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
// Errors: audit.ErrEmptyLedger when the tenant has no entry; ErrOutOfRange
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
// that is not an identifier; ErrOutOfRange when to is before from; *audit.BreakError with
// audit.ReasonTenantLog when a stored position or leaf hash is not the one
// the ledger gives; the errors of Sync and IndexTenantLogs; fn's error,
// returned as is. A tenant with no entry, or from past the end, gets no
// call of fn and no error.
func (s *Store) TenantEntries(ctx context.Context, t cloison.TenantID, from, to uint64, fn func(TenantLogEntry) error) error {
	if _, err := audit.TenantOrigin(s.cfg.Origin, t); err != nil {
		return err
	}
	if from == 0 {
		from = 1
	}
	if to != 0 && to < from {
		return fmt.Errorf("%w: to %d is before from %d", ErrOutOfRange, to, from)
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
	page := make([]TenantLogEntry, 0, s.cfg.ScanPage)
	for from <= to {
		page = page[:0]
		last := min(to, from+uint64(s.cfg.ScanPage)-1)
		if err := s.tenantPage(ctx, t, from, last, func(e TenantLogEntry) { page = append(page, e) }); err != nil {
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
func (s *Store) tenantPage(ctx context.Context, t cloison.TenantID, from, to uint64, add func(TenantLogEntry)) error {
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
		e := TenantLogEntry{Pos: p, Leaf: leaf}
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
		return fmt.Errorf("%w: %d in a tenant log of size %d (of %d)", ErrOutOfRange, lo, size, n)
	}
	return nil
}

// VerifyTenantLogs recomputes every stored tenant log from the ledger up to
// the watermark (on the scan pool, a page at a time, in memory O(tenants ×
// log n)) and compares every stored row: each position's ledger seq, each
// tree hash, each request_entries row, and the number of rows (none
// missing, none extra). It is what makes the stored logs "derived and
// verified": the database does not recompute them.
//
// Last it holds each tenant log to the checkpoints served of it
// (verifyServedTenantCheckpoints).
//
// Errors: *audit.BreakError with audit.ReasonTenantLog at the first entry
// whose tenant rows differ (or at the watermark when rows are missing or
// extra, or the watermark is beyond the head); audit.ErrSmallerTree for a
// tenant log rolled back below a checkpoint it was served, audit.ErrFork
// for a served root the log does not have; the translated database
// errors.
func (s *Store) VerifyTenantLogs(ctx context.Context) error {
	var wm, entries, hashes, requests int64
	var head audit.Head
	var served map[cloison.TenantID]servedCheckpoint
	if err := s.scanReadOnly(ctx, func(tx pgx.Tx) error {
		var m *int64
		if err := tx.QueryRow(ctx, `SELECT max(seq) FROM tenant_log_indexed`).Scan(&m); err != nil {
			return err
		}
		if m != nil {
			wm = *m
		}
		if err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM tenant_log_entries), (SELECT count(*) FROM tenant_log_hashes),
			(SELECT count(*) FROM request_entries)`).Scan(&entries, &hashes, &requests); err != nil {
			return err
		}
		var err error
		if head, err = headOn(ctx, tx); err != nil {
			return err
		}
		// In the same snapshot as the head: every checkpoint served in it
		// was signed from ledger entries it holds.
		served, err = servedTenantCheckpoints(ctx, tx)
		return err
	}); err != nil {
		return err
	}
	if uint64(wm) > head.Seq {
		return &audit.BreakError{Seq: uint64(wm), Reason: audit.ReasonTenantLog,
			Detail: fmt.Sprintf("tenant logs are indexed to seq %d, the ledger ends at %d", wm, head.Seq)}
	}
	trees := &tenantTrees{size: map[cloison.TenantID]int64{}, frontier: map[cloison.TenantID]hashMap{}}
	var wantRequests int64
	page := make([]audit.Record, 0, s.cfg.ScanPage)
	flush := func() error {
		ls := leavesOf(page)
		for _, l := range ls {
			if _, ok := trees.size[l.tenant]; !ok {
				trees.size[l.tenant], trees.frontier[l.tenant] = 0, hashMap{}
			}
		}
		want, err := trees.add(ls)
		page = page[:0]
		wantRequests += int64(len(want.rten))
		if err != nil || len(want.tenants) == 0 {
			return err
		}
		if err := s.compareTenantRows(ctx, want); err != nil {
			return err
		}
		trees.prune()
		return nil
	}
	if wm > 0 {
		err := s.scanPages(ctx, 1, uint64(wm), func(r audit.Record) error {
			page = append(page, r)
			if len(page) == cap(page) {
				return flush()
			}
			return nil
		})
		if err == nil {
			err = flush()
		}
		if err != nil {
			return err
		}
	}
	var wantEntries, wantHashes int64
	for _, n := range trees.size {
		wantEntries += n
		wantHashes += tlog.StoredHashCount(n)
	}
	if wantEntries != entries || wantHashes != hashes {
		return &audit.BreakError{Seq: uint64(wm), Reason: audit.ReasonTenantLog,
			Detail: fmt.Sprintf("tenant logs hold %d positions and %d hashes, the ledger gives %d and %d", entries, hashes, wantEntries, wantHashes)}
	}
	if wantRequests != requests {
		return &audit.BreakError{Seq: uint64(wm), Reason: audit.ReasonTenantLog,
			Detail: fmt.Sprintf("request_entries holds %d rows, the ledger gives %d", requests, wantRequests)}
	}
	return s.verifyServedTenantCheckpoints(ctx, served, trees.size, uint64(wm), head.Seq)
}

// servedCheckpoint is the largest tenant checkpoint served of a tenant log.
type servedCheckpoint struct {
	size int64
	root []byte
}

// servedTenantCheckpoints reads the largest checkpoint served of each
// tenant log (tenant_checkpoints, migration 00023).
func servedTenantCheckpoints(ctx context.Context, q querier) (map[cloison.TenantID]servedCheckpoint, error) {
	rows, err := q.Query(ctx, `SELECT DISTINCT ON (tenant) tenant, size, root FROM tenant_checkpoints ORDER BY tenant, size DESC`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[cloison.TenantID]servedCheckpoint{}
	for rows.Next() {
		var t string
		var c servedCheckpoint
		if err := rows.Scan(&t, &c.size, &c.root); err != nil {
			return nil, err
		}
		out[cloison.TenantID(t)] = c
	}
	return out, rows.Err()
}

// verifyServedTenantCheckpoints holds every tenant log to latest, the
// largest checkpoint TenantCheckpoint served of it (read in the snapshot
// that read head): the log the ledger gives up to head (sizes, the verified stored
// rows up to the watermark wm and the entries after it counted) must reach
// that size, and when the verified rows do, have that root. It reads the
// entries after the watermark and O(log n) stored hashes per tenant.
//
// Errors: audit.ErrSmallerTree for a log rolled back below a served
// checkpoint; audit.ErrFork for a served root the log does not have; the
// translated database errors.
func (s *Store) verifyServedTenantCheckpoints(ctx context.Context, latest map[cloison.TenantID]servedCheckpoint, verified map[cloison.TenantID]int64, wm, head uint64) error {
	if len(latest) == 0 {
		return nil
	}
	size := map[cloison.TenantID]int64{}
	for t, n := range verified {
		size[t] = n
	}
	if wm < head {
		if err := s.scanPages(ctx, wm+1, head, func(r audit.Record) error {
			for _, l := range audit.TenantLeaves(r) {
				size[l.Tenant]++
			}
			return nil
		}); err != nil {
			return err
		}
	}
	for t, c := range latest {
		if size[t] < c.size {
			return fmt.Errorf("%w: a tenant log was served at size %d, the ledger gives it %d", audit.ErrSmallerTree, c.size, size[t])
		}
		if c.size > verified[t] {
			continue // beyond the indexed rows: the size is all there is to hold
		}
		root, err := tlog.TreeHash(c.size, tenantReader{ctx: ctx, q: s.scan, t: t})
		if err != nil {
			return translate(err)
		}
		if !bytes.Equal(root[:], c.root) {
			return fmt.Errorf("%w: a tenant log served at size %d had another root", audit.ErrFork, c.size)
		}
	}
	return nil
}

// compareTenantRows checks that the stored rows at want's keys are want's.
func (s *Store) compareTenantRows(ctx context.Context, want tenantRows) error {
	type key struct {
		t string
		x int64
	}
	seqs := make(map[key]int64, len(want.tenants))
	rows, err := s.scan.Query(ctx, `SELECT e.tenant, e.pos, e.seq FROM tenant_log_entries e
		JOIN unnest($1::text[], $2::bigint[]) AS k(tenant, pos) ON e.tenant = k.tenant AND e.pos = k.pos`, want.tenants, want.pos)
	if err != nil {
		return translate(err)
	}
	for rows.Next() {
		var k key
		var seq int64
		if err := rows.Scan(&k.t, &k.x, &seq); err != nil {
			rows.Close()
			return translate(err)
		}
		seqs[k] = seq
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return translate(err)
	}
	for i, t := range want.tenants {
		if got, ok := seqs[key{t, want.pos[i]}]; !ok || got != want.seqs[i] {
			return &audit.BreakError{Seq: uint64(want.seqs[i]), Reason: audit.ReasonTenantLog,
				Detail: fmt.Sprintf("a tenant log's position %d is not this entry's", want.pos[i])}
		}
	}
	stored := make(map[key][]byte, len(want.hten))
	rows, err = s.scan.Query(ctx, `SELECT h.tenant, h.index, h.hash FROM tenant_log_hashes h
		JOIN unnest($1::text[], $2::bigint[]) AS k(tenant, index) ON h.tenant = k.tenant AND h.index = k.index`, want.hten, want.hindex)
	if err != nil {
		return translate(err)
	}
	for rows.Next() {
		var k key
		var h []byte
		if err := rows.Scan(&k.t, &k.x, &h); err != nil {
			rows.Close()
			return translate(err)
		}
		stored[k] = h
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return translate(err)
	}
	if len(want.rten) > 0 {
		n := 0
		if err := s.scan.QueryRow(ctx, `SELECT count(*) FROM request_entries r
			JOIN unnest($1::text[], $2::text[], $3::bigint[], $4::bigint[]) AS k(tenant, request, pos, seq)
			ON r.tenant = k.tenant AND r.request = k.request AND r.pos = k.pos AND r.seq = k.seq`,
			want.rten, want.rreq, want.rpos, want.rseqs).Scan(&n); err != nil {
			return translate(err)
		}
		if n != len(want.rten) {
			return &audit.BreakError{Seq: uint64(want.rseqs[0]), Reason: audit.ReasonTenantLog,
				Detail: fmt.Sprintf("request_entries lacks %d of the request.completed entries from here", len(want.rten)-n)}
		}
	}
	for i, t := range want.hten {
		if string(stored[key{t, want.hindex[i]}]) != string(want.hashes[i]) {
			// The entry whose leaf the hash's subtree ends with.
			level, n := tlog.SplitStoredHashIndex(want.hindex[i])
			last := n<<uint(level) + 1<<uint(level) // 1-based position
			var seq int64
			for j, tt := range want.tenants {
				if tt == t && want.pos[j] == last {
					seq = want.seqs[j]
				}
			}
			return &audit.BreakError{Seq: uint64(seq), Reason: audit.ReasonTenantLog,
				Detail: fmt.Sprintf("a tenant log's stored hash %d (level %d) is not the entries' hash", want.hindex[i], level)}
		}
	}
	return nil
}

// entryTenantsTx returns the tenants every stored version of incident id
// names (affected_tenants), each once, in order of first appearance.
func entryTenantsTx(ctx context.Context, tx pgx.Tx, id audit.Name) ([]cloison.TenantID, error) {
	rows, err := tx.Query(ctx, `SELECT a.t FROM incident_versions v,
		jsonb_array_elements_text(convert_from(v.content, 'UTF8')::jsonb -> 'affected_tenants') WITH ORDINALITY AS a(t, i)
		WHERE v.incident_id = $1 ORDER BY v.version, a.i`, string(id))
	if err != nil {
		return nil, err
	}
	ts, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var out []cloison.TenantID
	for _, t := range ts {
		out = unionTenants(out, []cloison.TenantID{cloison.TenantID(t)})
	}
	return out, nil
}

// unionTenants appends to a the tenants of b it lacks.
func unionTenants(a, b []cloison.TenantID) []cloison.TenantID {
	for _, t := range b {
		if t != "" && !slices.Contains(a, t) {
			a = append(a, t)
		}
	}
	return a
}

// fileTenants returns the tenants any version of f names.
func fileTenants(f audit.IncidentFile) []cloison.TenantID {
	var out []cloison.TenantID
	for _, v := range f.Versions {
		out = unionTenants(out, v.AffectedTenants)
	}
	return out
}

// sameTenants reports whether a and b hold the same tenants (in any
// order).
func sameTenants(a, b []cloison.TenantID) bool {
	if len(a) != len(b) {
		return false
	}
	for _, t := range a {
		if !slices.Contains(b, t) {
			return false
		}
	}
	return true
}

// legacyTenants tells incident events written before migration 00013
// (which name no tenants) from later ones that leave tenants out: once an
// incident event in the ledger names tenants, every later one must.
type legacyTenants struct {
	first uint64 // seq of the first incident event naming tenants; 0: none yet
}

func (l *legacyTenants) see(seq int64, tenants []cloison.TenantID) {
	if len(tenants) > 0 && (l.first == 0 || uint64(seq) < l.first) {
		l.first = uint64(seq)
	}
}

// legacy reports whether an event at seq naming tenants may be one
// written before events named them.
func (l *legacyTenants) legacy(seq uint64, tenants []cloison.TenantID) bool {
	return len(tenants) == 0 && (l.first == 0 || seq < l.first)
}
