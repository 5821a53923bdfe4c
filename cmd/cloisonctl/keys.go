package main

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Key files: one line of standard base64 — the 32-byte seed for a private
// key (mode 0600), the 32-byte public key for a public one.

func writeKeyPair(path string) (ed25519.PublicKey, error) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(priv.Seed())+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path+".pub", []byte(base64.StdEncoding.EncodeToString(pub)+"\n"), 0o644); err != nil {
		return nil, err
	}
	return pub, nil
}

func readKeyBytes(path string, n int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err != nil || len(raw) != n {
		return nil, cloison.Errorf(cloison.CodeInvalid, "%s: not a base64 Ed25519 key of %d bytes", path, n)
	}
	return raw, nil
}

func readPrivateKey(path string) (ed25519.PrivateKey, error) {
	seed, err := readKeyBytes(path, ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// readPublicKeys reads public key files (PATH.pub from keygen).
func readPublicKeys(paths []string) (map[string]ed25519.PublicKey, error) {
	var pubs []ed25519.PublicKey
	for _, p := range paths {
		raw, err := readKeyBytes(p, ed25519.PublicKeySize)
		if err != nil {
			return nil, fmt.Errorf("public key: %w", err)
		}
		pubs = append(pubs, ed25519.PublicKey(raw))
	}
	return audit.KeySet(pubs...), nil
}
