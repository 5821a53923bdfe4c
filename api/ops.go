package api

import (
	"time"

	"github.com/cloison/cloison/service"
)

// operations are the service-layer operations the HTTP handlers and the
// gRPC services both call: one implementation, two codecs.
type operations struct {
	admin      *service.Admin
	compliance *service.Compliance
	responses  *service.Responses // built with its metrics (newResponseState)
}

// newOperations builds the operations from s's Config.
func newOperations(s *Server) *operations {
	cfg := s.cfg
	var keys service.KeyRing
	if cfg.Keys != nil { // a nil *KeyRing in the interface would not read as absent
		keys = cfg.Keys
	}
	var witnesses service.Witnesses
	if cfg.Transparency != nil {
		witnesses = cfg.Transparency
	}
	return &operations{
		responses: s.resp.svc,
		admin: service.NewAdmin(service.AdminDeps{Tenants: cfg.Tenants, Pool: cfg.Engine, Keys: keys, Policies: cfg.Decider,
			Register: cfg.Ledger, Ledger: service.AppendFunc(s.append)}),
		compliance: service.NewCompliance(service.ComplianceDeps{Register: cfg.Ledger, Ledger: cfg.Ledger, Tenants: cfg.Tenants, Log: cfg.Ledger,
			Gate: service.GateFunc(s.streams.acquire), Now: func() time.Time { return timeNow() }, Verify: cfg.Verify,
			ExportKey: cfg.ExportKey, Witnesses: witnesses}),
	}
}
