package export

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Source is what Write reads from a ledger store (audit/postgres's Store
// gives one). Its methods are called in the order listed, once each except
// Scan.
type Source interface {
	// Sync returns once every event acknowledged before the call is
	// sequenced, so that the export holds it.
	Sync(ctx context.Context) error
	// Snapshot reads, in one snapshot of the ledger, the range from..to
	// (from 0: 1; to 0 or past the head: the head), the hashes around
	// it, the tree at its end, the prefix hashes and the register.
	//
	// Errors: audit.ErrEmptyLedger when the range holds no entry; the
	// store's own (no signing key, database errors).
	Snapshot(ctx context.Context, from, to uint64) (Snapshot, error)
	// TreeNote signs the tree head h and keeps the note, so that the
	// export's checkpoint is one the ledger vouches for.
	TreeNote(ctx context.Context, h audit.TreeHead) ([]byte, error)
	// Scan hands fn the entries from..to in seq order, without holding a
	// transaction (the rows up to the snapshot's end are fixed). It may
	// end early if rows are missing: Write checks the last entry.
	Scan(ctx context.Context, from, to uint64, fn func(audit.Record) error) error
	// Append records an event in the ledger (export.created).
	Append(ctx context.Context, e audit.Event) (audit.Record, error)
}

// Snapshot is what a Source reads in one snapshot for an export.
type Snapshot struct {
	Origin audit.Name // the log's origin
	Regime Regime     // the store's regime, when Options gives none
	// Settings is the exact canonical content of the latest register
	// settings version whose register.settings_set event is at or before
	// To (nil when none was set), SettingsSeq that event: the PDF's header
	// (organisation, NEQ) comes from them, never from flags.
	Settings    []byte
	SettingsSeq uint64
	// SettingsEvent and SettingsProof: when SettingsSeq precedes From, the
	// event's payload and its record proof in the tree of size To.
	SettingsEvent []byte
	SettingsProof []tlog.Hash
	From, To      uint64         // the range, resolved
	Prev, Head    audit.Digest   // hash of entry From-1 (zero for 1) and of entry To
	Tree          audit.TreeHead // the Merkle tree of size To
	// Prefix holds the stored hashes of PrefixSubtrees(From-1), in its
	// order (none when From is 1).
	Prefix []tlog.Hash
	// Register holds the register entries opened in the range, with their
	// versions and notices recorded up to To.
	Register []audit.IncidentFile
}

// ErrInconsistent: the ledger scan did not end at the snapshot's last
// entry (rows gone, or a store that broke the snapshot's promise).
var ErrInconsistent = cloison.NewError(cloison.CodeInternal, "export: the ledger scan does not end at the snapshot's head")

// Write writes a compliance export of src into opts.Dir: ledger.jsonl (the
// exact stored canonical bytes), ledger.csv, register.jsonl (the
// register's records as canonical JSON, each with its ledger seq),
// register.csv, notices.csv, register.pdf, tree-prefix.txt when the range
// starts after seq 1, and a signed manifest.txt (file SHA-256s, ledger
// range, prev and head hashes, the signed tree note of size To). The
// range's end, the Merkle tree at that size and the register come from
// one snapshot (Source.Snapshot); the register holds the entries opened in
// the range, with their records up to its end. The export is then itself
// recorded in the ledger (export.created, with the manifest's SHA-256).
// VerifyDir checks it offline.
//
// Errors: cloison.CodeInvalid without opts.Key or for a directory that is
// not empty; audit.ErrEmptyLedger; ErrInconsistent; the errors of src
// (Source.Snapshot refuses without a checkpoint signing key: an export is
// always tied to a signed checkpoint) and of the file system.
func Write(ctx context.Context, src Source, opts Options) (Manifest, error) {
	if opts.Key == nil {
		return Manifest{}, cloison.Errorf(cloison.CodeInvalid, "audit/postgres: export needs a manifest signing key")
	}
	if opts.Actor == "" {
		opts.Actor = "cloisonctl"
	}
	if err := src.Sync(ctx); err != nil { // every acknowledged event is in the export
		return Manifest{}, err
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return Manifest{}, err
	}
	if ents, err := os.ReadDir(opts.Dir); err != nil || len(ents) > 0 {
		return Manifest{}, cloison.Errorf(cloison.CodeInvalid, "audit/postgres: export directory %s is not empty", opts.Dir)
	}
	m := Manifest{Created: time.Now().UTC()}
	snap, err := src.Snapshot(ctx, opts.From, opts.To)
	if err != nil {
		return m, err
	}
	m.Origin, m.From, m.To, m.Prev, m.Head = snap.Origin, snap.From, snap.To, snap.Prev, snap.Head
	if m.Checkpoint, err = src.TreeNote(ctx, snap.Tree); err != nil {
		return m, err
	}
	if err := writeLedger(ctx, src, opts, m); err != nil {
		return m, err
	}
	files := snap.Register
	head := RegisterHead{Regime: cmp.Or(opts.Regime, snap.Regime), Settings: snap.Settings, SettingsSeq: snap.SettingsSeq,
		SettingsEvent: snap.SettingsEvent, SettingsProof: snap.SettingsProof}
	writers := map[string]func(*os.File) error{
		RegisterJSONL: func(f *os.File) error { return WriteRegisterJSONL(f, head, files) },
		RegisterCSV:   func(f *os.File) error { return WriteRegisterCSV(f, files) },
		NoticesCSV:    func(f *os.File) error { return WriteNoticesCSV(f, files) },
		// Rendered from the same records register.jsonl holds and the
		// manifest's fields only: VerifyDir renders it again.
		RegisterPDF: func(f *os.File) error { return RenderRegisterPDF(f, m, head, files) },
	}
	if m.From > 1 {
		levels, indexes := PrefixSubtrees(m.From - 1)
		writers[TreePrefix] = func(f *os.File) error { return WriteTreePrefix(f, levels, indexes, snap.Prefix) }
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
		size, d, err := HashFile(filepath.Join(opts.Dir, e.Name()))
		if err != nil {
			return m, err
		}
		m.Files = append(m.Files, File{Name: e.Name(), Size: size, SHA256: d})
	}
	if err := m.Sign(opts.Key); err != nil {
		return m, err
	}
	text := m.Marshal()
	if err := writeFile(filepath.Join(opts.Dir, ManifestName), func(f *os.File) error { _, err := f.Write(text); return err }); err != nil {
		return m, err
	}
	_, err = src.Append(ctx, audit.Event{OccurredAt: m.Created, Actor: opts.Actor, Payload: audit.ExportCreated{
		Export: audit.Name("export-" + m.Created.Format("20060102T150405Z")), FromSeq: int64(m.From), ToSeq: int64(m.To),
		Files: int64(len(m.Files)), ManifestDigest: audit.Sum(text),
	}})
	return m, err
}

// writeLedger writes ledger.jsonl and ledger.csv of m's range from
// src.Scan, and holds the last entry to m.To and m.Head.
func writeLedger(ctx context.Context, src Source, opts Options, m Manifest) error {
	jf, err := os.Create(filepath.Join(opts.Dir, LedgerJSONL))
	if err != nil {
		return err
	}
	defer jf.Close()
	cf, err := os.Create(filepath.Join(opts.Dir, LedgerCSV))
	if err != nil {
		return err
	}
	defer cf.Close()
	jw, cw := bufio.NewWriterSize(jf, 1<<20), bufio.NewWriterSize(cf, 1<<20)
	c, err := NewCSV(cw)
	if err != nil {
		return err
	}
	if err := c.Row(LedgerCSVHeader...); err != nil {
		return err
	}
	var line []byte
	var last audit.Record
	err = src.Scan(ctx, m.From, m.To, func(r audit.Record) error {
		line = AppendLedgerLine(line[:0], r)
		if _, err := jw.Write(line); err != nil {
			return err
		}
		last = r
		if opts.Progress != nil && r.Seq%10000 == 0 {
			opts.Progress(r.Seq)
		}
		return c.Row(LedgerCSVRow(r)...)
	})
	if err != nil {
		return err
	}
	if last.Seq != m.To || last.Hash != m.Head {
		return fmt.Errorf("%w: the ledger scan ended at seq %d, the snapshot at %d", ErrInconsistent, last.Seq, m.To)
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
