package api

import (
	"context"

	"github.com/cloison/cloison"
	adminv1 "github.com/cloison/cloison/api/proto/cloison/admin/v1"
)

// The admin API's adapter routes over gRPC: the same AdapterAdmin calls,
// so the same checks, errors and ledger events, with the caller's
// principal as actor.

func adapterPB(a AdapterInfo) *adminv1.Adapter {
	return &adminv1.Adapter{Tenant: string(a.Tenant), Name: a.Name, Id: a.ID, Model: a.Model, Digest: a.Digest,
		ModelDigest: a.ModelDigest, Rank: int64(a.Rank), Alpha: a.Alpha}
}

// RegisterAdapter is POST /admin/v1/adapters over gRPC.
func (a *adminService) RegisterAdapter(ctx context.Context, req *adminv1.RegisterAdapterRequest) (*adminv1.Adapter, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	if a.s.cfg.AdapterAdmin == nil {
		return nil, errNoAdapterAdmin
	}
	info, err := a.s.cfg.AdapterAdmin.RegisterAdapter(ctx, grpcActor(ctx), AdapterRegister{Tenant: cloison.TenantID(req.GetTenant()),
		Name: req.GetName(), Path: req.GetPath(), Model: req.GetModel()})
	if err != nil {
		return nil, err
	}
	return adapterPB(info), nil
}

// UnregisterAdapter is DELETE /admin/v1/tenants/{tenant}/adapters/{name}
// over gRPC.
func (a *adminService) UnregisterAdapter(ctx context.Context, req *adminv1.UnregisterAdapterRequest) (*adminv1.Adapter, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	if a.s.cfg.AdapterAdmin == nil {
		return nil, errNoAdapterAdmin
	}
	info, err := a.s.cfg.AdapterAdmin.UnregisterAdapter(ctx, grpcActor(ctx), cloison.TenantID(req.GetTenant()), req.GetModel(), req.GetName())
	if err != nil {
		return nil, err
	}
	return adapterPB(info), nil
}

// ListAdapters is GET /admin/v1/tenants/{tenant}/adapters over gRPC.
func (a *adminService) ListAdapters(ctx context.Context, req *adminv1.ListAdaptersRequest) (*adminv1.ListAdaptersResponse, error) {
	if err := checkProtoFields(req); err != nil {
		return nil, err
	}
	if a.s.cfg.AdapterAdmin == nil {
		return nil, errNoAdapterAdmin
	}
	out := &adminv1.ListAdaptersResponse{}
	for _, info := range a.s.cfg.AdapterAdmin.TenantAdapters(cloison.TenantID(req.GetTenant())) {
		out.Adapters = append(out.Adapters, adapterPB(info))
	}
	return out, nil
}
