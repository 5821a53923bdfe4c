package service

import (
	"context"
	"errors"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/tenancy"
)

// Draft errors.
var (
	// ErrDraftOperatorOnly refuses a tenant the drafts of the notices to
	// the Commission and to the persons concerned: they describe the whole
	// incident (every tenant's part of it).
	ErrDraftOperatorOnly = cloison.NewError(cloison.CodePermissionDenied, "this notice draft is for the operator's officers only")
	// ErrDraftTenant is an operator's client draft without a tenant, or for
	// a tenant the incident does not affect.
	ErrDraftTenant = cloison.NewError(cloison.CodeInvalid, "a client draft needs ?tenant= naming a tenant the incident affects")
	// ErrDraftKind is a draft kind other than cai, persons or client.
	ErrDraftKind = cloison.NewError(cloison.CodeInvalid, "unknown draft kind (want cai, persons or client)")
)

// IncidentDraft is a French-first draft of a notice about incident id
// (export.Draft). cai and persons are for operator officers only. client
// (the art. 18.3 notice to a tenant, addressed to its incident_contact) is
// for an operator, who names the tenant, or for the tenant itself, whose
// draft counts the other affected tenants without naming them. Nothing is
// recorded: the notice sent is recorded with AddNotice.
//
// Errors: ErrDraftKind; ErrNotVisible (an incident p may not see, or a
// tenant asking for another tenant's draft); ErrDraftOperatorOnly;
// ErrDraftTenant; the register's and the tenant store's.
func (c *Compliance) IncidentDraft(ctx context.Context, p tenancy.Principal, id audit.Name, kind export.DraftKind, tenant cloison.TenantID) (string, error) {
	switch kind {
	case export.DraftCAI, export.DraftPersons, export.DraftClient:
	default:
		return "", ErrDraftKind
	}
	f, err := c.Incident(ctx, p, id)
	if err != nil {
		return "", err
	}
	var to export.DraftClientOf
	switch {
	case kind != export.DraftClient && !Operator(p):
		return "", ErrDraftOperatorOnly
	case kind == export.DraftClient && !Operator(p):
		if tenant != "" && tenant != p.Tenant {
			return "", ErrNotVisible
		}
		tenant = p.Tenant
		fallthrough
	case kind == export.DraftClient:
		if audit.CheckName("tenant", string(tenant)) != nil {
			return "", ErrDraftTenant
		}
		t, err := c.d.Tenants.Tenant(ctx, tenant)
		if errors.Is(err, tenancy.ErrNotFound) {
			return "", ErrDraftTenant
		}
		if err != nil {
			return "", err
		}
		to = export.DraftClientOf{Tenant: tenant, Contact: t.IncidentContact, Due: audit.DueFor(f, tenant, t.NoticeDeadlineHours)}
	}
	text, err := export.Draft(kind, f, audit.Organization{}, to)
	if errors.Is(err, export.ErrDraftTenant) {
		if !Operator(p) {
			return "", ErrNotVisible
		}
		return "", ErrDraftTenant
	}
	return text, err
}
