package service

import (
	"context"
	"errors"
	"testing"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/tenancy"
)

// A tenant sees the incidents that affect it and no other; another's is
// answered as an unknown one. An operator officer sees all.
func TestIncidentVisibility(t *testing.T) {
	reg := &fakeRegister{files: []audit.IncidentFile{incidentOf("inc-1", "acme"), incidentOf("inc-2", "globex"), incidentOf("inc-3", "acme", "globex")}}
	c := NewCompliance(ComplianceDeps{Register: reg})
	ctx := context.Background()
	for _, tc := range []struct {
		p    tenancy.Principal
		want []audit.Name
	}{
		{officer(), []audit.Name{"inc-1", "inc-2", "inc-3"}},
		{tenantOfficer("acme"), []audit.Name{"inc-1", "inc-3"}},
		{tenantOfficer("initech"), nil},
	} {
		fs, err := c.Incidents(ctx, tc.p)
		if err != nil || fs == nil {
			t.Fatalf("%s: got %v, %v; want a list", tc.p.Tenant, fs, err)
		}
		var got []audit.Name
		for _, f := range fs {
			got = append(got, f.ID)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: got %v, want %v", tc.p.Tenant, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("%s: got %v, want %v", tc.p.Tenant, got, tc.want)
			}
		}
	}
	if _, err := c.Incident(ctx, tenantOfficer("acme"), "inc-2"); !errors.Is(err, ErrNotVisible) {
		t.Fatalf("another tenant's incident: got %v, want ErrNotVisible", err)
	}
	if _, err := c.Incident(ctx, officer(), "inc-9"); !errors.Is(err, ErrNotVisible) {
		t.Fatalf("unknown incident: got %v, want ErrNotVisible", err)
	}
}

// A tenant's view of an incident it shares is redacted (TenantIncident);
// an operator's is whole (OperatorIncident).
func TestIncidentViewsByPrincipal(t *testing.T) {
	f := incidentOf("inc-3", "acme", "globex")
	c := NewCompliance(ComplianceDeps{Register: &fakeRegister{}, Tenants: &fakeTenants{tenants: map[cloison.TenantID]tenancy.Tenant{}}})
	for _, tc := range []struct {
		p        tenancy.Principal
		operator bool
	}{{officer(), true}, {tenantOfficer("acme"), false}} {
		vs, err := c.IncidentViews(context.Background(), tc.p, []audit.IncidentFile{f})
		if err != nil || len(vs) != 1 {
			t.Fatalf("got %v, %v", vs, err)
		}
		if _, ok := vs[0].(OperatorIncident); ok != tc.operator {
			t.Fatalf("operator %v: got view %T", tc.operator, vs[0])
		}
	}
}

// Compliance streams pass the gate first: a refused stream reads nothing.
func TestComplianceStreamsPassTheGate(t *testing.T) {
	refused := cloison.NewError(cloison.CodeCapacityExhausted, "too many")
	led := &scanLedger{}
	c := NewCompliance(ComplianceDeps{Ledger: led, Gate: GateFunc(func(cloison.TenantID, bool) (func(), error) { return nil, refused })})
	if err := c.ScanLedger(context.Background(), officer(), 1, 0, nil); !errors.Is(err, refused) || led.scans != 0 {
		t.Fatalf("got %v after %d scans, want the gate's refusal before any", err, led.scans)
	}
	if err := NewCompliance(ComplianceDeps{Ledger: led}).ScanLedger(context.Background(), officer(), 0, 0, nil); err != nil || led.scans != 1 {
		t.Fatalf("no gate: got %v, %d scans", err, led.scans)
	}
	if err := c.ScanLedger(context.Background(), officer(), 5, 2, nil); !errors.Is(err, ErrInvalidField) {
		t.Fatalf("to before from: got %v", err)
	}
}

// An export needs the node's signing key, checked before anything else.
func TestExportNeedsKey(t *testing.T) {
	c := NewCompliance(ComplianceDeps{})
	if err := c.Export(context.Background(), officer(), "admin:alice", 1, 0, nil); !errors.Is(err, ErrNoExportKey) {
		t.Fatalf("got %v, want ErrNoExportKey", err)
	}
}
