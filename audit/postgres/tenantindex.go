package postgres

import (
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Tenant logs, stored (migration 00013). Each tenant's log — the leaves
// audit.TenantLeaf gives, in ledger order — is kept as an RFC 6962 tree of
// its own, computed by audit.TenantForest from audit.TenantLogLeaves: tenant_log_entries maps (tenant,
// position) to the ledger seq whose leaf it is, tenant_log_hashes holds
// the tree's stored hashes (tlog.StoredHashIndex) per tenant. They are
// derived from the committed ledger, never written by the append path, so
// appends pay nothing for them: IndexTenantLogs reads the entries after
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

// tenantRows are the rows of an audit.TenantLogStep as the columns one
// indexing page inserts (unnest).
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

// columnsOf returns step's rows as columns.
func columnsOf(step audit.TenantLogStep) tenantRows {
	var out tenantRows
	for _, p := range step.Positions {
		out.tenants, out.pos, out.seqs = append(out.tenants, string(p.Tenant)), append(out.pos, p.Pos), append(out.seqs, p.Seq)
	}
	for _, h := range step.Hashes {
		out.hten, out.hindex = append(out.hten, string(h.Tenant)), append(out.hindex, h.Index)
		out.hashes = append(out.hashes, append([]byte(nil), h.Hash[:]...))
	}
	for _, r := range step.Requests {
		out.rten, out.rreq = append(out.rten, string(r.Tenant)), append(out.rreq, string(r.Request))
		out.rpos, out.rseqs = append(out.rpos, r.Pos), append(out.rseqs, r.Seq)
	}
	return out
}

// loadForest reads into trees the size and frontier of each tenant in ls
// that trees does not know yet, from q.
func loadForest(ctx context.Context, q querier, trees *audit.TenantForest, ls []audit.TenantLogLeaf) error {
	var want []string
	for _, l := range ls {
		if !trees.Knows(l.Tenant) && !slices.Contains(want, string(l.Tenant)) {
			want = append(want, string(l.Tenant))
		}
	}
	if len(want) == 0 {
		return nil
	}
	size := make(map[string]int64, len(want))
	frontier := make(map[string]audit.HashMap, len(want))
	for _, t := range want {
		frontier[t] = audit.HashMap{}
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
		size[t] = n
		for _, x := range audit.FrontierIndexes(n) {
			kt, ki = append(kt, t), append(ki, x)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if len(kt) > 0 {
		if err := loadFrontiers(ctx, q, kt, ki, frontier); err != nil {
			return err
		}
	}
	for _, t := range want {
		trees.Start(cloison.TenantID(t), size[t], frontier[t])
	}
	return nil
}

// loadFrontiers reads the stored hashes (kt[i], ki[i]) into frontier.
func loadFrontiers(ctx context.Context, q querier, kt []string, ki []int64, frontier map[string]audit.HashMap) error {
	rows, err := q.Query(ctx, `SELECT h.tenant, h.index, h.hash FROM tenant_log_hashes h
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
		frontier[t][x] = tlog.Hash(h)
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
			ls := audit.TenantLogLeaves(page)
			trees := audit.NewTenantForest()
			if err := loadForest(ctx, tx, trees, ls); err != nil {
				return err
			}
			step, err := trees.Append(ls)
			if err != nil {
				return fmt.Errorf("%w: %v", ErrSchema, err)
			}
			rows := columnsOf(step)
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
