package service

import (
	"context"
	"errors"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

// Fakes embed the interface they stand for and implement only what a
// test exercises: a call to anything else panics, which a test would see.

// fakeTenants holds tenants by id and counts the changes made.
type fakeTenants struct {
	TenantStore
	tenants map[cloison.TenantID]tenancy.Tenant
	changes int
}

func (f *fakeTenants) Tenants(context.Context) ([]tenancy.Tenant, error) {
	var out []tenancy.Tenant
	for _, t := range f.tenants {
		out = append(out, t)
	}
	return out, nil
}

func (f *fakeTenants) Tenant(_ context.Context, id cloison.TenantID) (tenancy.Tenant, error) {
	t, ok := f.tenants[id]
	if !ok {
		return tenancy.Tenant{}, tenancy.ErrNotFound
	}
	return t, nil
}

func (f *fakeTenants) CreateTenant(_ context.Context, t tenancy.Tenant) (tenancy.Tenant, error) {
	f.changes++
	f.tenants[t.ID] = t
	return t, nil
}

func (f *fakeTenants) UpdateTenant(_ context.Context, id cloison.TenantID, fn func(*tenancy.Tenant) error) (tenancy.Tenant, error) {
	f.changes++
	t, ok := f.tenants[id]
	if !ok {
		return tenancy.Tenant{}, tenancy.ErrNotFound
	}
	if err := fn(&t); err != nil {
		return tenancy.Tenant{}, err
	}
	f.tenants[id] = t
	return t, nil
}

// fakePool is a KV pool whose AddTenant fails with addErr, and which holds
// the partitions in parts.
type fakePool struct {
	Pool
	addErr error
	parts  map[cloison.TenantID]isolation.Partition
}

func (f *fakePool) AddTenant(tc isolation.TenantConfig) error {
	if f.addErr != nil {
		return f.addErr
	}
	f.parts[tc.ID] = isolation.Partition{Tenant: tc.ID, Tier: tc.Tier, Zeroing: tc.Zeroing, Reserved: tc.Reserved}
	return nil
}

func (f *fakePool) TenantIsolation(id cloison.TenantID) (isolation.Partition, error) {
	p, ok := f.parts[id]
	if !ok {
		return isolation.Partition{}, isolation.ErrUnknownTenant
	}
	return p, nil
}

func (f *fakePool) Attestation() attest.Attestation { return attest.Attestation{} }

// fakeRegister is an incident register of fixed files.
type fakeRegister struct {
	RegisterStore
	files []audit.IncidentFile
}

func (f *fakeRegister) Incidents(context.Context) ([]audit.IncidentFile, error) { return f.files, nil }

func (f *fakeRegister) Incident(_ context.Context, id audit.Name) (audit.IncidentFile, error) {
	for _, x := range f.files {
		if x.ID == id {
			return x, nil
		}
	}
	return audit.IncidentFile{}, audit.ErrNotFound
}

// scanLedger counts the rows it scans.
type scanLedger struct {
	LedgerReader
	scans int
}

func (f *scanLedger) Scan(context.Context, uint64, uint64, func(audit.Record) error) error {
	f.scans++
	return nil
}

var errLedger = errors.New("ledger down")

func incidentOf(id audit.Name, tenants ...cloison.TenantID) audit.IncidentFile {
	return audit.IncidentFile{ID: id, Versions: []audit.StoredVersion{{IncidentVersion: audit.IncidentVersion{Incident: id, Version: 1, AffectedTenants: tenants}}}}
}

func officer() tenancy.Principal {
	return tenancy.Principal{Subject: "alice", Scopes: []tenancy.Scope{tenancy.ScopeAdmin, tenancy.ScopeComplianceRead}}
}

func tenantOfficer(t cloison.TenantID) tenancy.Principal {
	return tenancy.Principal{Subject: "bob", Tenant: t, Scopes: []tenancy.Scope{tenancy.ScopeComplianceRead}}
}
