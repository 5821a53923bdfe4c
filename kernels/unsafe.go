//go:build !faults

package kernels

// Unsafe is empty in the default build: an arena always checks ownership.
// The switch exists only with the faults build tag (unsafe_faults.go).
type Unsafe struct{}

// SkipOwnership is false in the default build.
func (Unsafe) SkipOwnership() bool { return false }
