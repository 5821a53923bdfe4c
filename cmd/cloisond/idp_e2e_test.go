package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cloison/cloison/internal/pgtest"
)

// An external identity provider configured through the --config file (typed
// values): its ES256 tokens, keys from a local JWKS server, are served with
// the tenant from --jwks-tenant-claim; a key the JWKS does not list, and a
// token of another audience, get 401; a rotation (new kid) is picked up.
func TestE2EExternalIdP(t *testing.T) {
	db := pgtest.New(t)
	k1, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	k2, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwk := func(kid string, k *ecdsa.PrivateKey) map[string]any {
		b, _ := k.PublicKey.Bytes()
		return map[string]any{"kty": "EC", "crv": "P-256", "kid": kid, "alg": "ES256", "use": "sig",
			"x": base64.RawURLEncoding.EncodeToString(b[1:33]), "y": base64.RawURLEncoding.EncodeToString(b[33:])}
	}
	var mu sync.Mutex
	keys := []map[string]any{jwk("k1", k1)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Cache-Control", "max-age=600")
		json.NewEncoder(w).Encode(map[string]any{"keys": keys})
	}))
	defer srv.Close()
	const iss = "https://idp.example.test/realms/acme"
	cfg, _ := json.Marshal(map[string]any{"jwks-url": srv.URL + "/jwks", "jwt-issuer": iss, "jwt-audience": "cloison-api",
		"jwks-tenant-claim": "org", "jwks-scope-claim": "scp", "jwks-refresh-limit": "1s", "max-running": 8})
	file := filepath.Join(t.TempDir(), "cloisond.json")
	if err := os.WriteFile(file, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	n := startNode(t, db.AdminURL, pgtestRoles(), "--config", file)
	createTenant(t, db.AdminURL, "acme", nil)
	sign := func(kid string, k *ecdsa.PrivateKey, aud string) string {
		tok := jwt.NewWithClaims(jwt.SigningMethodES256, jwt.MapClaims{"iss": iss, "aud": aud, "sub": "alice", "org": "acme",
			"scp": "openid infer", "exp": time.Now().Add(time.Hour).Unix()})
		tok.Header["kid"] = kid
		s, err := tok.SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	if r := n.do("POST", "/v1/completions", sign("k1", k1, "cloison-api"), completion("hi", 2, false)); r.status != 200 {
		t.Fatalf("IdP token: %d %s", r.status, r.body)
	}
	if r := n.do("POST", "/v1/completions", sign("k1", k1, "cloison"), completion("hi", 2, false)); r.status != 401 {
		t.Fatalf("IdP token of another audience: %d %s", r.status, r.body)
	}
	attacker, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if r := n.do("POST", "/v1/completions", sign("k1", attacker, "cloison-api"), completion("hi", 2, false)); r.status != 401 {
		t.Fatalf("attacker's key under the IdP's kid: %d %s", r.status, r.body)
	}
	mu.Lock()
	keys = append(keys, jwk("k2", k2))
	mu.Unlock()
	// k2 is fetched once --jwks-refresh-limit (1 s) since the last fetch
	// has passed; until then it is an unknown key.
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := n.do("POST", "/v1/completions", sign("k2", k2, "cloison-api"), completion("hi", 2, false))
		if r.status == 200 {
			break
		}
		if r.status != 401 || time.Now().After(deadline) {
			t.Fatalf("rotated key: %d %s", r.status, r.body)
		}
		time.Sleep(time.Second)
	}
	if r := n.do("POST", "/v1/completions", sign("k1", k1, "cloison-api"), completion("hi", 2, false)); r.status != 200 {
		t.Fatalf("old kid after the rotation: %d %s", r.status, r.body)
	}
}
