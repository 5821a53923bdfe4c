package api

import (
	"context"
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

// incidents returns the register entries the caller may see.
func (s *Server) incidents(ctx context.Context, p tenancy.Principal) ([]audit.IncidentFile, error) {
	all, err := s.cfg.Ledger.Incidents(ctx)
	if err != nil {
		return nil, err
	}
	out := []audit.IncidentFile{}
	for _, f := range all {
		if visible(p, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// incident returns one register entry, or ErrNotVisible when it does not
// exist or the caller may not see it (the two are indistinguishable).
func (s *Server) incident(ctx context.Context, p tenancy.Principal, id audit.Name) (audit.IncidentFile, error) {
	f, err := s.cfg.Ledger.Incident(ctx, id)
	if errors.Is(err, auditpg.ErrNotFound) || (err == nil && !visible(p, f)) {
		return audit.IncidentFile{}, ErrNotVisible
	}
	return f, err
}

// doOpenIncident appends version 1 of a register entry.
func (s *Server) doOpenIncident(ctx context.Context, actor audit.Name, v audit.IncidentVersion) (audit.StoredVersion, error) {
	if v.Incident == "" {
		v.Incident = auditpg.NewIncidentID(timeNow())
	}
	v.Version = 1
	if v.Source == "" {
		v.Source = audit.SourceAdmin
	}
	return s.cfg.Ledger.OpenIncident(ctx, actor, v)
}

// doUpdateIncident appends a version: the latest with the JSON patch applied
// (the register assigns incident and version).
func (s *Server) doUpdateIncident(ctx context.Context, actor audit.Name, id audit.Name, patch json.RawMessage) (audit.StoredVersion, error) {
	return s.cfg.Ledger.UpdateIncident(ctx, actor, id, func(v *audit.IncidentVersion) error {
		version, id := v.Version, v.Incident
		if err := json.Unmarshal(patch, v); err != nil {
			return fmt.Errorf("%w: %v", ErrBadField, err)
		}
		v.Version, v.Incident = version, id
		return nil
	})
}

// scanLedger hands fn the ledger rows in [from, to] (to 0: the head) that
// the caller may see: its own tenant's, or all of them with admin. It is a
// compliance stream (streams.go).
//
// Errors: ErrTooManyStreams before any row; the ledger's errors; fn's.
func (s *Server) scanLedger(ctx context.Context, p tenancy.Principal, from, to uint64, fn func(audit.Record) error) error {
	release, err := s.streams.acquire(p.Tenant)
	if err != nil {
		return err
	}
	defer release()
	if from == 0 {
		from = 1
	}
	all := p.Has(tenancy.ScopeAdmin)
	return s.cfg.Ledger.Scan(ctx, from, to, func(rec audit.Record) error {
		if !all && rec.Tenant != p.Tenant {
			return nil
		}
		return fn(rec)
	})
}

// doVerifyLedger verifies the whole chain; a break is a result (ok false,
// the *audit.BreakError), not an error.
func (s *Server) doVerifyLedger(ctx context.Context, p tenancy.Principal) (audit.Result, *audit.BreakError, error) {
	release, err := s.streams.acquire(p.Tenant)
	if err != nil {
		return audit.Result{}, nil, err
	}
	defer release()
	res, err := s.cfg.Ledger.Verify(ctx, s.cfg.Verify)
	if err != nil {
		var be *audit.BreakError
		if errors.As(err, &be) {
			return res, be, nil
		}
		return res, nil, err
	}
	return res, nil, nil
}

func (s *Server) listIncidents(w http.ResponseWriter, r *http.Request) {
	out, err := s.incidents(r.Context(), principal(r))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"incidents": out})
}

func (s *Server) getIncident(w http.ResponseWriter, r *http.Request) {
	f, err := s.incident(r.Context(), principal(r), audit.Name(r.PathValue("id")))
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
	st, err := s.doOpenIncident(r.Context(), s.actor(r), v)
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
	st, err := s.doUpdateIncident(r.Context(), s.actor(r), audit.Name(r.PathValue("id")), patch)
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
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	defer clearWriteDeadline(w)
	wrote := false
	err := s.scanLedger(r.Context(), principal(r), from, to, func(rec audit.Record) error {
		wrote = true
		s.streams.writeWithin(w)
		return enc.Encode(map[string]any{"seq": rec.Seq, "prev_hash": rec.PrevHash, "hash": rec.Hash, "kind": rec.Kind,
			"tenant": rec.Tenant, "payload": json.RawMessage(rec.Payload)})
	})
	if err != nil && !wrote {
		WriteHTTPError(w, err)
		return
	}
	if err != nil {
		s.log.Error("ledger range", "err", err)
	}
}

func (s *Server) verifyLedger(w http.ResponseWriter, r *http.Request) {
	res, broken, err := s.doVerifyLedger(r.Context(), principal(r))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	if broken != nil {
		writeJSON(w, 200, map[string]any{"ok": false, "broken": broken})
		return
	}
	writeJSON(w, 200, map[string]any{"ok": true, "result": res, "summary": res.String()})
}
