package postgres

import (
	"context"

	"github.com/cloison/cloison/audit"
)

// OfKinds returns the records of the given kinds in sequence order (a
// node reads its adapter registrations back at start with it). Every event
// staged before the call is sequenced first (Sync).
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
	rows, err := s.scan.Query(ctx, `SELECT seq FROM audit_events WHERE kind = ANY($1) ORDER BY seq`, names)
	if err != nil {
		return nil, translate(err)
	}
	var seqs []uint64
	for rows.Next() {
		var seq int64
		if err := rows.Scan(&seq); err != nil {
			rows.Close()
			return nil, translate(err)
		}
		seqs = append(seqs, uint64(seq))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, translate(err)
	}
	out := make([]audit.Record, 0, len(seqs))
	for _, seq := range seqs {
		if err := scanRows(ctx, s.scan, seq, seq, 1, func(r audit.Record) error {
			out = append(out, r)
			return nil
		}); err != nil {
			return nil, translate(err)
		}
	}
	return out, nil
}
