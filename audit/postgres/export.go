package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
)

// ErrRegisterMismatch: the register disagrees with the ledger (a row
// missing, or one the ledger never recorded); an export is refused rather
// than written short.
var ErrRegisterMismatch = cloison.NewError(cloison.CodeConflict, "audit/postgres: the register disagrees with the ledger")

// Export writes a compliance export into opts.Dir (export.Write: the
// files, the signed manifest, the export.created event), reading the
// range, its tree and the register from one REPEATABLE READ snapshot and
// the ledger rows in keyset pages on the scan pool. Without a checkpoint
// signing key it refuses (ErrNoSigningKey): an export is always tied to a
// signed checkpoint, which it stores like TreeCheckpoint's.
//
// Errors: those of export.Write; ErrNoSigningKey; ErrRegisterMismatch
// (with every audit.ErrChainBroken disagreement joined) when the register
// disagrees with the ledger; ErrSchema when the
// ledger scan does not end at the snapshot's head; the translated
// database errors.
func (s *Store) Export(ctx context.Context, opts export.Options) (export.Manifest, error) {
	m, err := export.Write(ctx, exportSource{s}, opts)
	if errors.Is(err, export.ErrInconsistent) {
		err = fmt.Errorf("%w: %v", ErrSchema, err)
	}
	return m, err
}

// exportSource is the Store as export.Write reads it.
type exportSource struct{ s *Store }

func (e exportSource) Sync(ctx context.Context) error { return e.s.Sync(ctx) }

func (e exportSource) TreeNote(ctx context.Context, h audit.TreeHead) ([]byte, error) {
	return e.s.storeTreeNote(ctx, h)
}

// Scan reads keyset pages on the scan pool (scanPages): the rows up to
// the snapshot's end are fixed (append-only, committed in seq order), so
// no transaction is held while files are written.
func (e exportSource) Scan(ctx context.Context, from, to uint64, fn func(audit.Record) error) error {
	return translate(e.s.scanPages(ctx, from, to, fn))
}

func (e exportSource) Append(ctx context.Context, ev audit.Event) (audit.Record, error) {
	return e.s.Append(ctx, ev)
}

// Snapshot reads the range's end, the tree at that size and the register
// in one snapshot (REPEATABLE READ): the register holds exactly the
// records whose ledger events are in the exported range. The whole
// register is first held to the ledger (checkRegisterTx): any
// disagreement refuses the export (ErrRegisterMismatch).
func (e exportSource) Snapshot(ctx context.Context, from, to uint64) (export.Snapshot, error) {
	s := e.s
	if s.signer == nil {
		return export.Snapshot{}, ErrNoSigningKey
	}
	snap := export.Snapshot{Origin: s.cfg.Origin, Regime: s.cfg.Regime}
	err := s.scanReadOnly(ctx, func(tx pgx.Tx) error {
		var maxSeq int64
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM audit_events").Scan(&maxSeq); err != nil {
			return err
		}
		snap.From, snap.To = from, to
		if snap.From == 0 {
			snap.From = 1
		}
		if snap.To == 0 || snap.To > uint64(maxSeq) {
			snap.To = uint64(maxSeq)
		}
		if snap.To < snap.From {
			return audit.ErrEmptyLedger
		}
		if snap.From > 1 {
			var prev []byte
			if err := tx.QueryRow(ctx, "SELECT hash FROM audit_events WHERE seq = $1", int64(snap.From-1)).Scan(&prev); err != nil {
				return err
			}
			copy(snap.Prev[:], prev)
		}
		var head []byte
		if err := tx.QueryRow(ctx, "SELECT hash FROM audit_events WHERE seq = $1", int64(snap.To)).Scan(&head); err != nil {
			return err
		}
		copy(snap.Head[:], head)
		r := &treeReader{ctx: ctx, q: tx}
		root, err := tlog.TreeHash(int64(snap.To), r)
		if err != nil {
			return err
		}
		snap.Tree = audit.TreeHead{Origin: s.cfg.Origin, Size: snap.To, Root: root}
		if snap.From > 1 {
			levels, indexes := export.PrefixSubtrees(snap.From - 1)
			stored := make([]int64, len(levels))
			for i := range levels {
				stored[i] = tlog.StoredHashIndex(levels[i], indexes[i])
			}
			if snap.Prefix, err = r.ReadHashes(stored); err != nil {
				return err
			}
		}
		// A register that disagrees with the ledger (a row deleted
		// behind the triggers) is not exported as if it were whole.
		problems, err := checkRegisterTx(ctx, tx)
		if err != nil {
			return err
		}
		if len(problems) > 0 {
			return fmt.Errorf("%w: export refused: the register disagrees with the ledger: %w", ErrRegisterMismatch, errors.Join(problems...))
		}
		// The PDF's header names the register's own settings at the
		// range's end, held to their ledger event (settingsTx's check).
		var content, digest []byte
		var version, seq int64
		err = tx.QueryRow(ctx, `SELECT version, content, content_sha256, ledger_seq FROM register_settings
			WHERE ledger_seq <= $1 ORDER BY version DESC LIMIT 1`, int64(snap.To)).Scan(&version, &content, &digest, &seq)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		default:
			p, err := ledgerPayload(ctx, tx, uint64(seq))
			if err != nil {
				return err
			}
			e, ok := p.(*audit.RegisterSettingsSet)
			if !ok || e.Version != version || e.ContentDigest != audit.Digest(digest) || audit.Sum(content) != audit.Digest(digest) {
				return fmt.Errorf("%w: register settings version %d do not match ledger seq %d", audit.ErrChainBroken, version, seq)
			}
			snap.Settings, snap.SettingsSeq = content, uint64(seq)
			if snap.SettingsSeq < snap.From {
				// Outside the range: the event and its proof travel
				// with the settings, so that a verifier holds them to
				// the export's checkpoint all the same.
				if err := tx.QueryRow(ctx, "SELECT payload FROM audit_events WHERE seq = $1", seq).Scan(&snap.SettingsEvent); err != nil {
					return err
				}
				proof, err := tlog.ProveRecord(int64(snap.To), seq-1, &treeReader{ctx: ctx, q: tx})
				if err != nil {
					return err
				}
				snap.SettingsProof = proof
			}
		}
		rows, err := tx.Query(ctx, `SELECT id FROM incidents WHERE ledger_seq BETWEEN $1 AND $2 ORDER BY opened_at, id`, int64(snap.From), int64(snap.To))
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			f, err := incidentTx(ctx, tx, audit.Name(id))
			if err != nil {
				return err
			}
			f.Versions = slices.DeleteFunc(f.Versions, func(v audit.StoredVersion) bool { return v.LedgerSeq > snap.To })
			f.Notices = slices.DeleteFunc(f.Notices, func(n audit.StoredNotice) bool { return n.LedgerSeq > snap.To })
			snap.Register = append(snap.Register, f)
		}
		return nil
	})
	return snap, err
}
