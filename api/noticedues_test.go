package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/api"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestNoticeDeadlines checks notice deadlines end to end, since a
// notice sent late is a breach of its own: the notice clause
// (contact, deadline) is set through the admin API with its tenant.updated
// event; an incident naming two tenants shows each tenant's notice due at
// named + deadline; once past bravo's deadline with no notice sent,
// cloison_incident_notices_overdue counts it and the register shows it
// overdue, while alpha's notice, sent in time, shows sent_on_time; a tenant
// sees its own line only; alpha's client draft carries its due time.
func TestNoticeDeadlines(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo"}})
	admin := p.Token(t, "alpha", tenancy.ScopeAdmin, tenancy.ScopeComplianceRead)
	head, err := p.Ledger.Head(ctx)
	if err != nil {
		t.Fatal(err)
	}

	for _, c := range []struct {
		tenant, body string
		status       int
	}{
		{"alpha", `{"notice_deadline_hours":24,"incident_contact":"dpo@alpha.example"}`, 200},
		{"bravo", `{"notice_deadline_hours":1}`, 200},
		{"bravo", `{"notice_deadline_hours":-1}`, 400},
		{"bravo", `{"notice_deadline_hours":8761}`, 400},
		{"bravo", `{"notice_deadline":"1h"}`, 400}, // unknown field: refused, not ignored
	} {
		code, _, body := call(t, p, "PATCH", "/admin/v1/tenants/"+c.tenant, admin, c.body)
		if code != c.status {
			t.Fatalf("PATCH %s %s: got %d %s, want %d", c.tenant, c.body, code, body, c.status)
		}
	}
	alpha, err := p.Tenants.Tenant(ctx, "alpha")
	if err != nil || alpha.NoticeDeadlineHours != 24 || alpha.IncidentContact != "dpo@alpha.example" {
		t.Fatalf("alpha after update: %+v, %v", alpha, err)
	}
	updates := map[cloison.TenantID]int{}
	if err := p.Ledger.Scan(ctx, head.Seq+1, 0, func(r audit.Record) error {
		if r.Kind == audit.KindTenantUpdated {
			updates[r.Tenant]++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if updates["alpha"] != 1 || updates["bravo"] != 1 {
		t.Fatalf("tenant.updated events: %v, want one for alpha and one for bravo (refused updates ledger nothing)", updates)
	}

	if got := overdue(t, p.Server); got != 0 {
		t.Fatalf("overdue before any incident: %v, want 0", got)
	}
	now := time.Now()
	id, err := p.Ledger.OpenFromDetection(ctx, "engine:test", audit.Detection{Source: audit.SourceIsolationViolation, Invariant: "ownership-tag",
		DetectedAt: now, AffectedTenants: []cloison.TenantID{"alpha", "bravo"}, AffectedRequests: []cloison.RequestID{"req-1"}, AffectedResponses: 3,
		Model: platformtest.Model})
	if err != nil {
		t.Fatal(err)
	}
	dues := func(token string) []audit.NoticeDue {
		t.Helper()
		code, _, body := call(t, p, "GET", "/compliance/v1/incidents/"+string(id), token, "")
		var v struct{ NoticeDeadlines []audit.NoticeDue }
		if err := json.Unmarshal(body, &v); code != 200 || err != nil {
			t.Fatalf("GET incident: %d %s %v", code, body, err)
		}
		return v.NoticeDeadlines
	}
	statuses := func(ds []audit.NoticeDue) map[cloison.TenantID]audit.NoticeStatus {
		out := map[cloison.TenantID]audit.NoticeStatus{}
		for _, d := range ds {
			out[d.Tenant] = d.Status
		}
		return out
	}

	ds := dues(admin)
	if len(ds) != 2 || ds[0].Status != audit.NoticePending || ds[1].Status != audit.NoticePending ||
		ds[0].DueAt == nil || !ds[0].DueAt.Equal(ds[0].NamedAt.Add(24*time.Hour)) || !ds[1].DueAt.Equal(ds[1].NamedAt.Add(time.Hour)) {
		t.Fatalf("dues at once: %+v, want alpha due in 24h and bravo in 1h, both pending", ds)
	}
	if got := overdue(t, p.Server); got != 0 {
		t.Fatalf("overdue at once: %v, want 0", got)
	}

	// alpha is told in time; two hours later bravo, told nothing, is overdue.
	if _, err := p.Ledger.AddNotice(ctx, "admin:test", audit.Notice{Incident: id, Recipient: audit.RecipientTenant, Tenant: "alpha",
		RecipientName: "alpha DPO", SentAt: time.Now(), Method: "e-mail"}); err != nil {
		t.Fatal(err)
	}
	restore := api.SetClock(func() time.Time { return now.Add(2 * time.Hour) })
	defer func() { restore() }() // the clock set last
	if got := statuses(dues(admin)); got["alpha"] != audit.NoticeOnTime || got["bravo"] != audit.NoticeOverdue {
		t.Fatalf("register two hours later: %v, want alpha sent_on_time, bravo overdue", got)
	}
	if got := overdue(t, p.Server); got != 1 {
		t.Fatalf("cloison_incident_notices_overdue two hours later: %v, want 1", got)
	}
	// A tenant sees its own line only.
	if own := dues(p.Token(t, "bravo", tenancy.ScopeComplianceRead)); len(own) != 1 || own[0].Tenant != "bravo" || own[0].Status != audit.NoticeOverdue {
		t.Fatalf("bravo's view: %+v, want its own overdue line only", own)
	}
	// The draft of alpha's art. 18.3 notice: contact, due time, model,
	// responses affected.
	draft := httpGet(t, p.URL+"/compliance/v1/incidents/"+string(id)+"/drafts/client?tenant=alpha", admin)
	due := ds[0].DueAt.UTC().Format(time.RFC3339)
	for _, want := range []string{"alpha — dpo@alpha.example", "Échéance contractuelle de cet avis : " + due,
		"Contractual deadline of this notice : " + due, platformtest.Model, "Réponses retenues ou exposées : 3"} {
		if !strings.Contains(draft, want) {
			t.Errorf("client draft lacks %q:\n%s", want, draft)
		}
	}
	// bravo told late: no longer overdue, shown sent_late.
	restore()
	if _, err := p.Ledger.AddNotice(ctx, "admin:test", audit.Notice{Incident: id, Recipient: audit.RecipientTenant, Tenant: "bravo",
		RecipientName: "bravo DPO", SentAt: time.Now(), Method: "e-mail"}); err != nil {
		t.Fatal(err)
	}
	restore = api.SetClock(func() time.Time { return now.Add(2 * time.Hour) })
	if got := statuses(dues(admin)); got["bravo"] != audit.NoticeOnTime {
		// sent within the hour of real time: on time
		t.Fatalf("bravo told at once: %v, want sent_on_time", got)
	}
	if got := overdue(t, p.Server); got != 0 {
		t.Fatalf("overdue once both are told: %v, want 0", got)
	}
}

func overdue(t *testing.T, s *api.Server) float64 {
	t.Helper()
	text := scrape(t, s)
	if !strings.Contains(text, "cloison_incident_notices_overdue") {
		t.Fatalf("no cloison_incident_notices_overdue series in:\n%s", text)
	}
	return total(parseExposition(t, text), "cloison_incident_notices_overdue")
}
