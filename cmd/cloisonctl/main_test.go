package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cloison/cloison/internal/pgtest"
)

var pkgDB *pgtest.DB

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &pkgDB)) }

func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := run(t, args...)
	if err != nil {
		t.Fatalf("cloisonctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func TestCLIEndToEnd(t *testing.T) {
	dir := t.TempDir()
	cpDir := filepath.Join(dir, "checkpoints")
	key, mkey := filepath.Join(dir, "cp.key"), filepath.Join(dir, "manifest.key")
	db := []string{"--database-url", pkgDB.AdminURL, "--origin", "cli-test", "--checkpoint-key", key, "--checkpoint-dir", cpDir,
		"--org-name", "Société Exemple inc.", "--org-neq", "1170000000"}
	asRuntime := append(append([]string{}, db...), "--role", pkgDB.Roles.Runtime)

	if out := mustRun(t, append([]string{"migrate", "--owner-role", pkgDB.Roles.Owner, "--runtime-role", pkgDB.Roles.Runtime, "--deployment", pkgDB.Roles.Deployment}, db...)...); !strings.Contains(out, "up to date") {
		t.Errorf("migrate: %s", out)
	}
	mustRun(t, "audit", "keygen", "--out", key)
	mustRun(t, "audit", "keygen", "--out", mkey)

	out := mustRun(t, append([]string{"incident", "open", "--actor", "admin:elise", "--circumstances", "Courriel mal adressé / misdirected e-mail",
		"--personal-info", "adresses courriel", "--awareness", "2026-11-20", "--occurred", "2026-11-18..2026-11-19~"}, asRuntime...)...)
	id := regexp.MustCompile(`inc-\d{8}-[0-9a-f]{8}`).FindString(out)
	if id == "" {
		t.Fatalf("open: %s", out)
	}
	mustRun(t, append([]string{"incident", "update", id, "--actor", "admin:elise", "--assessment-complete", "--risk", "no",
		"--sensitivity", "faible", "--malicious-uses", "hameçonnage", "--consequences", "pourriels", "--likelihood", "faible",
		"--measure-taken", "2026-11-21: destinataire a supprimé le courriel"}, asRuntime...)...)
	mustRun(t, append([]string{"incident", "notice", id, "--actor", "admin:elise", "--to", "tenant", "--tenant", "t1", "--method", "e-mail"}, asRuntime...)...)
	if out := mustRun(t, append([]string{"incident", "list"}, asRuntime...)...); !strings.Contains(out, id) || !strings.Contains(out, "completed") || !strings.Contains(out, "2031-11-20") {
		t.Errorf("list: %s", out)
	}
	if out := mustRun(t, append([]string{"incident", "show", id, "--all"}, asRuntime...)...); !strings.Contains(out, "hameçonnage") || !strings.Contains(out, `"approximate": true`) {
		t.Errorf("show: %s", out)
	}
	if out := mustRun(t, append([]string{"incident", "draft", id, "cai"}, asRuntime...)...); !strings.Contains(out, "Société Exemple inc. (NEQ 1170000000)") ||
		!strings.Contains(out, "hameçonnage") && !strings.Contains(out, "adresses courriel") || strings.Index(out, "FRANÇAIS") > strings.Index(out, "ENGLISH") {
		t.Errorf("draft cai: %s", out)
	}
	for _, bad := range [][]string{{"draft", id, "public"}, {"draft", id, "cai", "--tenant", "t1"}, {"draft", id, "client"}, {"draft", id, "client", "--tenant", "t1"}} {
		if out, err := run(t, append(append([]string{"incident"}, bad...), asRuntime...)...); err == nil {
			t.Errorf("incident %v: got %s, want an error", bad, out)
		}
	}
	if out := mustRun(t, append([]string{"audit", "verify", "--public-key", key + ".pub"}, asRuntime...)...); !strings.Contains(out, "3 events verified") || !strings.Contains(out, "register matches") {
		t.Errorf("verify: %s", out)
	}
	exp := filepath.Join(dir, "export")
	if out, err := run(t, append([]string{"audit", "export", "--dir", exp, "--manifest-key", mkey, "--register-regime", "federal"}, asRuntime...)...); err == nil {
		t.Errorf("export --register-regime federal: got %s, want an error", out)
	}
	mustRun(t, append([]string{"audit", "export", "--dir", exp, "--manifest-key", mkey, "--actor", "admin:elise", "--register-regime", "public"}, asRuntime...)...)
	if _, err := exec.LookPath("pdftotext"); err == nil {
		if out, err := exec.Command("pdftotext", filepath.Join(exp, "register.pdf"), "-").Output(); err != nil || !strings.Contains(string(out), "A-2.1") {
			t.Errorf("register.pdf under --register-regime public: %v %s", err, out)
		}
	}
	trusted := filepath.Join(dir, "trusted.note")
	for i := 0; i < 2; i++ { // the first run writes the trusted state, the second checks against it
		if out := mustRun(t, "audit", "verify-export", exp, "--manifest-public-key", mkey+".pub", "--checkpoint-public-key", key+".pub",
			"--trusted", trusted); !strings.Contains(out, "6 files match") || !strings.Contains(out, "1 register entries match") {
			t.Errorf("verify-export: %s", out)
		}
	}
	if b, err := os.ReadFile(trusted); err != nil || !strings.HasPrefix(string(b), "cli-test\n") {
		t.Errorf("trusted state: %q, %v", b, err)
	}
	// Purge is refused for the runtime role and, before five years, for anyone.
	if _, err := run(t, append([]string{"incident", "purge", id}, asRuntime...)...); err == nil {
		t.Error("runtime purge succeeded")
	}
	if _, err := run(t, append([]string{"incident", "purge", id, "--role", pkgDB.Roles.Owner}, db...)...); err == nil || !strings.Contains(err.Error(), "retention") {
		t.Errorf("early purge: got %v, want a retention refusal", err)
	}
	if _, err := run(t, "audit", "verify-export", exp, "--manifest-public-key", key+".pub", "--checkpoint-public-key", key+".pub"); err == nil {
		t.Error("verify-export with the wrong manifest key succeeded")
	}
	// The notice, younger than five years, deleted with the triggers off:
	// the officer's list and a new export fail naming the entry, never
	// show or export the register shortened.
	if _, err := pkgDB.AdminPool(t).Exec(context.Background(), `ALTER TABLE incident_notices DISABLE TRIGGER ALL;
		DELETE FROM incident_notices WHERE incident_id = '`+id+`'; ALTER TABLE incident_notices ENABLE TRIGGER ALL`); err != nil {
		t.Fatal(err)
	}
	if _, err := run(t, append([]string{"incident", "list"}, asRuntime...)...); exitCode(err) != 3 || !strings.Contains(fmt.Sprint(err), id) {
		t.Errorf("list after a deletion: got %v (exit %d), want exit 3 naming %s", err, exitCode(err), id)
	}
	if _, err := run(t, append([]string{"audit", "export", "--dir", filepath.Join(dir, "short"), "--manifest-key", mkey}, asRuntime...)...); exitCode(err) != 3 || !strings.Contains(fmt.Sprint(err), id) {
		t.Errorf("export after a deletion: got %v (exit %d), want exit 3 naming %s", err, exitCode(err), id)
	}
}
