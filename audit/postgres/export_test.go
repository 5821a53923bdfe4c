package postgres

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/internal/pgtest"
)

func TestExportVerifiesOffline(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointEvery: 20,
		CheckpointDir: t.TempDir(), Organization: audit.Organization{Name: "Société Exemple inc.", NEQ: "1170000000"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 50; i++ {
		if _, err := s.Append(ctx, event("exp", i)); err != nil {
			t.Fatal(err)
		}
	}
	v := adminVersion("inc-exp", "2026-11-01")
	v.Circumstances = "=HYPERLINK(\"http://evil\",\"clic\") — accès non autorisé"
	if _, err := s.OpenIncident(ctx, "admin:elise", v); err != nil {
		t.Fatal(err)
	}
	_, manifestKey, _ := ed25519.GenerateKey(nil)
	dir := filepath.Join(t.TempDir(), "export")
	m, err := s.Export(ctx, ExportOptions{Dir: dir, From: 11, Key: manifestKey, Actor: "admin:elise"})
	if err != nil {
		t.Fatal(err)
	}
	if m.From != 11 || m.To != 51 || m.Checkpoint == nil || len(m.Files) != 5 {
		t.Fatalf("got range %d..%d, checkpoint %v, %d files", m.From, m.To, m.Checkpoint != nil, len(m.Files))
	}
	mkeys := audit.KeySet(manifestKey.Public().(ed25519.PublicKey))
	rep, err := export.VerifyDir(dir, mkeys, testKeys())
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ledger == nil || rep.Ledger.Events != 41 || rep.Ledger.Checkpoints != 1 {
		t.Errorf("got %+v", rep.Ledger)
	}
	// The export is itself in the ledger.
	h, _ := s.Head(ctx)
	var last audit.Record
	_ = s.Scan(ctx, h.Seq, h.Seq, func(r audit.Record) error { last = r; return nil })
	if last.Kind != audit.KindExportCreated {
		t.Errorf("last event %s, want export.created", last.Kind)
	}
	reg, _ := os.ReadFile(filepath.Join(dir, export.RegisterCSV))
	if !bytes.Contains(reg, []byte(`'=HYPERLINK`)) || !bytes.Contains(reg, []byte("accès non autorisé")) {
		t.Error("register.csv: formula not neutralised or accents lost")
	}

	tamper := []struct {
		name string
		do   func(t *testing.T, dir string)
	}{
		{"ledger line edited", func(t *testing.T, dir string) {
			p := filepath.Join(dir, export.LedgerJSONL)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte(`"completion_tokens":17`), []byte(`"completion_tokens":18`), 1), 0o600)
		}},
		{"extra file", func(t *testing.T, dir string) { os.WriteFile(filepath.Join(dir, "note.txt"), []byte("x"), 0o600) }},
		{"file removed", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, export.RegisterPDF)) }},
		{"manifest edited", func(t *testing.T, dir string) {
			p := filepath.Join(dir, export.ManifestName)
			b, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(b, []byte("ledger 11 51"), []byte("ledger 11 50"), 1), 0o600)
		}},
	}
	for _, tt := range tamper {
		t.Run(tt.name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "copy")
			if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			tt.do(t, cp)
			if _, err := export.VerifyDir(cp, mkeys, testKeys()); !errors.Is(err, export.ErrVerify) {
				t.Errorf("got %v, want ErrVerify", err)
			}
		})
	}
	// A manifest key nobody trusts.
	_, other, _ := ed25519.GenerateKey(nil)
	if _, err := export.VerifyDir(dir, audit.KeySet(other.Public().(ed25519.PublicKey)), testKeys()); !errors.Is(err, export.ErrVerify) {
		t.Errorf("untrusted key: got %v, want ErrVerify", err)
	}
}
