package audit

import (
	"crypto/ed25519"
	"crypto/sha256"

	"github.com/cloison/cloison"
)

// Deployment key purposes (the deployment_keys table): the keys a
// deployment keeps outside the database, in files or mounted secrets.
const (
	PurposeCheckpoint Name = "checkpoint" // signs the ledger's checkpoints and tree notes
	PurposeKEK        Name = "kek"        // seals the token signing keys in signing_keys
	PurposeCluster    Name = "cluster"    // authenticates transfer manifests between nodes
)

// DeploymentKey names one key of the deployment by its id and digest (a
// public key's SHA-256, or a secret's fingerprint): never the secret.
type DeploymentKey struct {
	Purpose Name
	ID      string
	Digest  Digest
}

// CheckpointKey names the checkpoint (log) signing key whose public key is
// pub: its KeyID and SHA-256.
func CheckpointKey(pub ed25519.PublicKey) DeploymentKey {
	return DeploymentKey{Purpose: PurposeCheckpoint, ID: KeyID(pub), Digest: sha256.Sum256(pub)}
}

// KeyPolicy says what a ledger may do, when it records a node's key, if
// the recorded current key of the purpose is not the node's.
type KeyPolicy struct {
	// Rotate: the node's key replaces the recorded one (key.rotated for
	// it, key.revoked for the old one) when MayReplace allows it.
	Rotate bool
	// MayReplace reports whether the recorded current key id may be
	// replaced (nil: any). The checkpoint key demands that the old key is
	// still trusted for verification, so old checkpoints keep verifying.
	MayReplace func(currentID string) bool
}

// Errors of recording deployment keys. Their messages keep the
// audit/postgres prefix they were first published with: clients and
// operators' scripts see them.
var (
	// ErrKeyMismatch: the ledger records another current key for the
	// purpose, and this node may not replace it. Every node of a cluster
	// must be given the same key file.
	ErrKeyMismatch = cloison.NewError(cloison.CodeConflict, "audit/postgres: the ledger records another key for this purpose")
	// ErrKeyRetired: the node's key was rotated out (key.revoked): it is
	// never current again.
	ErrKeyRetired = cloison.NewError(cloison.CodePermissionDenied, "audit/postgres: this key was retired")
)
