package cloison

import "fmt"

// The isolation vocabulary a tenant's record and the KV pool share: how a
// tenant's freed pages are zeroed and where its pages come from. Package
// isolation enforces them (isolation.Zeroing and isolation.Tier are these
// types); package tenancy stores them with each tenant.

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
	// ZeroUnset in a pool's configuration means ZeroCrossTenant; in a
	// tenant's, the pool's default. The zero value is never the laxest mode.
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
//
// Errors: CodeInvalid for any other text.
func ParseZeroing(s string) (Zeroing, error) {
	switch s {
	case "never":
		return ZeroNever, nil
	case "cross-tenant":
		return ZeroCrossTenant, nil
	case "always":
		return ZeroAlways, nil
	}
	return 0, Errorf(CodeInvalid, "zeroing mode %q (want never, cross-tenant or always)", s)
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
//
// Errors: CodeInvalid for any other text.
func ParseTier(s string) (Tier, error) {
	switch s {
	case "shared":
		return TierShared, nil
	case "dedicated":
		return TierDedicated, nil
	}
	return 0, Errorf(CodeInvalid, "tier %q (want shared or dedicated)", s)
}
