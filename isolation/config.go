package isolation

import (
	"fmt"

	"github.com/cloison/cloison"
)

// Zeroing says when a freed page's KV bytes must be zeroed before the page is
// used again. Modes are ordered: a tenant may be stricter than the pool's
// default, never laxer.
//
//   - ZeroNever: pages are reused as they are. Safety rests on ownership tags
//     and fill counts alone (no read of a slot that the reading lease did not
//     write in this epoch). Cheapest; one bookkeeping bug away from a leak.
//   - ZeroCrossTenant: a page is zeroed before it changes tenant. The same
//     tenant may get its own dirty pages back without a scrub. A bookkeeping
//     bug can then only expose a tenant's own data to itself.
//   - ZeroAlways: every freed page is zeroed before any reuse. Costs one
//     memset per freed page; protects requests of the same tenant from each
//     other too (e.g. end users behind one API customer).
type Zeroing uint8

const (
	// ZeroUnset in a Config means ZeroCrossTenant; in a TenantConfig, the
	// pool's default. The zero value is never the laxest mode.
	ZeroUnset Zeroing = iota
	ZeroNever
	ZeroCrossTenant
	ZeroAlways
)

func (z Zeroing) String() string {
	switch z {
	case ZeroUnset:
		return "unset"
	case ZeroNever:
		return "never"
	case ZeroCrossTenant:
		return "cross-tenant"
	case ZeroAlways:
		return "always"
	}
	return fmt.Sprintf("Zeroing(%d)", uint8(z))
}

// ParseZeroing parses "never", "cross-tenant" or "always".
func ParseZeroing(s string) (Zeroing, error) {
	switch s {
	case "never":
		return ZeroNever, nil
	case "cross-tenant":
		return ZeroCrossTenant, nil
	case "always":
		return ZeroAlways, nil
	}
	return 0, fmt.Errorf("%w: zeroing mode %q (want never, cross-tenant or always)", ErrInvalidConfig, s)
}

// Tier says where a tenant's pages come from.
type Tier uint8

const (
	// TierShared tenants take pages from the common pool; their Reserved pages
	// are guaranteed (never lent to other tenants) but not fixed.
	TierShared Tier = iota
	// TierDedicated tenants use only their Reserved pages, a fixed set taken
	// from the pool when the tenant is added, which never leave the tenant.
	TierDedicated
)

func (t Tier) String() string {
	switch t {
	case TierShared:
		return "shared"
	case TierDedicated:
		return "dedicated"
	}
	return fmt.Sprintf("Tier(%d)", uint8(t))
}

// ParseTier parses "shared" or "dedicated".
func ParseTier(s string) (Tier, error) {
	switch s {
	case "shared":
		return TierShared, nil
	case "dedicated":
		return TierDedicated, nil
	}
	return 0, fmt.Errorf("%w: tier %q (want shared or dedicated)", ErrInvalidConfig, s)
}

// Config sizes a Pool.
type Config struct {
	// Pages is the number of KV pages; at least 1.
	Pages int
	// PageTokens is the number of token slots per page: a power of two
	// between 1 and 4096; 0 means 16.
	PageTokens int
	// DefaultZeroing is the weakest zeroing any tenant gets; unset means
	// ZeroCrossTenant.
	DefaultZeroing Zeroing
	// PrefixSecret is the server secret that tenant prefix-cache salts are
	// derived from (HMAC-SHA256). Never a value a client sends. Empty means a
	// random secret per pool.
	PrefixSecret []byte
	// SharedNamespaces lists the prefix-cache namespaces that tenants may
	// join to share prefix pages across tenants. Empty (the default) means
	// no cross-tenant sharing is possible.
	SharedNamespaces []string
	// Unsafe switches defences off in a build with the faults tag, so that
	// tests can prove each remaining layer still fails closed; in the
	// default build it is an empty struct (unsafe.go): nothing to set.
	Unsafe Unsafe
}

// TenantConfig describes one tenant's share of the pool.
type TenantConfig struct {
	ID cloison.TenantID
	// Tier: shared (default) or dedicated.
	Tier Tier
	// Reserved pages are guaranteed to the tenant and never lent to others.
	// A dedicated tenant has exactly these pages.
	Reserved int
	// Cap bounds the pages the tenant's live leases may reference at once;
	// 0 means no cap beyond the tenant's partition.
	Cap int
	// Zeroing is the tenant's zeroing mode; the pool's default applies if it
	// is stricter.
	Zeroing Zeroing
	// Namespace, when not empty, puts the tenant's prefix cache in the named
	// shared namespace (one of Config.SharedNamespaces). Empty means the
	// tenant's private namespace, salted with the tenant's ID.
	Namespace string
}
