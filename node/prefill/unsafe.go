//go:build !faults

package prefill

// AttestUnsafe has no switch in the default build: the capacity
// attestation always decides whether a node starts.
type AttestUnsafe struct{}

func (AttestUnsafe) skip() bool { return false }
