package service

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel/attribute"

	"github.com/cloison/cloison/internal/tracing"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/policies"
	"github.com/cloison/cloison/tenancy"
)

const (
	attrDecision = attribute.Key("cloison.decision_id")
	attrAllowed  = attribute.Key("cloison.allowed")
)

// Authenticate verifies a bearer token (its transport already took it out
// of the header or metadata) within an auth span and returns its
// principal. Scopes are the transport's to require: they depend on the
// route.
//
// Errors: those of tenancy.Verifier.Verify (unauthenticated; a suspended
// tenant or revoked token, permission denied).
func (s *Requests) Authenticate(ctx context.Context, raw string) (tenancy.Principal, error) {
	ctx, span := s.tracer.Start(ctx, "auth")
	defer span.End()
	p, err := s.cfg.Verifier.Verify(ctx, raw)
	if err != nil {
		tracing.Fail(span, err)
		return p, err
	}
	span.SetAttributes(tracing.AttrTenant.String(string(p.Tenant)))
	return p, nil
}

// decide evaluates the policy within a policy span.
func (s *Requests) decide(ctx context.Context, in policies.Input) (policies.Decision, error) {
	ctx, span := s.tracer.Start(ctx, "policy")
	defer span.End()
	dec, err := s.cfg.Decider.Decide(ctx, in)
	span.SetAttributes(attrDecision.String(dec.ID), attrAllowed.Bool(err == nil && dec.Allow))
	tracing.Fail(span, err)
	return dec, err
}

// placement is the policy input's view of where a request would go: on a
// decode node, the prefill nodes it may ask now.
func (s *Requests) placement() policies.Placement {
	if s.cfg.Placement == nil {
		return policies.Placement{}
	}
	return policies.Placement{Split: true, Prefill: s.cfg.Placement.PrefillLabels()}
}

// Placement is the policy input's view of where a request of this node
// would go (the attestation route shows it to the tenant).
func (s *Requests) Placement() policies.Placement { return s.placement() }

// applies checks that the pool isolates the tenant at least as the decision
// requires, and returns the tenant's partition (a tenant created since this
// node started gets it now: Engine.EnsureTenant); otherwise the request
// cannot be proven isolated and is refused.
func (s *Requests) applies(p tenancy.Principal, dec policies.Decision) (isolation.Partition, error) {
	part, err := s.cfg.Engine.EnsureTenant(PoolTenant(p.TenantRecord))
	if err != nil {
		return isolation.Partition{}, fmt.Errorf("%w: tenant %s has no KV partition on this node: %v", ErrIsolationPolicy, p.Tenant, err)
	}
	if part.Zeroing < dec.Zeroing || (dec.Tier == isolation.TierDedicated && part.Tier != isolation.TierDedicated) {
		return isolation.Partition{}, fmt.Errorf("%w: pool has %s/%s, policy requires %s/%s", ErrIsolationPolicy, part.Tier, part.Zeroing, dec.Tier, dec.Zeroing)
	}
	return part, nil
}

// PoolTenant is the KV partition a tenant record implies.
func PoolTenant(t tenancy.Tenant) isolation.TenantConfig {
	tc := isolation.TenantConfig{ID: t.ID, Tier: t.Tier, Zeroing: t.Zeroing, Cap: t.Quotas.KVPages}
	if t.Tier == isolation.TierDedicated {
		tc.Reserved = t.Quotas.KVPages
	}
	return tc
}
