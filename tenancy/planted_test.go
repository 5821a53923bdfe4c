package tenancy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"slices"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cloison/cloison"
)

// TestPlantedKeyRefused: the runtime database credentials are not trusted to
// mint keys. The runtime database role may
// INSERT and UPDATE signing_keys, so it can plant a verifying row with its
// own public key and a fake sealed private half. Such a row must never
// verify a token (401, whatever tenant and scopes the token claims), must
// be reported, and must not be promoted by the next rotation.
func TestPlantedKeyRefused(t *testing.T) {
	ctx := context.Background()
	for _, state := range []KeyState{KeyNext, KeyPrevious} {
		t.Run(string(state), func(t *testing.T) {
			f := newFixture(t, nil)
			pub, priv, err := ed25519.GenerateKey(rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			kid := Thumbprint(pub)
			fake := make([]byte, 12+32+16)
			_, _ = rand.Read(fake)
			// The attacker holds the runtime role's credentials, nothing else.
			rt := db.RuntimePool(t)
			if state == KeyNext { // one next per issuer: push the real one out first
				if _, err := rt.Exec(ctx, `UPDATE signing_keys SET state = 'retired', retired_at = clock_timestamp()
					WHERE issuer = $1 AND state = 'next'`, f.ring.Issuer()); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := rt.Exec(ctx, `INSERT INTO signing_keys (kid, issuer, public_key, sealed_private, state)
				VALUES ($1, $2, $3, $4, $5)`, kid, f.ring.Issuer(), []byte(pub), fake, string(state)); err != nil {
				t.Fatalf("plant as the runtime role: got %v, want the insert to succeed (the defence is not a privilege)", err)
			}
			if err := f.ring.Reload(ctx); err != nil {
				t.Fatalf("reload: got %v, want nil (a planted key is refused, not fatal)", err)
			}
			c := f.claims()
			c.Scopes = []string{string(ScopeAdmin), string(ScopeInfer), string(ScopeComplianceWrite)}
			tok := signWith(t, jwt.SigningMethodEdDSA, priv, map[string]any{"kid": kid}, c)
			_, err = f.verifier.Verify(ctx, tok)
			if !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("self-signed token: got %v, want ErrUnknownKey", err)
			}
			if code := cloison.ErrorCode(err); code != cloison.CodeUnauthenticated {
				t.Fatalf("code: got %v, want %v (HTTP 401)", code, cloison.CodeUnauthenticated)
			}
			if got := f.ring.Refused(); !slices.Contains(got, kid) {
				t.Fatalf("refused: got %v, want it to list %s", got, kid)
			}
			for _, k := range f.ring.JWKS().Keys {
				if k.Kid == kid {
					t.Fatalf("JWKS publishes the planted key %s", kid)
				}
			}
			// The next rotation retires the planted row instead of promoting it.
			if err := f.ring.Rotate(ctx); err != nil {
				t.Fatal(err)
			}
			for _, k := range f.ring.Keys() {
				if k.ID == kid && k.State != KeyRetired {
					t.Fatalf("after rotation: planted key is %v, want %v", k.State, KeyRetired)
				}
			}
			if _, err := f.verifier.Verify(ctx, tok); !errors.Is(err, ErrUnknownKey) {
				t.Fatalf("after rotation: got %v, want ErrUnknownKey", err)
			}
			if _, err := f.issuer.Issue(f.request()); err != nil {
				t.Fatalf("issue after rotation: got %v, want a token from an authentic current key", err)
			}
		})
	}
}
