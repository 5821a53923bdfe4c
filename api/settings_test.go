package api_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// The organisation and privacy officer are set over the admin API, ledgered
// (identifiers and a digest only) by the admin who set them, and named by
// entries opened afterwards; bad or unknown input is a 400, a non-admin 403.
func TestRegisterOrganisationAdmin(t *testing.T) {
	ctx := context.Background()
	p := platformtest.New(t, platformtest.Options{})
	admin := p.Token(t, "victim", tenancy.ScopeAdmin)
	user := p.Token(t, "victim", tenancy.ScopeInfer)
	body := `{"organization":{"name":"Exemple inc.","neq":"1234567890"},"contact":{"name":"Élise Tremblay","title":"Responsable PRP","phone":"+1 514 555 0100","email":"prp@exemple.qc.ca"}}`
	if code, _, _ := call(t, p, "PUT", "/admin/v1/register/organisation", user, body); code != 403 {
		t.Fatalf("without admin: got %d, want 403", code)
	}
	for _, bad := range []string{
		`{"organization":{"name":"X"}}`,
		`{"organization":{"name":"X"},"contact":{"name":"Y"},"extra":1}`,
		`{"organization":{"name":"X","neq":"12"},"contact":{"name":"Y"}}`,
		`{"organization":{"name":"X"},"contact":{"name":"Y","email":"nope"}}`,
		`{"organization":{"name":"X"},"contact":{"name":"Y","fax":"1"}}`,
	} {
		if code, eb, _ := call(t, p, "PUT", "/admin/v1/register/organisation", admin, bad); code != 400 || eb.Error.Code == "" {
			t.Errorf("%s: got %d %+v, want 400", bad, code, eb)
		}
	}
	code, _, raw := call(t, p, "PUT", "/admin/v1/register/organisation", admin, body)
	if code != 200 {
		t.Fatalf("PUT: got %d %s", code, raw)
	}
	var set audit.RegisterSettings
	if err := json.Unmarshal(raw, &set); err != nil || set.Version != 1 || set.Contact.Name != "Élise Tremblay" {
		t.Fatalf("PUT answer %s (%v)", raw, err)
	}
	if code, _, raw := call(t, p, "GET", "/admin/v1/register/organisation", admin, ""); code != 200 || !strings.Contains(string(raw), "1234567890") {
		t.Fatalf("GET: %d %s", code, raw)
	}
	id, err := p.Ledger.OpenFromDetection(ctx, "engine:test", audit.Detection{Source: audit.SourceTransferFailure, Invariant: "truncated", DetectedAt: time.Now(), AffectedResponses: 1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.Ledger.Incident(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if v := f.Latest(); v.Organization.NEQ != "1234567890" || v.Contact.Email != "prp@exemple.qc.ca" {
		t.Errorf("new entry names %+v %+v", v.Organization, v.Contact)
	}
	var events int
	if err := p.Ledger.Scan(ctx, 1, 0, func(r audit.Record) error {
		if r.Kind == audit.KindRegisterSettings {
			events++
			if strings.Contains(string(r.Payload), "Tremblay") || strings.Contains(string(r.Payload), "514 555 0100") || !strings.HasPrefix(string(r.Actor), "admin:") {
				t.Errorf("register.settings_set event %s by %s", r.Payload, r.Actor)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if events != 1 {
		t.Errorf("%d register.settings_set events, want 1 (refused PUTs ledger nothing)", events)
	}
}
