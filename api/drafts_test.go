package api_test

import (
	"strings"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/node/platformtest"
	"github.com/cloison/cloison/tenancy"
)

// TestIncidentDraftsHTTP: an operator gets every draft (the client one for
// the tenant it names, addressed to that tenant's incident contact); alpha
// gets only its own client draft, which does not name bravo; the Commission
// and persons drafts are refused to alpha, an unaffected tenant sees "not
// found", and an unknown kind or tenant is refused.
func TestIncidentDraftsHTTP(t *testing.T) {
	p := platformtest.New(t, platformtest.Options{Tenants: []cloison.TenantID{"alpha", "bravo", "charlie"}})
	id, _ := coVictims(t, p)
	base := p.URL + "/compliance/v1/incidents/" + string(id) + "/drafts/"
	op := p.Token(t, "alpha", tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
	alpha := p.Token(t, "alpha", tenancy.ScopeComplianceRead)
	charlie := p.Token(t, "charlie", tenancy.ScopeComplianceRead)

	for _, kind := range []string{"cai", "persons"} {
		resp, b := send(t, "GET", base+kind, op, "")
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Fatalf("operator %s: got %d %s %s", kind, resp.StatusCode, resp.Header.Get("Content-Type"), b)
		}
		if fr, en := strings.Index(string(b), "FRANÇAIS"), strings.Index(string(b), "ENGLISH"); fr < 0 || en < fr {
			t.Fatalf("operator %s: want French then English, got %s", kind, b)
		}
	}
	opClient := httpGet(t, base+"client?tenant=bravo", op)
	if !strings.Contains(opClient, "bravo — x@example.test") || strings.Contains(opClient, "alpha") {
		t.Fatalf("operator client draft for bravo: got %s", opClient)
	}
	own := httpGet(t, base+"client", alpha)
	if !strings.Contains(own, "alpha — x@example.test") || strings.Contains(own, "bravo") || !strings.Contains(own, "(nombre) : 1") {
		t.Fatalf("alpha's client draft: got %s", own)
	}

	for _, c := range []struct {
		name, url, token string
		status           int
	}{
		{"tenant cai", base + "cai", alpha, 403},
		{"tenant persons", base + "persons", alpha, 403},
		{"tenant other's client draft", base + "client?tenant=bravo", alpha, 404},
		{"unaffected tenant", base + "client", charlie, 404},
		{"unaffected tenant cai", base + "cai", charlie, 404},
		{"operator without tenant", base + "client", op, 400},
		{"operator unaffected tenant", base + "client?tenant=charlie", op, 400},
		{"operator unknown tenant", base + "client?tenant=zulu", op, 400},
		{"unknown kind", base + "public", op, 400},
		{"unknown incident", p.URL + "/compliance/v1/incidents/inc-nope/drafts/cai", op, 404},
	} {
		resp, b := send(t, "GET", c.url, c.token, "")
		if resp.StatusCode != c.status || strings.Contains(string(b), "FRANÇAIS") {
			t.Errorf("%s: got %d %s, want %d and no draft", c.name, resp.StatusCode, b, c.status)
		}
	}
}
