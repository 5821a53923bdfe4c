package prefill

import (
	"context"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/engine/model"
	"github.com/cloison/cloison/engine/tokenizer"
	"github.com/cloison/cloison/engine/transfer"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/kernels"
	"github.com/cloison/cloison/tenancy"
)

// Model is the model a node serves: an instance loaded from a ModelFile.
type Model struct {
	Backend   kernels.Backend // the arena comes from it
	Model     *model.Model
	Tokenizer *tokenizer.Tokenizer
	Name      string          // the model id the API serves
	Digest    transfer.Digest // SHA-256 of the GGUF file: the same on every node serving the file
}

// Capacity sizes a node's KV pool and what it attests (attest.Config).
type Capacity struct {
	// Pool is the KV pool (pages, page size, default zeroing, test faults).
	Pool isolation.Config
	// ServedContext is the context to serve (0: the model's); K the number
	// of full-context requests the pool must hold (0: 1).
	ServedContext, K int
	// Labels are the node's residency labels (region, tier), published in
	// its attestation; a tenant's residency picks its prefill nodes by them.
	Labels attest.Labels
	// KV is the element type the node's arena stores K and V in (zero:
	// float32). It is attested, and a decode node and its prefill nodes
	// must agree on it: the transfer refuses pages of another type.
	KV kernels.KVType
}

// Attest is the capacity attestation of a pool of c serving m, with the
// dedicated tenants' reserved pages.
//
// Errors: attest.ErrFailed (a pool cannot hold the context served).
func (c Capacity) Attest(m *model.Model, reserved map[cloison.TenantID]int) (attest.Attestation, error) {
	return attest.Capacity(attest.Config{ModelContext: m.Context, ServedContext: c.ServedContext, PoolPages: c.Pool.Pages,
		PageTokens: c.Pool.PageTokens, K: c.K, Zeroing: c.Pool.DefaultZeroing, Reserved: reserved, Labels: c.Labels, KVType: c.KV.String()})
}

// TenantSource is where a node reads the tenants whose partitions it holds
// (*tenancy.Store).
type TenantSource interface {
	Tenants(ctx context.Context) ([]tenancy.Tenant, error)
	Tenant(ctx context.Context, id cloison.TenantID) (tenancy.Tenant, error)
}

// PoolTenant is a tenant's partition as the pool takes it: its tier and
// zeroing, a cap of its KV pages, and a dedicated tenant's pages reserved.
// The API makes the same partition for a tenant created after start.
func PoolTenant(t tenancy.Tenant) isolation.TenantConfig {
	tc := isolation.TenantConfig{ID: t.ID, Tier: t.Tier, Zeroing: t.Zeroing, Cap: t.Quotas.KVPages}
	if t.Tier == isolation.TierDedicated {
		tc.Reserved = t.Quotas.KVPages
	}
	return tc
}
