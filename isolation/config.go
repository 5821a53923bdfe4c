package isolation

import (
	"fmt"

	"github.com/cloison/cloison"
)

// Zeroing says when a freed page's KV bytes must be zeroed before the page
// is used again (cloison.Zeroing, shared with the tenant records of package
// tenancy; its modes are documented there). Modes are ordered: a tenant may
// be stricter than the pool's default, never laxer.
type Zeroing = cloison.Zeroing

// The zeroing modes (cloison.ZeroUnset and the others).
const (
	ZeroUnset       = cloison.ZeroUnset
	ZeroNever       = cloison.ZeroNever
	ZeroCrossTenant = cloison.ZeroCrossTenant
	ZeroAlways      = cloison.ZeroAlways
)

// ParseZeroing parses "never", "cross-tenant" or "always".
//
// Errors: ErrInvalidConfig for any other text.
func ParseZeroing(s string) (Zeroing, error) {
	z, err := cloison.ParseZeroing(s)
	if err != nil {
		return 0, fmt.Errorf("%w: zeroing mode %q (want never, cross-tenant or always)", ErrInvalidConfig, s)
	}
	return z, nil
}

// Tier says where a tenant's pages come from (cloison.Tier).
type Tier = cloison.Tier

// The tiers (cloison.TierShared, cloison.TierDedicated).
const (
	TierShared    = cloison.TierShared
	TierDedicated = cloison.TierDedicated
)

// ParseTier parses "shared" or "dedicated".
//
// Errors: ErrInvalidConfig for any other text.
func ParseTier(s string) (Tier, error) {
	t, err := cloison.ParseTier(s)
	if err != nil {
		return 0, fmt.Errorf("%w: tier %q (want shared or dedicated)", ErrInvalidConfig, s)
	}
	return t, nil
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
