//go:build faults

package kernels

// Unsafe holds the backends' test-only switch; it exists only in a build
// with the faults tag.
type Unsafe struct {
	// SkipOwnershipChecks makes arenas read pages without comparing their
	// ownership tags and fill counts with the block table — as the 2026
	// engines did. It exists only so that tests can prove the other layers
	// fail closed without this one (and that the leak oracle detects a leak
	// when every layer is off).
	SkipOwnershipChecks bool
}

// SkipOwnership reports the switch (for backends).
func (u Unsafe) SkipOwnership() bool { return u.SkipOwnershipChecks }
