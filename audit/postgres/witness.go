package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
)

// Witness cosignatures (migration 00007, package audit/witness): the
// submitter stores each witness's verified cosignature line(s) on the
// stored tree checkpoint of that size; CosignedCheckpoint publishes the
// latest checkpoint with its cosignatures, what a verifier requiring k
// witnesses (audit.VerifyCosigned) is given.

// StoreCosignature keeps witness's cosignature lines (verified by the
// caller, audit.CheckCosignatures) on the stored checkpoint of size. A
// second cosignature by the same witness at the same size is ignored.
//
// Errors: audit.ErrOutOfRange when no checkpoint of that size is stored; the
// translated database errors.
func (s *Store) StoreCosignature(ctx context.Context, size uint64, witness string, lines []byte) error {
	tag, err := s.pool.Exec(ctx, `INSERT INTO tlog_cosignatures (size, witness, signature)
		SELECT $1, $2, $3 WHERE EXISTS (SELECT 1 FROM tlog_checkpoints WHERE size = $1)
		ON CONFLICT (size, witness) DO NOTHING`, int64(size), witness, string(lines))
	if err != nil {
		return translate(err)
	}
	if tag.RowsAffected() == 0 {
		var exists bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM tlog_checkpoints WHERE size = $1)", int64(size)).Scan(&exists); err != nil {
			return translate(err)
		}
		if !exists {
			return fmt.Errorf("%w: no stored checkpoint of size %d", audit.ErrOutOfRange, size)
		}
	}
	return nil
}

// WitnessedSize returns the largest checkpoint size witness has a stored
// cosignature for (0: none).
//
// Errors: the translated database errors.
func (s *Store) WitnessedSize(ctx context.Context, witness string) (uint64, error) {
	var n *int64
	if err := s.scan.QueryRow(ctx, "SELECT max(size) FROM tlog_cosignatures WHERE witness = $1", witness).Scan(&n); err != nil {
		return 0, translate(err)
	}
	if n == nil {
		return 0, nil
	}
	return uint64(*n), nil
}

// CosignedCheckpoint returns the largest stored tree checkpoint that at
// least min witnesses (at least one) cosigned, with every stored
// cosignature appended: a signed note that audit.VerifyCosigned checks.
//
// Errors: *SignRefusedError once the store refused to sign (sign.go);
// audit.ErrNoCheckpoint when no checkpoint has that many; the translated
// database errors.
func (s *Store) CosignedCheckpoint(ctx context.Context, min int) ([]byte, error) {
	if err := s.SigningRefused(); err != nil {
		return nil, err
	}
	if min < 1 {
		min = 1
	}
	var msg string
	var sigs []string
	err := s.scan.QueryRow(ctx, `SELECT c.note, array_agg(w.signature ORDER BY w.witness)
		FROM tlog_checkpoints c JOIN tlog_cosignatures w ON w.size = c.size
		GROUP BY c.size, c.note HAVING count(*) >= $1
		ORDER BY c.size DESC LIMIT 1`, min).Scan(&msg, &sigs)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, audit.ErrNoCheckpoint
	}
	if err != nil {
		return nil, translate(err)
	}
	out := []byte(msg)
	for _, l := range sigs {
		if out, err = audit.AddCosignatures(out, []byte(l)); err != nil {
			return nil, err
		}
	}
	return out, nil
}
