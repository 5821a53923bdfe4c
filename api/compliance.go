package api

import (
	"context"
	"encoding/json"
	"errors"
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
// is an operator officer (admin scope, see operator); writes to the register
// need admin. A tenant's view is redacted: an incident it shares with other
// tenants shows them counted, not named, and only the notices sent to the
// tenant itself (audit.IncidentFile.ForTenant); its ledger listing is its
// tenant log (scanTenantLog): positions and leaves as its proofs number
// and hash them, no global sequence number.
//
//	GET   /compliance/v1/incidents                   compliance:read — incidents affecting the caller's tenant
//	GET   /compliance/v1/incidents/{id}              compliance:read
//	POST  /compliance/v1/incidents                   compliance:write + admin — open (an audit.IncidentVersion)
//	PATCH /compliance/v1/incidents/{id}              compliance:write + admin — a new version (fields to change)
//	POST  /compliance/v1/incidents/{id}/notices      compliance:write + admin — record a notice sent
//	GET   /compliance/v1/incidents/{id}/drafts/{kind} compliance:read — notice draft, text/plain (drafts.go)
//	GET   /compliance/v1/ledger?from=N&to=M[&tenant=T] compliance:read — JSON Lines: with admin ledger rows by seq; else (or with tenant=T) the tenant log by position
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
	mux.Handle("GET /compliance/v1/incidents/{id}/drafts/{kind}", read(s.incidentDraft))
	mux.Handle("GET /compliance/v1/ledger", read(s.ledgerRange))
	mux.Handle("POST /compliance/v1/ledger/verify", s.auth(s.verifyLedger, tenancy.ScopeComplianceRead, tenancy.ScopeAdmin))
	s.tlogRoutes(mux) // /compliance/v1/tlog/... (tlog.go)
}

// operator reports whether p is one of the operator's admin or compliance
// officers, who see the whole register and ledger. The admin scope is what
// makes one (tenancy has no other mark of the operator): whoever grants
// client scopes must keep it to the operator's own officers. Everyone else
// is a tenant principal and sees its own tenant's part only.
func operator(p tenancy.Principal) bool { return p.Has(tenancy.ScopeAdmin) }

// visible reports whether the caller may see an incident.
func visible(p tenancy.Principal, f audit.IncidentFile) bool {
	if operator(p) {
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
			return ErrBadField.Withf("%v", err)
		}
		v.Version, v.Incident = version, id
		return nil
	})
}

// scanLedger hands fn the ledger rows in [from, to] (seq; to 0: the head),
// every tenant's: the operator's view (admin). A tenant principal's
// listing is its tenant log instead (scanTenantLog). It is a compliance
// stream (streams.go).
//
// Errors: ErrTooManyComplianceStreams before any row; the ledger's errors; fn's.
func (s *Server) scanLedger(ctx context.Context, p tenancy.Principal, from, to uint64, fn func(audit.Record) error) error {
	release, err := s.streams.acquire(p.Tenant)
	if err != nil {
		return err
	}
	defer release()
	if from == 0 {
		from = 1
	}
	return s.cfg.Ledger.Scan(ctx, from, to, fn)
}

// scanTenantLog is the ledger listing of a tenant principal: the leaves of
// its own tenant log t (an operator may name any tenant's, tenantLogOf) (audit.TenantLeaf: its entries verbatim, and the
// entries that name it with other tenants — shared violations, incident
// events — as redacted audit.TenantViews) at positions from..to (to 0:
// its end), in position order. The listing IS the log: row i is the leaf
// at position i, the exact bytes hashed, so a tenant takes a row's
// position to /compliance/v1/tlog/tenant/inclusion?seq=i and checks
// tlog.RecordHash of the row's payload against its tenant checkpoint. It
// never carries the global sequence number, the chain hashes (which cover
// it) or the entry's tenant column (which may name another tenant): those
// would count other tenants' traffic, or name them. Positions are stable:
// the log only grows. Each call indexes the entries appended since the
// last (auditpg.Store.TenantEntries) and reads the rows it lists, never
// the whole ledger. A compliance stream.
//
// Errors: ErrTooManyComplianceStreams before any row; the ledger's errors
// (auditpg.ErrOutOfRange for to before from); fn's.
func (s *Server) scanTenantLog(ctx context.Context, p tenancy.Principal, t cloison.TenantID, from, to uint64, fn func(auditpg.TenantLogEntry) error) error {
	release, err := s.streams.acquire(p.Tenant)
	if err != nil {
		return err
	}
	defer release()
	return s.cfg.Ledger.TenantEntries(ctx, t, from, to, fn)
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
	p := principal(r)
	fs, err := s.incidents(r.Context(), p)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	out, err := s.incidentViews(r.Context(), p, fs, timeNow())
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
	out, err := s.incidentViews(r.Context(), principal(r), []audit.IncidentFile{f}, timeNow())
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, out[0])
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

// ledgerRange streams ledger rows as JSON Lines, each payload the exact
// canonical bytes that were hashed. The operator (admin)
// reads the ledger: {"seq" (global), "prev_hash", "hash", "kind",
// "tenant", "payload"} for seq in [from, to]. A tenant reads its tenant
// log (scanTenantLog): {"seq" (the position in its log, as the tenant
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
	var t cloison.TenantID
	if named := q.Get("tenant"); named != "" || !operator(p) {
		var err error
		if t, err = tenantLogOf(p, named); err != nil {
			WriteHTTPError(w, err)
			return
		}
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // payloads as hashed: RFC 8785 leaves <, > and & unescaped
	defer clearWriteDeadline(w)
	wrote := false
	var err error
	if t == "" {
		err = s.scanLedger(r.Context(), p, from, to, func(rec audit.Record) error {
			wrote = true
			s.streams.writeWithin(w)
			return enc.Encode(map[string]any{"seq": rec.Seq, "prev_hash": rec.PrevHash, "hash": rec.Hash, "kind": rec.Kind,
				"tenant": rec.Tenant, "payload": json.RawMessage(rec.Payload)})
		})
	} else {
		err = s.scanTenantLog(r.Context(), p, t, from, to, func(e auditpg.TenantLogEntry) error {
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
