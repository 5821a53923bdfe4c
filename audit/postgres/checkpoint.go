package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// ErrNoSigningKey: a checkpoint was asked of a store without a key.
var ErrNoSigningKey = cloison.NewError(cloison.CodeInvalid, "audit/postgres: no checkpoint signing key configured")

// maybeCheckpoint writes a checkpoint of this store's last head when
// CheckpointEvery events were appended since the last one, or (force) when
// the head moved at all. A failure is logged and kept for Stats; it never
// fails an append, which is already durable.
func (s *Store) maybeCheckpoint(force bool) {
	if s.cfg.SigningKey == nil {
		return
	}
	s.cpMu.Lock()
	head, due := s.lastHead, s.sinceCP >= s.cfg.CheckpointEvery || (force && s.lastHead != s.lastCP && s.lastHead.Seq > 0)
	s.cpMu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := s.Checkpoint(ctx, head)
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	s.lastCPErr = err
	if err != nil {
		s.cfg.Logger.Error("audit checkpoint failed", "size", head.Seq, "err", err)
		return
	}
	s.sinceCP, s.lastCP = 0, head
	s.cpCount++
}

// Checkpoint signs head, copies the checkpoint to the external directory
// (first, so a stored checkpoint always has its outside copy) and stores it
// in audit_checkpoints. head must be a head this ledger really had: the
// caller got it from a commit or from Head. The stored chain must still
// hold the latest chain checkpoint in CheckpointDir (sign.go).
//
// Errors: ErrNoSigningKey; *SignRefusedError (ErrSigningRefused); the
// file's and the translated database errors.
func (s *Store) Checkpoint(ctx context.Context, head audit.Head) (audit.Checkpoint, error) {
	if s.cfg.SigningKey == nil {
		return audit.Checkpoint{}, ErrNoSigningKey
	}
	if err := s.proveChain(ctx, head); err != nil {
		return audit.Checkpoint{}, err
	}
	c, err := audit.SignCheckpoint(s.cfg.SigningKey, s.cfg.Origin, head, time.Now())
	if err != nil {
		return c, err
	}
	if s.cfg.CheckpointDir != "" {
		if err := WriteCheckpointFile(s.cfg.CheckpointDir, c); err != nil {
			return c, err
		}
		s.signedChain(c, filepath.Join(s.cfg.CheckpointDir, CheckpointFileName(c)))
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO audit_checkpoints (size, key_id, head, signed_at, note)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`, int64(c.Size), c.KeyID, c.Head[:], c.Time, string(c.Marshal()))
	return c, translate(err)
}

// CheckpointFileName is the external copy's name: origin, zero-padded size
// (so names sort by size) and key id.
func CheckpointFileName(c audit.Checkpoint) string {
	return fmt.Sprintf("%s-%020d-%s.checkpoint", strings.NewReplacer("/", "_", ":", "_").Replace(string(c.Origin)), c.Size, c.KeyID)
}

// WriteCheckpointFile writes c into dir durably: temporary file, fsync,
// rename, fsync of the directory.
func WriteCheckpointFile(dir string, c audit.Checkpoint) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("audit/postgres: checkpoint dir: %w", err)
	}
	name := filepath.Join(dir, CheckpointFileName(c))
	tmp, err := os.CreateTemp(dir, ".checkpoint-*")
	if err != nil {
		return fmt.Errorf("audit/postgres: checkpoint: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(c.Marshal()); err != nil {
		tmp.Close()
		return fmt.Errorf("audit/postgres: checkpoint: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("audit/postgres: checkpoint: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("audit/postgres: checkpoint: %w", err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("audit/postgres: checkpoint: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit/postgres: checkpoint: %w", err)
	}
	defer d.Close()
	return d.Sync()
}

// SourcedCheckpoint is a checkpoint and where it was read.
type SourcedCheckpoint struct {
	audit.Checkpoint
	Source string
}

// LoadCheckpointFiles reads every *.checkpoint file in dir, sorted by name.
// A file that does not parse is an error naming it: it was written by this
// package, so it was tampered with or damaged.
func LoadCheckpointFiles(dir string) ([]SourcedCheckpoint, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.checkpoint"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]SourcedCheckpoint, 0, len(names))
	for _, n := range names {
		b, err := os.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("audit/postgres: %w", err)
		}
		c, err := audit.ParseCheckpoint(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, SourcedCheckpoint{c, n})
	}
	return out, nil
}

// checkpointsTx reads the stored checkpoints. A row whose note does not
// parse, or disagrees with its columns, is reported as a forged checkpoint.
func checkpointsTx(ctx context.Context, tx pgx.Tx) ([]SourcedCheckpoint, error) {
	rows, err := tx.Query(ctx, "SELECT size, key_id, head, note FROM audit_checkpoints ORDER BY size, key_id")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []SourcedCheckpoint
	for rows.Next() {
		var size int64
		var keyID, note string
		var head []byte
		if err := rows.Scan(&size, &keyID, &head, &note); err != nil {
			return nil, err
		}
		c, err := audit.ParseCheckpoint([]byte(note))
		if err != nil || c.Size != uint64(size) || c.KeyID != keyID || string(c.Head[:]) != string(head) {
			return nil, &audit.BreakError{Seq: uint64(size), Reason: audit.ReasonCheckpointSig,
				Detail: fmt.Sprintf("database: stored checkpoint of size %d is malformed or disagrees with its columns", size)}
		}
		out = append(out, SourcedCheckpoint{c, "database"})
	}
	return out, rows.Err()
}

// Checkpoints returns the stored checkpoints.
func (s *Store) Checkpoints(ctx context.Context) ([]SourcedCheckpoint, error) {
	var out []SourcedCheckpoint
	err := s.readOnly(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = checkpointsTx(ctx, tx)
		return err
	})
	return out, err
}

// LatestCheckpointIn returns the stored checkpoint with the largest size in
// [from, to], or false.
func (s *Store) LatestCheckpointIn(ctx context.Context, from, to uint64) (audit.Checkpoint, bool, error) {
	var note string
	err := s.pool.QueryRow(ctx, `SELECT note FROM audit_checkpoints WHERE size BETWEEN $1 AND $2 ORDER BY size DESC, key_id LIMIT 1`,
		int64(from), int64(to)).Scan(&note)
	if errors.Is(err, pgx.ErrNoRows) {
		return audit.Checkpoint{}, false, nil
	}
	if err != nil {
		return audit.Checkpoint{}, false, translate(err)
	}
	c, err := audit.ParseCheckpoint([]byte(note))
	return c, err == nil, err
}
