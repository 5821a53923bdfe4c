package service

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"

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

// ContextFor is the context a tenant can actually use: the served context,
// lowered by the tenant's max-context quota and by the KV pages its
// partition can ever give one request. It is what the API advertises to the
// tenant, so that no request within it is refused for length.
func (s *Requests) ContextFor(p tenancy.Principal) int {
	n := s.cfg.Engine.Attestation().ServedContext
	if q := p.TenantRecord.Quotas.MaxContext; q > 0 {
		n = min(n, q)
	}
	if part, err := s.cfg.Engine.EnsureTenant(PoolTenant(p.TenantRecord)); err == nil {
		n = min(n, part.MaxLeaseTokens)
	}
	return n
}

// TenantPlacement is what GET /v1/attestation (and gRPC GetAttestation)
// tells the calling tenant, and nothing about any other (where another
// tenant's pages and prompts go is that tenant's business alone):
// how its KV pages are isolated on this node (isolation tier, zeroing
// mode), the residency its record requires, the labels of this node and of
// the prefill nodes its prompts may be sent to now, and whether the
// residency is met (Compliant: false means its requests are refused with
// permission_denied).
type TenantPlacement struct {
	Tenant        cloison.TenantID  `json:"tenant"`
	IsolationTier string            `json:"isolation_tier"`
	Zeroing       string            `json:"zeroing"`
	Residency     tenancy.Residency `json:"residency"`
	Decode        attest.Labels     `json:"node"`
	Prefill       []attest.Labels   `json:"prefill_nodes"`
	Compliant     bool              `json:"compliant"`
}

// TenantAttestation is the attestation as p may see it — its own
// reservation only — and p's placement. The isolation is the partition's
// where the tenant has one on this node, else its record's.
func (s *Requests) TenantAttestation(p tenancy.Principal) (attest.Attestation, TenantPlacement) {
	a := s.cfg.Engine.Attestation()
	own := a.Reserved[:0:0]
	for _, r := range a.Reserved {
		if r.Tenant == p.Tenant {
			own = append(own, r)
		}
	}
	a.Reserved = own
	// The tenant's own adapters of this model, by digest: never another
	// tenant's, and no tenant id (the caller's own).
	a.Adapters = nil
	if s.cfg.Adapters != nil {
		for _, ad := range s.cfg.Adapters.List(p.Tenant) {
			a.Adapters = append(a.Adapters, attest.AttestedAdapter{Name: ad.Name, Digest: hex.EncodeToString(ad.Digest[:]), Rank: ad.Rank})
		}
	}
	t := p.TenantRecord
	tp := TenantPlacement{Tenant: p.Tenant, IsolationTier: t.Tier.String(), Zeroing: t.Zeroing.String(), Residency: t.Residency,
		Decode: a.Labels, Prefill: []attest.Labels{}}
	if tp.Residency.Regions == nil {
		tp.Residency.Regions = []string{}
	}
	if part, err := s.cfg.Engine.TenantIsolation(p.Tenant); err == nil {
		tp.IsolationTier, tp.Zeroing = part.Tier.String(), part.Zeroing.String()
	}
	pl := s.placement()
	for _, l := range pl.Prefill {
		if l.Serves(t.Residency.Regions, t.Residency.Tier) {
			tp.Prefill = append(tp.Prefill, l) // the nodes its prompts may go to, no other
		}
	}
	tp.Compliant, _ = policies.Input{Tenant: t, Attestation: a, Placement: pl}.Complies()
	return a, tp
}
