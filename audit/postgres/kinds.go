package postgres

import (
	"context"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// OfKinds returns the records of the given kinds in sequence order, in one
// query on the (kind, seq) index (a node reads its adapter registrations
// back at start with it). Every event staged before the call is sequenced
// first (Sync).
//
// Errors: ErrUnavailable (and the other translations of errors.go) when
// the database fails; ErrPending (Sync).
func (s *Store) OfKinds(ctx context.Context, kinds ...audit.Kind) ([]audit.Record, error) {
	if err := s.Sync(ctx); err != nil {
		return nil, err
	}
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = string(k)
	}
	rows, err := s.scan.Query(ctx, `SELECT seq, prev_hash, hash, kind, tenant, actor, occurred_at, recorded_at, payload
		FROM audit_events WHERE kind = ANY($1) ORDER BY seq`, names)
	if err != nil {
		return nil, translate(err)
	}
	defer rows.Close()
	var (
		out                  []audit.Record
		seq                  int64
		prev, hash, payload  []byte
		kind, actor          string
		tenant               *string
		occurred, recordedAt time.Time
	)
	for rows.Next() {
		if err := rows.Scan(&seq, &prev, &hash, &kind, &tenant, &actor, &occurred, &recordedAt, &payload); err != nil {
			return nil, translate(err)
		}
		r := audit.Record{Seq: uint64(seq), Kind: audit.Kind(kind), Actor: audit.Name(actor), OccurredAt: occurred, RecordedAt: recordedAt,
			Payload: append([]byte(nil), payload...)}
		copy(r.PrevHash[:], prev)
		copy(r.Hash[:], hash)
		if tenant != nil {
			r.Tenant = cloison.TenantID(*tenant)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	return out, nil
}
