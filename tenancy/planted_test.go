package tenancy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"slices"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// TestPlantedKeyRefused: the runtime database credentials are not trusted to
// mint keys. The runtime database role may call row_apply with an event
// of its own, so it can plant a verifying row with its own public key and
// a fake sealed private half. Such a row must never
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
			// The attacker holds the runtime role's credentials, nothing
			// else: it writes key rows through row_apply, with events of
			// its own (this fixture's Store checks no event signature;
			// TestForgedKeyRetirementRefused is the signed case).
			rt := db.RuntimePool(t)
			if state == KeyNext { // one next per issuer: push the real one out first
				for _, k := range f.ring.Keys() {
					if k.State != KeyNext {
						continue
					}
					var sealed []byte
					if err := rt.QueryRow(ctx, `SELECT sealed_private FROM signing_keys WHERE kid = $1`, k.ID).Scan(&sealed); err != nil {
						t.Fatal(err)
					}
					row := keyRow{Kid: k.ID, Issuer: k.Issuer, Algorithm: "EdDSA", PublicKey: `\x` + hex.EncodeToString(k.Public),
						SealedPrivate: `\x` + hex.EncodeToString(sealed), State: string(KeyRetired)}
					if err := forgeRow(t, rt, audit.RowSigningKeys, k.ID, "", row, func(d *audit.Digest) audit.Payload {
						p := keyEvent(audit.KeyRevoked, k.ID, k.Public)
						p.State = d
						return p
					}); err != nil {
						t.Fatal(err)
					}
				}
			}
			row := keyRow{Kid: kid, Issuer: f.ring.Issuer(), Algorithm: "EdDSA", PublicKey: `\x` + hex.EncodeToString(pub),
				SealedPrivate: `\x` + hex.EncodeToString(fake), State: string(state)}
			if err := forgeRow(t, rt, audit.RowSigningKeys, kid, "", row, func(d *audit.Digest) audit.Payload {
				p := keyEvent(audit.KeyCreated, kid, pub)
				p.State = d
				return p
			}); err != nil {
				t.Fatalf("plant as the runtime role: got %v, want row_apply to write it (the defence is not a privilege)", err)
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
