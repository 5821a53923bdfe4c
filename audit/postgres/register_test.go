package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/internal/testwait"
)

func adminVersion(id audit.Name, awareness audit.Day) audit.IncidentVersion {
	return audit.IncidentVersion{
		Incident: id, Version: 1, Status: audit.IncidentOpen, Source: audit.SourceAdmin,
		PersonalInfo:  "Adresses courriel de clients / customer e-mail addresses",
		Circumstances: "Courriel envoyé au mauvais destinataire / e-mail sent to the wrong recipient",
		Occurred:      audit.Period{Start: awareness},
		Awareness:     audit.Period{Start: awareness},
		Assessment:    audit.Assessment{Status: audit.AssessmentPending},
		Organization:  audit.Organization{Name: "Exemple inc.", NEQ: "1170000000"},
		Contact:       audit.Contact{Name: "Élise Côté", Title: "Responsable de la protection des renseignements personnels"},
	}
}

func TestIncidentLifecycle(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 100)
	detected := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	violation, err := s.Append(ctx, audit.Event{OccurredAt: detected, Actor: "engine:node-1", Payload: audit.IsolationViolation{
		Request: "req-1", Invariant: "ownership-tag", Page: 42, Epoch: 7,
		AffectedTenants: []cloison.TenantID{"t1", "t2"}, WithheldResponses: 3,
	}})
	if err != nil {
		t.Fatal(err)
	}
	id, err := s.OpenFromDetection(ctx, "engine:node-1", audit.Detection{
		Source: audit.SourceIsolationViolation, Invariant: "ownership-tag", DetectedAt: detected,
		PeriodStart: detected.Add(-time.Minute), AffectedTenants: []cloison.TenantID{"t1", "t2"}, AffectedResponses: 3,
		LedgerEvents: []int64{int64(violation.Seq)},
	})
	if err != nil {
		t.Fatal(err)
	}
	risk := true
	v2, err := s.UpdateIncident(ctx, "admin:elise", id, func(v *audit.IncidentVersion) error {
		v.Assessment = audit.Assessment{Status: audit.AssessmentCompleted, Sensitivity: "élevée / high",
			MaliciousUses: "usurpation / impersonation", Consequences: "divulgation / disclosure", Likelihood: "faible / low",
			RiskOfSeriousInjury: &risk, CompletedOn: "2026-11-30",
			Consulted: []audit.Consultation{{Who: "Responsable PRP / privacy officer", Date: "2026-11-30"}}}
		v.PersonsConcerned = 2
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if v2.Version != 2 || v2.RetainUntil != "2031-11-29" {
		t.Errorf("got version %d retain %s, want 2 and 2031-11-29", v2.Version, v2.RetainUntil)
	}
	for _, n := range []audit.Notice{
		{Incident: id, Recipient: audit.RecipientCAI, RecipientName: "Commission d'accès à l'information", SentAt: detected.Add(24 * time.Hour), Method: "formulaire", ContentDigest: audit.Sum([]byte("avis"))},
		{Incident: id, Recipient: audit.RecipientTenant, Tenant: "t1", RecipientName: "t1", SentAt: detected.Add(time.Hour), Method: "e-mail"},
	} {
		if _, err := s.AddNotice(ctx, "admin:elise", n); err != nil {
			t.Fatal(err)
		}
	}
	f, err := s.Incident(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Versions) != 2 || len(f.Notices) != 2 || f.Notices[1].Number != 2 || f.Source != audit.SourceIsolationViolation {
		t.Fatalf("got %+v", f)
	}
	v1 := f.Versions[0]
	if v1.Assessment.Status != audit.AssessmentPending || v1.AffectedResponses != 3 || len(v1.AffectedTenants) != 2 || v1.Occurred.Start != "2026-11-29" {
		t.Errorf("version 1 not prefilled: %+v", v1.IncidentVersion)
	}
	// Every lifecycle step is a ledger event.
	var kinds []string
	err = s.Scan(ctx, 1, 0, func(r audit.Record) error { kinds = append(kinds, string(r.Kind)); return nil })
	want := []string{"isolation.violation", "incident.opened", "incident.updated", "notice.sent", "notice.sent"}
	if err != nil || len(kinds) != len(want) {
		t.Fatalf("got %v (%v), want %v", kinds, err, want)
	}
	for i := range want {
		if kinds[i] != want[i] {
			t.Errorf("event %d: got %s, want %s", i+1, kinds[i], want[i])
		}
	}
	if err := s.VerifyRegister(ctx); err != nil {
		t.Fatal(err)
	}
	// A stale update (version race) is a conflict, not a lost edit.
	if _, err := s.UpdateIncident(ctx, "admin:x", "inc-missing", func(*audit.IncidentVersion) error { return nil }); !errors.Is(err, audit.ErrNotFound) {
		t.Errorf("got %v, want audit.ErrNotFound", err)
	}
	admin := db.AdminPool(t)
	_, err = admin.Exec(ctx, `INSERT INTO incident_versions (incident_id, version, recorded_by, content, content_sha256, ledger_seq)
		SELECT incident_id, 2, 'x', content, content_sha256, ledger_seq FROM incident_versions WHERE version = 1`)
	if !errors.Is(translate(err), ErrSchema) && !errors.Is(translate(err), ErrConflict) {
		t.Errorf("version with mismatched content: got %v", err)
	}
	if _, err := s.OpenIncident(ctx, "admin:a", audit.IncidentVersion{Incident: "inc-bad", Version: 1}); !errors.Is(err, audit.ErrInvalidIncident) {
		t.Errorf("incomplete version: got %v, want ErrInvalidIncident", err)
	}
}

// Five-year retention is enforced by the database; a purge after it is an
// explicit, ledgered action.
func TestRetention(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	rt := openStore(t, db.RuntimePool(t), t.TempDir(), 100)
	recent := audit.DayOf(time.Now().AddDate(-1, 0, 0))
	if _, err := rt.OpenIncident(ctx, "admin:a", adminVersion("inc-recent", recent)); err != nil {
		t.Fatal(err)
	}
	if _, err := rt.OpenIncident(ctx, "admin:a", adminVersion("inc-old", "2019-03-01")); err != nil {
		t.Fatal(err)
	}
	// The owner (whom the runtime role's missing privilege does not stop)
	// and the superuser are stopped by the database.
	adminPool := db.AdminPool(t)
	for _, q := range []string{"DELETE FROM incident_versions WHERE incident_id = 'inc-recent'", "DELETE FROM incident_versions", "DELETE FROM incidents WHERE id = 'inc-old'"} {
		if _, err := adminPool.Exec(ctx, q); !errors.Is(translate(err), ErrRetention) {
			t.Errorf("%s: got %v, want ErrRetention", q, err)
		}
	}
	admin := openStore(t, adminPool, t.TempDir(), 100)
	before, _ := admin.Head(ctx)
	if _, err := admin.PurgeIncident(ctx, "admin:a", "inc-recent"); !errors.Is(err, ErrRetention) {
		t.Errorf("purge before five years: got %v, want ErrRetention", err)
	}
	if after, _ := admin.Head(ctx); after != before {
		t.Errorf("refused purge left a ledger event: head %d -> %d", before.Seq, after.Seq)
	}
	// Deleting with the purge flag set by hand, before retention, is refused too.
	_, err := adminPool.Exec(ctx, "BEGIN; SELECT set_config('cloison.purging', 'inc-recent', true); DELETE FROM incident_versions WHERE incident_id = 'inc-recent'; COMMIT")
	if !errors.Is(translate(err), ErrRetention) {
		t.Errorf("forced delete: got %v, want ErrRetention", err)
	}
	_, _ = adminPool.Exec(ctx, "ROLLBACK")
	rec, err := admin.PurgeIncident(ctx, "admin:dpo", "inc-old")
	if err != nil {
		t.Fatal(err)
	}
	if rec.Kind != audit.KindIncidentPurged {
		t.Errorf("got %s, want incident.purged", rec.Kind)
	}
	if _, err := admin.Incident(ctx, "inc-old"); !errors.Is(err, audit.ErrNotFound) {
		t.Errorf("purged incident: got %v, want audit.ErrNotFound", err)
	}
	if _, err := admin.Incident(ctx, "inc-recent"); err != nil {
		t.Errorf("recent incident: %v", err)
	}
	if _, err := admin.SignTree(ctx); err != nil { // register writes are vouched for by the next tree note
		t.Fatal(err)
	}
	if _, err := admin.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatal(err)
	}
	if err := admin.VerifyRegister(ctx); err != nil {
		t.Fatal(err)
	}
	// A superuser who disables the triggers and deletes a version is caught
	// by the register's reconciliation with the ledger.
	for _, q := range []string{"ALTER TABLE incident_versions DISABLE TRIGGER USER",
		"INSERT INTO incidents (id, source, opened_by, ledger_seq) VALUES ('inc-forged', 'admin', 'x', 1)"} {
		if _, err := adminPool.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	if err := admin.VerifyRegister(ctx); !errors.Is(err, audit.ErrChainBroken) {
		t.Errorf("forged incident: got %v, want ErrChainBroken", err)
	}
	// The runtime role cannot purge at all.
	if _, err := rt.PurgeIncident(ctx, "engine:n1", "inc-recent"); !errors.Is(err, ErrAppendOnly) {
		t.Errorf("runtime purge: got %v, want ErrAppendOnly", err)
	}
}

// Checkpoints come every N events or every T while events arrive, and are
// copied outside the database.
func TestCheckpointEveryNOrT(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "timed", SigningKey: testKey, CheckpointEvery: 1000000,
		CheckpointInterval: 50 * time.Millisecond, CheckpointDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Append(ctx, event("timed", 1)); err != nil {
		t.Fatal(err)
	}
	testwait.Eventually(t, 5*time.Second, func() bool { return s.Stats().Checkpoints > 0 }, "a checkpoint within the interval")
	st := s.Stats()
	if st.Checkpoints != 1 || st.LastCheckpoint.Seq != 1 || st.CheckpointErr != nil {
		t.Fatalf("got %+v, want one checkpoint at seq 1", st)
	}
	// No new events: no new checkpoint, however many times the interval
	// passes. Each tick reads the head (headSQL, as the runtime role) and
	// then decides; once two ticks have begun after the checkpoint, the
	// first of them has decided. PostgreSQL shows when each session's last
	// statement began, so the ticks are seen, not guessed from a sleep.
	const headSQL = "SELECT seq, hash FROM audit_events ORDER BY seq DESC LIMIT 1"
	admin := db.AdminPool(t)
	var since time.Time
	if err := admin.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&since); err != nil {
		t.Fatal(err)
	}
	ticks := map[string]bool{}
	testwait.Eventually(t, 10*time.Second, func() bool {
		rows, err := admin.Query(ctx, `SELECT pid::text || ' ' || query_start::text FROM pg_stat_activity
			WHERE datname = current_database() AND usename = $1 AND query = $2 AND query_start > $3`, db.Roles.Runtime, headSQL, since)
		if err != nil {
			t.Fatal(err)
		}
		seen, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range seen {
			ticks[k] = true
		}
		return len(ticks) >= 2
	}, "two ticks of the checkpoint interval after the checkpoint (seen %s)", testwait.Lazy(func() string { return fmt.Sprint(len(ticks)) }))
	if n := s.Stats().Checkpoints; n != 1 {
		t.Errorf("got %d checkpoints without new events, want 1", n)
	}
	files, err := LoadCheckpointFiles(dir)
	if err != nil || len(files) != 1 || files[0].Size != 1 {
		t.Fatalf("external copies: %v %v", files, err)
	}
	stored, err := s.Checkpoints(ctx)
	if err != nil || len(stored) != 1 || string(stored[0].Marshal()) != string(files[0].Marshal()) {
		t.Errorf("stored %v (%v) differs from the external copy", stored, err)
	}
}

// The configured organisation and privacy officer are copied into an entry
// that does not name them; a notice dated before awareness
// is refused.
func TestRegisterCopiesConfiguredContactAndChecksNoticeDates(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	officer := audit.Contact{Name: "Élise Côté", Title: "Responsable PRP", Phone: "+1 514 555 0100", Email: "prp@example.qc.ca"}
	s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointDir: t.TempDir(),
		Organization: audit.Organization{Name: "Société Exemple inc.", NEQ: "1170000000"}, Contact: officer})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v := adminVersion("inc-contact", "2026-11-01")
	v.Organization, v.Contact = audit.Organization{}, audit.Contact{}
	sv, err := s.OpenIncident(ctx, "admin:elise", v)
	if err != nil {
		t.Fatal(err)
	}
	if sv.Contact != officer || sv.Organization.NEQ != "1170000000" {
		t.Errorf("got %+v %+v", sv.Organization, sv.Contact)
	}
	_, err = s.AddNotice(ctx, "admin:elise", audit.Notice{Incident: "inc-contact", Recipient: audit.RecipientCAI, RecipientName: "CAI",
		SentAt: time.Date(2026, 10, 1, 0, 0, 0, 0, time.UTC), Method: "portail", ContentDigest: audit.Sum([]byte("x"))})
	if !errors.Is(err, audit.ErrInvalidIncident) {
		t.Errorf("notice before awareness: got %v, want ErrInvalidIncident", err)
	}
}
