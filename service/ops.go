package service

import (
	"context"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/attest"
	"github.com/cloison/cloison/audit"
	"github.com/cloison/cloison/isolation"
	"github.com/cloison/cloison/tenancy"
)

// What the admin, compliance and response operations use of the rest of
// the node, declared here where it is used: each type below is satisfied
// by the production implementation named in its comment, and a test may
// hand in a fake that implements only what it exercises.

// Errors every operation and the request path may return. The transports
// decode their own fields with the same values, so that errors.Is matches
// whichever layer refused.
var (
	// ErrInvalidField: a request field the operation cannot take; the
	// public message names the field (Withf).
	ErrInvalidField = cloison.NewError(cloison.CodeInvalid, "invalid request field")
	// ErrLedgerUnavailable: the ledger could not record a request or an
	// operation, so it did not happen: the platform refuses unaudited
	// service (unavailable, HTTP 503).
	ErrLedgerUnavailable = cloison.NewError(cloison.CodeUnavailable, "the audit ledger is unavailable; no unaudited service")
)

// TenantStore is the tenant, client and token store (*tenancy.Store).
// Every change it makes is ledgered in the change's own transaction, under
// the actor tenancy.WithActor puts on the context: a change the ledger
// cannot record does not happen.
type TenantStore interface {
	Tenants(ctx context.Context) ([]tenancy.Tenant, error)
	Tenant(ctx context.Context, id cloison.TenantID) (tenancy.Tenant, error)
	CreateTenant(ctx context.Context, t tenancy.Tenant) (tenancy.Tenant, error)
	SetStatus(ctx context.Context, id cloison.TenantID, st tenancy.Status) (tenancy.Tenant, error)
	UpdateTenant(ctx context.Context, id cloison.TenantID, fn func(*tenancy.Tenant) error) (tenancy.Tenant, error)
	Clients(ctx context.Context, tenant cloison.TenantID) ([]tenancy.Client, error)
	CreateClient(ctx context.Context, c tenancy.Client) (tenancy.Client, error)
	RevokeClient(ctx context.Context, id string) (tenancy.Client, error)
	RevokeToken(ctx context.Context, issuer, jti string, tenant cloison.TenantID, expires time.Time) error
}

// Pool is the node's KV pool and load as the admin operations see them
// (*engine.Engine).
type Pool interface {
	Attestation() attest.Attestation
	Load() (running, waiting int)
	PoolStats() isolation.Stats
	AddTenant(isolation.TenantConfig) error
	TenantIsolation(cloison.TenantID) (isolation.Partition, error)
}

// KeyRing holds the JWT signing keys (*tenancy.KeyRing); it ledgers every
// rotation and retirement in the step's own transaction.
type KeyRing interface {
	Keys() []tenancy.KeyInfo
	Rotate(ctx context.Context) error
	Retire(ctx context.Context, kid string) error
}

// PolicyReloader prepares and swaps the policy bundle (*policies.Decider):
// commit runs after the bundle compiled and passed its tests and before it
// serves, so a reload whose commit fails never serves.
type PolicyReloader interface {
	ReloadWith(ctx context.Context, sources map[string]string, commit func(revision string) error) (string, error)
}

// Appender writes one event of this node to the ledger and returns it with
// its seq. A failure wraps ErrLedgerUnavailable (or the transport's equivalent):
// the caller does not go on unaudited.
type Appender interface {
	Append(ctx context.Context, tenant cloison.TenantID, p audit.Payload) (audit.Record, error)
}

// AppendFunc is an Appender made of a function.
type AppendFunc func(ctx context.Context, tenant cloison.TenantID, p audit.Payload) (audit.Record, error)

// Append calls f.
func (f AppendFunc) Append(ctx context.Context, tenant cloison.TenantID, p audit.Payload) (audit.Record, error) {
	return f(ctx, tenant, p)
}

// Gate admits compliance streams (ledger ranges, exports, verifications):
// Acquire refuses at once when the node or the tenant holds too many, and
// release must be called exactly once when the stream ends. operator says
// the caller is the deployment's operator (Operator), for whom the gate
// may keep slots tenants cannot take.
type Gate interface {
	Acquire(tenant cloison.TenantID, operator bool) (release func(), err error)
}

// GateFunc is a Gate made of a function.
type GateFunc func(tenant cloison.TenantID, operator bool) (release func(), err error)

// Acquire calls f.
func (f GateFunc) Acquire(tenant cloison.TenantID, operator bool) (func(), error) {
	return f(tenant, operator)
}

// openGate admits everything (no Gate configured).
type openGate struct{}

func (openGate) Acquire(cloison.TenantID, bool) (func(), error) { return func() {}, nil }

// AdminActor is the ledger actor of an admin or compliance officer's
// operation.
func AdminActor(p tenancy.Principal) audit.Name {
	return audit.Name(SanitizeName("admin:" + p.Subject))
}

// TenantActor is the ledger actor of a tenant's own operation (a report, a
// replay, a stored response).
func TenantActor(p tenancy.Principal) audit.Name {
	return audit.Name(SanitizeName("tenant:" + string(p.Tenant) + "/" + p.Subject))
}

// OperatorActor is the ledger actor of an operator's replay of a tenant's
// request.
func OperatorActor(p tenancy.Principal) audit.Name {
	return audit.Name(SanitizeName("operator:" + p.Subject))
}

// Operator reports whether p is one of the operator's admin or compliance
// officers, who see the whole register and ledger. The admin scope is what
// makes one (tenancy has no other mark of the operator): whoever grants
// client scopes must keep it to the operator's own officers. Everyone else
// is a tenant principal and sees its own tenant's part only.
func Operator(p tenancy.Principal) bool { return p.Has(tenancy.ScopeAdmin) }
