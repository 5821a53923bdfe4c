package tenancy

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cloison/cloison"
)

const testAudience = "cloison-test"

// fixture is one issuer with its own ring, a tenant and a verifier.
type fixture struct {
	store    *Store
	ring     *KeyRing
	issuer   *Issuer
	verifier *Verifier
	tenant   Tenant
	kek      []byte
}

func newFixture(t *testing.T, edit func(*VerifierConfig)) *fixture {
	t.Helper()
	ctx := context.Background()
	f := &fixture{store: newStore(t)}
	var err error
	f.kek, err = LoadKEK(filepath.Join(t.TempDir(), "signing.kek"), true)
	if err != nil {
		t.Fatal(err)
	}
	f.ring, err = OpenKeyRing(ctx, f.store, "https://cloison.test/"+string(uniqueID("iss")), f.kek, WithMinRotateInterval(0))
	if err != nil {
		t.Fatal(err)
	}
	f.issuer = NewIssuer(f.ring)
	f.tenant, err = f.store.CreateTenant(ctx, sampleTenant("tok"))
	if err != nil {
		t.Fatal(err)
	}
	cfg := VerifierConfig{Audience: testAudience, Sources: []KeySource{f.ring}, Tenants: f.store, Clients: f.store}
	if edit != nil {
		edit(&cfg)
	}
	f.verifier, err = NewVerifier(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) request() TokenRequest {
	return TokenRequest{Subject: f.subject(), Tenant: f.tenant.ID, Scopes: []Scope{ScopeInfer}, Audience: testAudience, TTL: time.Minute}
}

// subject is unique per fixture: client ids are global.
func (f *fixture) subject() string { return "user-" + string(f.tenant.ID) }

// claims returns valid claims for hand-made tokens.
func (f *fixture) claims() Claims {
	now := time.Now()
	return Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer: f.ring.Issuer(), Subject: f.subject(), Audience: jwt.ClaimStrings{testAudience},
			ExpiresAt: jwt.NewNumericDate(now.Add(time.Minute)), NotBefore: jwt.NewNumericDate(now.Add(-time.Second)),
			IssuedAt: jwt.NewNumericDate(now.Add(-time.Second)),
		},
		Tenant: string(f.tenant.ID),
		Scopes: []string{"infer"},
	}
}

func b64(v any) string {
	b, _ := json.Marshal(v)
	return base64.RawURLEncoding.EncodeToString(b)
}

// signWith signs claims with an arbitrary method, key and header.
func signWith(t *testing.T, m jwt.SigningMethod, key any, hdr map[string]any, c jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(m, c)
	for k, v := range hdr {
		tok.Header[k] = v
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestVerifyAccepts(t *testing.T) {
	f := newFixture(t, nil)
	req := f.request()
	req.Scopes = []Scope{ScopeInfer, ScopeComplianceRead, ScopeInfer}
	tok, err := f.issuer.Issue(req)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.verifier.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	kid, _, _ := f.ring.signer()
	if p.Subject != f.subject() || p.Tenant != f.tenant.ID || p.Issuer != f.ring.Issuer() || p.KeyID != kid || p.TokenID == "" {
		t.Fatalf("got %+v", p)
	}
	if len(p.Scopes) != 2 || !p.Has(ScopeInfer) || !p.Has(ScopeComplianceRead) {
		t.Fatalf("scopes: got %v, want infer and compliance:read once each", p.Scopes)
	}
	if p.TenantRecord.ID != f.tenant.ID || p.TenantRecord.Quotas != f.tenant.Quotas {
		t.Fatalf("tenant record: got %+v, want %+v", p.TenantRecord, f.tenant)
	}
	if err := p.Require(ScopeInfer, ScopeComplianceRead); err != nil {
		t.Fatal(err)
	}
	for _, s := range []Scope{ScopeAdmin, ScopeComplianceWrite} {
		err := p.Require(s)
		if !errors.Is(err, ErrScopeNotGranted) || cloison.ErrorCode(err) != cloison.CodePermissionDenied {
			t.Fatalf("Require(%s): got %v, want ErrScopeNotGranted", s, err)
		}
	}
}

// TestVerifyRejects covers every refusal a token verifier owes (an
// algorithm other than EdDSA, an unknown or foreign key, a bad signature,
// issuer, audience or lifetime, a missing claim or an unknown scope), plus the
// malformed shapes around them; each must fail with its own typed error
// and code.
func TestVerifyRejects(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	kid, priv, _ := f.ring.signer()
	pub := priv.Public().(ed25519.PublicKey)
	hdr := map[string]any{"kid": kid}
	signed := func(edit func(*Claims)) string {
		c := f.claims()
		edit(&c)
		return signWith(t, jwt.SigningMethodEdDSA, priv, hdr, c)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)

	suspended, err := f.store.CreateTenant(ctx, sampleTenant("sus"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.SetStatus(ctx, suspended.ID, StatusSuspended); err != nil {
		t.Fatal(err)
	}
	other, err := f.store.CreateTenant(ctx, sampleTenant("oth"))
	if err != nil {
		t.Fatal(err)
	}
	mustClient := func(c Client, revoke bool) {
		if _, err := f.store.CreateClient(ctx, c); err != nil {
			t.Fatal(err)
		}
		if revoke {
			if _, err := f.store.RevokeClient(ctx, c.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
	revokedID, foreignID, narrowID := "rev-"+string(f.tenant.ID), "for-"+string(f.tenant.ID), "nar-"+string(f.tenant.ID)
	mustClient(Client{ID: revokedID, Tenant: f.tenant.ID, Name: "r", Scopes: []Scope{ScopeInfer}}, true)
	mustClient(Client{ID: foreignID, Tenant: other.ID, Name: "f", Scopes: []Scope{ScopeInfer}}, false)
	mustClient(Client{ID: narrowID, Tenant: f.tenant.ID, Name: "n", Scopes: []Scope{ScopeInfer}}, false)

	valid := signed(func(*Claims) {})
	parts := strings.Split(valid, ".")
	noneTok := b64(map[string]any{"alg": "none", "typ": "JWT"}) + "." + parts[1] + "."
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	shortSig := base64.RawURLEncoding.EncodeToString(sig[:63])
	tampered := func() string {
		c := f.claims()
		c.Tenant = string(other.ID)
		return parts[0] + "." + b64(c) + "." + parts[2]
	}()

	cases := []struct {
		name  string
		token string
		want  error
		code  cloison.Code
	}{
		{"alg none", noneTok, ErrTokenAlgorithm, cloison.CodeUnauthenticated},
		{"alg in another case", b64(map[string]any{"ALG": "EdDSA", "alg": "HS256", "kid": kid}) + "." + parts[1] + "." + parts[2], ErrTokenAlgorithm, cloison.CodeUnauthenticated},
		{"kid not a string", signWith(t, jwt.SigningMethodEdDSA, priv, map[string]any{"kid": 7}, f.claims()), ErrTokenMalformed, cloison.CodeUnauthenticated},
		{"alg none uppercase", b64(map[string]any{"alg": "NONE", "kid": kid}) + "." + parts[1] + ".", ErrTokenAlgorithm, cloison.CodeUnauthenticated},
		// HS256 keyed with the public key: the classic confusion attack.
		{"HS256 with the public key", signWith(t, jwt.SigningMethodHS256, []byte(pub), hdr, f.claims()), ErrTokenAlgorithm, cloison.CodeUnauthenticated},
		{"HS512", signWith(t, jwt.SigningMethodHS512, []byte("secret"), hdr, f.claims()), ErrTokenAlgorithm, cloison.CodeUnauthenticated},
		{"RS256", signWith(t, jwt.SigningMethodRS256, rsaKey, hdr, f.claims()), ErrTokenAlgorithm, cloison.CodeUnauthenticated},
		{"PS256", signWith(t, jwt.SigningMethodPS256, rsaKey, hdr, f.claims()), ErrTokenAlgorithm, cloison.CodeUnauthenticated},
		{"ES256", signWith(t, jwt.SigningMethodES256, ecKey, hdr, f.claims()), ErrTokenAlgorithm, cloison.CodeUnauthenticated},
		{"alg Ed25519 (not the registered name we accept)", b64(map[string]any{"alg": "Ed25519", "kid": kid}) + "." + parts[1] + "." + parts[2], ErrTokenAlgorithm, cloison.CodeUnauthenticated},
		{"no kid", signWith(t, jwt.SigningMethodEdDSA, priv, nil, f.claims()), ErrUnknownKey, cloison.CodeUnauthenticated},
		{"unknown kid", signWith(t, jwt.SigningMethodEdDSA, priv, map[string]any{"kid": "nope"}, f.claims()), ErrUnknownKey, cloison.CodeUnauthenticated},
		{"foreign key under our kid", signWith(t, jwt.SigningMethodEdDSA, otherPriv, hdr, f.claims()), ErrTokenSignature, cloison.CodeUnauthenticated},
		{"tampered payload", tampered, ErrTokenSignature, cloison.CodeUnauthenticated},
		{"short signature", parts[0] + "." + parts[1] + "." + shortSig, ErrTokenSignature, cloison.CodeUnauthenticated},
		{"wrong issuer", signed(func(c *Claims) { c.Issuer = "https://evil.example" }), ErrTokenIssuer, cloison.CodeUnauthenticated},
		{"no issuer", signed(func(c *Claims) { c.Issuer = "" }), ErrTokenIssuer, cloison.CodeUnauthenticated},
		{"wrong audience", signed(func(c *Claims) { c.Audience = jwt.ClaimStrings{"other-service"} }), ErrTokenAudience, cloison.CodeUnauthenticated},
		{"no audience", signed(func(c *Claims) { c.Audience = nil }), ErrTokenAudience, cloison.CodeUnauthenticated},
		{"expired", signed(func(c *Claims) { c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Minute)) }), ErrTokenExpired, cloison.CodeUnauthenticated},
		{"not yet valid", signed(func(c *Claims) { c.NotBefore = jwt.NewNumericDate(time.Now().Add(time.Hour)) }), ErrTokenNotYetValid, cloison.CodeUnauthenticated},
		{"issued in the future", signed(func(c *Claims) { c.IssuedAt = jwt.NewNumericDate(time.Now().Add(time.Hour)) }), ErrTokenNotYetValid, cloison.CodeUnauthenticated},
		{"missing exp", signed(func(c *Claims) { c.ExpiresAt = nil }), ErrTokenNoExpiry, cloison.CodeUnauthenticated},
		{"missing tenant", signed(func(c *Claims) { c.Tenant = "" }), ErrTokenNoTenant, cloison.CodeUnauthenticated},
		{"missing subject", signed(func(c *Claims) { c.Subject = "" }), ErrTokenNoSubject, cloison.CodeUnauthenticated},
		{"unknown scope", signed(func(c *Claims) { c.Scopes = []string{"infer", "root"} }), ErrUnknownScope, cloison.CodeUnauthenticated},
		{"unknown tenant", signed(func(c *Claims) { c.Tenant = "no-such-tenant" }), ErrUnknownTenant, cloison.CodeUnauthenticated},
		{"tenant not an id", signed(func(c *Claims) { c.Tenant = "../../etc" }), ErrUnknownTenant, cloison.CodeUnauthenticated},
		{"suspended tenant", signed(func(c *Claims) { c.Tenant = string(suspended.ID) }), ErrTenantSuspended, cloison.CodePermissionDenied},
		{"revoked client", signed(func(c *Claims) { c.Subject = revokedID }), ErrClientRevoked, cloison.CodeUnauthenticated},
		{"client of another tenant", signed(func(c *Claims) { c.Subject = foreignID }), ErrUnknownClient, cloison.CodeUnauthenticated},
		{"scope beyond the client's grant", signed(func(c *Claims) { c.Subject = narrowID; c.Scopes = []string{"infer", "admin"} }), ErrScopeNotGranted, cloison.CodePermissionDenied},
		{"crit header", signWith(t, jwt.SigningMethodEdDSA, priv, map[string]any{"kid": kid, "crit": []string{"exp"}}, f.claims()), ErrTokenMalformed, cloison.CodeUnauthenticated},
		{"odd typ", signWith(t, jwt.SigningMethodEdDSA, priv, map[string]any{"kid": kid, "typ": "JWE"}, f.claims()), ErrTokenMalformed, cloison.CodeUnauthenticated},
		{"empty", "", ErrTokenMalformed, cloison.CodeUnauthenticated},
		{"two segments", parts[0] + "." + parts[1], ErrTokenMalformed, cloison.CodeUnauthenticated},
		{"four segments", valid + ".x", ErrTokenMalformed, cloison.CodeUnauthenticated},
		{"header not base64", "!!." + parts[1] + "." + parts[2], ErrTokenMalformed, cloison.CodeUnauthenticated},
		{"header not json", base64.RawURLEncoding.EncodeToString([]byte("nope")) + "." + parts[1] + "." + parts[2], ErrTokenMalformed, cloison.CodeUnauthenticated},
		{"payload not json", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte("[1")) + "." + parts[2], ErrTokenMalformed, cloison.CodeUnauthenticated},
		{"padded base64", parts[0] + "=." + parts[1] + "." + parts[2], ErrTokenMalformed, cloison.CodeUnauthenticated},
		{"oversized", parts[0] + "." + strings.Repeat("A", MaxTokenBytes) + "." + parts[2], ErrTokenMalformed, cloison.CodeUnauthenticated},
	}
	if _, err := f.verifier.Verify(ctx, valid); err != nil {
		t.Fatalf("the valid base token: %v", err)
	}
	all := []error{ErrTokenMalformed, ErrTokenAlgorithm, ErrUnknownKey, ErrTokenSignature, ErrTokenIssuer, ErrTokenAudience,
		ErrTokenExpired, ErrTokenNotYetValid, ErrTokenNoExpiry, ErrTokenNoTenant, ErrTokenNoSubject, ErrUnknownScope,
		ErrUnknownTenant, ErrUnknownClient, ErrClientRevoked, ErrTenantSuspended, ErrScopeNotGranted}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := f.verifier.Verify(ctx, c.token)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
			if got := cloison.ErrorCode(err); got != c.code {
				t.Fatalf("code: got %s, want %s", got, c.code)
			}
			for _, other := range all {
				if other != c.want && errors.Is(err, other) {
					t.Fatalf("got %v: matches %v as well as %v", err, other, c.want)
				}
			}
			if p.Tenant != "" || p.Subject != "" {
				t.Fatalf("a refusal returned principal %+v", p)
			}
		})
	}
}

// RequireClient refuses a subject that is not a registered client.
func TestVerifyRequireClient(t *testing.T) {
	f := newFixture(t, func(c *VerifierConfig) { c.RequireClient = true })
	tok, err := f.issuer.Issue(f.request())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.verifier.Verify(context.Background(), tok); !errors.Is(err, ErrUnknownClient) {
		t.Fatalf("unregistered subject: got %v, want ErrUnknownClient", err)
	}
	if _, err := f.store.CreateClient(context.Background(), Client{ID: f.subject(), Tenant: f.tenant.ID, Name: "u", Scopes: []Scope{ScopeInfer}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.verifier.Verify(context.Background(), tok); err != nil {
		t.Fatalf("registered subject: %v", err)
	}
}

// With the store unreachable a valid token is neither accepted nor called
// invalid: the caller gets unavailable (503) and may retry.
func TestVerifyStoreDown(t *testing.T) {
	f := newFixture(t, nil)
	tok, err := f.issuer.Issue(f.request())
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(VerifierConfig{Audience: testAudience, Sources: []KeySource{f.ring}, Tenants: downStore(t)})
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(context.Background(), tok)
	if !errors.Is(err, ErrUnavailable) || cloison.ErrorCode(err) != cloison.CodeUnavailable || p.Tenant != "" {
		t.Fatalf("got %+v, %v; want ErrUnavailable", p, err)
	}
}

// A tenant suspended after its token was issued stops at once.
func TestVerifySuspensionTakesEffectAtOnce(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil)
	tok, err := f.issuer.Issue(f.request())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.verifier.Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := f.store.SetStatus(ctx, f.tenant.ID, StatusSuspended); err != nil {
		t.Fatal(err)
	}
	if _, err := f.verifier.Verify(ctx, tok); !errors.Is(err, ErrTenantSuspended) {
		t.Fatalf("got %v, want ErrTenantSuspended", err)
	}
}

// Leeway tolerates a skewed clock within its bound, and no more.
func TestVerifyLeewayAndClock(t *testing.T) {
	ctx := context.Background()
	base := time.Now()
	clock := base
	f := newFixture(t, func(c *VerifierConfig) { c.Leeway = 30 * time.Second; c.Now = func() time.Time { return clock } })
	f.issuer.Now = func() time.Time { return base }
	tok, err := f.issuer.Issue(f.request()) // valid for one minute
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		at   time.Duration
		want error
	}{
		{-20 * time.Second, nil},
		{-40 * time.Second, ErrTokenNotYetValid},
		{time.Minute + 20*time.Second, nil},
		{time.Minute + 40*time.Second, ErrTokenExpired},
	} {
		clock = base.Add(c.at)
		if _, err := f.verifier.Verify(ctx, tok); !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
			t.Fatalf("at %v: got %v, want %v", c.at, err, c.want)
		}
	}
}

func TestIssueRefuses(t *testing.T) {
	f := newFixture(t, nil)
	cases := map[string]func(*TokenRequest){
		"no subject":        func(r *TokenRequest) { r.Subject = "" },
		"no tenant":         func(r *TokenRequest) { r.Tenant = "" },
		"no audience":       func(r *TokenRequest) { r.Audience = "" },
		"no scope":          func(r *TokenRequest) { r.Scopes = nil },
		"unknown scope":     func(r *TokenRequest) { r.Scopes = []Scope{"root"} },
		"too long":          func(r *TokenRequest) { r.TTL = 25 * time.Hour },
		"negative lifetime": func(r *TokenRequest) { r.TTL = -time.Second },
	}
	for name, edit := range cases {
		t.Run(name, func(t *testing.T) {
			r := f.request()
			edit(&r)
			if _, err := f.issuer.Issue(r); !errors.Is(err, ErrInvalidToken) {
				t.Fatalf("got %v, want ErrInvalidToken", err)
			}
		})
	}
}

func TestNewVerifierRefuses(t *testing.T) {
	f := newFixture(t, nil)
	ks, err := ParseJWKS(f.ring.Issuer(), mustJSON(t, f.ring.JWKS()))
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]VerifierConfig{
		"no audience":          {Sources: []KeySource{f.ring}, Tenants: f.store},
		"no source":            {Audience: "a", Tenants: f.store},
		"no tenants":           {Audience: "a", Sources: []KeySource{f.ring}},
		"issuer twice":         {Audience: "a", Sources: []KeySource{f.ring, ks}, Tenants: f.store},
		"require without list": {Audience: "a", Sources: []KeySource{f.ring}, Tenants: f.store, RequireClient: true},
		"huge leeway":          {Audience: "a", Sources: []KeySource{f.ring}, Tenants: f.store, Leeway: time.Hour},
	}
	for name, cfg := range cases {
		if _, err := NewVerifier(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: got %v, want ErrInvalidConfig", name, err)
		}
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// An external issuer's keys verify its tokens only: the same key cannot
// vouch for the dev issuer's name, and the dev ring's keys cannot vouch for
// the external issuer.
func TestExternalIssuer(t *testing.T) {
	ctx := context.Background()
	const extIss = "https://idp.example"
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	kid := Thumbprint(pub)
	doc := JWKS{Keys: []JWK{
		{Kty: "RSA", Kid: "rsa-ignored", X: ""},
		PublicJWK(kid, pub),
	}}
	path := filepath.Join(t.TempDir(), "idp.jwks.json")
	if err := writeFile(path, mustJSON(t, doc)); err != nil {
		t.Fatal(err)
	}
	ext, err := LoadJWKSFile(extIss, path)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *VerifierConfig) { c.Sources = append(c.Sources, ext) })
	c := f.claims()
	c.Issuer = extIss
	tok := signWith(t, jwt.SigningMethodEdDSA, priv, map[string]any{"kid": kid}, c)
	if p, err := f.verifier.Verify(ctx, tok); err != nil || p.Issuer != extIss {
		t.Fatalf("external token: got %+v, %v", p, err)
	}
	c.Issuer = f.ring.Issuer()
	if _, err := f.verifier.Verify(ctx, signWith(t, jwt.SigningMethodEdDSA, priv, map[string]any{"kid": kid}, c)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("external key claiming the dev issuer: got %v, want ErrUnknownKey", err)
	}
	devKid, devPriv, _ := f.ring.signer()
	c.Issuer = extIss
	if _, err := f.verifier.Verify(ctx, signWith(t, jwt.SigningMethodEdDSA, devPriv, map[string]any{"kid": devKid}, c)); !errors.Is(err, ErrUnknownKey) {
		t.Fatalf("dev key claiming the external issuer: got %v, want ErrUnknownKey", err)
	}
}

func TestParseJWKSRefuses(t *testing.T) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	good := PublicJWK(Thumbprint(pub), pub)
	cases := map[string]string{
		"not json":      `{"keys":`,
		"no keys":       `{"keys":[]}`,
		"only rsa":      `{"keys":[{"kty":"RSA","kid":"a","n":"x","e":"AQAB"}]}`,
		"only enc":      string(mustJSON(t, JWKS{Keys: []JWK{{Kty: "OKP", Crv: "Ed25519", X: good.X, Kid: "k", Use: "enc"}}})),
		"no kid":        string(mustJSON(t, JWKS{Keys: []JWK{{Kty: "OKP", Crv: "Ed25519", X: good.X}}})),
		"short x":       string(mustJSON(t, JWKS{Keys: []JWK{{Kty: "OKP", Crv: "Ed25519", X: "AAAA", Kid: "k"}}})),
		"private part":  string(mustJSON(t, JWKS{Keys: []JWK{{Kty: "OKP", Crv: "Ed25519", X: good.X, Kid: "k", D: good.X}}})),
		"duplicate kid": string(mustJSON(t, JWKS{Keys: []JWK{good, good}})),
	}
	for name, doc := range cases {
		if _, err := ParseJWKS("https://idp.example", []byte(doc)); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("%s: got %v, want ErrInvalidKey", name, err)
		}
	}
	if _, err := ParseJWKS("", mustJSON(t, JWKS{Keys: []JWK{good}})); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("no issuer: got %v, want ErrInvalidKey", err)
	}
}

// FuzzVerify: no input panics, and nothing but a token the issuer signed
// verifies — strict base64 and Ed25519's non-malleable signatures leave no
// second encoding of a valid token.
func FuzzVerify(f *testing.F) {
	fx := newFuzzFixture(f)
	valid, err := fx.issuer.Issue(TokenRequest{Subject: "fz", Tenant: fx.tenant.ID, Scopes: []Scope{ScopeInfer}, Audience: testAudience, TTL: time.Hour})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(valid)
	f.Add("")
	f.Add("a.b.c")
	parts := strings.Split(valid, ".")
	f.Add(b64(map[string]any{"alg": "none"}) + "." + parts[1] + ".")
	f.Fuzz(func(t *testing.T, tok string) {
		p, err := fx.verifier.Verify(context.Background(), tok)
		if err == nil {
			if tok != valid || p.Tenant != fx.tenant.ID {
				t.Fatalf("verified a token that was never issued: %q", tok)
			}
			return
		}
		if c := cloison.ErrorCode(err); c != cloison.CodeUnauthenticated && c != cloison.CodePermissionDenied {
			t.Fatalf("token %q: code %s (%v), want unauthenticated or permission_denied", tok, c, err)
		}
	})
}

func newFuzzFixture(tb testing.TB) *fixture {
	tb.Helper()
	ctx := context.Background()
	fx := &fixture{store: newStore(tb)}
	kek := make([]byte, KEKSize)
	_, _ = rand.Read(kek)
	var err error
	if fx.ring, err = OpenKeyRing(ctx, fx.store, "https://cloison.test/"+string(uniqueID("fz")), kek, WithMinRotateInterval(0)); err != nil {
		tb.Fatal(err)
	}
	fx.issuer = NewIssuer(fx.ring)
	t := sampleTenant("fz")
	t.Classification, t.Tier, t.Zeroing = ClassPublic, cloison.TierShared, cloison.ZeroNever
	if fx.tenant, err = fx.store.CreateTenant(ctx, t); err != nil {
		tb.Fatal(err)
	}
	if fx.verifier, err = NewVerifier(VerifierConfig{Audience: testAudience, Sources: []KeySource{fx.ring}, Tenants: fx.store}); err != nil {
		tb.Fatal(err)
	}
	return fx
}

// FuzzParseJWKS: no document panics the parser, and every key it accepts
// is a 32-byte Ed25519 key under a non-empty kid.
func FuzzParseJWKS(f *testing.F) {
	pub, _, _ := ed25519.GenerateKey(rand.Reader)
	good, _ := json.Marshal(JWKS{Keys: []JWK{PublicJWK(Thumbprint(pub), pub)}})
	f.Add(good)
	f.Add([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"k","x":"AAAA"}]}`))
	f.Add([]byte(`{"keys":[{"kty":"RSA"}]}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		ks, err := ParseJWKS("https://idp.example", doc)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("error %v is not ErrInvalidKey", err)
			}
			return
		}
		if len(ks.keys) == 0 {
			t.Fatal("accepted a set with no key")
		}
		for kid, k := range ks.keys {
			if kid == "" || len(k) != ed25519.PublicKeySize {
				t.Fatalf("accepted kid %q with a %d-byte key", kid, len(k))
			}
		}
	})
}

// BenchmarkVerify: signature, claims, and the tenant and client reads from
// PostgreSQL (one round trip: no client lookup).
func BenchmarkVerify(b *testing.B) {
	fx := newFuzzFixture(b)
	tok, err := fx.issuer.Issue(TokenRequest{Subject: "bench", Tenant: fx.tenant.ID, Scopes: []Scope{ScopeInfer}, Audience: testAudience, TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := fx.verifier.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}
