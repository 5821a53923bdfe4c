// Package keyfile reads and writes Ed25519 key files: one line of standard
// base64 — the 32-byte seed for a private key (mode 0600), the 32-byte public
// key for a public one (PATH.pub beside it) — and reads every secret file
// (ReadSecret).
//
// Guarantee: no secret is read from a file that its group or others can
// read or write (any of mode 0o077): whoever else can read it can sign
// checkpoints, tokens or transfer manifests. The mode is checked on the open
// file (fstat), so that a file swapped between the check and the read is
// not read. Kubernetes Secrets must be mounted with defaultMode 0400 (or
// 0600) and without an fsGroup that adds group read.
package keyfile

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
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

// ErrInsecureMode: a secret file that its group or others may access.
var ErrInsecureMode = cloison.NewError(cloison.CodePermissionDenied, "keyfile: a secret file is accessible to group or others; want mode 0600 or 0400")

// ReadSecret reads the secret file at path (following symbolic links, as
// Kubernetes mounts Secrets), refusing one that is not a regular file or
// whose mode gives group or others any access.
// Errors: ErrInsecureMode, ErrNotRegular, or the file system's.
func ReadSecret(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s", ErrNotRegular, path)
	}
	if perm := st.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %04o", ErrInsecureMode, path, perm)
	}
	return io.ReadAll(f)
}

// ErrNotRegular: a secret path that is not a regular file.
var ErrNotRegular = cloison.NewError(cloison.CodeInvalid, "keyfile: a secret file is not a regular file")

// Read reads n raw bytes of base64 from the secret file path (ReadSecret).
// Errors: ErrInsecureMode, ErrNotRegular, CodeInvalid (not n bytes of
// base64), or the file system's.
func Read(path string, n int) ([]byte, error) {
	b, err := ReadSecret(path)
	if err != nil {
		return nil, err
	}
	return decodeKey(path, b, n)
}

// ReadPublic reads n raw bytes of base64 from a public file (a .pub key,
// any mode). Errors: CodeInvalid, or the file system's.
func ReadPublic(path string, n int) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return decodeKey(path, b, n)
}

func decodeKey(path string, b []byte, n int) ([]byte, error) {
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
