package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"time"

	"github.com/cloison/cloison/tenancy"
)

// idpConfig is an external identity provider (tenancy.Provider): --jwks-url
// is its JWKS document (https, or http to loopback), --jwt-issuer the iss its
// RS256/ES256/EdDSA tokens carry, --jwt-audience the aud they must carry
// (default --audience), --jwks-tenant-claim and --jwks-scope-claim the claims
// naming the tenant and the scopes, --jwks-refresh-limit the least time
// between two JWKS fetches. Its tokens go through the same tenant
// status, revocation and client checks as the deployment's own.
type idpConfig struct {
	url, issuer, audience, tenantClaim, scopeClaim string
	refreshLimit                                   time.Duration
}

func (c *idpConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.url, "jwks-url", "", "external identity provider: URL of its JWKS (RS256, ES256, EdDSA keys; cached per Cache-Control within 1m-24h, refetched on an unknown kid at most every --jwks-refresh-limit); empty: none")
	fs.DurationVar(&c.refreshLimit, "jwks-refresh-limit", tenancy.DefaultJWKSRefreshLimit, "external identity provider: least time between two JWKS fetches caused by an unknown kid or an expired set")
	fs.StringVar(&c.issuer, "jwt-issuer", "", "external identity provider: the iss its tokens carry (required with --jwks-url)")
	fs.StringVar(&c.audience, "jwt-audience", "", "external identity provider: the aud its tokens must carry (default: --audience)")
	fs.StringVar(&c.tenantClaim, "jwks-tenant-claim", "tenant", "external identity provider: the claim holding the tenant id")
	fs.StringVar(&c.scopeClaim, "jwks-scope-claim", "scope", "external identity provider: the claim holding the scopes (space-separated string or list; scopes Cloison does not know are dropped)")
}

// check refuses a half-configured provider before anything starts.
func (c *idpConfig) check() error {
	switch {
	case c.url == "" && (c.issuer != "" || c.audience != ""):
		return errors.New("--jwt-issuer and --jwt-audience need --jwks-url")
	case c.url == "":
		return nil
	case c.issuer == "":
		return errors.New("--jwks-url needs --jwt-issuer")
	case c.refreshLimit <= 0:
		return errors.New("--jwks-refresh-limit must be positive")
	}
	_, err := tenancy.NewProvider(tenancy.ProviderConfig{URL: c.url, Issuer: c.issuer, TenantClaim: c.tenantClaim, ScopeClaim: c.scopeClaim})
	if err != nil {
		return fmt.Errorf("--jwks-url: %w", err)
	}
	return nil
}

// providers returns the configured provider (none without --jwks-url),
// fetching its keys once: a failure is logged, and its tokens are refused
// until a fetch succeeds.
func (c *idpConfig) providers(ctx context.Context, log *slog.Logger) ([]*tenancy.Provider, error) {
	if c.url == "" {
		return nil, nil
	}
	p, err := tenancy.NewProvider(tenancy.ProviderConfig{URL: c.url, Issuer: c.issuer, Audience: c.audience,
		TenantClaim: c.tenantClaim, ScopeClaim: c.scopeClaim, RefreshLimit: c.refreshLimit})
	if err != nil {
		return nil, err
	}
	if err := p.Refresh(ctx); err != nil {
		log.Warn("external identity provider: JWKS fetch failed; its tokens are refused until one succeeds", "issuer", c.issuer, "err", err)
	}
	log.Info("trusting an external identity provider", "issuer", c.issuer, "jwks", c.url)
	return []*tenancy.Provider{p}, nil
}
