package prefill

import "github.com/cloison/cloison/attest"

// selfAttestation is a node's own capacity attestation (attest.Capacity);
// only a faults build can start a node whose attestation failed.
func selfAttestation(u AttestUnsafe, c attest.Config) (attest.Attestation, error) {
	a, err := attest.Capacity(c)
	if err != nil && u.skip() {
		return a, nil // published as failed
	}
	return a, err
}

// CheckPeers checks a decode node's prefill nodes in
// (attest.Prefill); only a faults build can start the engine as if they
// had passed, the published attestation keeping each peer's verdict.
func CheckPeers(u AttestUnsafe, self attest.Attestation, modelDigest string, peers []attest.PrefillPeer) (attest.Attestation, int, error) {
	a, capacity, err := attest.Prefill(self, modelDigest, peers)
	if err != nil && u.skip() {
		a.OK, a.Reason = true, ""
		return a, capacity, nil
	}
	return a, capacity, err
}
