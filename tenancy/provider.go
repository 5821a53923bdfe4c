package tenancy

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/cloison/cloison"
)

// External identity provider algorithms: besides EdDSA, a Provider's keys
// may be RSA (RS256, at least MinRSABits) or P-256 (ES256).
const (
	AlgRS256   = "RS256"
	AlgES256   = "ES256"
	MinRSABits = 2048
	// MaxJWKSBytes bounds the JWKS document a Provider reads.
	MaxJWKSBytes = 1 << 20
)

// Provider cache bounds and the unknown-kid refresh interval (defaults).
const (
	DefaultJWKSMinCache       = time.Minute
	DefaultJWKSMaxCache       = 24 * time.Hour
	DefaultJWKSCache          = 5 * time.Minute
	DefaultJWKSRefreshLimit   = 30 * time.Second
	defaultJWKSFetchTimeout   = 10 * time.Second
	defaultProviderTenantName = "tenant"
	defaultProviderScopeName  = "scope"
)

// ProviderConfig configures an external identity provider.
type ProviderConfig struct {
	// URL of the JWKS document: https, or http to a loopback address.
	URL string
	// Issuer is the iss its tokens carry (required).
	Issuer string
	// Audience its tokens must carry; empty: the verifier's.
	Audience string
	// TenantClaim names the claim holding the tenant id ("tenant").
	TenantClaim string
	// ScopeClaim names the claim holding the scopes ("scope"): a
	// space-separated string (RFC 8693 / 9068) or a list of strings.
	ScopeClaim string
	// MinCache and MaxCache bound how long a fetched set is used: the
	// response's Cache-Control max-age (DefaultJWKSCache when absent;
	// no-store or no-cache: MinCache), clamped to [MinCache, MaxCache].
	MinCache, MaxCache time.Duration
	// RefreshLimit is the least time between two fetches caused by an
	// unknown kid or an expired set (DefaultJWKSRefreshLimit).
	RefreshLimit time.Duration
	// Client fetches the document (a client with a 10 s timeout when nil).
	Client *http.Client
	// Now is the clock (time.Now when nil); a test seam.
	Now func() time.Time
}

// Provider is an external identity provider whose verifying keys (RS256,
// ES256 or EdDSA) come from a JWKS URL. Safe for concurrent use.
type Provider struct {
	cfg ProviderConfig

	mu        sync.Mutex
	keys      map[string]providerKey
	expires   time.Time // keys are used until then
	lastFetch time.Time // the last fetch attempt, successful or not
	fetches   int
}

type providerKey struct {
	alg string
	key crypto.PublicKey
}

// NewProvider checks cfg. It fetches nothing: the first token, or Refresh,
// does. Errors: ErrInvalidConfig.
func NewProvider(cfg ProviderConfig) (*Provider, error) {
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = defaultProviderTenantName
	}
	if cfg.ScopeClaim == "" {
		cfg.ScopeClaim = defaultProviderScopeName
	}
	if cfg.MinCache == 0 {
		cfg.MinCache = DefaultJWKSMinCache
	}
	if cfg.MaxCache == 0 {
		cfg.MaxCache = DefaultJWKSMaxCache
	}
	if cfg.RefreshLimit == 0 {
		cfg.RefreshLimit = DefaultJWKSRefreshLimit
	}
	if cfg.Client == nil {
		cfg.Client = &http.Client{Timeout: defaultJWKSFetchTimeout}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.Issuer == "":
		return nil, fmt.Errorf("%w: provider without issuer", ErrInvalidConfig)
	case err != nil || u.Host == "":
		return nil, fmt.Errorf("%w: provider %s: jwks url %q", ErrInvalidConfig, cfg.Issuer, cfg.URL)
	case u.Scheme != "https" && (u.Scheme != "http" || !loopback(u.Hostname())):
		return nil, fmt.Errorf("%w: provider %s: jwks url must be https (http only to a loopback address)", ErrInvalidConfig, cfg.Issuer)
	case cfg.MinCache < 0 || cfg.MaxCache < cfg.MinCache || cfg.RefreshLimit < 0:
		return nil, fmt.Errorf("%w: provider %s: cache bounds", ErrInvalidConfig, cfg.Issuer)
	case cfg.TenantClaim == cfg.ScopeClaim:
		return nil, fmt.Errorf("%w: provider %s: tenant and scope claims are one claim", ErrInvalidConfig, cfg.Issuer)
	}
	return &Provider{cfg: cfg}, nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Issuer returns the iss the provider's tokens carry.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// Fetches returns how many times the JWKS URL was fetched (tests, metrics).
func (p *Provider) Fetches() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fetches
}

// Refresh fetches the JWKS document now, whatever the cache says. On error
// the keys held stay until they expire. Errors: ErrUnavailable (the URL does
// not answer 200), ErrInvalidKey (the document is refused).
func (p *Provider) Refresh(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fetchLocked(ctx)
}

func (p *Provider) fetchLocked(ctx context.Context) error {
	now := p.cfg.Now()
	p.lastFetch = now
	p.fetches++
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.cfg.URL, nil)
	if err != nil {
		return fmt.Errorf("%w: jwks of %s: %w", ErrUnavailable, p.cfg.Issuer, err)
	}
	req.Header.Set("Accept", "application/json, application/jwk-set+json")
	resp, err := p.cfg.Client.Do(req)
	if err != nil {
		return fmt.Errorf("%w: jwks of %s: %w", ErrUnavailable, p.cfg.Issuer, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: jwks of %s: HTTP %d", ErrUnavailable, p.cfg.Issuer, resp.StatusCode)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxJWKSBytes+1))
	if err != nil {
		return fmt.Errorf("%w: jwks of %s: %w", ErrUnavailable, p.cfg.Issuer, err)
	}
	if len(b) > MaxJWKSBytes {
		return fmt.Errorf("%w: jwks of %s is over %d bytes", ErrInvalidKey, p.cfg.Issuer, MaxJWKSBytes)
	}
	keys, err := parseProviderJWKS(p.cfg.Issuer, b)
	if err != nil {
		return err
	}
	p.keys = keys
	p.expires = now.Add(p.cacheFor(resp.Header.Get("Cache-Control")))
	return nil
}

// cacheFor is the lifetime a response with Cache-Control cc gets.
func (p *Provider) cacheFor(cc string) time.Duration {
	d := DefaultJWKSCache
	for _, dir := range strings.Split(cc, ",") {
		name, val, _ := strings.Cut(strings.TrimSpace(strings.ToLower(dir)), "=")
		switch name {
		case "no-store", "no-cache":
			return p.cfg.MinCache
		case "max-age":
			if s, err := strconv.ParseInt(strings.Trim(val, `"`), 10, 64); err == nil && s >= 0 {
				d = time.Duration(min(s, int64(p.cfg.MaxCache/time.Second)+1)) * time.Second
			}
		}
	}
	return min(max(d, p.cfg.MinCache), p.cfg.MaxCache)
}

// key returns the verifying key kid for a token signed with alg: the set is
// fetched when it has expired or kid is unknown, at most once per
// RefreshLimit. An expired set that cannot be refreshed verifies nothing
// (ErrUnavailable). Errors: ErrUnknownKey, ErrTokenAlgorithm (kid is a key
// of another type or algorithm), ErrUnavailable (also for a refused
// document).
func (p *Provider) key(ctx context.Context, kid, alg string) (crypto.PublicKey, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.cfg.Now()
	mayFetch := p.fetches == 0 || now.Sub(p.lastFetch) >= p.cfg.RefreshLimit
	_, known := p.keys[kid]
	if (!now.Before(p.expires) || !known) && mayFetch {
		if err := p.fetchLocked(ctx); err != nil && !now.Before(p.expires) {
			// The caller's token is not at fault: whatever went wrong
			// (down, or a document refused), it is unavailable (503).
			if errors.Is(err, ErrUnavailable) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: jwks of %s refused: %v", ErrUnavailable, p.cfg.Issuer, err)
		}
	}
	if !p.cfg.Now().Before(p.expires) {
		return nil, fmt.Errorf("%w: jwks of %s expired and not yet refreshed", ErrUnavailable, p.cfg.Issuer)
	}
	k, ok := p.keys[kid]
	switch {
	case !ok:
		return nil, fmt.Errorf("%w: kid %q of %s", ErrUnknownKey, kid, p.cfg.Issuer)
	case k.alg != alg:
		return nil, fmt.Errorf("%w: kid %q of %s is an %s key, the token says %s", ErrTokenAlgorithm, kid, p.cfg.Issuer, k.alg, alg)
	}
	return k.key, nil
}

// providerJWK is an RFC 7517 key of type RSA, EC or OKP.
type providerJWK struct {
	Kty, Kid, Alg, Use, Crv string
	N, E, X, Y, D           string
	P, Q                    string
}

// parseProviderJWKS reads a provider's JWKS: RSA keys (RS256, at least
// MinRSABits, e 65537 or another odd e ≥ 3), EC P-256 (ES256) and OKP Ed25519
// (EdDSA) signing keys are kept; other types, curves, algorithms and "enc"
// keys are skipped. A kept key without a kid, malformed, carrying a private
// part, or a kid seen twice refuses the whole document, as does one with no
// usable key. Errors: ErrInvalidKey.
func parseProviderJWKS(iss string, data []byte) (map[string]providerKey, error) {
	var doc struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%w: jwks of %s: %w", ErrInvalidKey, iss, err)
	}
	keys := map[string]providerKey{}
	for i, raw := range doc.Keys {
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("%w: jwks of %s: key %d: %w", ErrInvalidKey, iss, i, err)
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		k := providerJWK{Kty: str("kty"), Kid: str("kid"), Alg: str("alg"), Use: str("use"), Crv: str("crv"),
			N: str("n"), E: str("e"), X: str("x"), Y: str("y"), D: str("d"), P: str("p"), Q: str("q")}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		var alg string
		switch {
		case k.Kty == "RSA" && (k.Alg == "" || k.Alg == AlgRS256):
			alg = AlgRS256
		case k.Kty == "EC" && k.Crv == "P-256" && (k.Alg == "" || k.Alg == AlgES256):
			alg = AlgES256
		case k.Kty == "OKP" && k.Crv == "Ed25519" && (k.Alg == "" || k.Alg == Algorithm):
			alg = Algorithm
		default:
			continue
		}
		switch {
		case k.Kid == "":
			return nil, fmt.Errorf("%w: jwks of %s: key %d has no kid", ErrInvalidKey, iss, i)
		case k.D != "" || k.P != "" || k.Q != "":
			return nil, fmt.Errorf("%w: jwks of %s: key %s carries a private key", ErrInvalidKey, iss, k.Kid)
		case keys[k.Kid].key != nil:
			return nil, fmt.Errorf("%w: jwks of %s: kid %s appears twice", ErrInvalidKey, iss, k.Kid)
		}
		pub, err := k.public(alg)
		if err != nil {
			return nil, fmt.Errorf("%w: jwks of %s: key %s: %s", ErrInvalidKey, iss, k.Kid, err)
		}
		keys[k.Kid] = providerKey{alg: alg, key: pub}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%w: jwks of %s holds no RS256, ES256 or EdDSA signing key", ErrInvalidKey, iss)
	}
	return keys, nil
}

func (k providerJWK) public(alg string) (crypto.PublicKey, error) {
	b64 := func(s string) ([]byte, error) { return base64.RawURLEncoding.Strict().DecodeString(s) }
	switch alg {
	case AlgRS256:
		n, err1 := b64(k.N)
		e, err2 := b64(k.E)
		if err1 != nil || err2 != nil || len(n) == 0 || n[0] == 0 || len(e) == 0 || len(e) > 4 || e[0] == 0 {
			return nil, fmt.Errorf("n or e is not a base64url unsigned integer")
		}
		pub := &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		if pub.N.BitLen() < MinRSABits {
			return nil, fmt.Errorf("RSA key of %d bits (want at least %d)", pub.N.BitLen(), MinRSABits)
		}
		if pub.E < 3 || pub.E%2 == 0 {
			return nil, fmt.Errorf("RSA exponent %d", pub.E)
		}
		return pub, nil
	case AlgES256:
		x, err1 := b64(k.X)
		y, err2 := b64(k.Y)
		if err1 != nil || err2 != nil || len(x) != 32 || len(y) != 32 {
			return nil, fmt.Errorf("x or y is not a base64url 32-byte coordinate")
		}
		point := append(append([]byte{4}, x...), y...)
		pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
		if err != nil {
			return nil, fmt.Errorf("not a point of P-256")
		}
		return pub, nil
	default:
		x, err := b64(k.X)
		if err != nil || len(x) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("x is not a base64url Ed25519 public key")
		}
		return ed25519.PublicKey(x), nil
	}
}

// peekIssuer reads the iss of an unverified payload segment ("" when there
// is none); Verify uses it only to choose the key source and parser.
func peekIssuer(seg string) string {
	b, err := base64.RawURLEncoding.Strict().DecodeString(seg)
	if err != nil {
		return ""
	}
	var c struct {
		Iss any `json:"iss"`
	}
	if json.Unmarshal(b, &c) != nil {
		return ""
	}
	s, _ := c.Iss.(string)
	return s
}

// verifyProvider verifies a token of an external provider: its JWKS key for
// kid, of the header's algorithm; exp, nbf, iat, iss and the provider's
// audience; the tenant and scopes from the provider's claims; then what
// every token goes through (admit).
func (v *Verifier) verifyProvider(ctx context.Context, raw string, h header, pp providerParser) (Principal, error) {
	cfg := pp.p.cfg
	c := jwt.MapClaims{}
	_, err := pp.parser.ParseWithClaims(raw, c, func(t *jwt.Token) (any, error) {
		return pp.p.key(ctx, h.Kid, h.Alg)
	})
	if err != nil {
		if errors.Is(err, jwt.ErrTokenRequiredClaimMissing) && c["exp"] != nil {
			return Principal{}, fmt.Errorf("%w: no aud", ErrTokenAudience)
		}
		return Principal{}, jwtError(err)
	}
	exp, _ := c.GetExpirationTime() // required: the parser checked it
	sub, _ := c["sub"].(string)
	jti, _ := c["jti"].(string)
	tenant, _ := c[cfg.TenantClaim].(string)
	var scopes []string
	switch s := c[cfg.ScopeClaim].(type) {
	case nil:
	case string:
		scopes = strings.Fields(s)
	case []any:
		for _, e := range s {
			str, ok := e.(string)
			if !ok {
				return Principal{}, fmt.Errorf("%w: claim %s holds a non-string", ErrUnknownScope, cfg.ScopeClaim)
			}
			scopes = append(scopes, str)
		}
	default:
		return Principal{}, fmt.Errorf("%w: claim %s is neither a string nor a list", ErrUnknownScope, cfg.ScopeClaim)
	}
	p := Principal{Subject: sub, Tenant: cloison.TenantID(tenant), Issuer: cfg.Issuer, KeyID: h.Kid, TokenID: jti, ExpiresAt: exp.Time}
	return v.admit(ctx, p, scopes, true)
}
