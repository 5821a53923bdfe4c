package tenancy

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cloison/cloison"
)

const idpAudience = "cloison-api"

// jwksServer serves a JWKS document the test changes at will.
type jwksServer struct {
	mu     sync.Mutex
	keys   []map[string]any
	cc     string
	status int
	*httptest.Server
}

func newJWKSServer(t *testing.T) *jwksServer {
	s := &jwksServer{cc: "max-age=600", status: http.StatusOK}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.status != http.StatusOK {
			w.WriteHeader(s.status)
			return
		}
		w.Header().Set("Cache-Control", s.cc)
		json.NewEncoder(w).Encode(map[string]any{"keys": s.keys})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) set(keys ...map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys = keys
}

func rsaJWK(kid string, k *rsa.PrivateKey) map[string]any {
	return map[string]any{"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
		"n": base64.RawURLEncoding.EncodeToString(k.N.Bytes()),
		"e": base64.RawURLEncoding.EncodeToString(big.NewInt(int64(k.E)).Bytes())}
}

func ecJWK(kid string, k *ecdsa.PrivateKey) map[string]any {
	b, err := k.PublicKey.Bytes()
	if err != nil {
		panic(err)
	}
	return map[string]any{"kty": "EC", "crv": "P-256", "kid": kid,
		"x": base64.RawURLEncoding.EncodeToString(b[1:33]), "y": base64.RawURLEncoding.EncodeToString(b[33:])}
}

func newRSA(t *testing.T) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func newEC(t *testing.T) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// idp is an external provider in front of a fixture's store and tenant.
type idp struct {
	*fixture
	srv   *jwksServer
	prov  *Provider
	iss   string
	clock time.Time
	mu    sync.Mutex
}

func newIdP(t *testing.T) *idp {
	t.Helper()
	d := &idp{srv: newJWKSServer(t), clock: time.Now()}
	d.iss = "https://idp.test/" + string(uniqueID("realm"))
	var err error
	d.prov, err = NewProvider(ProviderConfig{URL: d.srv.URL + "/jwks", Issuer: d.iss, Audience: idpAudience,
		TenantClaim: "org", ScopeClaim: "scp", Now: d.now})
	if err != nil {
		t.Fatal(err)
	}
	d.fixture = newFixture(t, func(c *VerifierConfig) { c.Providers = []*Provider{d.prov}; c.Revocations = c.Tenants.(*Store) })
	return d
}

func (d *idp) now() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.clock
}

func (d *idp) advance(by time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.clock = d.clock.Add(by)
}

func (d *idp) claims() jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{"iss": d.iss, "sub": "alice@idp", "aud": idpAudience, "exp": now.Add(time.Minute).Unix(),
		"iat": now.Add(-time.Second).Unix(), "jti": string(uniqueID("jti")), "org": string(d.tenant.ID), "scp": "openid infer profile"}
}

func with(c jwt.MapClaims, k string, v any) jwt.MapClaims {
	out := jwt.MapClaims{}
	for kk, vv := range c {
		out[kk] = vv
	}
	if v == nil {
		delete(out, k)
	} else {
		out[k] = v
	}
	return out
}

// RS256 and ES256 tokens of the provider verify, tenant and scopes from the
// configured claims (other scopes such as openid dropped), with one fetch
// while the set is cached; alg confusion, other keys, audiences and claims
// are refused with their typed errors.
func TestProviderTokens(t *testing.T) {
	ctx := context.Background()
	d := newIdP(t)
	rk, ek, attacker := newRSA(t), newEC(t), newRSA(t)
	d.srv.set(rsaJWK("r1", rk), ecJWK("e1", ek))

	for _, tok := range []string{
		signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, d.claims()),
		signWith(t, jwt.SigningMethodES256, ek, map[string]any{"kid": "e1"}, d.claims()),
		signWith(t, jwt.SigningMethodES256, ek, map[string]any{"kid": "e1"}, with(d.claims(), "scp", []string{"infer", "email"})),
	} {
		p, err := d.verifier.Verify(ctx, tok)
		if err != nil {
			t.Fatal(err)
		}
		if p.Tenant != d.tenant.ID || p.Issuer != d.iss || p.Subject != "alice@idp" || len(p.Scopes) != 1 || p.Scopes[0] != ScopeInfer {
			t.Fatalf("principal %+v", p)
		}
	}
	if n := d.prov.Fetches(); n != 1 {
		t.Fatalf("%d fetches, want 1 (cached for max-age)", n)
	}

	pubDER, _ := x509.MarshalPKIXPublicKey(&rk.PublicKey)
	other := newFixture(t, nil) // another tenant, not of this IdP's claims
	for _, tt := range []struct {
		name string
		tok  string
		want error
	}{
		{"HS256 keyed with the RSA public key", signWith(t, jwt.SigningMethodHS256, pubDER, map[string]any{"kid": "r1"}, d.claims()), ErrTokenAlgorithm},
		{"HS256 keyed with n", signWith(t, jwt.SigningMethodHS256, rk.N.Bytes(), map[string]any{"kid": "r1"}, d.claims()), ErrTokenAlgorithm},
		{"alg none", b64(map[string]any{"alg": "none", "kid": "r1"}) + "." + b64(d.claims()) + ".", ErrTokenAlgorithm},
		{"PS256 with the RSA key", signWith(t, jwt.SigningMethodPS256, rk, map[string]any{"kid": "r1"}, d.claims()), ErrTokenAlgorithm},
		{"ES256 header naming the RSA kid", signWith(t, jwt.SigningMethodES256, ek, map[string]any{"kid": "r1"}, d.claims()), ErrTokenAlgorithm},
		{"RS256 header naming the EC kid", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "e1"}, d.claims()), ErrTokenAlgorithm},
		{"attacker key under the real kid", signWith(t, jwt.SigningMethodRS256, attacker, map[string]any{"kid": "r1"}, d.claims()), ErrTokenSignature},
		{"attacker key with its own jwk and jku headers", signWith(t, jwt.SigningMethodRS256, attacker,
			map[string]any{"kid": "evil", "jwk": rsaJWK("evil", attacker), "jku": "http://127.0.0.1:1/jwks"}, d.claims()), ErrUnknownKey},
		{"no kid", signWith(t, jwt.SigningMethodRS256, rk, nil, d.claims()), ErrUnknownKey},
		{"RS256 claiming the dev issuer", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(d.claims(), "iss", d.ring.Issuer())), ErrTokenAlgorithm},
		{"the dev issuer's audience", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(d.claims(), "aud", testAudience)), ErrTokenAudience},
		{"no aud", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(d.claims(), "aud", nil)), ErrTokenAudience},
		{"expired", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(d.claims(), "exp", time.Now().Add(-time.Hour).Unix())), ErrTokenExpired},
		{"no exp", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(d.claims(), "exp", nil)), ErrTokenNoExpiry},
		{"no tenant claim", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(d.claims(), "org", nil)), ErrTokenNoTenant},
		{"tenant in the wrong claim", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(with(d.claims(), "org", nil), "tenant", string(d.tenant.ID))), ErrTokenNoTenant},
		{"unknown tenant", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(d.claims(), "org", "no-such-tenant")), ErrUnknownTenant},
		{"no subject", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(d.claims(), "sub", nil)), ErrTokenNoSubject},
		{"scope claim of another type", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(d.claims(), "scp", 7)), ErrUnknownScope},
		// The IdP's keys do not verify for the dev issuer's name either.
		{"provider key, other fixture", signWith(t, jwt.SigningMethodRS256, rk, map[string]any{"kid": "r1"}, with(d.claims(), "org", string(other.tenant.ID))), nil},
	} {
		_, err := d.verifier.Verify(ctx, tt.tok)
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s: %v", tt.name, err)
			}
			continue
		}
		if !errors.Is(err, tt.want) || cloison.ErrorCode(err) != cloison.CodeUnauthenticated {
			t.Errorf("%s: got %v (%s), want %v", tt.name, err, cloison.ErrorCode(err), tt.want)
		}
	}
	// The unknown kids above came within RefreshLimit of the first fetch:
	// an attacker's kids cannot make the node hammer the IdP.
	if n := d.prov.Fetches(); n != 1 {
		t.Errorf("%d fetches, want 1 (unknown-kid refresh rate-limited)", n)
	}

	// Provider tokens go through revocation and the tenant's status.
	c := d.claims()
	tok := signWith(t, jwt.SigningMethodES256, ek, map[string]any{"kid": "e1"}, c)
	if _, err := d.verifier.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if err := d.store.RevokeToken(ctx, d.iss, c["jti"].(string), d.tenant.ID, time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.verifier.Verify(ctx, tok); !errors.Is(err, ErrTokenRevoked) {
		t.Fatalf("revoked provider token: %v", err)
	}
	if _, err := d.store.SetStatus(ctx, other.tenant.ID, StatusSuspended); err != nil {
		t.Fatal(err)
	}
	tok = signWith(t, jwt.SigningMethodES256, ek, map[string]any{"kid": "e1"}, with(d.claims(), "org", string(other.tenant.ID)))
	if _, err := d.verifier.Verify(ctx, tok); !errors.Is(err, ErrTenantSuspended) {
		t.Fatalf("suspended tenant: %v", err)
	}
}

// Rotation: a new kid is fetched on first sight (once per RefreshLimit); the
// old kid verifies while it is in the set and stops once a refresh no longer
// lists it; an expired set that cannot be refreshed verifies nothing.
func TestProviderRotation(t *testing.T) {
	ctx := context.Background()
	d := newIdP(t)
	k1, k2 := newEC(t), newEC(t)
	d.srv.set(ecJWK("k1", k1))
	tok1 := signWith(t, jwt.SigningMethodES256, k1, map[string]any{"kid": "k1"}, d.claims())
	tok2 := signWith(t, jwt.SigningMethodES256, k2, map[string]any{"kid": "k2"}, d.claims())
	verify := func(tok string, want error) {
		t.Helper()
		_, err := d.verifier.Verify(ctx, tok)
		if want == nil && err != nil || want != nil && !errors.Is(err, want) {
			t.Fatalf("got %v, want %v", err, want)
		}
	}
	verify(tok1, nil)
	d.srv.set(ecJWK("k1", k1), ecJWK("k2", k2)) // the IdP publishes k2
	verify(tok2, ErrUnknownKey)                 // within RefreshLimit of the last fetch
	d.advance(DefaultJWKSRefreshLimit)
	verify(tok2, nil) // unknown kid: refetched
	verify(tok1, nil) // the old kid still verifies
	if n := d.prov.Fetches(); n != 2 {
		t.Fatalf("%d fetches, want 2", n)
	}
	d.srv.set(ecJWK("k2", k2)) // k1 removed
	verify(tok1, nil)          // cached set (max-age=600) still lists it
	d.advance(10 * time.Minute)
	verify(tok1, ErrUnknownKey) // expired: refetched, k1 gone
	verify(tok2, nil)

	d.srv.mu.Lock()
	d.srv.status = http.StatusInternalServerError
	d.srv.mu.Unlock()
	d.advance(11 * time.Minute)
	_, err := d.verifier.Verify(ctx, tok2)
	if !errors.Is(err, ErrUnavailable) || cloison.ErrorCode(err) != cloison.CodeUnavailable {
		t.Fatalf("JWKS down past expiry: %v (%s)", err, cloison.ErrorCode(err))
	}
	n := d.prov.Fetches()
	verify(tok2, ErrUnavailable) // no refetch within RefreshLimit
	if d.prov.Fetches() != n {
		t.Fatal("a failed fetch was retried within RefreshLimit")
	}

	// A document the provider now serves that is refused (a private part)
	// is as unavailable: 503, never the caller's 400.
	d.srv.mu.Lock()
	d.srv.status = http.StatusOK
	d.srv.keys = []map[string]any{with(ecJWK("k2", k2), "d", "AAAA")}
	d.srv.mu.Unlock()
	d.advance(DefaultJWKSRefreshLimit)
	_, err = d.verifier.Verify(ctx, tok2)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrInvalidKey) || cloison.ErrorCode(err) != cloison.CodeUnavailable {
		t.Fatalf("refused JWKS past expiry: %v (%s)", err, cloison.ErrorCode(err))
	}
}

// Cache-Control max-age is honoured within [MinCache, MaxCache].
func TestProviderCacheLifetime(t *testing.T) {
	p, err := NewProvider(ProviderConfig{URL: "https://idp.test/jwks", Issuer: "https://idp.test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		cc   string
		want time.Duration
	}{
		{"", DefaultJWKSCache},
		{"public, max-age=600", 10 * time.Minute},
		{"max-age=5", DefaultJWKSMinCache},
		{"max-age=99999999999999999", DefaultJWKSMaxCache},
		{"max-age=999999999", DefaultJWKSMaxCache},
		{"no-store", DefaultJWKSMinCache},
		{"max-age=3600, no-cache", DefaultJWKSMinCache},
		{"max-age=-1", DefaultJWKSCache},
		{`MAX-AGE="7200"`, 2 * time.Hour},
	} {
		if got := p.cacheFor(tt.cc); got != tt.want {
			t.Errorf("%q: %v, want %v", tt.cc, got, tt.want)
		}
	}
}

// A JWKS document with a private part, a duplicate or missing kid, a weak or
// malformed key, or no usable key is refused whole; other key types are
// skipped.
func TestProviderJWKSParse(t *testing.T) {
	ec := ecJWK("e", newEC(t))
	small, _ := rsa.GenerateKey(rand.Reader, 1024)
	with := func(k map[string]any, kv ...any) map[string]any {
		out := map[string]any{}
		for a, b := range k {
			out[a] = b
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	offCurve := with(ec, "y", base64.RawURLEncoding.EncodeToString(make([]byte, 32)))
	for _, tt := range []struct {
		name string
		keys []map[string]any
		ok   bool
	}{
		{"one EC key", []map[string]any{ec}, true},
		{"enc and RS512 keys skipped", []map[string]any{ec, with(ec, "kid", "x", "use", "enc"), with(rsaJWK("r", small), "alg", "RS512")}, true},
		{"private part", []map[string]any{with(ec, "d", "AAAA")}, false},
		{"duplicate kid", []map[string]any{ec, ec}, false},
		{"no kid", []map[string]any{with(ec, "kid", "")}, false},
		{"RSA 1024", []map[string]any{rsaJWK("r", small)}, false},
		{"off the curve", []map[string]any{offCurve}, false},
		{"short x", []map[string]any{with(ec, "x", "AAAA")}, false},
		{"only skipped keys", []map[string]any{with(ec, "use", "enc")}, false},
		{"empty", nil, false},
	} {
		b, _ := json.Marshal(map[string]any{"keys": tt.keys})
		_, err := parseProviderJWKS("iss", b)
		if (err == nil) != tt.ok || err != nil && !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%s: %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	for _, u := range []string{"http://idp.example/jwks", "ftp://127.0.0.1/jwks", "/jwks", ""} {
		if _, err := NewProvider(ProviderConfig{URL: u, Issuer: "i"}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("jwks url %q: %v", u, err)
		}
	}
}
