package engine

import (
	"github.com/cloison/cloison"
	"github.com/cloison/cloison/isolation"
)

// Tenant partitions live in the engine's pool; the API reaches them only
// through these methods, so that a request's tenant crosses from the API
// into the engine once (EnsureTenant) and the API holds no pool. The pool
// is safe for concurrent use: none of these goes through the engine loop.

// AddTenant gives a new tenant its partition (tenant creation: a tenant the
// pool cannot hold is not created).
//
// Errors: those of isolation.Pool.AddTenant (ErrInvalidConfig, a duplicate
// included; ErrPoolExhausted).
func (e *Engine) AddTenant(tc isolation.TenantConfig) error { return e.cfg.Pool.AddTenant(tc) }

// EnsureTenant returns the tenant's partition, adding it first when the
// tenant was created since the node started (isolation.Pool.EnsureTenant):
// the one call a request makes for its tenant before its policy decision
// is applied. The partition returned may differ from tc when the tenant had
// one already: the caller checks it against what the decision requires.
//
// Errors: those of isolation.Pool.AddTenant, when the tenant had no
// partition and tc cannot be added.
func (e *Engine) EnsureTenant(tc isolation.TenantConfig) (isolation.Partition, error) {
	return e.cfg.Pool.EnsureTenant(tc)
}

// TenantIsolation returns the partition the pool holds for tenant, without
// adding one.
//
// Errors: isolation.ErrUnknownTenant.
func (e *Engine) TenantIsolation(tenant cloison.TenantID) (isolation.Partition, error) {
	return e.cfg.Pool.Partition(tenant)
}

// PoolStats returns a snapshot of the pool's counters (metrics, pool status).
func (e *Engine) PoolStats() isolation.Stats { return e.cfg.Pool.Stats() }
