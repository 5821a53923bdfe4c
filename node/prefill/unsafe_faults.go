//go:build faults

package prefill

// AttestUnsafe switches the capacity attestation off, for the ablation
// suites only: it exists with fields in a build with the faults tag, and is
// an empty struct in the default build (unsafe.go), so a server binary
// cannot start a node whose pool fails its attestation.
type AttestUnsafe struct {
	// SkipAttestation starts the node even though a pool cannot hold the
	// served context: a prefill node publishes its failed attestation, and
	// a decode node starts as if its prefill nodes had passed (the
	// published attestation keeps each peer's verdict).
	SkipAttestation bool
}

func (u AttestUnsafe) skip() bool { return u.SkipAttestation }
