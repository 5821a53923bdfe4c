package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// The review's forgery through the CLI's eyes: an officer opens an entry
// (signed with the log key), the holder of the runtime role's credentials
// alone appends a backdated notice.sent to the Commission "by
// admin:officer-x" through audit_sequence and incident_notices, and the
// next administrative command checkpoints it. `audit verify` passed before
// event signatures; now it exits 3 naming the entry.
func TestCLIVerifyNamesRuntimeRoleForgery(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	key := filepath.Join(dir, "cp.key")
	mustRun(t, "audit", "keygen", "--out", key)
	rt := []string{"--database-url", db.AdminURL, "--role", db.Roles.Runtime, "--origin", "cli-forge", "--checkpoint-key", key,
		"--checkpoint-dir", filepath.Join(dir, "checkpoints")}
	out := mustRun(t, append([]string{"incident", "open", "--actor", "admin:elise", "--circumstances", "Courriel mal adressé",
		"--personal-info", "adresses courriel", "--awareness", time.Now().Add(-48 * time.Hour).Format(time.DateOnly)}, rt...)...)
	id := regexp.MustCompile(`inc-\d{8}-[0-9a-f]{8}`).FindString(out)
	if id == "" {
		t.Fatalf("open: %s", out)
	}

	conn, err := pgx.Connect(ctx, db.RuntimeURL) // the runtime role itself, no key
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	sent := time.Now().Add(-24 * time.Hour).UTC().Truncate(time.Microsecond)
	n := audit.Notice{Incident: audit.Name(id), Number: 1, Recipient: audit.RecipientCAI, RecipientName: "Commission d'accès à l'information",
		SentAt: sent, Method: "portal", ContentDigest: audit.Sum([]byte("avis"))}
	record, recordDigest, err := n.Record("admin:officer-x", time.Now()).Canonical()
	if err != nil {
		t.Fatal(err)
	}
	payload, err := audit.Event{OccurredAt: sent, Actor: "admin:officer-x", Payload: audit.NoticeSent{Incident: n.Incident, Notice: 1,
		Recipient: audit.RecipientCAI, ContentDigest: n.ContentDigest, RecordDigest: &recordDigest}}.Canonical()
	if err != nil {
		t.Fatal(err)
	}
	var forged int64
	if err := pgx.BeginTxFunc(ctx, conn, pgx.TxOptions{}, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, "SELECT first_seq FROM audit_sequence($1, $2, $3, $4, $5)", []time.Time{sent}, []string{string(audit.KindNoticeSent)},
			[]*string{nil}, []string{"admin:officer-x"}, [][]byte{payload}).Scan(&forged); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO incident_notices (incident_id, notice_no, recipient_kind, recipient, tenant, sent_at, method, content_sha256, recorded_by, ledger_seq, record, record_sha256)
			VALUES ($1, 1, $2, $3, NULL, $4, $5, $6, $7, $8, $9, $10)`,
			id, string(audit.RecipientCAI), n.RecipientName, sent, n.Method, n.ContentDigest[:], "admin:officer-x", forged, record, recordDigest[:])
		return err
	}); err != nil {
		t.Fatalf("the runtime role's forgery: %v", err)
	}
	// The next command's store signs a checkpoint and a tree note over it.
	mustRun(t, append([]string{"incident", "update", id, "--actor", "admin:elise", "--measure-taken", time.Now().Format(time.DateOnly) + ": courriel supprimé"}, rt...)...)

	out, err = run(t, append([]string{"audit", "verify", "--public-key", key + ".pub", "--no-register"}, rt...)...)
	if err == nil || exitCode(err) != 3 {
		t.Fatalf("audit verify: got %v (exit %d), want exit 3\n%s", err, exitCode(err), out)
	}
	want := "seq " + strconv.FormatInt(forged, 10) + " (signature): notice.sent by admin:officer-x is not signed"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("audit verify: got %v, want it to name %q", err, want)
	}
}
