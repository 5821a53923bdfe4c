package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/cloison/cloison/service"
	"net/http"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/isolation"
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
//	GET  /admin/v1/register/organisation the organisation and privacy officer new register entries name
//	PUT  /admin/v1/register/organisation {"organization": {"name", "neq"}, "contact": {"name", "title", "phone", "email"}}:
//	                                     a new settings version (register row; the ledger event holds its digest)
//
// Every change is ledgered in the same transaction as the change (tenancy
// Store with a ledger; the policy swap waits for its event): when the
// ledger cannot record it, the change does not happen and the caller gets
// unavailable.
func (s *Server) adminRoutes(mux *http.ServeMux) {
	a := func(h http.HandlerFunc) http.Handler { return s.auth(h, tenancy.ScopeAdmin) }
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
	mux.Handle("POST /admin/v1/policies/reload", a(s.reloadPolicies))
	mux.Handle("GET /admin/v1/register/organisation", a(s.getRegisterSettings))
	mux.Handle("PUT /admin/v1/register/organisation", a(s.putRegisterSettings))
}

func (s *Server) actor(r *http.Request) audit.Name { return actorOf(principal(r)) }

// actorOf is the ledger actor of an admin operation.
func actorOf(p tenancy.Principal) audit.Name {
	return audit.Name(sanitizeName("admin:" + p.Subject))
}

// asAdmin returns ctx carrying, for the tenancy store's ledger events, the
// actor of the admin who called (over HTTP or gRPC).
func asAdmin(ctx context.Context) context.Context {
	p, ok := ctx.Value(principalKey{}).(tenancy.Principal)
	if !ok {
		p = grpcPrincipal(ctx)
	}
	return tenancy.WithActor(ctx, actorOf(p))
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	ts, err := s.cfg.Tenants.Tenants(r.Context())
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"tenants": ts})
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) {
	t, err := s.cfg.Tenants.Tenant(r.Context(), cloison.TenantID(r.PathValue("id")))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, t)
}

// PoolTenant is the KV partition a tenant record implies.
func PoolTenant(t tenancy.Tenant) isolation.TenantConfig { return service.PoolTenant(t) }

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) {
	var t tenancy.Tenant
	if err := decode(r.Body, s.cfg.MaxBody, &t); err != nil {
		WriteHTTPError(w, err)
		return
	}
	created, err := s.doCreateTenant(r.Context(), t)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, created)
}

// doCreateTenant validates t, gives it its KV partition on this node (first:
// a tenant the pool cannot hold is not created), then stores it with its
// tenant.created event in one transaction.
func (s *Server) doCreateTenant(ctx context.Context, t tenancy.Tenant) (tenancy.Tenant, error) {
	if err := t.Validate(); err != nil {
		return tenancy.Tenant{}, err
	}
	if err := s.cfg.Engine.AddTenant(PoolTenant(t)); err != nil && !s.leftoverPartition(ctx, t) {
		return tenancy.Tenant{}, err
	}
	return s.cfg.Tenants.CreateTenant(asAdmin(ctx), t)
}

// leftoverPartition reports whether the pool already holds a partition for
// t that an earlier create left behind (the store, or its ledger, refused
// it): no stored tenant has the id, and the partition has t's tier and
// reserved pages and at least its zeroing. A retried create reuses it
// rather than failing until the node restarts.
func (s *Server) leftoverPartition(ctx context.Context, t tenancy.Tenant) bool {
	if _, err := s.cfg.Tenants.Tenant(ctx, t.ID); !errors.Is(err, tenancy.ErrNotFound) {
		return false
	}
	want := PoolTenant(t)
	st, err := s.cfg.Engine.TenantIsolation(t.ID)
	return err == nil && st.Tier == want.Tier && st.Reserved == want.Reserved && st.Zeroing >= want.Zeroing
}

func (s *Server) setStatus(st tenancy.Status) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, err := s.doSetStatus(r.Context(), cloison.TenantID(r.PathValue("id")), st)
		if err != nil {
			WriteHTTPError(w, err)
			return
		}
		writeJSON(w, 200, t)
	}
}

// doSetStatus suspends or reactivates a tenant, with its ledger event in the
// same transaction.
func (s *Server) doSetStatus(ctx context.Context, id cloison.TenantID, st tenancy.Status) (tenancy.Tenant, error) {
	return s.cfg.Tenants.SetStatus(asAdmin(ctx), id, st)
}

// TenantUpdate is what PATCH /admin/v1/tenants/{id} (and UpdateTenant) may
// change: nil fields stay as they are.
type TenantUpdate struct {
	Quotas *struct {
		MaxConcurrent   *int `json:"max_concurrent"`
		KVPages         *int `json:"kv_pages"`
		TokensPerMinute *int `json:"tokens_per_minute"`
		MaxContext      *int `json:"max_context"`
	} `json:"quotas"`
	AllowedModels *[]string `json:"allowed_models"`
	// IncidentContact and NoticeDeadlineHours are the tenant's notice
	// clause (issue 17 §4): where the art. 18.3 notice goes and within how
	// many hours of the register first naming the tenant (0: none agreed).
	IncidentContact     *string `json:"incident_contact"`
	NoticeDeadlineHours *int    `json:"notice_deadline_hours"`
	// Residency (issue 17 §5) replaces the tenant's allowed regions and
	// required node tier, both ("regions": [] and "tier": "": any).
	Residency *tenancy.Residency `json:"residency"`
}

// ErrKVPagesFixed: a tenant's kv_pages is its KV partition on every node,
// made when the tenant is; update cannot change it.
var ErrKVPagesFixed = cloison.NewError(cloison.CodeInvalid, "kv_pages cannot be changed by an update (it is the tenant's KV partition)")

func (s *Server) updateTenant(w http.ResponseWriter, r *http.Request) {
	var u TenantUpdate
	// Strict: a misspelt field (say "notice_deadline") is refused as
	// unsupported, never ignored while the update reports success.
	if err := decodeStrict(r.Body, s.cfg.MaxBody, &u); err != nil {
		WriteHTTPError(w, err)
		return
	}
	t, err := s.doUpdateTenant(r.Context(), cloison.TenantID(r.PathValue("id")), u)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, t)
}

// doUpdateTenant changes a tenant's quotas, allowed models, notice
// clause and residency (checked as
// at creation) with its tenant.updated event in the same transaction; they
// apply to the tenant's next request on every node (Verify reads the record
// on each). kv_pages may only be restated, not changed (ErrKVPagesFixed).
func (s *Server) doUpdateTenant(ctx context.Context, id cloison.TenantID, u TenantUpdate) (tenancy.Tenant, error) {
	return s.cfg.Tenants.UpdateTenant(asAdmin(ctx), id, func(t *tenancy.Tenant) error {
		if q := u.Quotas; q != nil {
			if q.KVPages != nil && *q.KVPages != t.Quotas.KVPages {
				return ErrKVPagesFixed
			}
			for _, f := range []struct {
				v   *int
				dst *int
			}{{q.MaxConcurrent, &t.Quotas.MaxConcurrent}, {q.TokensPerMinute, &t.Quotas.TokensPerMinute}, {q.MaxContext, &t.Quotas.MaxContext}} {
				if f.v != nil {
					*f.dst = *f.v
				}
			}
		}
		if u.AllowedModels != nil {
			t.AllowedModels = *u.AllowedModels
		}
		if u.IncidentContact != nil {
			t.IncidentContact = *u.IncidentContact
		}
		if u.NoticeDeadlineHours != nil {
			t.NoticeDeadlineHours = *u.NoticeDeadlineHours
		}
		if u.Residency != nil {
			t.Residency = *u.Residency
			if t.Residency.Regions == nil {
				t.Residency.Regions = []string{}
			}
		}
		return nil
	})
}

func (s *Server) listClients(w http.ResponseWriter, r *http.Request) {
	cs, err := s.cfg.Tenants.Clients(r.Context(), cloison.TenantID(r.PathValue("id")))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	if cs == nil {
		cs = []tenancy.Client{}
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
	out, err := s.doCreateClient(r.Context(), c)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, out)
}

// doCreateClient registers an API client with its client.created event in
// one transaction.
func (s *Server) doCreateClient(ctx context.Context, c tenancy.Client) (tenancy.Client, error) {
	c.Status, c.CreatedAt, c.RevokedAt = "", time.Time{}, time.Time{}
	return s.cfg.Tenants.CreateClient(asAdmin(ctx), c)
}

func (s *Server) revokeClient(w http.ResponseWriter, r *http.Request) {
	c, err := s.doRevokeClient(r.Context(), r.PathValue("id"))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, c)
}

// doRevokeClient revokes an API client with its client.revoked event in one
// transaction; its tokens stop verifying at once on this node and within
// tenancy.ClientCacheTTL on the others.
func (s *Server) doRevokeClient(ctx context.Context, id string) (tenancy.Client, error) {
	return s.cfg.Tenants.RevokeClient(asAdmin(ctx), id)
}

// TokenRevocation names one token to revoke: its jti and iss claims, and
// its exp (the list keeps it until then).
type TokenRevocation struct {
	TokenID   string           `json:"jti"`
	Issuer    string           `json:"issuer"`
	ExpiresAt time.Time        `json:"expires_at"`
	Tenant    cloison.TenantID `json:"tenant,omitempty"`
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	var tr TokenRevocation
	if err := decode(r.Body, s.cfg.MaxBody, &tr); err != nil {
		WriteHTTPError(w, err)
		return
	}
	if err := s.doRevokeToken(r.Context(), tr); err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]string{"revoked": tr.TokenID})
}

// doRevokeToken puts one token on the revocation list with its
// token.revoked event in one transaction.
func (s *Server) doRevokeToken(ctx context.Context, tr TokenRevocation) error {
	return s.cfg.Tenants.RevokeToken(asAdmin(ctx), tr.Issuer, tr.TokenID, tr.Tenant, tr.ExpiresAt)
}

// poolState is what the pool status operation reports.
type poolState struct {
	Attestation attest.Attestation `json:"attestation"`
	Pool        isolation.Stats    `json:"pool"`
	Running     int                `json:"running"`
	Waiting     int                `json:"waiting"`
}

func (s *Server) poolState() poolState {
	run, wait := s.cfg.Engine.Load()
	return poolState{Attestation: s.cfg.Engine.Attestation(), Pool: s.cfg.Engine.PoolStats(), Running: run, Waiting: wait}
}

func (s *Server) poolStatus(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, 200, s.poolState())
}

// errNoKeyRing: this node holds no signing keys.
var errNoKeyRing = cloison.NewError(cloison.CodeNotFound, "no key ring on this node")

func (s *Server) keys() ([]tenancy.KeyInfo, error) {
	if s.cfg.Keys == nil {
		return nil, errNoKeyRing
	}
	return s.cfg.Keys.Keys(), nil
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.keys()
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"keys": ks})
}

func (s *Server) rotateKeys(w http.ResponseWriter, r *http.Request) {
	ks, err := s.doRotateKeys(r.Context())
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"keys": ks})
}

// doRotateKeys rotates the JWT signing keys; the ring ledgers every step in
// the rotation's transaction. Errors: tenancy.ErrRotateTooSoon within the
// ring's minimum interval.
func (s *Server) doRotateKeys(ctx context.Context) ([]tenancy.KeyInfo, error) {
	if s.cfg.Keys == nil {
		return nil, errNoKeyRing
	}
	if err := s.cfg.Keys.Rotate(asAdmin(ctx)); err != nil {
		return nil, err
	}
	return s.cfg.Keys.Keys(), nil
}

func (s *Server) retireKey(w http.ResponseWriter, r *http.Request) {
	ks, err := s.doRetireKey(r.Context(), r.PathValue("kid"))
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]any{"keys": ks})
}

// doRetireKey retires one signing key (not the current one) with its
// key.revoked event in one transaction: its tokens stop verifying at once
// on this node and at the next key refresh on the others.
func (s *Server) doRetireKey(ctx context.Context, kid string) ([]tenancy.KeyInfo, error) {
	if s.cfg.Keys == nil {
		return nil, errNoKeyRing
	}
	if err := s.cfg.Keys.Retire(asAdmin(ctx), kid); err != nil {
		return nil, err
	}
	return s.cfg.Keys.Keys(), nil
}

func (s *Server) reloadPolicies(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Files map[string]string `json:"files"`
	}
	if err := decode(r.Body, 8*s.cfg.MaxBody, &body); err != nil {
		WriteHTTPError(w, err)
		return
	}
	rev, err := s.doReloadPolicies(r.Context(), s.actor(r), body.Files)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]string{"revision": rev})
}

// doReloadPolicies prepares a new Rego bundle (the Decider compiles, tests
// and probes it), ledgers policy.reloaded with its digest, and only then
// swaps it in: a reload the ledger did not record does not serve.
func (s *Server) doReloadPolicies(ctx context.Context, actor audit.Name, files map[string]string) (string, error) {
	if len(files) == 0 {
		return "", ErrBadField.Withf("files is empty")
	}
	return s.cfg.Decider.ReloadWith(ctx, files, func(rev string) error {
		digest, _ := audit.ParseDigest(trimSHA(rev))
		_, err := s.append(ctx, "", audit.PolicyReloaded{Revision: digest, Files: int64(len(files)), Actor: actor})
		return err
	})
}

func trimSHA(s string) string {
	if len(s) > 7 && s[:7] == "sha256:" {
		return s[7:]
	}
	return s
}

func (s *Server) getRegisterSettings(w http.ResponseWriter, r *http.Request) {
	set, err := s.cfg.Ledger.RegisterSettings(r.Context())
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
	if body.Organization == nil || body.Contact == nil {
		WriteHTTPError(w, ErrBadField.Withf("organization and contact are required"))
		return
	}
	set, err := s.cfg.Ledger.SetRegisterSettings(r.Context(), s.actor(r), *body.Organization, *body.Contact)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, set)
}
