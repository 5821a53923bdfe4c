package isolation

import "github.com/cloison/cloison"

// Partition is how the pool holds one tenant: what isolates it and the most
// one of its requests may hold. It is what a caller checks a policy
// decision against before it serves the tenant, and what it advertises.
type Partition struct {
	Tenant cloison.TenantID
	Tier   Tier
	// Zeroing is the mode in force: the stricter of the tenant's and the
	// pool's default.
	Zeroing  Zeroing
	Reserved int // pages guaranteed to the tenant
	// MaxLeaseTokens is the most tokens one lease of the tenant could ever
	// hold (MaxLeaseTokens).
	MaxLeaseTokens int
	PageTokens     int // token slots per page, the pool's
}

// Partition returns the partition the pool holds for tenant id: one lookup,
// no scan of the pool.
//
// Errors: ErrUnknownTenant.
func (p *Pool) Partition(id cloison.TenantID) (Partition, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	t, err := p.tenantOf(id)
	if err != nil {
		return Partition{}, err
	}
	return p.partitionOf(t), nil
}

// EnsureTenant gives tenant tc.ID its partition if the pool has none (a
// tenant created since the node started) and returns the partition the pool
// holds. The lookup and the addition are one step under the pool's lock, so
// concurrent first requests of one tenant add it once. A partition added
// earlier is returned as it is, even where tc now asks for another tier,
// zeroing or reservation: the caller checks the returned partition against
// what it requires (a tenant's partition changes only when the node
// restarts).
//
// Errors: those of AddTenant (ErrInvalidConfig, ErrPoolExhausted), when the
// tenant had no partition and tc cannot be added.
func (p *Pool) EnsureTenant(tc TenantConfig) (Partition, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if t, err := p.tenantOf(tc.ID); err == nil {
		return p.partitionOf(t), nil
	}
	if err := p.addTenant(tc); err != nil {
		return Partition{}, err
	}
	t, err := p.tenantOf(tc.ID)
	if err != nil {
		return Partition{}, err
	}
	return p.partitionOf(t), nil
}

// partitionOf describes t; p.mu held.
func (p *Pool) partitionOf(t *tenant) Partition {
	return Partition{Tenant: t.cfg.ID, Tier: t.cfg.Tier, Zeroing: t.mode, Reserved: t.cfg.Reserved,
		MaxLeaseTokens: p.maxPages(t) * p.pageTokens, PageTokens: p.pageTokens}
}
