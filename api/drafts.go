package api

import (
	"net/http"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/audit/export"
	"github.com/cloison/cloison/service"
)

// Draft errors (service.Compliance.IncidentDraft's).
var (
	ErrDraftOperatorOnly = service.ErrDraftOperatorOnly
	ErrDraftTenant       = service.ErrDraftTenant
	ErrDraftKind         = service.ErrDraftKind
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
	text, err := s.ops.compliance.IncidentDraft(r.Context(), p, audit.Name(r.PathValue("id")), export.DraftKind(r.PathValue("kind")), cloison.TenantID(r.URL.Query().Get("tenant")))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(200)
	_, _ = w.Write([]byte(text))
}
