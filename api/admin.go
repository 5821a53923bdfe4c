package api

import (
	"bytes"
	"encoding/json"
	"net/http"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/service"
	"github.com/cloison/cloison/tenancy"
)

// adminRoutes: every route needs the admin scope.
//
//	GET  /admin/v1/tenants               list tenants
//	POST /admin/v1/tenants               create a tenant (and its KV partition on this node)
//	GET  /admin/v1/tenants/{id}          one tenant
//	POST /admin/v1/tenants/{id}/suspend  suspend (tokens stop verifying at once)
//	POST /admin/v1/tenants/{id}/activate reactivate
//	PATCH /admin/v1/tenants/{id}         {"quotas": {...}, "allowed_models": [...], "residency": {"regions": [...], "tier": ""}}: fields given change
//	GET  /admin/v1/tenants/{id}/clients  the tenant's API clients
//	POST /admin/v1/tenants/{id}/clients  {"id", "name", "scopes"}: register an API client (id = JWT sub)
//	POST /admin/v1/clients/{id}/revoke   revoke an API client (its tokens stop verifying)
//	POST /admin/v1/tokens/revoke         {"jti", "issuer", "expires_at", "tenant"}: revoke one token
//	GET  /admin/v1/pool                  KV pool status and the capacity attestation
//	GET  /admin/v1/keys                  signing keys (public halves)
//	POST /admin/v1/keys/rotate           rotate the JWT signing keys (refused within the minimum interval)
//	POST /admin/v1/keys/{kid}/retire     retire one key (not the current one) at once
//	POST /admin/v1/policies/reload       {"files": {"name.rego": "..."}}; ledgered with the bundle digest
//	GET  /admin/v1/policies              the serving bundle: {"revision", "files": {"name.rego": "..."}}
//	GET  /admin/v1/register/organisation the organisation and privacy officer new register entries name
//	PUT  /admin/v1/register/organisation {"organization": {"name", "neq"}, "contact": {"name", "title", "phone", "email"}}:
//	                                     a new settings version (register row; the ledger event holds its digest)
//	GET  /admin/v1/models                the models served, with digest, bytes and pool (models.go)
//	POST /admin/v1/models                {"path", "id"}: load a model from the model directory; ledgered (model.loaded)
//	DELETE /admin/v1/models/{id}         unload a model; ledgered (model.unloaded)
//	POST /admin/v1/adapters              {"tenant", "name", "path", "model"}: register a tenant's LoRA adapter from the model directory; ledgered (adapter.registered)
//	GET /admin/v1/tenants/{t}/adapters   the tenant's adapters
//	DELETE /admin/v1/tenants/{t}/adapters/{name}[?model=M]  unregister one; ledgered (adapter.unregistered)
//
// The operations are service.Admin's, shared with the gRPC AdminService:
// every change is ledgered in the same transaction as the change (tenancy
// Store with a ledger; the policy swap waits for its event): when the
// ledger cannot record it, the change does not happen and the caller gets
// unavailable.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	a := func(h http.HandlerFunc) http.Handler { return s.auth(plainBody(h, s.cfg.MaxBody), tenancy.ScopeAdmin) }
	mux.Handle("GET /admin/v1/tenants", a(s.listTenants))
	mux.Handle("POST /admin/v1/tenants", a(s.createTenant))
	mux.Handle("GET /admin/v1/tenants/{id}", a(s.getTenant))
	mux.Handle("POST /admin/v1/tenants/{id}/suspend", a(s.setStatus(tenancy.StatusSuspended)))
	mux.Handle("POST /admin/v1/tenants/{id}/activate", a(s.setStatus(tenancy.StatusActive)))
	mux.Handle("PATCH /admin/v1/tenants/{id}", a(s.updateTenant))
	mux.Handle("GET /admin/v1/tenants/{id}/clients", a(s.listClients))
	mux.Handle("POST /admin/v1/tenants/{id}/clients", a(s.createClient))
	mux.Handle("POST /admin/v1/clients/{id}/revoke", a(s.revokeClient))
	mux.Handle("POST /admin/v1/tokens/revoke", a(s.revokeToken))
	mux.Handle("GET /admin/v1/pool", a(s.poolStatus))
	mux.Handle("GET /admin/v1/keys", a(s.listKeys))
	mux.Handle("POST /admin/v1/keys/rotate", a(s.rotateKeys))
	mux.Handle("POST /admin/v1/keys/{kid}/retire", a(s.retireKey))
	mux.Handle("GET /admin/v1/policies", a(s.currentPolicy))
	mux.Handle("POST /admin/v1/policies/reload", s.auth(s.reloadPolicies, tenancy.ScopeAdmin)) // policy files are code: CRLF allowed
	mux.Handle("GET /admin/v1/register/organisation", a(s.getRegisterSettings))
	mux.Handle("PUT /admin/v1/register/organisation", a(s.putRegisterSettings))
	s.adminModelRoutes(mux, a)
	s.adminAdapterRoutes(mux, a)
}

func (s *Server) actor(r *http.Request) audit.Name { return actorOf(principal(r)) }

// actorOf is the ledger actor of an admin operation.
func actorOf(p tenancy.Principal) audit.Name { return service.AdminActor(p) }

// PoolTenant is the KV partition a tenant record implies.
func PoolTenant(t tenancy.Tenant) isolation.TenantConfig { return service.PoolTenant(t) }

// TenantUpdate is what PATCH /admin/v1/tenants/{id} (and UpdateTenant) may
// change: nil fields stay as they are.
type TenantUpdate = service.TenantUpdate

// TokenRevocation names one token to revoke: its jti and iss claims, and
// its exp (the list keeps it until then).
type TokenRevocation = service.TokenRevocation

// ErrKVPagesFixed: a tenant's kv_pages is its KV partition on every node,
// made when the tenant is; update cannot change it.
var ErrKVPagesFixed = service.ErrKVPagesFixed

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	ts, err := s.ops.admin.Tenants(r.Context())
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"tenants": ts})
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) {
	t, err := s.ops.admin.Tenant(r.Context(), cloison.TenantID(r.PathValue("id")))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, t)
}

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) {
	var t tenancy.Tenant
	if err := decode(r.Body, s.cfg.MaxBody, &t); err != nil {
		WriteHTTPError(w, err)
		return
	}
	created, err := s.ops.admin.CreateTenant(r.Context(), s.actor(r), t)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, created)
}

func (s *Server) setStatus(st tenancy.Status) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, err := s.ops.admin.SetStatus(r.Context(), s.actor(r), cloison.TenantID(r.PathValue("id")), st)
		if err != nil {
			WriteHTTPError(w, err)
			return
		}
		writeJSON(w, 200, t)
	}
}

func (s *Server) updateTenant(w http.ResponseWriter, r *http.Request) {
	var u TenantUpdate
	// Strict: a misspelt field (say "notice_deadline") is refused as
	// unsupported, never ignored while the update reports success.
	if err := decodeStrict(r.Body, s.cfg.MaxBody, &u); err != nil {
		WriteHTTPError(w, err)
		return
	}
	t, err := s.ops.admin.UpdateTenant(r.Context(), s.actor(r), cloison.TenantID(r.PathValue("id")), u)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, t)
}

func (s *Server) listClients(w http.ResponseWriter, r *http.Request) {
	cs, err := s.ops.admin.Clients(r.Context(), cloison.TenantID(r.PathValue("id")))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"clients": cs})
}

func (s *Server) createClient(w http.ResponseWriter, r *http.Request) {
	var c tenancy.Client
	if err := decode(r.Body, s.cfg.MaxBody, &c); err != nil {
		WriteHTTPError(w, err)
		return
	}
	c.Tenant = cloison.TenantID(r.PathValue("id"))
	out, err := s.ops.admin.CreateClient(r.Context(), s.actor(r), c)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, out)
}

func (s *Server) revokeClient(w http.ResponseWriter, r *http.Request) {
	c, err := s.ops.admin.RevokeClient(r.Context(), s.actor(r), r.PathValue("id"))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, c)
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	var tr TokenRevocation
	if err := decode(r.Body, s.cfg.MaxBody, &tr); err != nil {
		WriteHTTPError(w, err)
		return
	}
	if err := s.ops.admin.RevokeToken(r.Context(), s.actor(r), tr); err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]string{"revoked": tr.TokenID})
}

// poolStatus answers GET /admin/v1/pool: the node's first model's pool
// state (as it always did) and under "models" every served model's, the
// first model's first; each attestation names every tenant's adapters of
// its model (an admin's view).
func (s *Server) poolStatus(w http.ResponseWriter, r *http.Request) {
	all := s.poolStates()
	writeJSON(w, 200, struct {
		service.PoolState
		Models []service.PoolState `json:"models"`
	}{all[0], all})
}

// poolStates is every served model's pool state (service.PoolStateOf), the
// node's first model's first.
func (s *Server) poolStates() []service.PoolState {
	var out []service.PoolState
	for _, v := range s.views() {
		out = append(out, service.PoolStateOf(v.cfg.Engine, v.req.Adapters()))
	}
	return out
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.ops.admin.Keys()
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"keys": ks})
}

func (s *Server) rotateKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.ops.admin.RotateKeys(r.Context(), s.actor(r))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"keys": ks})
}

func (s *Server) retireKey(w http.ResponseWriter, r *http.Request) {
	ks, err := s.ops.admin.RetireKey(r.Context(), s.actor(r), r.PathValue("kid"))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"keys": ks})
}

func (s *Server) reloadPolicies(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Files map[string]string `json:"files"`
	}
	if err := decode(r.Body, 8*s.cfg.MaxBody, &body); err != nil {
		WriteHTTPError(w, err)
		return
	}
	rev, err := s.ops.admin.ReloadPolicies(r.Context(), s.actor(r), body.Files)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]string{"revision": rev})
}

func (s *Server) currentPolicy(w http.ResponseWriter, r *http.Request) {
	pol, err := s.ops.admin.Policy()
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, pol)
}

func (s *Server) getRegisterSettings(w http.ResponseWriter, r *http.Request) {
	set, err := s.ops.admin.RegisterSettings(r.Context())
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, set)
}

// putRegisterSettings replaces the organisation and the privacy officer
// (both required, every element given in full; unknown fields refused).
// The register keeps every version; entries already opened keep theirs.
func (s *Server) putRegisterSettings(w http.ResponseWriter, r *http.Request) {
	var raw json.RawMessage
	if err := decode(r.Body, s.cfg.MaxBody, &raw); err != nil {
		WriteHTTPError(w, err)
		return
	}
	var body struct {
		Organization *audit.Organization `json:"organization"`
		Contact      *audit.Contact      `json:"contact"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil {
		WriteHTTPError(w, ErrBadField.Withf("%v", err))
		return
	}
	set, err := s.ops.admin.SetRegisterSettings(r.Context(), s.actor(r), body.Organization, body.Contact)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, set)
}
