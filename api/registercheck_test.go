package api_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestRegisterDeletionSeenByEveryView: a register entry younger than its
// five-year retention, deleted by a superuser with the triggers off, is a
// failure wherever the register is read: the server's verify route
// answers ok:false naming it, the officer's list flags it (a tenant's
// without the details), and an export is refused, not written short.
func TestRegisterDeletionSeenByEveryView(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha"}})
	admin := p.Token(t, "alpha", tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
	tenant := p.Token(t, "alpha", tenancy.ScopeComplianceRead)
	var ids []audit.Name
	for _, inv := range []string{"ownership-tag", "scrub"} {
		id, err := p.Ledger.OpenFromDetection(ctx, "engine:test", audit.Detection{Source: audit.SourceIsolationViolation, Invariant: audit.Name(inv),
			DetectedAt: time.Now(), AffectedTenants: []cloison.TenantID{"alpha"}, AffectedRequests: []cloison.RequestID{"req-" + cloison.RequestID(inv)},
			AffectedResponses: 1, Model: platformtest.Model})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	type verifyAnswer struct {
		OK       bool `json:"ok"`
		Register struct {
			OK       bool     `json:"ok"`
			Failures int      `json:"failures"`
			Problems []string `json:"problems"`
		} `json:"register"`
	}
	verify := func() verifyAnswer {
		t.Helper()
		code, _, body := call(t, p, "POST", "/compliance/v1/ledger/verify", admin, "")
		var v verifyAnswer
		if err := json.Unmarshal(body, &v); code != 200 || err != nil {
			t.Fatalf("verify: %d %s %v", code, body, err)
		}
		return v
	}
	type listAnswer struct {
		Incidents     []json.RawMessage `json:"incidents"`
		RegisterCheck struct {
			OK       bool     `json:"ok"`
			Failures int      `json:"failures"`
			Problems []string `json:"problems"`
		} `json:"register_check"`
	}
	list := func(token string) listAnswer {
		t.Helper()
		code, _, body := call(t, p, "GET", "/compliance/v1/incidents", token, "")
		var l listAnswer
		if err := json.Unmarshal(body, &l); code != 200 || err != nil {
			t.Fatalf("list: %d %s %v", code, body, err)
		}
		return l
	}
	if v := verify(); !v.OK || !v.Register.OK {
		t.Fatalf("verify before the deletion: %+v, want ok", v)
	}
	if l := list(admin); len(l.Incidents) != 2 || !l.RegisterCheck.OK {
		t.Fatalf("list before the deletion: %d entries, check %+v", len(l.Incidents), l.RegisterCheck)
	}

	gone := ids[0]
	if _, err := p.DB.AdminPool(t).Exec(ctx, `
		ALTER TABLE incident_notices DISABLE TRIGGER ALL; ALTER TABLE incident_versions DISABLE TRIGGER ALL; ALTER TABLE incidents DISABLE TRIGGER ALL;
		DELETE FROM incident_notices WHERE incident_id = '`+string(gone)+`';
		DELETE FROM incident_versions WHERE incident_id = '`+string(gone)+`';
		DELETE FROM incidents WHERE id = '`+string(gone)+`';
		ALTER TABLE incident_notices ENABLE TRIGGER ALL; ALTER TABLE incident_versions ENABLE TRIGGER ALL; ALTER TABLE incidents ENABLE TRIGGER ALL`); err != nil {
		t.Fatal(err)
	}

	v := verify()
	if v.OK || v.Register.OK || v.Register.Failures != 1 || len(v.Register.Problems) != 1 || !strings.Contains(v.Register.Problems[0], string(gone)) {
		t.Errorf("verify after the deletion: %+v, want ok:false naming %s", v, gone)
	}
	l := list(admin)
	if len(l.Incidents) != 1 || l.RegisterCheck.OK || len(l.RegisterCheck.Problems) != 1 || !strings.Contains(l.RegisterCheck.Problems[0], string(gone)) {
		t.Errorf("officer's list after the deletion: %d entries, check %+v; want the deletion flagged", len(l.Incidents), l.RegisterCheck)
	}
	if l := list(tenant); l.RegisterCheck.OK || l.RegisterCheck.Failures != 1 || len(l.RegisterCheck.Problems) != 0 {
		t.Errorf("tenant's list after the deletion: check %+v; want failed, counted, not named", l.RegisterCheck)
	}
	code, _, body := call(t, p, "GET", "/compliance/v1/incidents/"+string(ids[1]), admin, "")
	if code != 200 || !strings.Contains(string(body), `"register_check":{"ok":false`) {
		t.Errorf("GET the remaining entry: %d %s; want its register_check failed", code, body)
	}
	_, key, _ := ed25519.GenerateKey(nil)
	_, err := p.Ledger.Export(ctx, export.Options{Dir: filepath.Join(t.TempDir(), "x"), Key: key, Actor: "admin:test"})
	if !errors.Is(err, auditpg.ErrRegisterMismatch) || !errors.Is(err, audit.ErrChainBroken) || !strings.Contains(err.Error(), string(gone)) {
		t.Errorf("export after the deletion: got %v, want ErrRegisterMismatch naming %s", err, gone)
	}
}

// TestVerifyRouteReportsEveryBreak: two entries tampered with far apart
// (triggers off, as a superuser) are both named by the server's verify
// route, over HTTP and gRPC: a first break never hides a later one.
func TestVerifyRouteReportsEveryBreak(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha"}})
	admin := p.Token(t, "alpha", tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
	for i := range 12 {
		if _, err := p.Ledger.Append(ctx, audit.Event{OccurredAt: time.Now(), Tenant: "alpha", Actor: "engine:test",
			Payload: audit.RequestCompleted{Request: cloison.RequestID(fmt.Sprintf("req-%d", i)), Model: "m",
				PromptTokens: int64(i), CompletionTokens: 1, Pages: 1, Tier: "cross-tenant"}}); err != nil {
			t.Fatal(err)
		}
	}
	h, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Ledger.SignTree(ctx); err != nil {
		t.Fatal(err)
	}
	first, last := h.Seq-9, h.Seq-1
	if _, err := p.DB.AdminPool(t).Exec(ctx, fmt.Sprintf(`
		ALTER TABLE audit_events DISABLE TRIGGER ALL;
		UPDATE audit_events SET payload = convert_to(replace(convert_from(payload, 'UTF8'), '"model":"m"', '"model":"x"'), 'UTF8') WHERE seq IN (%d, %d);
		ALTER TABLE audit_events ENABLE TRIGGER ALL`, first, last)); err != nil {
		t.Fatal(err)
	}
	code, _, body := call(t, p, "POST", "/compliance/v1/ledger/verify", admin, "")
	var v struct {
		OK     bool `json:"ok"`
		Breaks []struct {
			Seq uint64 `json:"seq"`
		} `json:"breaks"`
	}
	if err := json.Unmarshal(body, &v); code != 200 || err != nil {
		t.Fatalf("verify: %d %s %v", code, body, err)
	}
	named := map[uint64]bool{}
	for _, b := range v.Breaks {
		named[b.Seq] = true
	}
	if v.OK || !named[first] || !named[last] {
		t.Errorf("verify: %s; want ok:false naming seq %d and seq %d", body, first, last)
	}
}
