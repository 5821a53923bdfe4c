package service

import (
	"strings"

	"github.com/cloison/cloison/engine"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/tenancy"
)

// AdapterSep separates a model's name from an adapter's in a request's
// model field: "<model>:<adapter>".
const AdapterSep = ":"

// resolveModel is what a request's model field names for tenant p: this
// node's model (nil adapter), or "<model>:<adapter>", one of p's tenant's
// LoRA adapters of it (Config.Adapters). A model the tenant may not use, an
// adapter that does not exist and another tenant's adapter all get the same
// ErrUnknownModel, with the same text, through the same single map lookup:
// a tenant never learns of another's adapter.
func (s *Requests) resolveModel(p tenancy.Principal, name string) (*model.Adapter, error) {
	if name == s.cfg.ModelName && p.TenantRecord.Allows(name) {
		return nil, nil
	}
	refuse := ErrUnknownModel.Withf("%q", clip(name, 64))
	rest, ok := strings.CutPrefix(name, s.cfg.ModelName+AdapterSep)
	if !ok || s.cfg.Adapters == nil || !p.TenantRecord.Allows(s.cfg.ModelName) {
		return nil, refuse
	}
	ad, err := s.cfg.Adapters.Lookup(p.Tenant, rest)
	if err != nil {
		return nil, refuse
	}
	return ad, nil
}

// AdapterModels are the "<model>:<adapter>" ids of p's tenant's adapters of
// this model (GET /v1/models): never another tenant's.
func (s *Requests) AdapterModels(p tenancy.Principal) []string {
	if s.cfg.Adapters == nil || !p.TenantRecord.Allows(s.cfg.ModelName) {
		return nil
	}
	var out []string
	for _, a := range s.cfg.Adapters.List(p.Tenant) {
		out = append(out, s.cfg.ModelName+AdapterSep+a.Name)
	}
	return out
}

// Adapters is the model's adapter registry (Config.Adapters; nil: none).
func (s *Requests) Adapters() *engine.Adapters { return s.cfg.Adapters }
