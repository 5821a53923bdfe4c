package api

import (
	"context"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
	compliancev1 "github.com/cloison/cloison/api/proto/cloison/compliance/v1"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/tenancy"
)

// The register's notice drafts and organisation settings over gRPC, the
// same implementation and scopes as their HTTP routes (drafts.go:
// GET /compliance/v1/incidents/{id}/drafts/{kind}, compliance:read;
// admin.go: GET and PUT /admin/v1/register/organisation, admin). The
// settings are ledgered by the store (register.settings_set in the same
// transaction) whichever transport asks; a draft records nothing.

// registerMethodScopes join MethodScopes (init).
var registerMethodScopes = map[string][]tenancy.Scope{
	compliancev1.ComplianceService_GetIncidentDraft_FullMethodName: {tenancy.ScopeComplianceRead},
	adminv1.AdminService_GetRegisterSettings_FullMethodName:        {tenancy.ScopeAdmin},
	adminv1.AdminService_SetRegisterSettings_FullMethodName:        {tenancy.ScopeAdmin},
}

func init() {
	for m, sc := range registerMethodScopes {
		MethodScopes[m] = sc
	}
}

func (c *complianceService) GetIncidentDraft(ctx context.Context, req *compliancev1.GetIncidentDraftRequest) (*compliancev1.IncidentDraft, error) {
	text, err := c.s.ops.compliance.IncidentDraft(ctx, grpcPrincipal(ctx), audit.Name(req.GetId()), export.DraftKind(req.GetKind()), cloison.TenantID(req.GetTenant()))
	if err != nil {
		return nil, err
	}
	return &compliancev1.IncidentDraft{Incident: req.GetId(), Kind: req.GetKind(), Text: text}, nil
}

func registerSettingsPB(r audit.RegisterSettings) *adminv1.RegisterSettings {
	return &adminv1.RegisterSettings{Version: r.Version,
		Organization: &adminv1.RegisterOrganization{Name: r.Organization.Name, Neq: r.Organization.NEQ},
		Contact:      &adminv1.RegisterContact{Name: r.Contact.Name, Title: r.Contact.Title, Phone: r.Contact.Phone, Email: r.Contact.Email}}
}

func (a *adminService) GetRegisterSettings(ctx context.Context, _ *adminv1.GetRegisterSettingsRequest) (*adminv1.RegisterSettings, error) {
	set, err := a.s.ops.admin.RegisterSettings(ctx)
	if err != nil {
		return nil, err
	}
	return registerSettingsPB(set), nil
}

// SetRegisterSettings: both parts required, as on HTTP; the store
// validates every element (audit.ErrInvalidIncident → invalid argument).
func (a *adminService) SetRegisterSettings(ctx context.Context, req *adminv1.SetRegisterSettingsRequest) (*adminv1.RegisterSettings, error) {
	var org *audit.Organization
	var contact *audit.Contact
	if o := req.GetOrganization(); o != nil {
		org = &audit.Organization{Name: o.GetName(), NEQ: o.GetNeq()}
	}
	if c := req.GetContact(); c != nil {
		contact = &audit.Contact{Name: c.GetName(), Title: c.GetTitle(), Phone: c.GetPhone(), Email: c.GetEmail()}
	}
	set, err := a.s.ops.admin.SetRegisterSettings(ctx, grpcActor(ctx), org, contact)
	if err != nil {
		return nil, err
	}
	return registerSettingsPB(set), nil
}
