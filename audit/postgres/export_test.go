package postgres

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

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
	// The PDF's header names the register's own settings, not the
	// Config's (the flags an exporter would have to repeat).
	if _, err := s.SetRegisterSettings(ctx, "admin:elise", audit.Organization{Name: "Réglages Québec inc.", NEQ: "1179999999"},
		audit.Contact{Name: "Élise Côté"}); err != nil {
		t.Fatal(err)
	}
	v := adminVersion("inc-exp", "2026-11-01")
	v.Circumstances = "=HYPERLINK(\"http://evil\",\"clic\") — accès non autorisé"
	if _, err := s.OpenIncident(ctx, "admin:elise", v); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateIncident(ctx, "admin:marc", "inc-exp", func(v *audit.IncidentVersion) error {
		v.PersonsConcerned = 12
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	text := "Avis à la Commission d'accès à l'information : incident inc-exp"
	if _, err := s.AddNotice(ctx, "admin:elise", audit.Notice{Incident: "inc-exp", Recipient: audit.RecipientCAI,
		RecipientName: "Commission d'accès à l'information", SentAt: time.Now().Add(-time.Hour), Method: "portail",
		ContentDigest: audit.Sum([]byte(text)), Text: text}); err != nil {
		t.Fatal(err)
	}
	// A trusted checkpoint of the tree before the export.
	trusted, err := s.SignTree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, manifestKey, _ := ed25519.GenerateKey(nil)
	dir := filepath.Join(t.TempDir(), "export")
	m, err := s.Export(ctx, export.Options{Dir: dir, From: 11, Key: manifestKey, Actor: "admin:elise"})
	if err != nil {
		t.Fatal(err)
	}
	if m.From != 11 || m.To != 54 || m.Checkpoint == nil || len(m.Files) != 7 {
		t.Fatalf("got range %d..%d, checkpoint %v, %d files", m.From, m.To, m.Checkpoint != nil, len(m.Files))
	}
	mkeys := audit.KeySet(manifestKey.Public().(ed25519.PublicKey))
	rep, err := export.VerifyDirTrusted(dir, mkeys, testKeys(), trusted)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ledger == nil || rep.Ledger.Events != 44 || rep.Tree.Size != 54 || rep.Incidents != 1 || !rep.SettingsChecked {
		t.Errorf("got %+v, tree %+v, %d incidents, settings checked %v", rep.Ledger, rep.Tree, rep.Incidents, rep.SettingsChecked)
	}
	jl, _ := os.ReadFile(filepath.Join(dir, export.RegisterJSONL))
	first, _, _ := bytes.Cut(jl, []byte("\n"))
	if !bytes.Contains(first, []byte("Réglages Québec inc.")) || !bytes.Contains(first, []byte("1179999999")) || bytes.Contains(jl, []byte("Société Exemple")) {
		t.Errorf("register line does not carry the register's settings: %s", first)
	}
	if !bytes.Contains(jl, []byte(text)) || bytes.Count(jl, []byte("\n")) != 5 {
		t.Errorf("register.jsonl lacks the notice text or has the wrong records:\n%s", jl)
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
			os.WriteFile(p, bytes.Replace(b, []byte("ledger 11 54"), []byte("ledger 11 53"), 1), 0o600)
		}},
	}
	// The operator holds the manifest key: an edit it re-signs must still
	// fail, each with its reason.
	resigned := []struct {
		name, reason string
		do           func(t *testing.T, dir string, m *export.Manifest)
	}{
		{"register.csv edited, manifest re-signed", "register.csv does not match register.jsonl", func(t *testing.T, dir string, m *export.Manifest) {
			edit(t, filepath.Join(dir, export.RegisterCSV), "accès non autorisé", "accès autorisé")
		}},
		{"notices.csv edited, manifest re-signed", "notices.csv does not match register.jsonl", func(t *testing.T, dir string, m *export.Manifest) {
			edit(t, filepath.Join(dir, export.NoticesCSV), "portail", "courriel")
		}},
		{"register.jsonl version edited, manifest re-signed", "content SHA-256", func(t *testing.T, dir string, m *export.Manifest) {
			edit(t, filepath.Join(dir, export.RegisterJSONL), `"persons_concerned":12`, `"persons_concerned":2`)
		}},
		{"register.jsonl notice method edited, manifest re-signed", "record SHA-256", func(t *testing.T, dir string, m *export.Manifest) {
			edit(t, filepath.Join(dir, export.RegisterJSONL), `"method":"portail"`, `"method":"courriel"`)
		}},
		{"register.jsonl retain_until edited, manifest re-signed", "retain_until", func(t *testing.T, dir string, m *export.Manifest) {
			edit(t, filepath.Join(dir, export.RegisterJSONL), `"retain_until":"2031-11-01"`, `"retain_until":"2027-11-01"`)
		}},
		{"register.jsonl recorded_by edited, manifest re-signed", "recorded at/by", func(t *testing.T, dir string, m *export.Manifest) {
			edit(t, filepath.Join(dir, export.RegisterJSONL), `"recorded_by":"admin:marc"`, `"recorded_by":"admin:elise"`)
		}},
		{"register.jsonl notice removed, manifest re-signed", "has no register record", func(t *testing.T, dir string, m *export.Manifest) {
			p := filepath.Join(dir, export.RegisterJSONL)
			b, _ := os.ReadFile(p)
			lines := bytes.SplitAfter(b, []byte("\n"))
			os.WriteFile(p, bytes.Join(lines[:4], nil), 0o600)
		}},
		{"register.jsonl settings edited, manifest re-signed", "register settings", func(t *testing.T, dir string, m *export.Manifest) {
			edit(t, filepath.Join(dir, export.RegisterJSONL), "Réglages Québec inc.", "Autre entreprise inc")
		}},
		{"register line removed (an old export), manifest re-signed", "register line must come first", func(t *testing.T, dir string, m *export.Manifest) {
			p := filepath.Join(dir, export.RegisterJSONL)
			b, _ := os.ReadFile(p)
			_, rest, _ := bytes.Cut(b, []byte("\n"))
			os.WriteFile(p, rest, 0o600)
		}},
		// What an inspector reads: the register as the PDF shows it with
		// the risk set to "non" and the Commission's notice backdated,
		// rendered by the same code with the same header.
		{"register.pdf edited (risk non, notice backdated), manifest re-signed", "register.pdf is not the rendering", func(t *testing.T, dir string, m *export.Manifest) {
			f, err := s.Incident(ctx, "inc-exp")
			if err != nil {
				t.Fatal(err)
			}
			no := false
			f.Versions[len(f.Versions)-1].Assessment.RiskOfSeriousInjury = &no
			f.Notices[0].SentAt = f.Notices[0].SentAt.AddDate(0, 0, -20)
			set, err := s.RegisterSettings(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := export.WriteRegisterPDF(&buf, []audit.IncidentFile{f}, export.ReportMeta{Organization: set.Organization, Generated: m.Created,
				Origin: m.Origin, From: m.From, To: m.To, Head: m.Head}); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, export.RegisterPDF), buf.Bytes(), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"checkpoint none, manifest re-signed", "checkpoint none", func(t *testing.T, dir string, m *export.Manifest) {
			m.Checkpoint = nil
		}},
		{"tree prefix edited, manifest re-signed", "another Merkle root", func(t *testing.T, dir string, m *export.Manifest) {
			p := filepath.Join(dir, export.TreePrefix)
			b, _ := os.ReadFile(p)
			if b[len(b)-2] == '0' {
				b[len(b)-2] = '1'
			} else {
				b[len(b)-2] = '0'
			}
			os.WriteFile(p, b, 0o600)
		}},
	}
	for _, tt := range resigned {
		t.Run(tt.name, func(t *testing.T) {
			cp := filepath.Join(t.TempDir(), "copy")
			if err := os.CopyFS(cp, os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			b, _ := os.ReadFile(filepath.Join(cp, export.ManifestName))
			m, err := export.ParseManifest(b)
			if err != nil {
				t.Fatal(err)
			}
			tt.do(t, cp, &m)
			for i, f := range m.Files {
				m.Files[i].Size, m.Files[i].SHA256, _ = export.HashFile(filepath.Join(cp, f.Name))
			}
			if err := m.Sign(manifestKey); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(cp, export.ManifestName), m.Marshal(), 0o600)
			_, err = export.VerifyDir(cp, mkeys, testKeys())
			if !errors.Is(err, export.ErrVerify) || !strings.Contains(err.Error(), tt.reason) {
				t.Errorf("got %v, want ErrVerify naming %q", err, tt.reason)
			}
		})
	}
	// Trusted state: a checkpoint of a tree the export does not extend (a
	// fork) and one larger than the export (a rollback) are refused.
	t.Run("trusted checkpoint of a fork", func(t *testing.T) {
		signer, _ := audit.TreeSigner("test-ledger", testKey)
		h, err := audit.OpenTreeHead(trusted, mustVKey(t))
		if err != nil {
			t.Fatal(err)
		}
		h.Root[0] ^= 1
		forked, _ := audit.SignTreeHead(signer, h)
		if _, err := export.VerifyDirTrusted(dir, mkeys, testKeys(), forked); !errors.Is(err, audit.ErrFork) {
			t.Errorf("got %v, want ErrFork", err)
		}
		h.Size = 60
		larger, _ := audit.SignTreeHead(signer, h)
		if _, err := export.VerifyDirTrusted(dir, mkeys, testKeys(), larger); !errors.Is(err, audit.ErrSmallerTree) {
			t.Errorf("got %v, want ErrSmallerTree", err)
		}
	})
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
	// An export starting after the settings were set carries their event
	// and its inclusion proof: the PDF's header is still held to the
	// log, and a forged proof is refused.
	t.Run("settings set before the range", func(t *testing.T) {
		late := filepath.Join(t.TempDir(), "late")
		if _, err := s.Export(ctx, export.Options{Dir: late, From: 52, Key: manifestKey, Actor: "admin:elise"}); err != nil {
			t.Fatal(err)
		}
		rep, err := export.VerifyDir(late, mkeys, testKeys())
		if err != nil || !rep.SettingsChecked {
			t.Fatalf("got %v, settings checked %v; want them checked by their proof", err, rep.SettingsChecked)
		}
		// tamper edits the register line of a copy, re-signs its
		// manifest as the exporter can, and verifies it.
		tamper := func(edit func(line []byte) []byte) error {
			cp := filepath.Join(t.TempDir(), "copy")
			if err := os.CopyFS(cp, os.DirFS(late)); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(cp, export.RegisterJSONL)
			b, _ := os.ReadFile(p)
			first, rest, _ := bytes.Cut(b, []byte("\n"))
			os.WriteFile(p, append(append(edit(bytes.Clone(first)), '\n'), rest...), 0o600)
			b, _ = os.ReadFile(filepath.Join(cp, export.ManifestName))
			m, err := export.ParseManifest(b)
			if err != nil {
				t.Fatal(err)
			}
			for i, f := range m.Files {
				m.Files[i].Size, m.Files[i].SHA256, _ = export.HashFile(filepath.Join(cp, f.Name))
			}
			if err := m.Sign(manifestKey); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(cp, export.ManifestName), m.Marshal(), 0o600)
			_, err = export.VerifyDir(cp, mkeys, testKeys())
			return err
		}
		if err := tamper(func(l []byte) []byte { return l }); err != nil {
			t.Fatalf("re-signed unchanged copy: %v", err)
		}
		err = tamper(func(l []byte) []byte {
			const key = `"settings_proof":["`
			i := bytes.Index(l, []byte(key))
			if i < 0 {
				t.Fatalf("register line without a settings proof: %s", l)
			}
			i += len(key)
			l[i] = map[bool]byte{true: 'B', false: 'A'}[l[i] == 'A']
			return l
		})
		if !errors.Is(err, export.ErrVerify) || !strings.Contains(err.Error(), "not in the checkpoint's tree") {
			t.Errorf("forged settings proof: got %v", err)
		}
		err = tamper(func(l []byte) []byte {
			return regexp.MustCompile(`"settings_event":\{.*?\},"settings_proof":\[[^\]]*\],`).ReplaceAll(l, nil)
		})
		if !errors.Is(err, export.ErrVerify) || !strings.Contains(err.Error(), "without their event's inclusion proof") {
			t.Errorf("settings proof stripped: got %v", err)
		}
	})
	// A manifest key nobody trusts.
	_, other, _ := ed25519.GenerateKey(nil)
	if _, err := export.VerifyDir(dir, audit.KeySet(other.Public().(ed25519.PublicKey)), testKeys()); !errors.Is(err, export.ErrVerify) {
		t.Errorf("untrusted key: got %v, want ErrVerify", err)
	}
}

func edit(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(b, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mustVKey(t *testing.T) string {
	t.Helper()
	vkey, err := audit.TreeVerifierKey("test-ledger", testKey.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}
