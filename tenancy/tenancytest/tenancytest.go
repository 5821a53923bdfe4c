// Package tenancytest gives other packages' tests a working tenancy setup
// over a migrated database: a store, a key ring with its issuer, a verifier,
// tenants with unique ids, and tokens for them.
package tenancytest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/cloison/cloison"
	auditpg "github.com/cloison/cloison/audit/postgres"
	"github.com/cloison/cloison/tenancy"
)

// Audience is the aud the Env's verifier expects and its tokens carry.
const Audience = "cloison-test"

// Env is one issuer (its own name, so Envs sharing a database do not see
// each other's keys) with a verifier that trusts it.
type Env struct {
	Store    *tenancy.Store
	Ring     *tenancy.KeyRing
	Issuer   *tenancy.Issuer
	Verifier *tenancy.Verifier
}

// New builds an Env over pool (a migrated database; the runtime role is
// enough), ledgering its changes to the real ledger on pool; its ring has no
// minimum rotation interval. The key-encryption key is random and in memory.
func New(tb testing.TB, pool *pgxpool.Pool) *Env {
	tb.Helper()
	ctx := context.Background()
	kek := make([]byte, tenancy.KEKSize)
	if _, err := rand.Read(kek); err != nil {
		tb.Fatal(err)
	}
	ledger, err := auditpg.Open(ctx, pool, auditpg.Config{Origin: "tenancytest"})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = ledger.Close() })
	e := &Env{Store: tenancy.NewStore(pool).WithLedger(ledger)}
	if e.Ring, err = tenancy.OpenKeyRing(ctx, e.Store, "https://cloison.test/"+unique("iss"), kek, tenancy.WithMinRotateInterval(0)); err != nil {
		tb.Fatal(err)
	}
	e.Issuer = tenancy.NewIssuer(e.Ring)
	e.Verifier, err = tenancy.NewVerifier(tenancy.VerifierConfig{Audience: Audience, Sources: []tenancy.KeySource{e.Ring},
		Tenants: e.Store, Clients: e.Store, Revocations: e.Store})
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

func unique(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return prefix + "-" + hex.EncodeToString(b[:])
}

// Tenant creates an active tenant with a unique id (prefix-xxxxxxxxxx),
// internal data, default quotas and allowed models; edit may change it
// before it is stored.
func (e *Env) Tenant(tb testing.TB, prefix string, models []string, edit func(*tenancy.Tenant)) tenancy.Tenant {
	tb.Helper()
	t := tenancy.NewTenant(cloison.TenantID(unique(prefix)), "Test tenant "+prefix, tenancy.ClassInternal)
	t.AllowedModels = models
	t.IncidentContact = "privacy@" + prefix + ".example"
	if edit != nil {
		edit(&t)
	}
	out, err := e.Store.CreateTenant(context.Background(), t)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// Token issues a one-hour token for subject "user@<tenant>" of tenant with
// the scopes given.
func (e *Env) Token(tb testing.TB, tenant cloison.TenantID, scopes ...tenancy.Scope) string {
	tb.Helper()
	tok, err := e.Issuer.Issue(tenancy.TokenRequest{Subject: "user@" + string(tenant), Tenant: tenant, Scopes: scopes,
		Audience: Audience, TTL: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}
