package main

import (
	"crypto/ed25519"
	"fmt"

	"github.com/cloison/cloison/internal/keyfile"

	"github.com/cloison/cloison/audit"
)

// Key files are internal/keyfile's format: one line of base64, the seed of a
// private key (mode 0600), PATH.pub beside it.

// readPublicKeys reads public key files (PATH.pub from keygen).
func readPublicKeys(paths []string) (map[string]ed25519.PublicKey, error) {
	var pubs []ed25519.PublicKey
	for _, p := range paths {
		raw, err := keyfile.ReadPublic(p, ed25519.PublicKeySize)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		pubs = append(pubs, ed25519.PublicKey(raw))
	}
	return audit.KeySet(pubs...), nil
}
