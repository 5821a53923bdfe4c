package api

import (
	"context"
	"errors"
	"net/http"

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
	// ErrDraftTenant is an operator's client draft without ?tenant=, or for
	// a tenant the incident does not affect.
	ErrDraftTenant = cloison.NewError(cloison.CodeInvalid, "a client draft needs ?tenant= naming a tenant the incident affects")
	// ErrDraftKind is a draft kind other than cai, persons or client.
	ErrDraftKind = cloison.NewError(cloison.CodeInvalid, "unknown draft kind (want cai, persons or client)")
)

// incidentDraft serves GET /compliance/v1/incidents/{id}/drafts/{kind}
// (compliance:read): a French-first draft of a notice (export.Draft), as
// text/plain. cai and persons are for operator officers only. client (the
// art. 18.3 notice to a tenant, addressed to its incident_contact) is for
// an operator, who names the tenant with ?tenant=, or for the tenant
// itself, whose draft counts the other affected tenants without naming
// them. Nothing is recorded: the notice sent is recorded with POST
// .../notices.
func (s *Server) incidentDraft(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	text, err := s.doIncidentDraft(r.Context(), p, audit.Name(r.PathValue("id")), export.DraftKind(r.PathValue("kind")), cloison.TenantID(r.URL.Query().Get("tenant")))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(200)
	_, _ = w.Write([]byte(text))
}

// doIncidentDraft is the draft behind both transports (GetIncidentDraft
// over gRPC).
func (s *Server) doIncidentDraft(ctx context.Context, p tenancy.Principal, id audit.Name, kind export.DraftKind, tenant cloison.TenantID) (string, error) {
	switch kind {
	case export.DraftCAI, export.DraftPersons, export.DraftClient:
	default:
		return "", ErrDraftKind
	}
	f, err := s.incident(ctx, p, id)
	if err != nil {
		return "", err
	}
	var to export.DraftClientOf
	switch {
	case kind != export.DraftClient && !operator(p):
		return "", ErrDraftOperatorOnly
	case kind == export.DraftClient && !operator(p):
		if tenant != "" && tenant != p.Tenant {
			return "", ErrNotVisible
		}
		tenant = p.Tenant
		fallthrough
	case kind == export.DraftClient:
		if audit.CheckName("tenant", string(tenant)) != nil {
			return "", ErrDraftTenant
		}
		t, err := s.cfg.Tenants.Tenant(ctx, tenant)
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
		if !operator(p) {
			return "", ErrNotVisible
		}
		return "", ErrDraftTenant
	}
	return text, err
}
