package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/internal/pgtest"
)

func completed(t *testing.T, s *Store, tenant cloison.TenantID, req cloison.RequestID) {
	t.Helper()
	if _, err := s.Append(context.Background(), audit.Event{OccurredAt: time.Now(), Tenant: tenant, Actor: "engine:n", Payload: audit.RequestCompleted{
		Request: req, Model: "m", PromptTokens: 3, CompletionTokens: 2, Tier: "cross-tenant",
		Served: &audit.Served{Key: "sd1", Backend: "cpu", KernelPath: "generic", Sampling: audit.Sampling{Temperature: "0", TopP: "0", MinP: "0",
			RepetitionPenalty: "0", FrequencyPenalty: "0", PresencePenalty: "0", Seed: "1", SeedSource: "client", MaxTokens: 2}}}}); err != nil {
		t.Fatal(err)
	}
}

// A request's entry is found and proven in its own tenant's log, checkable
// with the published key alone; another tenant's request is audit.ErrNotFound,
// the same answer as an unknown id.
func TestRequestEntryProvesOwnRequestsOnly(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s := openStore(t, db.RuntimePool(t), t.TempDir(), 100)
	completed(t, s, "a", "req-a1")
	completed(t, s, "b", "req-b1")
	completed(t, s, "a", "req-a2")
	e, err := s.RequestEntry(ctx, "a", "req-a2")
	if err != nil {
		t.Fatal(err)
	}
	if e.Position != 2 || e.Size != 2 || e.Completed.Request != "req-a2" {
		t.Fatalf("got position %d of %d for %s, want 2 of 2 for req-a2", e.Position, e.Size, e.Completed.Request)
	}
	vkey, err := s.TreeVerifierKey()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := audit.VerifyTenantInclusion(e.Checkpoint, vkey, "a", e.Position, e.Payload, e.Proof); err != nil {
		t.Fatalf("inclusion proof does not verify: %v", err)
	}
	if _, err := audit.VerifyTenantInclusion(e.Checkpoint, vkey, "b", e.Position, e.Payload, e.Proof); err == nil {
		t.Fatal("a's proof verified as b's")
	}
	for _, c := range []struct {
		t   cloison.TenantID
		req cloison.RequestID
	}{{"a", "req-b1"}, {"b", "req-a1"}, {"a", "req-none"}} {
		if _, err := s.RequestEntry(ctx, c.t, c.req); !errors.Is(err, audit.ErrNotFound) {
			t.Errorf("RequestEntry(%s, %s): got %v, want audit.ErrNotFound", c.t, c.req, err)
		}
	}
}

// A report opens a potential incident under assessment and is ledgered in
// the same transaction; a second report of the request returns the first;
// the per-tenant limit refuses the next; a replay verdict closes or
// confirms the entry.
func TestReportLifecycle(t *testing.T) {
	db := pgtest.New(t)
	ctx := context.Background()
	s, err := Open(ctx, db.RuntimePool(t), Config{Origin: "test-ledger", SigningKey: testKey, CheckpointDir: t.TempDir(),
		Organization: audit.Organization{Name: "Exemple inc."}, Contact: audit.Contact{Name: "PRP"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	lim := audit.ReportLimit{N: 2, Window: time.Hour}
	rep, dup, err := s.RecordReport(ctx, "tenant:a", audit.NewReport{Tenant: "a", Request: "req-1", Reason: "foreign-content",
		Sealed: []byte{1, 2, 3}, RequestAt: time.Now(), EntrySeq: 1}, lim)
	if err != nil || dup {
		t.Fatalf("got %v, dup %v", err, dup)
	}
	f, err := s.Incident(ctx, rep.Incident)
	if err != nil {
		t.Fatal(err)
	}
	v := f.Versions[len(f.Versions)-1]
	if v.Status != audit.IncidentUnderAssessment || v.Source != audit.SourceTenantReport || len(v.AffectedRequests) != 1 || v.AffectedRequests[0] != "req-1" {
		t.Fatalf("got %+v, want an entry under assessment naming req-1", v.IncidentVersion)
	}
	again, dup, err := s.RecordReport(ctx, "tenant:a", audit.NewReport{Tenant: "a", Request: "req-1", Reason: "other", RequestAt: time.Now()}, lim)
	if err != nil || !dup || again.ID != rep.ID {
		t.Fatalf("second report: got %v %v %v, want the first (%s) as a duplicate", again.ID, dup, err, rep.ID)
	}
	if _, _, err := s.RecordReport(ctx, "tenant:a", audit.NewReport{Tenant: "a", Request: "req-2", Reason: "other", RequestAt: time.Now()}, lim); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.RecordReport(ctx, "tenant:a", audit.NewReport{Tenant: "a", Request: "req-3", Reason: "other", RequestAt: time.Now()}, lim); !errors.Is(err, audit.ErrReportRate) {
		t.Fatalf("third report in the window: got %v, want audit.ErrReportRate", err)
	}
	if _, _, err := s.RecordReport(ctx, "tenant:b", audit.NewReport{Tenant: "b", Request: "req-3", Reason: "other", RequestAt: time.Now()}, lim); err != nil {
		t.Fatalf("another tenant's limit is its own: %v", err)
	}
	if _, err := s.ReportOf(ctx, "b", rep.ID); !errors.Is(err, audit.ErrNotFound) {
		t.Fatalf("b read a's report: %v", err)
	}
	d := audit.Digest{9}
	if _, err := s.RecordReplay(ctx, "tenant:a", "a", audit.RequestReplayed{Request: "req-1", By: "tenant", Verdict: audit.VerdictNotIsolationFailure, Completion: &d}); err != nil {
		t.Fatal(err)
	}
	f, _ = s.Incident(ctx, rep.Incident)
	if got := f.Versions[len(f.Versions)-1].Status; got != audit.IncidentClosed {
		t.Fatalf("after a clean replay: status %s, want closed", got)
	}
	r2, _ := s.ReportFor(ctx, "a", "req-2")
	if _, err := s.RecordReplay(ctx, "tenant:a", "a", audit.RequestReplayed{Request: "req-2", By: "tenant", Verdict: audit.VerdictConfirmed, Completion: &d}); err != nil {
		t.Fatal(err)
	}
	f, _ = s.Incident(ctx, r2.Incident)
	if got := f.Versions[len(f.Versions)-1]; got.Status != audit.IncidentOpen || got.Assessment.Likelihood == "" {
		t.Fatalf("after a differing replay: %+v, want open with the assessment prefilled", got.IncidentVersion)
	}
	if r2, _ = s.ReportFor(ctx, "a", "req-2"); r2.Verdict != audit.VerdictConfirmed {
		t.Fatalf("verdict %q, want confirmed", r2.Verdict)
	}
	if err := s.VerifyRegister(ctx); err != nil {
		t.Fatalf("register does not verify: %v", err)
	}
}
