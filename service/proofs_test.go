package service

import (
	"errors"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/tenancy"
)

// A tenant reads its own log only; an operator names any; a caller with
// no tenant must name one.
func TestTenantLogOf(t *testing.T) {
	for _, c := range []struct {
		name  string
		p     tenancy.Principal
		named string
		want  cloison.TenantID
		err   error
	}{
		{"own, unnamed", tenantOfficer("acme"), "", "acme", nil},
		{"own, named", tenantOfficer("acme"), "acme", "acme", nil},
		{"another's", tenantOfficer("acme"), "globex", "", ErrOtherTenantLog},
		{"operator names any", officer(), "globex", "globex", nil},
		{"operator without tenant names none", officer(), "", "", ErrInvalidField},
	} {
		got, err := TenantLogOf(c.p, c.named)
		if got != c.want || !errors.Is(err, c.err) {
			t.Errorf("%s: got %q, %v; want %q, %v", c.name, got, err, c.want, c.err)
		}
	}
}

// An operator naming no tenant lists the global ledger; every other
// listing is a tenant log.
func TestListedLog(t *testing.T) {
	if got, err := ListedLog(officer(), ""); got != "" || err != nil {
		t.Fatalf("operator: got %q, %v; want the global ledger", got, err)
	}
	if got, err := ListedLog(officer(), "acme"); got != "acme" || err != nil {
		t.Fatalf("operator naming acme: got %q, %v", got, err)
	}
	if got, err := ListedLog(tenantOfficer("acme"), ""); got != "acme" || err != nil {
		t.Fatalf("tenant: got %q, %v; want its own log", got, err)
	}
	if _, err := ListedLog(tenantOfficer("acme"), "globex"); !errors.Is(err, ErrOtherTenantLog) {
		t.Fatalf("tenant naming another: got %v", err)
	}
}
