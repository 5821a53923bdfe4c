//go:build !faults

package isolation

// Unsafe is empty in the default build: no defence can be switched off. The
// switches exist only with the faults build tag (unsafe_faults.go).
type Unsafe struct{}

func (Unsafe) skipFillCheck() bool { return false }
func (Unsafe) skipScrub() bool     { return false }
