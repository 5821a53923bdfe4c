package postgres

import (
	"context"
	"crypto/ed25519"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
)

// VerifyOptions says what to trust and where the external copies are.
type VerifyOptions struct {
	// Keys are the trusted checkpoint public keys (audit.KeySet).
	Keys map[string]ed25519.PublicKey
	// ExternalDir holds the checkpoint copies kept outside the database.
	ExternalDir string
	// Progress, if set, is called every 10,000 events with the seq reached.
	Progress func(seq uint64)
}

// Verify streams the whole ledger in one snapshot, recomputes every hash,
// checks every stored and external checkpoint (signature, and head at its
// size) and returns the first break as an *audit.BreakError.
//
// The external directory is read before the snapshot is taken: a checkpoint
// file is written after its events commit, so every external checkpoint's
// events are visible to the snapshot and a live writer causes no false
// truncation report.
func (s *Store) Verify(ctx context.Context, opts VerifyOptions) (audit.Result, error) {
	var external []SourcedCheckpoint
	if opts.ExternalDir != "" {
		var err error
		if external, err = LoadCheckpointFiles(opts.ExternalDir); err != nil {
			return audit.Result{}, err
		}
	}
	var res audit.Result
	err := s.readOnly(ctx, func(tx pgx.Tx) error {
		stored, err := checkpointsTx(ctx, tx)
		if err != nil {
			return err
		}
		v := audit.NewVerifier(audit.Head{}, opts.Keys)
		for _, c := range append(stored, external...) {
			if err := v.AddCheckpoint(c.Checkpoint, c.Source); err != nil {
				return err
			}
		}
		err = scanTx(ctx, tx, 1, 0, func(r audit.Record) error {
			if err := v.Add(r); err != nil {
				return err
			}
			if opts.Progress != nil && r.Seq%10000 == 0 {
				opts.Progress(r.Seq)
			}
			return nil
		})
		if err != nil {
			return err
		}
		res, err = v.Finish()
		return err
	})
	return res, err
}
