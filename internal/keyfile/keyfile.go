// Package keyfile reads and writes Ed25519 key files: one line of standard
// base64 — the 32-byte seed for a private key (mode 0600), the 32-byte public
// key for a public one (PATH.pub beside it).
package keyfile

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/cloison/cloison"
)

// Write generates a key pair and writes PATH (private seed) and PATH.pub.
func Write(path string) (ed25519.PrivateKey, error) {
	pub, priv, err := ed25519.GenerateKey(nil)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(priv.Seed())+"\n"), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path+".pub", []byte(base64.StdEncoding.EncodeToString(pub)+"\n"), 0o644); err != nil {
		return nil, err
	}
	return priv, nil
}

// Read reads n raw bytes of base64 from path.
func Read(path string, n int) ([]byte, error) {
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

// Private reads a private key file.
func Private(path string) (ed25519.PrivateKey, error) {
	seed, err := Read(path, ed25519.SeedSize)
	if err != nil {
		return nil, err
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

// PrivateOrCreate reads the private key at path, creating it if missing.
func PrivateOrCreate(path string) (ed25519.PrivateKey, error) {
	k, err := Private(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Write(path)
	}
	return k, err
}
