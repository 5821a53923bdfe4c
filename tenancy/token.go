package tenancy

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cloison/cloison"
)

// Algorithm is the only JWS algorithm Cloison signs with or accepts: EdDSA
// over Ed25519 (RFC 8037).
const Algorithm = "EdDSA"

// MaxTokenBytes bounds the size of a token Verify parses at all.
const MaxTokenBytes = 8 << 10

// Claims is the JWT payload: iss, aud, sub, exp (required), nbf, iat, jti,
// plus the tenant and the granted scopes.
type Claims struct {
	jwt.RegisteredClaims
	Tenant string   `json:"tenant,omitempty"`
	Scopes []string `json:"scopes,omitempty"`
}

// TokenRequest is what Issue signs.
type TokenRequest struct {
	Subject  string
	Tenant   cloison.TenantID
	Scopes   []Scope
	Audience string
	// TTL is the token's lifetime: 0 means DefaultTokenTTL; at most the
	// issuer's MaxTTL.
	TTL time.Duration
	// NotBefore: zero means now.
	NotBefore time.Time
}

// Token lifetimes.
const (
	DefaultTokenTTL = time.Hour
	DefaultMaxTTL   = 24 * time.Hour
)

// Issuer signs tokens with its key ring's current key.
type Issuer struct {
	ring *KeyRing
	// MaxTTL bounds token lifetimes (DefaultMaxTTL when zero). Rotate keys
	// at least MaxTTL apart, so a previous key outlives its tokens.
	MaxTTL time.Duration
	// Now is the clock (time.Now when nil); a test seam.
	Now func() time.Time
}

// NewIssuer returns an issuer for ring's issuer name.
func NewIssuer(ring *KeyRing) *Issuer { return &Issuer{ring: ring} }

// Issue signs a token for req, with a random jti and iat = now. Errors:
// ErrInvalidToken, ErrInvalidKey (the ring has no current key).
func (i *Issuer) Issue(req TokenRequest) (string, error) {
	now := time.Now()
	if i.Now != nil {
		now = i.Now()
	}
	maxTTL := i.MaxTTL
	if maxTTL == 0 {
		maxTTL = DefaultMaxTTL
	}
	ttl := req.TTL
	if ttl == 0 {
		ttl = DefaultTokenTTL
	}
	switch {
	case req.Subject == "":
		return "", fmt.Errorf("%w: no subject", ErrInvalidToken)
	case !tenantID.MatchString(string(req.Tenant)):
		return "", fmt.Errorf("%w: tenant %q", ErrInvalidToken, req.Tenant)
	case req.Audience == "":
		return "", fmt.Errorf("%w: no audience", ErrInvalidToken)
	case ttl < 0 || ttl > maxTTL:
		return "", fmt.Errorf("%w: lifetime %v (want at most %v)", ErrInvalidToken, ttl, maxTTL)
	case len(req.Scopes) == 0:
		return "", fmt.Errorf("%w: no scope", ErrInvalidToken)
	}
	scopes := make([]string, 0, len(req.Scopes))
	for _, s := range req.Scopes {
		if _, err := ParseScope(string(s)); err != nil {
			return "", fmt.Errorf("%w: %w", ErrInvalidToken, err)
		}
		if !slices.Contains(scopes, string(s)) {
			scopes = append(scopes, string(s))
		}
	}
	nbf := req.NotBefore
	if nbf.IsZero() {
		nbf = now
	}
	var jti [16]byte
	if _, err := rand.Read(jti[:]); err != nil {
		return "", err
	}
	c := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:    i.ring.Issuer(),
			Subject:   req.Subject,
			Audience:  jwt.ClaimStrings{req.Audience},
			ExpiresAt: jwt.NewNumericDate(nbf.Add(ttl)),
			NotBefore: jwt.NewNumericDate(nbf),
			IssuedAt:  jwt.NewNumericDate(now),
			ID:        base64.RawURLEncoding.EncodeToString(jti[:]),
		},
		Tenant: string(req.Tenant),
		Scopes: scopes,
	}
	return i.ring.sign(c)
}

// sign signs any claims with the current key (Issue's checks are the
// caller's); tests use it to forge the tokens Verify must refuse.
func (r *KeyRing) sign(c jwt.Claims) (string, error) {
	kid, priv, ok := r.signer()
	if !ok {
		return "", fmt.Errorf("%w: issuer %s has no current signing key", ErrInvalidKey, r.issuer)
	}
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"] = kid
	return t.SignedString(priv)
}

// Principal is an authenticated caller: what a verified token says, and the
// tenant record as it stood when the token was verified.
type Principal struct {
	Subject   string           `json:"sub"`
	Tenant    cloison.TenantID `json:"tenant"`
	Scopes    []Scope          `json:"scopes"`
	Issuer    string           `json:"iss"`
	KeyID     string           `json:"kid"`
	TokenID   string           `json:"jti,omitempty"`
	ExpiresAt time.Time        `json:"exp"`
	// TenantRecord is the tenant read during Verify (status active).
	TenantRecord Tenant `json:"-"`
}

// Has reports whether the principal holds scope s.
func (p Principal) Has(s Scope) bool { return slices.Contains(p.Scopes, s) }

// Require returns ErrScopeNotGranted unless the principal holds every scope
// listed.
func (p Principal) Require(scopes ...Scope) error {
	for _, s := range scopes {
		if !p.Has(s) {
			return fmt.Errorf("%w: %s needs scope %q", ErrScopeNotGranted, p.Subject, s)
		}
	}
	return nil
}

// TenantLookup reads tenant records; *Store is one.
type TenantLookup interface {
	Tenant(ctx context.Context, id cloison.TenantID) (Tenant, error)
}

// ClientLookup reads API clients; *Store is one.
type ClientLookup interface {
	Client(ctx context.Context, id string) (Client, error)
}

// RevocationLookup reads the token revocation list; *Store is one.
type RevocationLookup interface {
	TokenRevoked(ctx context.Context, issuer, jti string) (bool, error)
}

// VerifierConfig configures a Verifier.
type VerifierConfig struct {
	// Audience is the aud value tokens must carry (required).
	Audience string
	// Sources are the trusted issuers' keys (the dev issuer's *KeyRing,
	// external issuers' *KeySet); a key verifies only tokens whose iss is
	// its source's issuer. At least one; issuers distinct.
	Sources []KeySource
	// Providers are external identity providers (RS256, ES256 or EdDSA
	// keys from a JWKS URL; provider.go); their issuers are distinct from
	// the Sources' and each other's.
	Providers []*Provider
	// Tenants reads the token's tenant (required).
	Tenants TenantLookup
	// Clients, when set, checks a subject that is a registered API client:
	// it must be active, of the token's tenant, and the token's scopes
	// within its grant.
	Clients ClientLookup
	// RequireClient refuses subjects that are not registered clients
	// (needs Clients).
	RequireClient bool
	// Revocations, when set, is checked on every token with a jti: a token
	// on the list is refused (ErrTokenRevoked).
	Revocations RevocationLookup
	// Leeway tolerates clock skew on exp, nbf and iat; at most 5 minutes.
	Leeway time.Duration
	// Now is the clock (time.Now when nil); a test seam.
	Now func() time.Time
}

// Verifier authenticates bearer tokens. Safe for concurrent use.
type Verifier struct {
	cfg     VerifierConfig
	sources map[string]KeySource
	parser  *jwt.Parser
	// providers by issuer, each with its own parser (algorithms, audience).
	providers map[string]providerParser
}

type providerParser struct {
	p      *Provider
	parser *jwt.Parser
}

// ErrInvalidConfig: a VerifierConfig the verifier refuses.
var ErrInvalidConfig = cloison.NewError(cloison.CodeInvalid, "tenancy: invalid verifier config")

// NewVerifier checks cfg and returns a Verifier. Errors: ErrInvalidConfig.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	switch {
	case cfg.Audience == "":
		return nil, fmt.Errorf("%w: no audience", ErrInvalidConfig)
	case len(cfg.Sources) == 0 && len(cfg.Providers) == 0:
		return nil, fmt.Errorf("%w: no key source", ErrInvalidConfig)
	case cfg.Tenants == nil:
		return nil, fmt.Errorf("%w: no tenant lookup", ErrInvalidConfig)
	case cfg.RequireClient && cfg.Clients == nil:
		return nil, fmt.Errorf("%w: RequireClient without a client lookup", ErrInvalidConfig)
	case cfg.Leeway < 0 || cfg.Leeway > 5*time.Minute:
		return nil, fmt.Errorf("%w: leeway %v", ErrInvalidConfig, cfg.Leeway)
	}
	v := &Verifier{cfg: cfg, sources: map[string]KeySource{}}
	for _, s := range cfg.Sources {
		if s == nil || s.Issuer() == "" {
			return nil, fmt.Errorf("%w: key source without issuer", ErrInvalidConfig)
		}
		if v.sources[s.Issuer()] != nil {
			return nil, fmt.Errorf("%w: issuer %s twice", ErrInvalidConfig, s.Issuer())
		}
		v.sources[s.Issuer()] = s
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	v.providers = map[string]providerParser{}
	for _, p := range cfg.Providers {
		if p == nil {
			return nil, fmt.Errorf("%w: nil provider", ErrInvalidConfig)
		}
		if v.sources[p.Issuer()] != nil || v.providers[p.Issuer()].p != nil {
			return nil, fmt.Errorf("%w: issuer %s twice", ErrInvalidConfig, p.Issuer())
		}
		aud := p.cfg.Audience
		if aud == "" {
			aud = cfg.Audience
		}
		v.providers[p.Issuer()] = providerParser{p: p, parser: jwt.NewParser(
			jwt.WithValidMethods([]string{Algorithm, AlgRS256, AlgES256}),
			jwt.WithExpirationRequired(),
			jwt.WithAudience(aud),
			jwt.WithIssuer(p.Issuer()),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(cfg.Leeway),
			jwt.WithTimeFunc(now),
			jwt.WithStrictDecoding(),
		)}
	}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{Algorithm}),
		jwt.WithExpirationRequired(),
		jwt.WithAudience(cfg.Audience),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(cfg.Leeway),
		jwt.WithTimeFunc(now),
		jwt.WithStrictDecoding(),
	)
	return v, nil
}

// header is the part of the JOSE header Verify checks before the library
// does, for precise errors. It is read from a map, as the library reads it:
// member names match exactly (a struct would also match "ALG").
type header struct {
	Alg, Kid, Typ string
	Crit          bool
}

func parseHeader(seg string) (header, error) {
	b, err := base64.RawURLEncoding.Strict().DecodeString(seg)
	if err != nil {
		return header{}, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return header{}, err
	}
	str := func(k string) (string, error) {
		switch v := m[k].(type) {
		case nil:
			return "", nil
		case string:
			return v, nil
		}
		return "", fmt.Errorf("header %s is not a string", k)
	}
	var h header
	if h.Alg, err = str("alg"); err != nil {
		return header{}, err
	}
	if h.Kid, err = str("kid"); err != nil {
		return header{}, err
	}
	if h.Typ, err = str("typ"); err != nil {
		return header{}, err
	}
	_, h.Crit = m["crit"]
	return h, nil
}

// Verify authenticates a bearer token (without the "Bearer " prefix) and
// returns its principal. Checks, in order: size and shape; alg EdDSA (none,
// HS*, RS*, ES* and anything else: ErrTokenAlgorithm; RS256 and ES256 only
// for an external Provider's iss, verifyProvider); a kid of a trusted
// issuer's verifying key (ErrTokenIssuer, ErrUnknownKey); the signature
// (ErrTokenSignature); exp present and not passed, nbf and iat not in the
// future, aud (ErrTokenNoExpiry, ErrTokenExpired, ErrTokenNotYetValid,
// ErrTokenAudience); sub, tenant and scopes (ErrTokenNoSubject,
// ErrTokenNoTenant, ErrUnknownScope); the tenant exists and is active
// (ErrUnknownTenant, ErrTenantSuspended); the revocation list, when
// configured (ErrTokenRevoked); the client, when configured
// (ErrUnknownClient, ErrClientRevoked, ErrScopeNotGranted). Any other error
// (the store unreachable) is returned as the store returned it: it is not
// the caller's fault, and it is never an authentication success.
func (v *Verifier) Verify(ctx context.Context, raw string) (Principal, error) {
	if len(raw) > MaxTokenBytes {
		return Principal{}, fmt.Errorf("%w: %d bytes", ErrTokenMalformed, len(raw))
	}
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return Principal{}, fmt.Errorf("%w: %d segments", ErrTokenMalformed, len(parts))
	}
	h, err := parseHeader(parts[0])
	if err != nil {
		return Principal{}, fmt.Errorf("%w: header: %w", ErrTokenMalformed, err)
	}
	switch {
	case h.Alg != Algorithm && h.Alg != AlgRS256 && h.Alg != AlgES256:
		return Principal{}, fmt.Errorf("%w: alg %q", ErrTokenAlgorithm, h.Alg)
	case h.Crit:
		return Principal{}, fmt.Errorf("%w: critical header extensions are not understood", ErrTokenMalformed)
	case h.Typ != "" && !strings.EqualFold(h.Typ, "JWT") && !strings.EqualFold(h.Typ, "at+jwt"):
		return Principal{}, fmt.Errorf("%w: typ %q", ErrTokenMalformed, h.Typ)
	case h.Kid == "":
		return Principal{}, fmt.Errorf("%w: no kid", ErrUnknownKey)
	}
	if pp, ok := v.providers[peekIssuer(parts[1])]; ok {
		return v.verifyProvider(ctx, raw, h, pp)
	}
	if h.Alg != Algorithm { // RS256 and ES256 only from a provider's JWKS
		return Principal{}, fmt.Errorf("%w: alg %q", ErrTokenAlgorithm, h.Alg)
	}
	var c Claims
	_, err = v.parser.ParseWithClaims(raw, &c, func(t *jwt.Token) (any, error) {
		src := v.sources[c.Issuer]
		if src == nil {
			return nil, fmt.Errorf("%w: %q", ErrTokenIssuer, c.Issuer)
		}
		pub, ok := src.PublicKey(h.Kid)
		if !ok {
			return nil, fmt.Errorf("%w: kid %q of %s", ErrUnknownKey, h.Kid, c.Issuer)
		}
		return pub, nil
	})
	if err != nil {
		// Claims are only validated once the signature holds, so a missing
		// claim here is one of a genuine token; name which.
		if errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && c.ExpiresAt != nil {
			return Principal{}, fmt.Errorf("%w: no aud", ErrTokenAudience)
		}
		return Principal{}, jwtError(err)
	}
	p := Principal{Subject: c.Subject, Tenant: cloison.TenantID(c.Tenant), Issuer: c.Issuer, KeyID: h.Kid, TokenID: c.ID,
		ExpiresAt: c.ExpiresAt.Time}
	return v.admit(ctx, p, c.Scopes, false)
}

// admit checks a principal whose signature and registered claims hold: sub,
// tenant and scopes (unknown scopes refused, or dropped when dropUnknown: an
// external provider's other scopes such as openid), the tenant's status, the
// revocation list and the client.
func (v *Verifier) admit(ctx context.Context, p Principal, scopes []string, dropUnknown bool) (Principal, error) {
	switch {
	case p.Subject == "":
		return Principal{}, ErrTokenNoSubject
	case p.Tenant == "":
		return Principal{}, ErrTokenNoTenant
	}
	for _, s := range scopes {
		sc, err := ParseScope(s)
		if err != nil && dropUnknown {
			continue
		}
		if err != nil {
			return Principal{}, err
		}
		if !slices.Contains(p.Scopes, sc) {
			p.Scopes = append(p.Scopes, sc)
		}
	}
	if !tenantID.MatchString(string(p.Tenant)) {
		return Principal{}, fmt.Errorf("%w: %q", ErrUnknownTenant, p.Tenant)
	}
	t, err := v.cfg.Tenants.Tenant(ctx, p.Tenant)
	switch {
	case errors.Is(err, ErrNotFound):
		return Principal{}, fmt.Errorf("%w: %s", ErrUnknownTenant, p.Tenant)
	case err != nil:
		return Principal{}, err
	case t.Status != StatusActive:
		return Principal{}, fmt.Errorf("%w: %s", ErrTenantSuspended, p.Tenant)
	}
	p.TenantRecord = t
	if v.cfg.Revocations != nil && p.TokenID != "" {
		revoked, err := v.cfg.Revocations.TokenRevoked(ctx, p.Issuer, p.TokenID)
		switch {
		case err != nil:
			return Principal{}, err
		case revoked:
			return Principal{}, fmt.Errorf("%w: jti %s of %s", ErrTokenRevoked, p.TokenID, p.Issuer)
		}
	}
	if v.cfg.Clients != nil {
		if err := v.checkClient(ctx, p); err != nil {
			return Principal{}, err
		}
	}
	return p, nil
}

func (v *Verifier) checkClient(ctx context.Context, p Principal) error {
	cl, err := v.cfg.Clients.Client(ctx, p.Subject)
	switch {
	case errors.Is(err, ErrNotFound):
		if v.cfg.RequireClient {
			return fmt.Errorf("%w: %s", ErrUnknownClient, p.Subject)
		}
		return nil
	case err != nil:
		return err
	case cl.Tenant != p.Tenant:
		return fmt.Errorf("%w: %s is a client of another tenant", ErrUnknownClient, p.Subject)
	case cl.Status != ClientActive:
		return fmt.Errorf("%w: %s", ErrClientRevoked, p.Subject)
	}
	for _, s := range p.Scopes {
		if !slices.Contains(cl.Scopes, s) {
			return fmt.Errorf("%w: client %s was never granted %q", ErrScopeNotGranted, p.Subject, s)
		}
	}
	return nil
}

// jwtError maps the library's errors to this package's, most specific first.
func jwtError(err error) error {
	for _, own := range []error{ErrTokenIssuer, ErrUnknownKey, ErrTokenAlgorithm, ErrUnavailable} {
		if errors.Is(err, own) {
			return err
		}
	}
	table := []struct {
		lib, own error
	}{
		{jwt.ErrTokenMalformed, ErrTokenMalformed},
		{jwt.ErrTokenSignatureInvalid, ErrTokenSignature},
		{jwt.ErrTokenRequiredClaimMissing, ErrTokenNoExpiry},
		{jwt.ErrTokenExpired, ErrTokenExpired},
		{jwt.ErrTokenNotValidYet, ErrTokenNotYetValid},
		{jwt.ErrTokenUsedBeforeIssued, ErrTokenNotYetValid},
		{jwt.ErrTokenInvalidAudience, ErrTokenAudience},
	}
	for _, m := range table {
		if errors.Is(err, m.lib) {
			return fmt.Errorf("%w: %w", m.own, err)
		}
	}
	return fmt.Errorf("%w: %w", ErrTokenMalformed, err)
}
