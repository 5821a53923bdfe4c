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

// Verify reads the whole ledger, recomputes every hash, checks every
// stored and external checkpoint (signature, and head at its size) and
// returns the first break as an *audit.BreakError.
//
// It runs on the scan pool and holds no long transaction: the stored
// checkpoints are read first, then the chain is read in keyset pages (Scan)
// up to the head read after them. The ledger is append-only and committed
// in seq order, and a checkpoint is written only after its events commit,
// so every checkpoint read is within the rows verified, and a live writer
// causes no false truncation report. The external directory is read first
// of all, for the same reason.
//
// Errors: *audit.BreakError for a broken chain or checkpoint; the database
// errors of Scan.
func (s *Store) Verify(ctx context.Context, opts VerifyOptions) (audit.Result, error) {
	var external []SourcedCheckpoint
	if opts.ExternalDir != "" {
		var err error
		if external, err = LoadCheckpointFiles(opts.ExternalDir); err != nil {
			return audit.Result{}, err
		}
	}
	var stored []SourcedCheckpoint
	if err := s.scanReadOnly(ctx, func(tx pgx.Tx) error {
		var err error
		stored, err = checkpointsTx(ctx, tx)
		return err
	}); err != nil {
		return audit.Result{}, err
	}
	v := audit.NewVerifier(audit.Head{}, opts.Keys)
	for _, c := range append(stored, external...) {
		if err := v.AddCheckpoint(c.Checkpoint, c.Source); err != nil {
			return audit.Result{}, err
		}
	}
	err := s.scanPages(ctx, 1, 0, func(r audit.Record) error {
		if err := v.Add(r); err != nil {
			return err
		}
		if opts.Progress != nil && r.Seq%10000 == 0 {
			opts.Progress(r.Seq)
		}
		return nil
	})
	if err != nil {
		return audit.Result{}, err
	}
	return v.Finish()
}
