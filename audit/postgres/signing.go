package postgres

import (
	"context"
	"crypto/ed25519"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
)

// BeginSigning appends the ledger's audit.SigningBegan event, signed and
// stating its own seq, unless the ledger already has one; from it on,
// verification requires a valid signature on every event of
// audit.SignedKinds. It reads the head under the ledger lock (audit_head)
// and appends in the same transaction, so the seq it states is the one it
// gets. A node calls it once its ledger is open, before it serves: an
// older ledger's unsigned events stay before the mark, and nothing written
// after it without the key is accepted. It returns the mark's seq.
//
// Errors: ErrNoSigningKey for a store without the log key; the translated
// database errors.
func (s *Store) BeginSigning(ctx context.Context, actor audit.Name) (uint64, error) {
	if !s.events.CanSign() {
		return 0, ErrNoSigningKey
	}
	var seq uint64
	err := s.readWrite(ctx, func(tx pgx.Tx) error {
		var head int64
		var hash []byte
		if err := tx.QueryRow(ctx, "SELECT seq, hash FROM audit_head()").Scan(&head, &hash); err != nil {
			return err
		}
		var at int64
		err := tx.QueryRow(ctx, "SELECT seq FROM audit_events WHERE kind = $1 ORDER BY seq LIMIT 1", string(audit.KindSigningBegan)).Scan(&at)
		switch {
		case err == nil:
			seq = uint64(at)
			return nil
		case err != pgx.ErrNoRows:
			return err
		}
		rec, err := s.events.Prepare(audit.Event{OccurredAt: time.Now(), Actor: actor, Payload: audit.SigningBegan{
			Seq: head + 1, Key: audit.Name(audit.KeyID(s.cfg.SigningKey.Public().(ed25519.PublicKey)))}})
		if err != nil {
			return err
		}
		recs := []audit.Record{rec}
		if err := appendInTx(ctx, tx, recs); err != nil {
			return err
		}
		seq = recs[0].Seq
		return nil
	})
	return seq, err
}
