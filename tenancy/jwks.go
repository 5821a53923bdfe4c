package tenancy

import (
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
)

// JWK is an RFC 7517 JSON Web Key of type OKP (RFC 8037), curve Ed25519.
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Kid string `json:"kid"`
	Alg string `json:"alg,omitempty"`
	Use string `json:"use,omitempty"`
	// D is the private key; a JWKS that carries one is refused.
	D string `json:"d,omitempty"`
}

// JWKS is an RFC 7517 JWK Set; Serve its JSON at the JWKS endpoint.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// PublicJWK returns the JWK of an Ed25519 verifying key.
func PublicJWK(kid string, pub ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), Kid: kid, Alg: "EdDSA", Use: "sig"}
}

// KeySet is a fixed set of an external issuer's Ed25519 verifying keys, read
// from its JWKS document. It is a KeySource.
type KeySet struct {
	issuer string
	keys   map[string]ed25519.PublicKey
}

// ParseJWKS reads a JWKS document of the external issuer iss. Keys of other
// types, curves or uses (RSA, P-256, "enc") are skipped; an Ed25519 key
// without a kid, with a malformed x, with a private part, or a kid seen
// twice makes the whole document invalid, as does a document with no usable
// key. Errors: ErrInvalidKey.
func ParseJWKS(iss string, data []byte) (*KeySet, error) {
	if iss == "" {
		return nil, fmt.Errorf("%w: jwks: empty issuer", ErrInvalidKey)
	}
	var doc JWKS
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: jwks: %w", ErrInvalidKey, err)
	}
	ks := &KeySet{issuer: iss, keys: map[string]ed25519.PublicKey{}}
	for i, k := range doc.Keys {
		if k.Kty != "OKP" || k.Crv != "Ed25519" || (k.Use != "" && k.Use != "sig") ||
			(k.Alg != "" && k.Alg != "EdDSA" && k.Alg != "Ed25519") {
			continue
		}
		x, err := base64.RawURLEncoding.Strict().DecodeString(k.X)
		switch {
		case k.Kid == "":
			return nil, fmt.Errorf("%w: jwks key %d has no kid", ErrInvalidKey, i)
		case k.D != "":
			return nil, fmt.Errorf("%w: jwks key %s carries a private key", ErrInvalidKey, k.Kid)
		case err != nil || len(x) != ed25519.PublicKeySize:
			return nil, fmt.Errorf("%w: jwks key %s: x is not a base64url Ed25519 public key", ErrInvalidKey, k.Kid)
		case ks.keys[k.Kid] != nil:
			return nil, fmt.Errorf("%w: jwks kid %s appears twice", ErrInvalidKey, k.Kid)
		}
		ks.keys[k.Kid] = ed25519.PublicKey(x)
	}
	if len(ks.keys) == 0 {
		return nil, fmt.Errorf("%w: jwks of %s holds no Ed25519 signing key", ErrInvalidKey, iss)
	}
	return ks, nil
}

// LoadJWKSFile reads the JWKS document of external issuer iss from path.
// Errors: ErrInvalidKey, or the file system's.
func LoadJWKSFile(iss, path string) (*KeySet, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenancy: jwks: %w", err)
	}
	return ParseJWKS(iss, b)
}

// Issuer returns the iss claim the set verifies for.
func (k *KeySet) Issuer() string { return k.issuer }

// PublicKey returns the key kid.
func (k *KeySet) PublicKey(kid string) (ed25519.PublicKey, bool) {
	p, ok := k.keys[kid]
	return p, ok
}
