package postgres

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
)

// Export writes a compliance export into opts.Dir: ledger.jsonl (the exact
// stored canonical bytes), ledger.csv, register.jsonl (the register's
// records as canonical JSON, each with its ledger seq), register.csv,
// notices.csv, register.pdf, tree-prefix.txt when the range starts after
// seq 1, and a signed manifest.txt (file SHA-256s, ledger range, prev and
// head hashes, the signed tree note of size To). The range's end, the
// Merkle tree at that size and the register come from one snapshot; the
// register holds the entries opened in the range, with their records up to
// its end. Without a checkpoint signing key it refuses (ErrNoSigningKey):
// an export is always tied to a signed checkpoint. The export is then
// itself recorded in the ledger (export.created, with the manifest's
// SHA-256). export.VerifyDir checks it offline.
func (s *Store) Export(ctx context.Context, opts ExportOptions) (export.Manifest, error) {
	if opts.Key == nil {
		return export.Manifest{}, cloison.Errorf(cloison.CodeInvalid, "audit/postgres: export needs a manifest signing key")
	}
	if opts.Actor == "" {
		opts.Actor = "cloisonctl"
	}
	if err := s.Sync(ctx); err != nil { // every acknowledged event is in the export
		return export.Manifest{}, err
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return export.Manifest{}, err
	}
	if ents, err := os.ReadDir(opts.Dir); err != nil || len(ents) > 0 {
		return export.Manifest{}, cloison.Errorf(cloison.CodeInvalid, "audit/postgres: export directory %s is not empty", opts.Dir)
	}
	if s.signer == nil {
		return export.Manifest{}, ErrNoSigningKey
	}
	m := export.Manifest{Created: time.Now().UTC(), Origin: s.cfg.Origin}
	// One snapshot (REPEATABLE READ) fixes the range's end, the tree at
	// that size and the register: the register holds exactly the records
	// whose ledger events are in the exported range.
	var files []audit.IncidentFile
	var tree audit.TreeHead
	var prefix []tlog.Hash
	var levels []int
	var indexes []int64
	err := s.scanReadOnly(ctx, func(tx pgx.Tx) error {
		var maxSeq int64
		if err := tx.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM audit_events").Scan(&maxSeq); err != nil {
			return err
		}
		m.From, m.To = opts.From, opts.To
		if m.From == 0 {
			m.From = 1
		}
		if m.To == 0 || m.To > uint64(maxSeq) {
			m.To = uint64(maxSeq)
		}
		if m.To < m.From {
			return audit.ErrEmptyLedger
		}
		if m.From > 1 {
			var prev []byte
			if err := tx.QueryRow(ctx, "SELECT hash FROM audit_events WHERE seq = $1", int64(m.From-1)).Scan(&prev); err != nil {
				return err
			}
			copy(m.Prev[:], prev)
		}
		var head []byte
		if err := tx.QueryRow(ctx, "SELECT hash FROM audit_events WHERE seq = $1", int64(m.To)).Scan(&head); err != nil {
			return err
		}
		copy(m.Head[:], head)
		r := &treeReader{ctx: ctx, q: tx}
		root, err := tlog.TreeHash(int64(m.To), r)
		if err != nil {
			return err
		}
		tree = audit.TreeHead{Origin: s.cfg.Origin, Size: m.To, Root: root}
		if m.From > 1 {
			levels, indexes = export.PrefixSubtrees(m.From - 1)
			stored := make([]int64, len(levels))
			for i := range levels {
				stored[i] = tlog.StoredHashIndex(levels[i], indexes[i])
			}
			if prefix, err = r.ReadHashes(stored); err != nil {
				return err
			}
		}
		rows, err := tx.Query(ctx, `SELECT id FROM incidents WHERE ledger_seq BETWEEN $1 AND $2 ORDER BY opened_at, id`, int64(m.From), int64(m.To))
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
			f.Versions = slices.DeleteFunc(f.Versions, func(v audit.StoredVersion) bool { return v.LedgerSeq > m.To })
			f.Notices = slices.DeleteFunc(f.Notices, func(n audit.StoredNotice) bool { return n.LedgerSeq > m.To })
			files = append(files, f)
		}
		return nil
	})
	if err != nil {
		return m, err
	}
	if m.Checkpoint, err = s.storeTreeNote(ctx, tree); err != nil {
		return m, err
	}
	// The ledger part reads keyset pages on the scan pool (Scan): the rows
	// up to m.To are fixed (append-only, committed in seq order), so no
	// transaction is held while files are written.
	err = translate(func() error {
		jf, err := os.Create(filepath.Join(opts.Dir, export.LedgerJSONL))
		if err != nil {
			return err
		}
		defer jf.Close()
		cf, err := os.Create(filepath.Join(opts.Dir, export.LedgerCSV))
		if err != nil {
			return err
		}
		defer cf.Close()
		jw, cw := bufio.NewWriterSize(jf, 1<<20), bufio.NewWriterSize(cf, 1<<20)
		c, err := export.NewCSV(cw)
		if err != nil {
			return err
		}
		if err := c.Row(export.LedgerCSVHeader...); err != nil {
			return err
		}
		var line []byte
		var last audit.Record
		err = s.scanPages(ctx, m.From, m.To, func(r audit.Record) error {
			line = export.AppendLedgerLine(line[:0], r)
			if _, err := jw.Write(line); err != nil {
				return err
			}
			last = r
			if opts.Progress != nil && r.Seq%10000 == 0 {
				opts.Progress(r.Seq)
			}
			return c.Row(export.LedgerCSVRow(r)...)
		})
		if err != nil {
			return err
		}
		if last.Seq != m.To || last.Hash != m.Head {
			return fmt.Errorf("%w: the ledger scan ended at seq %d, the snapshot at %d", ErrSchema, last.Seq, m.To)
		}
		if err := c.Flush(); err != nil {
			return err
		}
		for _, w := range []*bufio.Writer{jw, cw} {
			if err := w.Flush(); err != nil {
				return err
			}
		}
		for _, f := range []*os.File{jf, cf} {
			if err := f.Sync(); err != nil {
				return err
			}
		}
		return nil
	}())
	if err != nil {
		return m, err
	}
	writers := map[string]func(*os.File) error{
		export.RegisterJSONL: func(f *os.File) error { return export.WriteRegisterJSONL(f, files) },
		export.RegisterCSV:   func(f *os.File) error { return export.WriteRegisterCSV(f, files) },
		export.NoticesCSV:    func(f *os.File) error { return export.WriteNoticesCSV(f, files) },
		export.RegisterPDF: func(f *os.File) error {
			return export.WriteRegisterPDF(f, files, export.ReportMeta{Organization: s.cfg.Organization, Generated: m.Created,
				Origin: s.cfg.Origin, From: m.From, To: m.To, Head: m.Head, Regime: cmp.Or(opts.Regime, s.cfg.Regime)})
		},
	}
	if m.From > 1 {
		writers[export.TreePrefix] = func(f *os.File) error { return export.WriteTreePrefix(f, levels, indexes, prefix) }
	}
	for name, write := range writers {
		if err := writeFile(filepath.Join(opts.Dir, name), write); err != nil {
			return m, fmt.Errorf("audit/postgres: export %s: %w", name, err)
		}
	}
	ents, err := os.ReadDir(opts.Dir)
	if err != nil {
		return m, err
	}
	for _, e := range ents {
		size, d, err := export.HashFile(filepath.Join(opts.Dir, e.Name()))
		if err != nil {
			return m, err
		}
		m.Files = append(m.Files, export.File{Name: e.Name(), Size: size, SHA256: d})
	}
	if err := m.Sign(opts.Key); err != nil {
		return m, err
	}
	text := m.Marshal()
	if err := writeFile(filepath.Join(opts.Dir, export.ManifestName), func(f *os.File) error { _, err := f.Write(text); return err }); err != nil {
		return m, err
	}
	_, err = s.Append(ctx, audit.Event{OccurredAt: m.Created, Actor: opts.Actor, Payload: audit.ExportCreated{
		Export: audit.Name("export-" + m.Created.Format("20060102T150405Z")), FromSeq: int64(m.From), ToSeq: int64(m.To),
		Files: int64(len(m.Files)), ManifestDigest: audit.Sum(text),
	}})
	return m, err
}

func writeFile(path string, write func(*os.File) error) (err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o640)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}()
	if err := write(f); err != nil {
		return err
	}
	return f.Sync()
}
