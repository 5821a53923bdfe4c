package postgres

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
)

// ExportOptions says what to export and how to sign it.
type ExportOptions struct {
	Dir      string             // created; must not exist or be empty
	From, To uint64             // ledger range; 0 means 1 and the head
	Key      ed25519.PrivateKey // signs the manifest
	Actor    audit.Name         // recorded in the export.created event
	// Progress, if set, is called every 10,000 ledger events exported.
	Progress func(seq uint64)
}

// Export writes a compliance export into opts.Dir: ledger.jsonl (the exact
// stored canonical bytes), ledger.csv, register.csv, notices.csv,
// register.pdf and a signed manifest.txt (file SHA-256s, ledger range,
// prev and head hashes, a checkpoint of the range). The export is then
// itself recorded in the ledger (export.created, with the manifest's
// SHA-256). export.VerifyDir checks it offline.
func (s *Store) Export(ctx context.Context, opts ExportOptions) (export.Manifest, error) {
	if opts.Key == nil {
		return export.Manifest{}, cloison.Errorf(cloison.CodeInvalid, "audit/postgres: export needs a manifest signing key")
	}
	if opts.Actor == "" {
		opts.Actor = "cloisonctl"
	}
	if err := os.MkdirAll(opts.Dir, 0o750); err != nil {
		return export.Manifest{}, err
	}
	if ents, err := os.ReadDir(opts.Dir); err != nil || len(ents) > 0 {
		return export.Manifest{}, cloison.Errorf(cloison.CodeInvalid, "audit/postgres: export directory %s is not empty", opts.Dir)
	}
	m := export.Manifest{Created: time.Now().UTC(), Origin: s.cfg.Origin}
	// The ledger part reads keyset pages on the scan pool (Scan), up to
	// the head read here: no transaction is held while files are written.
	err := translate(func() error {
		var maxSeq int64
		if err := s.scan.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM audit_events").Scan(&maxSeq); err != nil {
			return err
		}
		from, to := opts.From, opts.To
		if from == 0 {
			from = 1
		}
		if to == 0 || to > uint64(maxSeq) {
			to = uint64(maxSeq)
		}
		if to < from {
			return nil // no ledger range (empty ledger)
		}
		if from > 1 {
			var prev []byte
			if err := s.scan.QueryRow(ctx, "SELECT hash FROM audit_events WHERE seq = $1", int64(from-1)).Scan(&prev); err != nil {
				return err
			}
			copy(m.Prev[:], prev)
		}
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
		err = s.scanPages(ctx, from, to, func(r audit.Record) error {
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
		m.From, m.To, m.Head = from, last.Seq, last.Hash
		return nil
	}())
	if err != nil {
		return m, err
	}
	if m.To > 0 {
		cp, ok, err := s.LatestCheckpointIn(ctx, m.From, m.To)
		if err != nil {
			return m, err
		}
		if !ok && s.cfg.SigningKey != nil {
			if cp, err = s.Checkpoint(ctx, audit.Head{Seq: m.To, Hash: m.Head}); err != nil {
				return m, err
			}
			ok = true
		}
		if ok {
			m.Checkpoint = &cp
		}
	}
	files, err := s.Incidents(ctx)
	if err != nil {
		return m, err
	}
	writers := map[string]func(*os.File) error{
		export.RegisterCSV: func(f *os.File) error { return export.WriteRegisterCSV(f, files) },
		export.NoticesCSV:  func(f *os.File) error { return export.WriteNoticesCSV(f, files) },
		export.RegisterPDF: func(f *os.File) error {
			return export.WriteRegisterPDF(f, files, export.ReportMeta{Organization: s.cfg.Organization, Generated: m.Created,
				Origin: s.cfg.Origin, From: m.From, To: m.To, Head: m.Head})
		},
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
