package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/tenancy"
)

// ErrNotVisible hides incidents and ledger rows of other tenants: the caller
// sees "not found", never that they exist.
var ErrNotVisible = cloison.NewError(cloison.CodeNotFound, "incident not found")

// complianceRoutes. Reads are scoped to the caller's tenant unless the caller
// also holds the admin scope; writes to the register need admin.
//
//	GET   /compliance/v1/incidents                   compliance:read — incidents affecting the caller's tenant
//	GET   /compliance/v1/incidents/{id}              compliance:read
//	POST  /compliance/v1/incidents                   compliance:write + admin — open (an audit.IncidentVersion)
//	PATCH /compliance/v1/incidents/{id}              compliance:write + admin — a new version (fields to change)
//	POST  /compliance/v1/incidents/{id}/notices      compliance:write + admin — record a notice sent
//	GET   /compliance/v1/ledger?from=N&to=M          compliance:read — ledger rows (JSON Lines), own tenant's only
//	POST  /compliance/v1/ledger/verify               compliance:read + admin — verify the whole chain
func (s *Server) complianceRoutes(mux *http.ServeMux) {
	read := func(h http.HandlerFunc) http.Handler { return s.auth(h, tenancy.ScopeComplianceRead) }
	write := func(h http.HandlerFunc) http.Handler {
		return s.auth(h, tenancy.ScopeComplianceWrite, tenancy.ScopeAdmin)
	}
	mux.Handle("GET /compliance/v1/incidents", read(s.listIncidents))
	mux.Handle("GET /compliance/v1/incidents/{id}", read(s.getIncident))
	mux.Handle("POST /compliance/v1/incidents", write(s.openIncident))
	mux.Handle("PATCH /compliance/v1/incidents/{id}", write(s.updateIncident))
	mux.Handle("POST /compliance/v1/incidents/{id}/notices", write(s.addNotice))
	mux.Handle("GET /compliance/v1/ledger", read(s.ledgerRange))
	mux.Handle("POST /compliance/v1/ledger/verify", s.auth(s.verifyLedger, tenancy.ScopeComplianceRead, tenancy.ScopeAdmin))
}

// visible reports whether the caller may see an incident.
func visible(p tenancy.Principal, f audit.IncidentFile) bool {
	if p.Has(tenancy.ScopeAdmin) {
		return true
	}
	for _, v := range f.Versions {
		if slices.Contains(v.AffectedTenants, p.Tenant) {
			return true
		}
	}
	return false
}

func (s *Server) listIncidents(w http.ResponseWriter, r *http.Request) {
	all, err := s.cfg.Ledger.Incidents(r.Context())
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	p := principal(r)
	out := []audit.IncidentFile{}
	for _, f := range all {
		if visible(p, f) {
			out = append(out, f)
		}
	}
	writeJSON(w, 200, map[string]any{"incidents": out})
}

func (s *Server) getIncident(w http.ResponseWriter, r *http.Request) {
	f, err := s.cfg.Ledger.Incident(r.Context(), audit.Name(r.PathValue("id")))
	if errors.Is(err, auditpg.ErrNotFound) || (err == nil && !visible(principal(r), f)) {
		WriteHTTPError(w, ErrNotVisible)
		return
	}
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, f)
}

func (s *Server) openIncident(w http.ResponseWriter, r *http.Request) {
	var v audit.IncidentVersion
	if err := decode(r.Body, s.cfg.MaxBody, &v); err != nil {
		WriteHTTPError(w, err)
		return
	}
	if v.Incident == "" {
		v.Incident = auditpg.NewIncidentID(timeNow())
	}
	v.Version = 1
	if v.Source == "" {
		v.Source = audit.SourceAdmin
	}
	st, err := s.cfg.Ledger.OpenIncident(r.Context(), s.actor(r), v)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, st)
}

func (s *Server) updateIncident(w http.ResponseWriter, r *http.Request) {
	var patch json.RawMessage
	if err := decode(r.Body, s.cfg.MaxBody, &patch); err != nil {
		WriteHTTPError(w, err)
		return
	}
	st, err := s.cfg.Ledger.UpdateIncident(r.Context(), s.actor(r), audit.Name(r.PathValue("id")), func(v *audit.IncidentVersion) error {
		version, id := v.Version, v.Incident
		if err := json.Unmarshal(patch, v); err != nil {
			return fmt.Errorf("%w: %v", ErrBadField, err)
		}
		v.Version, v.Incident = version, id // the register assigns these
		return nil
	})
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, st)
}

func (s *Server) addNotice(w http.ResponseWriter, r *http.Request) {
	var n audit.Notice
	if err := decode(r.Body, s.cfg.MaxBody, &n); err != nil {
		WriteHTTPError(w, err)
		return
	}
	n.Incident = audit.Name(r.PathValue("id"))
	st, err := s.cfg.Ledger.AddNotice(r.Context(), s.actor(r), n)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, st)
}

// ledgerRange streams ledger rows as JSON Lines: the exact canonical
// payload bytes with seq and hashes. A tenant sees only its own rows.
func (s *Server) ledgerRange(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	from, err1 := strconv.ParseUint(q.Get("from"), 10, 64)
	to, err2 := strconv.ParseUint(q.Get("to"), 10, 64)
	if q.Get("from") == "" {
		from, err1 = 1, nil
	}
	if q.Get("to") == "" {
		to, err2 = 0, nil
	}
	if err1 != nil || err2 != nil || from == 0 {
		WriteHTTPError(w, fmt.Errorf("%w: from and to must be positive integers", ErrBadField))
		return
	}
	p := principal(r)
	all := p.Has(tenancy.ScopeAdmin)
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	err := s.cfg.Ledger.Scan(r.Context(), from, to, func(rec audit.Record) error {
		if !all && rec.Tenant != p.Tenant {
			return nil
		}
		return enc.Encode(map[string]any{"seq": rec.Seq, "prev_hash": rec.PrevHash, "hash": rec.Hash, "kind": rec.Kind,
			"tenant": rec.Tenant, "payload": json.RawMessage(rec.Payload)})
	})
	if err != nil {
		s.log.Error("ledger range", "err", err)
	}
}

func (s *Server) verifyLedger(w http.ResponseWriter, r *http.Request) {
	res, err := s.cfg.Ledger.Verify(r.Context(), s.cfg.Verify)
	if err != nil {
		var be *audit.BreakError
		if errors.As(err, &be) {
			writeJSON(w, 200, map[string]any{"ok": false, "broken": be})
			return
		}
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"ok": true, "result": res, "summary": res.String()})
}
