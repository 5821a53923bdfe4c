package tenancytest_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/cloison/cloison/internal/pgtest"
	"github.com/cloison/cloison/tenancy"
	"github.com/cloison/cloison/tenancy/tenancytest"
)

var db *pgtest.DB

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m, &db)) }

func TestEnv(t *testing.T) {
	e := tenancytest.New(t, db.RuntimePool(t))
	a := e.Tenant(t, "a", []string{"m"}, nil)
	b := e.Tenant(t, "a", nil, func(x *tenancy.Tenant) { x.Quotas.MaxConcurrent = 1 })
	if a.ID == b.ID {
		t.Fatalf("two tenants with id %s", a.ID)
	}
	p, err := e.Verifier.Verify(context.Background(), e.Token(t, a.ID, tenancy.ScopeInfer))
	if err != nil || p.Tenant != a.ID || !p.Has(tenancy.ScopeInfer) {
		t.Fatalf("got %+v, %v", p, err)
	}
	if err := p.Require(tenancy.ScopeAdmin); !errors.Is(err, tenancy.ErrScopeNotGranted) {
		t.Fatalf("got %v, want ErrScopeNotGranted", err)
	}
	// A second Env's verifier does not trust the first one's keys.
	other := tenancytest.New(t, db.RuntimePool(t))
	if _, err := other.Verifier.Verify(context.Background(), e.Token(t, a.ID, tenancy.ScopeInfer)); !errors.Is(err, tenancy.ErrTokenIssuer) {
		t.Fatalf("cross-env token: got %v, want ErrTokenIssuer", err)
	}
}
