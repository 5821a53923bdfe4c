package api

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
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
//	GET  /admin/v1/pool                  KV pool status and the capacity attestation
//	GET  /admin/v1/keys                  signing keys (public halves)
//	POST /admin/v1/keys/rotate           rotate the JWT signing keys
//	POST /admin/v1/policies/reload       {"files": {"name.rego": "..."}}; ledgered with the bundle digest
func (s *Server) adminRoutes(mux *http.ServeMux) {
	a := func(h http.HandlerFunc) http.Handler { return s.auth(h, tenancy.ScopeAdmin) }
	mux.Handle("GET /admin/v1/tenants", a(s.listTenants))
	mux.Handle("POST /admin/v1/tenants", a(s.createTenant))
	mux.Handle("GET /admin/v1/tenants/{id}", a(s.getTenant))
	mux.Handle("POST /admin/v1/tenants/{id}/suspend", a(s.setStatus(tenancy.StatusSuspended)))
	mux.Handle("POST /admin/v1/tenants/{id}/activate", a(s.setStatus(tenancy.StatusActive)))
	mux.Handle("GET /admin/v1/pool", a(s.poolStatus))
	mux.Handle("GET /admin/v1/keys", a(s.listKeys))
	mux.Handle("POST /admin/v1/keys/rotate", a(s.rotateKeys))
	mux.Handle("POST /admin/v1/policies/reload", a(s.reloadPolicies))
}

func (s *Server) actor(r *http.Request) audit.Name { return actorOf(principal(r)) }

// actorOf is the ledger actor of an admin operation.
func actorOf(p tenancy.Principal) audit.Name {
	return audit.Name(sanitizeName("admin:" + p.Subject))
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
func PoolTenant(t tenancy.Tenant) isolation.TenantConfig {
	tc := isolation.TenantConfig{ID: t.ID, Tier: t.Tier, Zeroing: t.Zeroing, Cap: t.Quotas.KVPages}
	if t.Tier == isolation.TierDedicated {
		tc.Reserved = t.Quotas.KVPages
	}
	return tc
}

func configDigest(v any) audit.Digest {
	b, _ := json.Marshal(v)
	return sha256.Sum256(b)
}

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
// a tenant the pool cannot hold is not created), stores it and ledgers
// tenant.created.
func (s *Server) doCreateTenant(ctx context.Context, t tenancy.Tenant) (tenancy.Tenant, error) {
	if err := t.Validate(); err != nil {
		return tenancy.Tenant{}, err
	}
	if err := s.cfg.Pool.AddTenant(PoolTenant(t)); err != nil {
		return tenancy.Tenant{}, err
	}
	created, err := s.cfg.Tenants.CreateTenant(ctx, t)
	if err != nil {
		return tenancy.Tenant{}, err
	}
	if _, err := s.append(ctx, created.ID, audit.TenantChange{Op: audit.TenantCreated, Tier: audit.Name(created.Tier.String()), ConfigDigest: configDigest(created)}); err != nil {
		return tenancy.Tenant{}, err
	}
	return created, nil
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

// doSetStatus suspends or reactivates a tenant and ledgers the change.
func (s *Server) doSetStatus(ctx context.Context, id cloison.TenantID, st tenancy.Status) (tenancy.Tenant, error) {
	t, err := s.cfg.Tenants.SetStatus(ctx, id, st)
	if err != nil {
		return tenancy.Tenant{}, err
	}
	op := audit.TenantUpdated
	if st == tenancy.StatusSuspended {
		op = audit.TenantDisabled
	}
	if _, err := s.append(ctx, t.ID, audit.TenantChange{Op: op, Tier: audit.Name(t.Tier.String()), ConfigDigest: configDigest(t)}); err != nil {
		return tenancy.Tenant{}, err
	}
	return t, nil
}

// poolState is what the pool status operation reports.
type poolState struct {
	Attestation engine.Attestation `json:"attestation"`
	Pool        isolation.Stats    `json:"pool"`
	Running     int                `json:"running"`
	Waiting     int                `json:"waiting"`
}

func (s *Server) poolState() poolState {
	run, wait := s.cfg.Engine.Load()
	return poolState{Attestation: s.cfg.Engine.Attestation(), Pool: s.cfg.Pool.Stats(), Running: run, Waiting: wait}
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

// doRotateKeys rotates the JWT signing keys and ledgers the new current key.
func (s *Server) doRotateKeys(ctx context.Context) ([]tenancy.KeyInfo, error) {
	if s.cfg.Keys == nil {
		return nil, errNoKeyRing
	}
	if err := s.cfg.Keys.Rotate(ctx); err != nil {
		return nil, err
	}
	for _, k := range s.cfg.Keys.Keys() {
		if k.State == tenancy.KeyCurrent {
			if _, err := s.append(ctx, "", audit.KeyChange{Op: audit.KeyRotated, Key: audit.Name(sanitizeName(k.ID)), Purpose: "jwt", PublicKeyDigest: sha256.Sum256(k.Public)}); err != nil {
				return nil, err
			}
		}
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

// doReloadPolicies swaps in a new Rego bundle (the Decider tests and probes
// it first) and ledgers policy.reloaded with its digest.
func (s *Server) doReloadPolicies(ctx context.Context, actor audit.Name, files map[string]string) (string, error) {
	if len(files) == 0 {
		return "", ErrBadField.Withf("files is empty")
	}
	rev, err := s.cfg.Decider.Reload(ctx, files)
	if err != nil {
		return "", err
	}
	digest, _ := audit.ParseDigest(trimSHA(rev))
	if _, err := s.append(ctx, "", audit.PolicyReloaded{Revision: digest, Files: int64(len(files)), Actor: actor}); err != nil {
		return "", err
	}
	return rev, nil
}

func trimSHA(s string) string {
	if len(s) > 7 && s[:7] == "sha256:" {
		return s[7:]
	}
	return s
}
