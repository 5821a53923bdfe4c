package service

import (
	"bytes"
	"context"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
	auditpg "github.com/cloison/cloison/audit/postgres"
)

// fakeServed keeps request entries, reports and stored responses by tenant
// in memory, as the ledger's store does: a row of another tenant is
// auditpg.ErrNotFound.
type fakeServed struct {
	Served
	entries map[cloison.TenantID]map[cloison.RequestID]auditpg.TenantEntry
	reports []auditpg.Report
	stored  []auditpg.StoredResponse
}

func (f *fakeServed) RequestEntry(_ context.Context, t cloison.TenantID, req cloison.RequestID) (auditpg.TenantEntry, error) {
	e, ok := f.entries[t][req]
	if !ok {
		return auditpg.TenantEntry{}, auditpg.ErrNotFound
	}
	return e, nil
}

func (f *fakeServed) RecordReport(_ context.Context, _ audit.Name, r auditpg.NewReport, _ auditpg.ReportLimit) (auditpg.Report, bool, error) {
	for _, x := range f.reports {
		if x.Tenant == r.Tenant && x.Request == r.Request {
			return x, true, nil
		}
	}
	rep := auditpg.Report{ID: audit.Name("rep-" + string(r.Request)), Tenant: r.Tenant, Request: r.Request, Reason: r.Reason, Sealed: r.Sealed, Incident: "inc-1"}
	f.reports = append(f.reports, rep)
	return rep, false, nil
}

func (f *fakeServed) ReportOf(_ context.Context, t cloison.TenantID, id audit.Name) (auditpg.Report, error) {
	for _, x := range f.reports {
		if x.Tenant == t && x.ID == id {
			return x, nil
		}
	}
	return auditpg.Report{}, auditpg.ErrNotFound
}

func (f *fakeServed) StoreResponse(_ context.Context, _ audit.Name, r auditpg.StoredResponse) (auditpg.StoredResponse, error) {
	f.stored = append(f.stored, r)
	return r, nil
}

func (f *fakeServed) StoredResponseOf(_ context.Context, t cloison.TenantID, id audit.Name) (auditpg.StoredResponse, error) {
	for _, x := range f.stored {
		if x.Tenant == t && x.ID == id {
			return x, nil
		}
	}
	return auditpg.StoredResponse{}, auditpg.ErrNotFound
}

// holds reports whether any sealed blob f keeps contains text.
func (f *fakeServed) holds(text string) bool {
	for _, r := range f.reports {
		if bytes.Contains(r.Sealed, []byte(text)) {
			return true
		}
	}
	for _, r := range f.stored {
		if bytes.Contains(r.Sealed, []byte(text)) {
			return true
		}
	}
	return false
}
