package service

import (
	"context"
	"errors"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/tenancy"
)

// Who may draft which notice: the Commission's and the persons' are the
// operator's; a tenant drafts its own client notice only, and another
// tenant's request is answered as an unknown incident.
func TestIncidentDraftPermissions(t *testing.T) {
	reg := &fakeRegister{files: []audit.IncidentFile{incidentOf("inc-1", "acme", "globex")}}
	st := &fakeTenants{tenants: map[cloison.TenantID]tenancy.Tenant{"acme": {ID: "acme", IncidentContact: "sec@acme.example"}, "globex": {ID: "globex"}}}
	c := NewCompliance(ComplianceDeps{Register: reg, Tenants: st})
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		p      tenancy.Principal
		kind   export.DraftKind
		tenant cloison.TenantID
		want   error
	}{
		{"unknown kind", officer(), "public", "", ErrDraftKind},
		{"tenant asks cai", tenantOfficer("acme"), export.DraftCAI, "", ErrDraftOperatorOnly},
		{"tenant asks persons", tenantOfficer("acme"), export.DraftPersons, "", ErrDraftOperatorOnly},
		{"tenant asks another's client draft", tenantOfficer("acme"), export.DraftClient, "globex", ErrNotVisible},
		{"tenant not affected", tenantOfficer("initech"), export.DraftClient, "", ErrNotVisible},
		{"operator without tenant", officer(), export.DraftClient, "", ErrDraftTenant},
		{"operator names an unknown tenant", officer(), export.DraftClient, "initech", ErrDraftTenant},
		{"tenant's own client draft", tenantOfficer("acme"), export.DraftClient, "", nil},
		{"operator's client draft", officer(), export.DraftClient, "globex", nil},
		{"operator's cai draft", officer(), export.DraftCAI, "", nil},
	} {
		text, err := c.IncidentDraft(ctx, tc.p, "inc-1", tc.kind, tc.tenant)
		if !errors.Is(err, tc.want) || (err == nil && text == "") {
			t.Errorf("%s: got %d bytes, %v; want %v", tc.name, len(text), err, tc.want)
		}
	}
}
