package api

import (
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/cloison/cloison"
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

func (s *Server) actor(r *http.Request) audit.Name {
	return audit.Name(sanitizeName("admin:" + principal(r).Subject))
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
	if err := t.Validate(); err != nil {
		WriteHTTPError(w, err)
		return
	}
	// The partition first: a tenant the pool cannot hold is not created.
	if err := s.cfg.Pool.AddTenant(PoolTenant(t)); err != nil {
		WriteHTTPError(w, err)
		return
	}
	created, err := s.cfg.Tenants.CreateTenant(r.Context(), t)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	if _, err := s.append(r.Context(), created.ID, audit.TenantChange{Op: audit.TenantCreated, Tier: audit.Name(created.Tier.String()), ConfigDigest: configDigest(created)}); err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 201, created)
}

func (s *Server) setStatus(st tenancy.Status) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, err := s.cfg.Tenants.SetStatus(r.Context(), cloison.TenantID(r.PathValue("id")), st)
		if err != nil {
			WriteHTTPError(w, err)
			return
		}
		op := audit.TenantUpdated
		if st == tenancy.StatusSuspended {
			op = audit.TenantDisabled
		}
		if _, err := s.append(r.Context(), t.ID, audit.TenantChange{Op: op, Tier: audit.Name(t.Tier.String()), ConfigDigest: configDigest(t)}); err != nil {
			WriteHTTPError(w, err)
			return
		}
		writeJSON(w, 200, t)
	}
}

func (s *Server) poolStatus(w http.ResponseWriter, r *http.Request) {
	run, wait := s.cfg.Engine.Load()
	writeJSON(w, 200, map[string]any{"attestation": s.cfg.Engine.Attestation(), "pool": s.cfg.Pool.Stats(), "running": run, "waiting": wait})
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Keys == nil {
		WriteHTTPError(w, cloison.NewError(cloison.CodeNotFound, "no key ring on this node"))
		return
	}
	writeJSON(w, 200, map[string]any{"keys": s.cfg.Keys.Keys()})
}

func (s *Server) rotateKeys(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Keys == nil {
		WriteHTTPError(w, cloison.NewError(cloison.CodeNotFound, "no key ring on this node"))
		return
	}
	if err := s.cfg.Keys.Rotate(r.Context()); err != nil {
		WriteHTTPError(w, err)
		return
	}
	for _, k := range s.cfg.Keys.Keys() {
		if k.State == tenancy.KeyCurrent {
			if _, err := s.append(r.Context(), "", audit.KeyChange{Op: audit.KeyRotated, Key: audit.Name(sanitizeName(k.ID)), Purpose: "jwt", PublicKeyDigest: sha256.Sum256(k.Public)}); err != nil {
				WriteHTTPError(w, err)
				return
			}
		}
	}
	writeJSON(w, 200, map[string]any{"keys": s.cfg.Keys.Keys()})
}

func (s *Server) reloadPolicies(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Files map[string]string `json:"files"`
	}
	if err := decode(r.Body, 8*s.cfg.MaxBody, &body); err != nil {
		WriteHTTPError(w, err)
		return
	}
	if len(body.Files) == 0 {
		WriteHTTPError(w, fmt.Errorf("%w: files is empty", ErrBadField))
		return
	}
	rev, err := s.cfg.Decider.Reload(r.Context(), body.Files)
	if err != nil {
		WriteHTTPError(w, err)
		return
	}
	digest, _ := audit.ParseDigest(trimSHA(rev))
	if _, err := s.append(r.Context(), "", audit.PolicyReloaded{Revision: digest, Files: int64(len(body.Files)), Actor: s.actor(r)}); err != nil {
		WriteHTTPError(w, err)
		return
	}
	writeJSON(w, 200, map[string]string{"revision": rev})
}

func trimSHA(s string) string {
	if len(s) > 7 && s[:7] == "sha256:" {
		return s[7:]
	}
	return s
}

var _ = errors.New
