package service

import (
	"context"
	"encoding/hex"
	"errors"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

// Errors of the admin operations.
var (
	// ErrKVPagesFixed: a tenant's kv_pages is its KV partition on every
	// node, made when the tenant is; an update cannot change it.
	ErrKVPagesFixed = cloison.NewError(cloison.CodeInvalid, "kv_pages cannot be changed by an update (it is the tenant's KV partition)")
	// ErrNoKeyRing: this node holds no signing keys.
	ErrNoKeyRing = cloison.NewError(cloison.CodeNotFound, "no key ring on this node")
)

// AdminDeps is what the admin operations are made of. Keys is optional
// (nil: the key operations answer ErrNoKeyRing).
type AdminDeps struct {
	Tenants  TenantStore
	Pool     Pool
	Keys     KeyRing
	Policies PolicyReloader
	Register RegisterStore
	// Ledger records the events the stores do not write themselves (the
	// policy reload's, before the new bundle serves).
	Ledger Appender
}

// Admin is the operator's administration of the node: tenants, API
// clients, tokens, signing keys, the policy bundle and the register's
// organisation. Every change is ledgered in the same transaction as the
// change (the stores' own), or before it takes effect (the policy swap
// waits for its event): when the ledger cannot record it, the change does
// not happen and the caller gets an unavailable error. The actor of each
// change is the admin who asked (AdminActor).
type Admin struct{ d AdminDeps }

// NewAdmin returns the admin operations over d.
func NewAdmin(d AdminDeps) *Admin { return &Admin{d: d} }

// PoolTenant is the KV partition a tenant record implies.
func PoolTenant(t tenancy.Tenant) isolation.TenantConfig {
	tc := isolation.TenantConfig{ID: t.ID, Tier: t.Tier, Zeroing: t.Zeroing, Cap: t.Quotas.KVPages}
	if t.Tier == isolation.TierDedicated {
		tc.Reserved = t.Quotas.KVPages
	}
	return tc
}

// Tenants lists every tenant. Errors: the store's.
func (a *Admin) Tenants(ctx context.Context) ([]tenancy.Tenant, error) {
	return a.d.Tenants.Tenants(ctx)
}

// Tenant returns one tenant. Errors: tenancy.ErrNotFound, the store's.
func (a *Admin) Tenant(ctx context.Context, id cloison.TenantID) (tenancy.Tenant, error) {
	return a.d.Tenants.Tenant(ctx, id)
}

// CreateTenant validates t, gives it its KV partition on this node (first:
// a tenant the pool cannot hold is not created), then stores it with its
// tenant.created event in one transaction.
//
// Errors: t.Validate's; the pool's (isolation.ErrInvalidConfig and
// friends) unless a partition an earlier failed create left behind fits
// t; the store's (tenancy.ErrExists, the ledger's).
func (a *Admin) CreateTenant(ctx context.Context, actor audit.Name, t tenancy.Tenant) (tenancy.Tenant, error) {
	if err := t.Validate(); err != nil {
		return tenancy.Tenant{}, err
	}
	if err := a.d.Pool.AddTenant(PoolTenant(t)); err != nil && !a.leftoverPartition(ctx, t) {
		return tenancy.Tenant{}, err
	}
	return a.d.Tenants.CreateTenant(tenancy.WithActor(ctx, actor), t)
}

// leftoverPartition reports whether the pool already holds a partition for
// t that an earlier create left behind (the store, or its ledger, refused
// it): no stored tenant has the id, and the partition has t's tier and
// reserved pages and at least its zeroing. A retried create reuses it
// rather than failing until the node restarts.
func (a *Admin) leftoverPartition(ctx context.Context, t tenancy.Tenant) bool {
	if _, err := a.d.Tenants.Tenant(ctx, t.ID); !errors.Is(err, tenancy.ErrNotFound) {
		return false
	}
	want := PoolTenant(t)
	st, err := a.d.Pool.TenantIsolation(t.ID)
	return err == nil && st.Tier == want.Tier && st.Reserved == want.Reserved && st.Zeroing >= want.Zeroing
}

// SetStatus suspends or reactivates a tenant, with its ledger event in the
// same transaction (a suspended tenant's tokens stop verifying at once).
// Errors: tenancy.ErrNotFound, the store's.
func (a *Admin) SetStatus(ctx context.Context, actor audit.Name, id cloison.TenantID, st tenancy.Status) (tenancy.Tenant, error) {
	return a.d.Tenants.SetStatus(tenancy.WithActor(ctx, actor), id, st)
}

// TenantUpdate is what an update of a tenant may change: nil fields stay
// as they are.
type TenantUpdate struct {
	Quotas *struct {
		MaxConcurrent   *int `json:"max_concurrent"`
		KVPages         *int `json:"kv_pages"`
		TokensPerMinute *int `json:"tokens_per_minute"`
		MaxContext      *int `json:"max_context"`
	} `json:"quotas"`
	AllowedModels *[]string `json:"allowed_models"`
	// IncidentContact and NoticeDeadlineHours are the tenant's notice
	// clause: where the notice to the tenant of an incident affecting it
	// (Loi 25 art. 18.3) goes, and within how many hours of the register
	// first naming the tenant (0: none agreed).
	IncidentContact     *string `json:"incident_contact"`
	NoticeDeadlineHours *int    `json:"notice_deadline_hours"`
	// Residency replaces the tenant's allowed regions and required node
	// tier, both ("regions": [] and "tier": "": any).
	Residency *tenancy.Residency `json:"residency"`
}

// UpdateTenant changes a tenant's quotas, allowed models, notice clause
// and residency (checked as at creation) with its tenant.updated event in
// the same transaction; they apply to the tenant's next request on every
// node (Verify reads the record on each). kv_pages may only be restated,
// not changed.
//
// Errors: ErrKVPagesFixed; tenancy.ErrNotFound; the record's validation;
// the store's.
func (a *Admin) UpdateTenant(ctx context.Context, actor audit.Name, id cloison.TenantID, u TenantUpdate) (tenancy.Tenant, error) {
	return a.d.Tenants.UpdateTenant(tenancy.WithActor(ctx, actor), id, func(t *tenancy.Tenant) error {
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

// Clients lists a tenant's API clients (never nil). Errors: the store's.
func (a *Admin) Clients(ctx context.Context, tenant cloison.TenantID) ([]tenancy.Client, error) {
	cs, err := a.d.Tenants.Clients(ctx, tenant)
	if err == nil && cs == nil {
		cs = []tenancy.Client{}
	}
	return cs, err
}

// CreateClient registers an API client with its client.created event in
// one transaction; status and times are the store's to set, never the
// caller's. Errors: the store's (validation, tenancy.ErrExists, the
// ledger's).
func (a *Admin) CreateClient(ctx context.Context, actor audit.Name, c tenancy.Client) (tenancy.Client, error) {
	c.Status, c.CreatedAt, c.RevokedAt = "", time.Time{}, time.Time{}
	return a.d.Tenants.CreateClient(tenancy.WithActor(ctx, actor), c)
}

// RevokeClient revokes an API client with its client.revoked event in one
// transaction; its tokens stop verifying at once on this node and within
// tenancy.ClientCacheTTL on the others. Errors: tenancy.ErrNotFound, the
// store's.
func (a *Admin) RevokeClient(ctx context.Context, actor audit.Name, id string) (tenancy.Client, error) {
	return a.d.Tenants.RevokeClient(tenancy.WithActor(ctx, actor), id)
}

// TokenRevocation names one token to revoke: its jti and iss claims, and
// its exp (the list keeps it until then).
type TokenRevocation struct {
	TokenID   string           `json:"jti"`
	Issuer    string           `json:"issuer"`
	ExpiresAt time.Time        `json:"expires_at"`
	Tenant    cloison.TenantID `json:"tenant,omitempty"`
}

// RevokeToken puts one token on the revocation list with its
// token.revoked event in one transaction. Errors: the store's.
func (a *Admin) RevokeToken(ctx context.Context, actor audit.Name, tr TokenRevocation) error {
	return a.d.Tenants.RevokeToken(tenancy.WithActor(ctx, actor), tr.Issuer, tr.TokenID, tr.Tenant, tr.ExpiresAt)
}

// PoolState is what the pool status operation reports.
type PoolState struct {
	Attestation attest.Attestation `json:"attestation"`
	Pool        isolation.Stats    `json:"pool"`
	Running     int                `json:"running"`
	Waiting     int                `json:"waiting"`
}

// PoolStateOf is the pool state of one model's engine p, as an admin sees
// it: its attestation names every tenant's adapters of the model (ad; nil:
// none), each with its tenant.
func PoolStateOf(p Pool, ad *engine.Adapters) PoolState {
	run, wait := p.Load()
	att := p.Attestation()
	if ad != nil {
		for _, x := range ad.All() {
			att.Adapters = append(att.Adapters, attest.AttestedAdapter{Tenant: x.Tenant, Name: x.Name, Digest: hex.EncodeToString(x.Digest[:]), Rank: x.Rank})
		}
	}
	return PoolState{Attestation: att, Pool: p.PoolStats(), Running: run, Waiting: wait}
}

// Keys lists the signing keys (public halves). Errors: ErrNoKeyRing.
func (a *Admin) Keys() ([]tenancy.KeyInfo, error) {
	if a.d.Keys == nil {
		return nil, ErrNoKeyRing
	}
	return a.d.Keys.Keys(), nil
}

// RotateKeys rotates the JWT signing keys; the ring ledgers every step in
// the rotation's transaction. Errors: ErrNoKeyRing;
// tenancy.ErrRotateTooSoon within the ring's minimum interval; the ring's.
func (a *Admin) RotateKeys(ctx context.Context, actor audit.Name) ([]tenancy.KeyInfo, error) {
	if a.d.Keys == nil {
		return nil, ErrNoKeyRing
	}
	if err := a.d.Keys.Rotate(tenancy.WithActor(ctx, actor)); err != nil {
		return nil, err
	}
	return a.d.Keys.Keys(), nil
}

// RetireKey retires one signing key (not the current one) with its
// key.revoked event in one transaction: its tokens stop verifying at once
// on this node and at the next key refresh on the others. Errors:
// ErrNoKeyRing; the ring's (unknown or current key, the ledger's).
func (a *Admin) RetireKey(ctx context.Context, actor audit.Name, kid string) ([]tenancy.KeyInfo, error) {
	if a.d.Keys == nil {
		return nil, ErrNoKeyRing
	}
	if err := a.d.Keys.Retire(tenancy.WithActor(ctx, actor), kid); err != nil {
		return nil, err
	}
	return a.d.Keys.Keys(), nil
}

// ReloadPolicies prepares a new Rego bundle from files (the decider
// compiles, tests and probes it), ledgers policy.reloaded with its digest,
// and only then swaps it in: a reload the ledger did not record does not
// serve. It returns the new revision.
//
// Errors: ErrInvalidField (no files); the decider's (a bundle that does
// not compile or fails its tests); the Appender's (the ledger down).
func (a *Admin) ReloadPolicies(ctx context.Context, actor audit.Name, files map[string]string) (string, error) {
	if len(files) == 0 {
		return "", ErrInvalidField.Withf("files is empty")
	}
	return a.d.Policies.ReloadWith(ctx, files, func(rev string) error {
		digest, _ := audit.ParseDigest(trimSHA(rev))
		_, err := a.d.Ledger.Append(ctx, "", audit.PolicyReloaded{Revision: digest, Files: int64(len(files)), Actor: actor})
		return err
	})
}

// PolicyBundle reads the serving policy bundle back (*policies.Decider).
type PolicyBundle interface {
	Bundle() (revision string, sources map[string]string)
}

// CurrentPolicy is the serving policy bundle: its revision (the digest
// policy.reloaded ledgered) and its files' sources by name.
type CurrentPolicy struct {
	Revision string            `json:"revision"`
	Files    map[string]string `json:"files"`
}

// ErrNoPolicyBundle: this node's policy decider cannot be read back.
var ErrNoPolicyBundle = cloison.NewError(cloison.CodeUnavailable, "this node's policy bundle cannot be read back")

// Policy returns the serving policy bundle. Errors: ErrNoPolicyBundle.
func (a *Admin) Policy() (CurrentPolicy, error) {
	pb, ok := a.d.Policies.(PolicyBundle)
	if !ok {
		return CurrentPolicy{}, ErrNoPolicyBundle
	}
	rev, files := pb.Bundle()
	if rev == "" {
		return CurrentPolicy{}, ErrNoPolicyBundle
	}
	return CurrentPolicy{Revision: rev, Files: files}, nil
}

func trimSHA(s string) string {
	if len(s) > 7 && s[:7] == "sha256:" {
		return s[7:]
	}
	return s
}

// RegisterSettings returns the organisation and privacy officer new
// register entries name. Errors: the register's.
func (a *Admin) RegisterSettings(ctx context.Context) (audit.RegisterSettings, error) {
	return a.d.Register.RegisterSettings(ctx)
}

// SetRegisterSettings records a new version of the organisation and the
// privacy officer (both required; the register validates every element
// and ledgers register.settings_set with its digest in the same
// transaction). Entries already opened keep theirs.
//
// Errors: ErrInvalidField (a part missing); audit.ErrInvalidIncident (an
// element the register refuses); the register's.
func (a *Admin) SetRegisterSettings(ctx context.Context, actor audit.Name, org *audit.Organization, contact *audit.Contact) (audit.RegisterSettings, error) {
	if org == nil || contact == nil {
		return audit.RegisterSettings{}, ErrInvalidField.Withf("organization and contact are required")
	}
	return a.d.Register.SetRegisterSettings(ctx, actor, *org, *contact)
}
