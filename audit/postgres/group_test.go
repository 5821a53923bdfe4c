package postgres

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

// Detections of one cause within the window share one entry, one hashed
// version per detection; another cause, another model, a closed entry or a
// detection past the window opens a new one.
func TestDetectionsGrouped(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 100)
	t0 := time.Now().Add(-3 * time.Hour).UTC()
	detect := func(check audit.Name, model audit.Name, at time.Time, req cloison.RequestID, tenant cloison.TenantID) audit.Name {
		t.Helper()
		// The event is recorded when it is appended (its occurred_at is
		// the database's clock, within audit.ClockTolerance); the
		// detection's own time, which groups it, is at.
		ev, err := s.Append(ctx, audit.Event{OccurredAt: time.Now(), Actor: "engine:n1", Tenant: tenant, Payload: audit.TransferVerificationFailed{
			Request: req, Source: "prefill", Check: check, WithheldResponses: 1}})
		if err != nil {
			t.Fatal(err)
		}
		id, err := s.OpenFromDetection(ctx, "engine:n1", audit.Detection{Source: audit.SourceTransferFailure, Invariant: check, Model: model,
			DetectedAt: at, PeriodStart: at, PeriodEnd: at, AffectedTenants: []cloison.TenantID{tenant},
			AffectedRequests: []cloison.RequestID{req}, AffectedResponses: 1, LedgerEvents: []int64{int64(ev.Seq)}})
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	a := detect("truncated", "m1", t0, "req-1", "t1")
	if b := detect("truncated", "m1", t0.Add(10*time.Minute), "req-2", "t2"); b != a {
		t.Fatalf("second detection of one cause opened %s, want it in %s", b, a)
	}
	if c := detect("truncated", "m1", t0.Add(59*time.Minute), "req-3", "t1"); c != a {
		t.Fatalf("third detection of one cause opened %s, want it in %s", c, a)
	}
	other := map[string]audit.Name{
		"another check": detect("page-digest", "m1", t0.Add(11*time.Minute), "req-4", "t1"),
		"another model": detect("truncated", "m2", t0.Add(12*time.Minute), "req-5", "t1"),
		"past window":   detect("truncated", "m1", t0.Add(61*time.Minute), "req-6", "t1"),
	}
	for what, id := range other {
		if id == a {
			t.Errorf("%s joined %s, want a new entry", what, a)
		}
	}
	if other["past window"] == other["another model"] || other["another check"] == other["another model"] {
		t.Errorf("distinct causes share an entry: %v", other)
	}

	f, err := s.Incident(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Versions) != 3 {
		t.Fatalf("entry %s has %d versions, want 3 (one hashed version per detection)", a, len(f.Versions))
	}
	last := f.Latest()
	if !slices.Equal(last.AffectedRequests, []cloison.RequestID{"req-1", "req-2", "req-3"}) || last.Detections != 3 ||
		last.AffectedResponses != 3 || len(last.LedgerEvents) != 3 || len(last.AffectedTenants) != 2 ||
		last.DetectionGroup != "transfer_verification_failed/truncated/m1" {
		t.Errorf("grouped entry: requests %v detections %d responses %d events %v tenants %v group %q",
			last.AffectedRequests, last.Detections, last.AffectedResponses, last.LedgerEvents, last.AffectedTenants, last.DetectionGroup)
	}
	// Identifiers only: the ledger events carry the versions' digests, and
	// the chain and the register still verify.
	if _, err := s.SignTree(ctx); err != nil { // register writes are vouched for by the next tree note
		t.Fatal(err)
	}
	if _, err := s.Verify(ctx, audit.VerifyOptions{Keys: testKeys()}); err != nil {
		t.Fatal(err)
	}
	if err := s.VerifyRegister(ctx); err != nil {
		t.Fatal(err)
	}

	// A closed entry takes no more detections.
	pw := other["past window"]
	if _, err := s.UpdateIncident(ctx, "admin:elise", pw, func(v *audit.IncidentVersion) error {
		v.Status = audit.IncidentClosed
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if id := detect("truncated", "m1", t0.Add(62*time.Minute), "req-7", "t1"); id == pw {
		t.Errorf("detection joined closed entry %s", pw)
	}
}

// With a negative window every detection opens its own entry.
func TestDetectionsUngrouped(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointDir: t.TempDir(), DetectionWindow: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen := map[audit.Name]bool{}
	for i := 0; i < 2; i++ {
		id, err := s.OpenFromDetection(ctx, "engine:n1", audit.Detection{Source: audit.SourceTransferFailure, Invariant: "truncated", DetectedAt: time.Now(), AffectedResponses: 1})
		if err != nil {
			t.Fatal(err)
		}
		seen[id] = true
	}
	if len(seen) != 2 {
		t.Errorf("got %d entries, want 2", len(seen))
	}
}
