package service

import (
	"bytes"
	"context"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// fakeServed keeps request entries, reports and stored responses by tenant
// in memory, as the ledger's store does: a row of another tenant is
// audit.ErrNotFound.
type fakeServed struct {
	Served
	entries map[cloison.TenantID]map[cloison.RequestID]audit.TenantEntry
	reports []audit.Report
	stored  []audit.StoredResponse
}

func (f *fakeServed) RequestEntry(_ context.Context, t cloison.TenantID, req cloison.RequestID) (audit.TenantEntry, error) {
	e, ok := f.entries[t][req]
	if !ok {
		return audit.TenantEntry{}, audit.ErrNotFound
	}
	return e, nil
}

func (f *fakeServed) RecordReport(_ context.Context, _ audit.Name, r audit.NewReport, _ audit.ReportLimit) (audit.Report, bool, error) {
	for _, x := range f.reports {
		if x.Tenant == r.Tenant && x.Request == r.Request {
			return x, true, nil
		}
	}
	rep := audit.Report{ID: audit.Name("rep-" + string(r.Request)), Tenant: r.Tenant, Request: r.Request, Reason: r.Reason, Sealed: r.Sealed, Incident: "inc-1"}
	f.reports = append(f.reports, rep)
	return rep, false, nil
}

func (f *fakeServed) ReportOf(_ context.Context, t cloison.TenantID, id audit.Name) (audit.Report, error) {
	for _, x := range f.reports {
		if x.Tenant == t && x.ID == id {
			return x, nil
		}
	}
	return audit.Report{}, audit.ErrNotFound
}

func (f *fakeServed) StoreResponse(_ context.Context, _ audit.Name, r audit.StoredResponse) (audit.StoredResponse, error) {
	f.stored = append(f.stored, r)
	return r, nil
}

func (f *fakeServed) StoredResponseOf(_ context.Context, t cloison.TenantID, id audit.Name) (audit.StoredResponse, error) {
	for _, x := range f.stored {
		if x.Tenant == t && x.ID == id {
			return x, nil
		}
	}
	return audit.StoredResponse{}, audit.ErrNotFound
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
