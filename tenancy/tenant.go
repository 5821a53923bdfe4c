package tenancy

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/cloison/cloison"
)

// Status is a tenant's standing. Only active tenants authenticate.
type Status string

const (
	StatusActive    Status = "active"
	StatusSuspended Status = "suspended"
)

// ParseStatus parses "active" or "suspended".
func ParseStatus(s string) (Status, error) {
	switch Status(s) {
	case StatusActive, StatusSuspended:
		return Status(s), nil
	}
	return "", ErrInvalidTenant.Withf("status %q (want active or suspended)", s)
}

// Classification is the most sensitive kind of data a tenant sends.
type Classification string

const (
	ClassPublic       Classification = "public"
	ClassInternal     Classification = "internal"
	ClassConfidential Classification = "confidential"
	// ClassPersonal: personal information in the sense of Quebec's Loi 25.
	ClassPersonal Classification = "personal"
)

// ParseClassification parses public, internal, confidential or personal.
func ParseClassification(s string) (Classification, error) {
	switch c := Classification(s); c {
	case ClassPublic, ClassInternal, ClassConfidential, ClassPersonal:
		return c, nil
	}
	return "", ErrInvalidTenant.Withf("classification %q (want public, internal, confidential or personal)", s)
}

// Sensitive reports whether data of this class must be served from dedicated
// pages zeroed before every reuse.
func (c Classification) Sensitive() bool { return c == ClassConfidential || c == ClassPersonal }

// Quotas bound what one tenant may use. Every quota is at least 1: there is
// no "unlimited" value that a zero could mean by accident.
type Quotas struct {
	// MaxConcurrent is the number of requests in flight at once.
	MaxConcurrent int `json:"max_concurrent"`
	// KVPages caps the KV pages the tenant's live leases hold at once
	// (isolation.TenantConfig.Cap); a dedicated tenant's reserved pages.
	KVPages int `json:"kv_pages"`
	// TokensPerMinute is the refill rate (and burst) of the tenant's token
	// bucket; prompt plus requested completion tokens are charged.
	TokensPerMinute int `json:"tokens_per_minute"`
	// MaxContext bounds prompt + completion tokens of one request; 0 means
	// the engine's served context.
	MaxContext int `json:"max_context"`
}

// DefaultQuotas are NewTenant's quotas.
var DefaultQuotas = Quotas{MaxConcurrent: 4, KVPages: 256, TokensPerMinute: 100_000}

// NewTenant returns an active tenant record with the isolation its
// classification needs — dedicated pages zeroed always for personal or
// confidential data, shared pages zeroed across tenants otherwise — and
// DefaultQuotas; the caller adds allowed models and the incident contact.
func NewTenant(id cloison.TenantID, name string, class Classification) Tenant {
	t := Tenant{ID: id, Name: name, Status: StatusActive, Tier: cloison.TierShared, Zeroing: cloison.ZeroCrossTenant,
		Classification: class, Quotas: DefaultQuotas, AllowedModels: []string{}, Residency: Residency{Regions: []string{}}}
	if class.Sensitive() {
		t.Tier, t.Zeroing = cloison.TierDedicated, cloison.ZeroAlways
	}
	return t
}

// MaxNoticeDeadlineHours bounds a tenant's notice deadline (a year), as the
// database does.
const MaxNoticeDeadlineHours = 8760

// MaxRegions bounds a tenant's allowed regions, as the database does.
const MaxRegions = 64

// Residency is a tenant's requirement on the nodes that process its data:
// their region label must be one of Regions (empty: any region) and their
// tier label must be Tier (empty: any tier). A node that cannot be shown to
// comply (no label) serves no tenant that states a requirement: admission
// refuses (permission_denied) and a decode node sends the prompt to no
// prefill node outside it (attest.Labels.Serves).
type Residency struct {
	Regions []string `json:"regions"`
	Tier    string   `json:"tier"`
}

// Required reports whether the residency restricts anything.
func (r Residency) Required() bool { return len(r.Regions) > 0 || r.Tier != "" }

// Tenant is one customer of the platform.
type Tenant struct {
	ID             cloison.TenantID `json:"id"`
	Name           string           `json:"name"`
	Status         Status           `json:"status"`
	Tier           cloison.Tier     `json:"-"` // JSON: "tier", as its String
	Zeroing        cloison.Zeroing  `json:"-"` // JSON: "zeroing", as its String
	Classification Classification   `json:"classification"`
	Quotas         Quotas           `json:"quotas"`
	// AllowedModels lists the model names the tenant may use; empty means
	// none (the policy bundle denies every model).
	AllowedModels []string `json:"allowed_models"`
	// IncidentContact is where confidentiality-incident notices go (an
	// e-mail address or postal address; free text).
	IncidentContact string `json:"incident_contact"`
	// NoticeDeadlineHours is the contractual deadline, in hours, of the
	// art. 18.3 notice to this tenant, counted from the register version
	// that first names it (audit.IncidentFile.NoticeDues); 0: none agreed.
	// At most MaxNoticeDeadlineHours.
	NoticeDeadlineHours int `json:"notice_deadline_hours"`
	// Residency is where the tenant's data may be processed: the node regions
	// and tier its contract or the law allows.
	Residency Residency `json:"residency"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// MarshalJSON writes Tier and Zeroing by name ("dedicated", "always").
func (t Tenant) MarshalJSON() ([]byte, error) {
	type plain Tenant
	return json.Marshal(struct {
		plain
		Tier    string `json:"tier"`
		Zeroing string `json:"zeroing"`
	}{plain(t), t.Tier.String(), t.Zeroing.String()})
}

// UnmarshalJSON reads what MarshalJSON writes. A missing status means
// active; a missing tier or zeroing, what NewTenant gives the
// classification (dedicated/always for personal or confidential data,
// shared/cross-tenant otherwise). Validate still has the last word.
func (t *Tenant) UnmarshalJSON(b []byte) error {
	type plain Tenant
	var v struct {
		plain
		Tier    string `json:"tier"`
		Zeroing string `json:"zeroing"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidTenant, err)
	}
	def := NewTenant(v.ID, v.Name, v.Classification)
	tier, zero := def.Tier, def.Zeroing
	var err error
	if v.Tier != "" {
		if tier, err = cloison.ParseTier(v.Tier); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidTenant, err)
		}
	}
	if v.Zeroing != "" {
		if zero, err = cloison.ParseZeroing(v.Zeroing); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidTenant, err)
		}
	}
	*t = Tenant(v.plain)
	t.Tier, t.Zeroing = tier, zero
	if t.Status == "" {
		t.Status = StatusActive
	}
	if t.Residency.Regions == nil {
		t.Residency.Regions = []string{}
	}
	return nil
}

var tenantID = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// Validate checks what the database also checks, so callers get a precise
// ErrInvalidTenant before a round trip. A sensitive classification requires
// the dedicated tier and ZeroAlways.
func (t *Tenant) Validate() error {
	bad := func(format string, args ...any) error {
		return ErrInvalidTenant.Withf("%s", fmt.Sprintf(format, args...))
	}
	switch {
	case !tenantID.MatchString(string(t.ID)):
		return bad("id %q (want 1-63 of a-z 0-9 _ -, starting with a letter or digit)", t.ID)
	case t.Name == "" || len(t.Name) > 200:
		return bad("name must have 1 to 200 bytes")
	case t.Status != StatusActive && t.Status != StatusSuspended:
		return bad("status %q", t.Status)
	case t.Tier != cloison.TierShared && t.Tier != cloison.TierDedicated:
		return bad("tier %v", t.Tier)
	case t.Zeroing < cloison.ZeroNever || t.Zeroing > cloison.ZeroAlways:
		return bad("zeroing %v", t.Zeroing)
	}
	if _, err := ParseClassification(string(t.Classification)); err != nil {
		return err
	}
	if t.Classification.Sensitive() && (t.Tier != cloison.TierDedicated || t.Zeroing != cloison.ZeroAlways) {
		return bad("%s data requires the dedicated tier and zeroing always (got %v, %v)", t.Classification, t.Tier, t.Zeroing)
	}
	if t.NoticeDeadlineHours < 0 || t.NoticeDeadlineHours > MaxNoticeDeadlineHours {
		return bad("notice deadline %d hours (want 0 to %d)", t.NoticeDeadlineHours, MaxNoticeDeadlineHours)
	}
	if len(t.IncidentContact) > 512 || !utf8.ValidString(t.IncidentContact) {
		return bad("incident contact must be UTF-8 of at most 512 bytes")
	}
	if len(t.Residency.Regions) > MaxRegions {
		return bad("%d allowed regions (at most %d)", len(t.Residency.Regions), MaxRegions)
	}
	for i, r := range t.Residency.Regions {
		if !cloison.ValidLabel(r) || slices.Contains(t.Residency.Regions[:i], r) {
			return bad("allowed region %q (want distinct DNS labels: 1-63 of a-z 0-9 -)", r)
		}
	}
	if t.Residency.Tier != "" && !cloison.ValidLabel(t.Residency.Tier) {
		return bad("required node tier %q (want a DNS label: 1-63 of a-z 0-9 -)", t.Residency.Tier)
	}
	q := t.Quotas
	if q.MaxConcurrent < 1 || q.KVPages < 1 || q.TokensPerMinute < 1 || q.MaxContext < 0 {
		return bad("quotas %+v (each at least 1; max context at least 0)", q)
	}
	for _, m := range t.AllowedModels {
		if m == "" || strings.TrimSpace(m) != m {
			return bad("allowed model %q", m)
		}
	}
	return nil
}

// Allows reports whether the tenant may use model.
func (t *Tenant) Allows(model string) bool { return slices.Contains(t.AllowedModels, model) }

// Scope is a permission a token carries.
type Scope string

const (
	ScopeInfer           Scope = "infer"
	ScopeComplianceRead  Scope = "compliance:read"
	ScopeComplianceWrite Scope = "compliance:write"
	ScopeAdmin           Scope = "admin"
	// ScopeAdaptersWrite lets a tenant upload its own LoRA adapters
	// (POST /v1/adapters), nothing of any other tenant's.
	ScopeAdaptersWrite Scope = "adapters:write"
)

// Scopes lists every scope, in a stable order.
var Scopes = []Scope{ScopeInfer, ScopeComplianceRead, ScopeComplianceWrite, ScopeAdmin, ScopeAdaptersWrite}

// ParseScope parses one scope name.
func ParseScope(s string) (Scope, error) {
	if slices.Contains(Scopes, Scope(s)) {
		return Scope(s), nil
	}
	return "", fmt.Errorf("%w: %q", ErrUnknownScope, s)
}

// ClientStatus is an API client's standing.
type ClientStatus string

const (
	ClientActive  ClientStatus = "active"
	ClientRevoked ClientStatus = "revoked"
)

// Client is a registered API client of a tenant: its ID is the JWT subject,
// Scopes what tokens for it may carry at most.
type Client struct {
	ID        string           `json:"id"`
	Tenant    cloison.TenantID `json:"tenant"`
	Name      string           `json:"name"`
	Scopes    []Scope          `json:"scopes"`
	Status    ClientStatus     `json:"status"`
	CreatedAt time.Time        `json:"created_at"`
	RevokedAt time.Time        `json:"revoked_at,omitzero"`
}

var clientID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$`)

// Validate checks a client before it is stored.
func (c *Client) Validate() error {
	switch {
	case !clientID.MatchString(c.ID):
		return ErrInvalidClient.Withf("client id %q", c.ID)
	case !tenantID.MatchString(string(c.Tenant)):
		return ErrInvalidClient.Withf("tenant %q", c.Tenant)
	case c.Name == "" || len(c.Name) > 200:
		return ErrInvalidClient.Withf("name must have 1 to 200 bytes")
	}
	for _, s := range c.Scopes {
		if _, err := ParseScope(string(s)); err != nil {
			return fmt.Errorf("%w: %w", ErrInvalidClient, err)
		}
	}
	return nil
}
