package postgres

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/internal/pgtest"
)

// TestExportRegime: the register PDF cites the Règlement under the act the
// store is configured with (Config.Regime, cloisond --register-regime):
// r. 3.1 for a public body, P-39.1, r. 3.1 by default; an export's
// own option wins. Needs pdftotext to read the PDF back.
func TestExportRegime(t *testing.T) {
	if _, err := exec.LookPath("pdftotext"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("pdftotext not installed: make test-tools installs poppler-utils; CI must not skip this")
		}
		t.Skip("pdftotext not installed")
	}
	db := pgtest.New(t)
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(nil)
	for _, c := range []struct {
		store, opt export.Regime
		want, not  string
	}{
		{"", "", "P-39.1", "A-2.1"},
		{export.RegimePublic, "", "A-2.1", "P-39.1"},
		{export.RegimePublic, export.RegimePrivate, "P-39.1", "A-2.1"},
	} {
		s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointDir: t.TempDir(), Regime: c.store,
			Organization: audit.Organization{Name: "Organisme public", NEQ: "1170000000"}})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if _, err := s.Append(ctx, event("regime", 0)); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "export")
		if _, err := s.Export(ctx, export.Options{Dir: dir, Key: key, Actor: "admin:elise", Regime: c.opt}); err != nil {
			t.Fatal(err)
		}
		pdf, err := os.ReadFile(filepath.Join(dir, "register.pdf"))
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("pdftotext", "-", "-")
		cmd.Stdin = bytes.NewReader(pdf)
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if text := string(out); !strings.Contains(text, c.want) || strings.Contains(text, c.not) {
			t.Errorf("store %q, option %q: want %s cited, not %s:\n%s", c.store, c.opt, c.want, c.not, text)
		}
	}
}
