package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// ErrNotVisible hides incidents and ledger rows of other tenants: the caller
// sees "not found", never that they exist.
var ErrNotVisible = service.ErrNotVisible

// complianceRoutes: codecs of service.Compliance, shared with the gRPC
// ComplianceService. Reads are scoped to the caller's tenant unless the caller
// is an operator officer (admin scope, see operator); writes to the register
// need admin. A tenant's view is redacted: an incident it shares with other
// tenants shows them counted, not named, and only the notices sent to the
// tenant itself (audit.IncidentFile.ForTenant); its ledger listing is its
// tenant log (service.Compliance.ScanTenantLog): positions and leaves as its proofs number
// and hash them, no global sequence number.
//
//	GET   /compliance/v1/incidents                   compliance:read — incidents affecting the caller's tenant, and register_check
//	GET   /compliance/v1/incidents/{id}              compliance:read — the entry, and register_check
//	POST  /compliance/v1/incidents                   compliance:write + admin — open (an audit.IncidentVersion)
//	PATCH /compliance/v1/incidents/{id}              compliance:write + admin — a new version (fields to change)
//	POST  /compliance/v1/incidents/{id}/notices      compliance:write + admin — record a notice sent
//	GET   /compliance/v1/incidents/{id}/drafts/{kind} compliance:read — notice draft, text/plain (drafts.go)
//	GET   /compliance/v1/ledger?from=N&to=M[&tenant=T] compliance:read — JSON Lines: with admin ledger rows by seq; else (or with tenant=T) the tenant log by position
//	POST  /compliance/v1/ledger/verify               compliance:read + admin — verify the whole chain and hold the register to it
//	GET   /compliance/v1/export?format=pdf|csv|jsonl|zip compliance:read + admin — a signed export, ledgered; one file or the ZIP of all (compliance_export.go)
//	POST  /compliance/v1/export/verify               compliance:read + admin — body: the export's ZIP; the verification in words
func (s *Server) complianceRoutes(mux *http.ServeMux) {
	read := func(h http.HandlerFunc) http.Handler { return s.auth(h, tenancy.ScopeComplianceRead) }
	write := func(h http.HandlerFunc) http.Handler {
		return s.auth(plainBody(h, s.cfg.MaxBody), tenancy.ScopeComplianceWrite, tenancy.ScopeAdmin)
	}
	mux.Handle("GET /compliance/v1/incidents", read(s.listIncidents))
	mux.Handle("GET /compliance/v1/incidents/{id}", read(s.getIncident))
	mux.Handle("POST /compliance/v1/incidents", write(s.openIncident))
	mux.Handle("PATCH /compliance/v1/incidents/{id}", write(s.updateIncident))
	mux.Handle("POST /compliance/v1/incidents/{id}/notices", write(s.addNotice))
	mux.Handle("GET /compliance/v1/incidents/{id}/drafts/{kind}", read(s.incidentDraft))
	mux.Handle("GET /compliance/v1/ledger", read(s.ledgerRange))
	mux.Handle("POST /compliance/v1/ledger/verify", s.auth(s.verifyLedger, tenancy.ScopeComplianceRead, tenancy.ScopeAdmin))
	exp := func(h http.HandlerFunc) http.Handler {
		return s.auth(h, tenancy.ScopeComplianceRead, tenancy.ScopeAdmin)
	}
	mux.Handle("GET /compliance/v1/export", exp(s.exportRegister))
	mux.Handle("POST /compliance/v1/export/verify", exp(s.verifyExport))
	s.tlogRoutes(mux) // /compliance/v1/tlog/... (tlog.go)
}

func (s *Server) listIncidents(w http.ResponseWriter, r *http.Request) {
	p := principal(r)
	fs, err := s.ops.compliance.Incidents(r.Context(), p)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	out, err := s.ops.compliance.IncidentViews(r.Context(), p, fs)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	rc, err := s.ops.compliance.CheckRegister(r.Context(), p)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"incidents": out, "register_check": rc})
}

func (s *Server) getIncident(w http.ResponseWriter, r *http.Request) {
	f, err := s.ops.compliance.Incident(r.Context(), principal(r), audit.Name(r.PathValue("id")))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	out, err := s.ops.compliance.IncidentViews(r.Context(), principal(r), []audit.IncidentFile{f})
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	rc, err := s.ops.compliance.CheckRegister(r.Context(), principal(r))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	// The entry's own fields, and beside them the register's check.
	b, err := json.Marshal(out[0])
	var view map[string]json.RawMessage
	if err == nil {
		err = json.Unmarshal(b, &view)
	}
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	view["register_check"], _ = json.Marshal(rc)
	writeJSON(w, 200, view)
}

func (s *Server) openIncident(w http.ResponseWriter, r *http.Request) {
	var v audit.IncidentVersion
	if err := decode(r.Body, s.cfg.MaxBody, &v); err != nil {
		WriteHTTPError(w, err)
		return
	}
	st, err := s.ops.compliance.OpenIncident(r.Context(), s.actor(r), v)
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
	st, err := s.ops.compliance.UpdateIncident(r.Context(), s.actor(r), audit.Name(r.PathValue("id")), patch)
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
	st, err := s.ops.compliance.AddNotice(r.Context(), s.actor(r), n)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, st)
}

// ledgerRange streams ledger rows as JSON Lines, each payload the exact
// canonical bytes that were hashed. The operator (admin)
// reads the ledger: {"seq" (global), "prev_hash", "hash", "kind",
// "tenant", "payload"} for seq in [from, to]. A tenant reads its tenant
// log (service.Compliance.ScanTenantLog): {"seq" (the position in its log, as the tenant
// proofs number it), "kind", "actor", "tenant" (its own), "payload" (the
// leaf)} for positions in [from, to]. ?tenant=T asks for T's tenant log
// in that form: the caller's own, or any with admin (tenantLogOf: another
// tenant's without admin is refused, 403).
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
		WriteHTTPError(w, ErrBadField.Withf("from and to must be positive integers"))
		return
	}
	if to != 0 && to < from {
		WriteHTTPError(w, ErrBadField.Withf("to (%d) is before from (%d)", to, from))
		return
	}
	p := principal(r)
	t, err := service.ListedLog(p, q.Get("tenant"))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // payloads as hashed: RFC 8785 leaves <, > and & unescaped
	defer clearWriteDeadline(w)
	wrote := false
	if t == "" {
		err = s.ops.compliance.ScanLedger(r.Context(), p, from, to, func(rec audit.Record) error {
			wrote = true
			s.streams.writeWithin(w)
			return enc.Encode(map[string]any{"seq": rec.Seq, "prev_hash": rec.PrevHash, "hash": rec.Hash, "kind": rec.Kind,
				"tenant": rec.Tenant, "payload": json.RawMessage(rec.Payload)})
		})
	} else {
		err = s.ops.compliance.ScanTenantLog(r.Context(), p, t, from, to, func(e audit.TenantLogEntry) error {
			wrote = true
			s.streams.writeWithin(w)
			return enc.Encode(tenantRow{Seq: e.Pos, Kind: e.Kind, Actor: e.Actor, Tenant: t, Payload: e.Leaf})
		})
	}
	if err != nil && !wrote {
		WriteHTTPError(w, err)
		return
	}
	if err != nil {
		s.log.Error("ledger range", "err", err)
	}
}

// tenantRow is one row of a tenant's listing: the leaf at position Seq of
// its tenant log.
type tenantRow struct {
	Seq     uint64           `json:"seq"`
	Kind    audit.Kind       `json:"kind"`
	Actor   audit.Name       `json:"actor"`
	Tenant  cloison.TenantID `json:"tenant"`
	Payload json.RawMessage  `json:"payload"`
}

// verifyLedger answers ok only when the chain verifies and the register
// matches it: "breaks" lists every break found ("broken" is the first,
// "more" counts those beyond audit.MaxBreaks), "register" the register's
// disagreements (a row deleted behind the triggers is one).
func (s *Server) verifyLedger(w http.ResponseWriter, r *http.Request) {
	res, broken, reg, err := s.ops.compliance.VerifyLedger(r.Context(), principal(r))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	if broken != nil || !reg.OK {
		out := map[string]any{"ok": false, "register": reg}
		if broken != nil && len(broken.All) > 0 {
			out["broken"] = broken.All[0]
			out["breaks"] = broken.All
			out["more"] = broken.More
		}
		writeJSON(w, 200, out)
		return
	}
	writeJSON(w, 200, map[string]any{"ok": true, "result": res, "summary": res.String(), "register": reg})
}
