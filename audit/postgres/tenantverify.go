package postgres

import (
	"bytes"
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

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
	trees := audit.NewTenantForest()
	var wantRequests int64
	page := make([]audit.Record, 0, s.cfg.ScanPage)
	flush := func() error {
		step, err := trees.Append(audit.TenantLogLeaves(page))
		page = page[:0]
		if err != nil {
			return fmt.Errorf("%w: %v", ErrSchema, err)
		}
		want := columnsOf(step)
		wantRequests += int64(len(want.rten))
		if len(want.tenants) == 0 {
			return nil
		}
		if err := s.compareTenantRows(ctx, want); err != nil {
			return err
		}
		trees.Prune()
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
	for _, n := range trees.Sizes() {
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
	return s.verifyServedTenantCheckpoints(ctx, served, trees.Sizes(), uint64(wm), head.Seq)
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
