package audit

import (
	"fmt"
	"time"

	"github.com/cloison/cloison"
)

// Payload is the typed body of a ledger event. The interface is sealed (its
// validate method is unexported): only the types below implement it, and
// none of them has a field that can hold free text. Every string-like field
// is an identifier (checked by CheckName), an enumeration, a date or a
// digest; everything else is a count or a flag. This is how the ledger makes
// it impossible, by API, to record prompt or completion text: a caller that
// wants to record content can record its Digest only.
type Payload interface {
	Kind() Kind
	validate() error
}

// NewPayload returns a pointer to a zero payload of kind k, or nil for an
// unknown kind. Decoders use it to pick the type.
func NewPayload(k Kind) Payload {
	switch k {
	case KindPolicyDecision:
		return &PolicyDecision{}
	case KindAdmissionRejected:
		return &AdmissionRejected{}
	case KindRequestCompleted:
		return &RequestCompleted{}
	case KindIsolationViolation:
		return &IsolationViolation{}
	case KindTransferVerification:
		return &TransferVerificationFailed{}
	case KindCapacityAttestation:
		return &CapacityAttestation{}
	case KindIncidentOpened:
		return &IncidentOpened{}
	case KindIncidentUpdated:
		return &IncidentUpdated{}
	case KindIncidentPurged:
		return &IncidentPurged{}
	case KindNoticeSent:
		return &NoticeSent{}
	case KindTenantCreated:
		return &TenantChange{Op: TenantCreated}
	case KindTenantUpdated:
		return &TenantChange{Op: TenantUpdated}
	case KindTenantDisabled:
		return &TenantChange{Op: TenantDisabled}
	case KindKeyCreated:
		return &KeyChange{Op: KeyCreated}
	case KindKeyRotated:
		return &KeyChange{Op: KeyRotated}
	case KindKeyRevoked:
		return &KeyChange{Op: KeyRevoked}
	case KindExportCreated:
		return &ExportCreated{}
	case KindPolicyReloaded:
		return &PolicyReloaded{}
	case KindModelLoaded:
		return &ModelLoaded{}
	case KindModelUnloaded:
		return &ModelUnloaded{}
	case KindAdapterRegistered:
		return &AdapterRegistered{}
	case KindAdapterUnregistered:
		return &AdapterUnregistered{}
	case KindPolicyRefusals:
		return &PolicyRefusals{}
	case KindClientCreated:
		return &ClientChange{Op: ClientCreated}
	case KindClientRevoked:
		return &ClientChange{Op: ClientRevoked}
	case KindTokenRevoked:
		return &TokenRevoked{}
	case KindRegisterSettings:
		return &RegisterSettingsSet{}
	case KindReportReceived:
		return &ReportReceived{}
	case KindRequestReplayed:
		return &RequestReplayed{}
	case KindResponseStored:
		return &ResponseStored{}
	case KindResponseDeleted:
		return &ResponseDeleted{}
	case KindSigningBegan:
		return &SigningBegan{}
	}
	return nil
}

// Day is a calendar date, "2006-01-02".
type Day string

// DayOf returns the UTC calendar date of t.
func DayOf(t time.Time) Day { return Day(t.UTC().Format(time.DateOnly)) }

// Time returns midnight UTC of d.
func (d Day) Time() (time.Time, error) { return time.Parse(time.DateOnly, string(d)) }

func checkDay(field string, d Day, optional bool) error {
	if d == "" && optional {
		return nil
	}
	if _, err := d.Time(); err != nil {
		return fmt.Errorf("%w: %s: %q is not a date (YYYY-MM-DD)", ErrInvalidEvent, field, d)
	}
	return nil
}

// PolicyDecision records one authorization decision.
type PolicyDecision struct {
	Decision      Name   `json:"decision"`       // decision id
	Policy        Name   `json:"policy"`         // query or package evaluated
	Revision      Name   `json:"revision"`       // bundle revision
	InputDigest   Digest `json:"input_digest"`   // SHA-256 of the canonical policy input
	Allowed       bool   `json:"allowed"`        // the result; deny on doubt
	Reason        Name   `json:"reason"`         // a cloison.Code or rule name; "" when allowed
	LatencyMicros int64  `json:"latency_micros"` // evaluation time
}

func (PolicyDecision) Kind() Kind { return KindPolicyDecision }
func (p PolicyDecision) validate() error {
	return firstErr(CheckName("decision", string(p.Decision)), CheckName("policy", string(p.Policy)),
		CheckName("revision", string(p.Revision)), checkOptName("reason", string(p.Reason)),
		checkCount("latency_micros", p.LatencyMicros))
}

// AdmissionRejected records a request rejected before any page was allocated.
type AdmissionRejected struct {
	Request        cloison.RequestID `json:"request"`
	Model          Name              `json:"model"`
	Code           cloison.Code      `json:"code"`
	PromptTokens   int64             `json:"prompt_tokens"`
	MaxTokens      int64             `json:"max_tokens"`
	PagesNeeded    int64             `json:"pages_needed"`
	PagesAvailable int64             `json:"pages_available"`
}

func (AdmissionRejected) Kind() Kind { return KindAdmissionRejected }
func (p AdmissionRejected) validate() error {
	return firstErr(CheckName("request", string(p.Request)), CheckName("model", string(p.Model)),
		CheckName("code", string(p.Code)), checkCount("prompt_tokens", p.PromptTokens),
		checkCount("max_tokens", p.MaxTokens), checkCount("pages_needed", p.PagesNeeded),
		checkCount("pages_available", p.PagesAvailable))
}

// RequestCompleted records a finished request: counts only, never text.
type RequestCompleted struct {
	Request cloison.RequestID `json:"request"`
	Model   Name              `json:"model"`
	// ModelDigest is the SHA-256 of the model file that served (a node
	// serving several models names which); absent in entries written
	// before it.
	ModelDigest *Digest `json:"model_digest,omitempty"`
	// AdapterDigest is the SHA-256 of the LoRA adapter the request ran
	// under (model "<base>:<adapter>"); absent without one.
	AdapterDigest    *Digest      `json:"adapter_digest,omitempty"`
	Status           cloison.Code `json:"status,omitempty"` // "" on success, else the error code
	PromptTokens     int64        `json:"prompt_tokens"`
	CompletionTokens int64        `json:"completion_tokens"`
	CachedTokens     int64        `json:"cached_tokens"`
	Pages            int64        `json:"pages"`
	Tier             Name         `json:"tier"` // isolation tier: never, cross-tenant, always
	DurationMicros   int64        `json:"duration_micros"`
	// Served: keyed digests of the prompt and completion and
	// what determined the output; absent in entries written before it.
	Served *Served `json:"served,omitempty"`
	// Placement (residency): the nodes that processed the request and
	// their residency labels, so a tenant can show where its data went;
	// absent in entries written before it.
	Placement *Placement `json:"placement,omitempty"`
	// Embedding: what an embeddings request served (counts and keyed
	// digests); absent for a generation.
	Embedding *Embedded `json:"embedding,omitempty"`
}

// Placement is where a request was processed: the decode node (which
// served the API and decoded) and, in a split deployment, the prefill node
// that computed the prompt's KV. Labels are as the nodes attested them;
// empty when a node has none.
type Placement struct {
	Node    Name          `json:"node"`
	Region  Name          `json:"region,omitempty"`
	Tier    Name          `json:"tier,omitempty"`
	Prefill *PrefillPlace `json:"prefill,omitempty"` // nil: prefilled on the decode node
}

// PrefillPlace is the prefill node of a Placement.
type PrefillPlace struct {
	Node   Name `json:"node"` // its address as the decode node dialled it
	Region Name `json:"region,omitempty"`
	Tier   Name `json:"tier,omitempty"`
}

func (p *Placement) validate() error {
	if p == nil {
		return nil
	}
	err := firstErr(CheckName("placement.node", string(p.Node)), checkOptName("placement.region", string(p.Region)),
		checkOptName("placement.tier", string(p.Tier)))
	if err == nil && p.Prefill != nil {
		err = firstErr(CheckName("placement.prefill.node", string(p.Prefill.Node)),
			checkOptName("placement.prefill.region", string(p.Prefill.Region)), checkOptName("placement.prefill.tier", string(p.Prefill.Tier)))
	}
	return err
}

func (RequestCompleted) Kind() Kind { return KindRequestCompleted }
func (p RequestCompleted) validate() error {
	return firstErr(CheckName("request", string(p.Request)), CheckName("model", string(p.Model)),
		checkOptName("status", string(p.Status)), checkCount("prompt_tokens", p.PromptTokens),
		checkCount("completion_tokens", p.CompletionTokens), checkCount("cached_tokens", p.CachedTokens),
		checkCount("pages", p.Pages), CheckName("tier", string(p.Tier)),
		checkCount("duration_micros", p.DurationMicros), p.Served.validate(), p.Placement.validate(), p.Embedding.validate())
}

// IsolationViolation records a broken isolation invariant and what the
// engine withheld because of it.
type IsolationViolation struct {
	Request           cloison.RequestID   `json:"request"`
	Invariant         Name                `json:"invariant"` // e.g. "ownership-tag", "epoch", "scrub"
	Page              int64               `json:"page"`
	Epoch             int64               `json:"epoch"`
	AffectedTenants   []cloison.TenantID  `json:"affected_tenants"`
	AffectedRequests  []cloison.RequestID `json:"affected_requests"`
	WithheldResponses int64               `json:"withheld_responses"`
	Incident          Name                `json:"incident,omitempty"`
}

func (IsolationViolation) Kind() Kind { return KindIsolationViolation }
func (p IsolationViolation) validate() error {
	err := firstErr(CheckName("request", string(p.Request)), CheckName("invariant", string(p.Invariant)),
		checkCount("page", p.Page), checkCount("epoch", p.Epoch),
		checkCount("withheld_responses", p.WithheldResponses), checkOptName("incident", string(p.Incident)))
	if err != nil {
		return err
	}
	return firstErr(checkNames("affected_tenants", p.AffectedTenants), checkNames("affected_requests", p.AffectedRequests))
}

// TransferVerificationFailed records a disaggregated transfer that decode
// refused to use.
type TransferVerificationFailed struct {
	Request           cloison.RequestID `json:"request"`
	Source            Name              `json:"source"` // prefill node
	Check             Name              `json:"check"`  // token-count, page-digest, binding
	ReservedTokens    int64             `json:"reserved_tokens"`
	TransferredTokens int64             `json:"transferred_tokens"`
	PagesMismatched   int64             `json:"pages_mismatched"`
	WithheldResponses int64             `json:"withheld_responses"`
	Incident          Name              `json:"incident,omitempty"`
}

func (TransferVerificationFailed) Kind() Kind { return KindTransferVerification }
func (p TransferVerificationFailed) validate() error {
	return firstErr(CheckName("request", string(p.Request)), CheckName("source", string(p.Source)),
		CheckName("check", string(p.Check)), checkCount("reserved_tokens", p.ReservedTokens),
		checkCount("transferred_tokens", p.TransferredTokens), checkCount("pages_mismatched", p.PagesMismatched),
		checkCount("withheld_responses", p.WithheldResponses), checkOptName("incident", string(p.Incident)))
}

// CapacityAttestation records what an engine found at start: the advertised
// context against what its pool can hold.
type CapacityAttestation struct {
	Node              Name  `json:"node"`
	Model             Name  `json:"model"`
	AdvertisedContext int64 `json:"advertised_context"`
	ServableContext   int64 `json:"servable_context"`
	PoolPages         int64 `json:"pool_pages"`
	PageTokens        int64 `json:"page_tokens"`
	Ready             bool  `json:"ready"`
	// ModelDigest is the SHA-256 of the model file the pool serves;
	// absent in records written before it.
	ModelDigest *Digest `json:"model_digest,omitempty"`
	// Region and Tier are the node's residency labels;
	// empty when it has none.
	Region Name `json:"region,omitempty"`
	Tier   Name `json:"tier,omitempty"`
	// Prefill lists a decode node's prefill nodes as it checked them.
	Prefill []PrefillCapacity `json:"prefill,omitempty"`
}

// PrefillCapacity is one prefill node's attested capacity.
type PrefillCapacity struct {
	Node          Name  `json:"node"` // its PrefillService address
	PoolTokens    int64 `json:"pool_tokens"`
	ServedContext int64 `json:"served_context"`
	Ready         bool  `json:"ready"` // it passed the decode node's check
	Region        Name  `json:"region,omitempty"`
	Tier          Name  `json:"tier,omitempty"`
}

func (CapacityAttestation) Kind() Kind { return KindCapacityAttestation }
func (p CapacityAttestation) validate() error {
	err := firstErr(CheckName("node", string(p.Node)), CheckName("model", string(p.Model)),
		checkCount("advertised_context", p.AdvertisedContext), checkCount("servable_context", p.ServableContext),
		checkCount("pool_pages", p.PoolPages), checkCount("page_tokens", p.PageTokens),
		checkOptName("region", string(p.Region)), checkOptName("tier", string(p.Tier)))
	for _, n := range p.Prefill {
		err = firstErr(err, CheckName("prefill.node", string(n.Node)), checkCount("prefill.pool_tokens", n.PoolTokens),
			checkCount("prefill.served_context", n.ServedContext), checkOptName("prefill.region", string(n.Region)),
			checkOptName("prefill.tier", string(n.Tier)))
	}
	return err
}

// IncidentOpened records a new register entry; ContentDigest is the SHA-256
// of version 1's canonical content.
type IncidentOpened struct {
	Incident      Name   `json:"incident"`
	Source        Name   `json:"source"`
	Version       int64  `json:"version"`
	ContentDigest Digest `json:"content_digest"`
	// Tenants the entry affects (its version's affected tenants): each
	// gets this event in its tenant log (TenantLeaf). Omitted when none,
	// and in events written before migration 00013.
	Tenants []cloison.TenantID `json:"tenants,omitempty"`
}

func (IncidentOpened) Kind() Kind { return KindIncidentOpened }
func (p IncidentOpened) validate() error {
	return firstErr(CheckName("incident", string(p.Incident)), CheckName("source", string(p.Source)),
		checkCount("version", p.Version), checkNames("tenants", p.Tenants))
}

// IncidentUpdated records a new version of a register entry.
type IncidentUpdated struct {
	Incident      Name   `json:"incident"`
	Version       int64  `json:"version"`
	ContentDigest Digest `json:"content_digest"`
	// Tenants the entry affects: those of every version up to this one
	// (a tenant named once keeps seeing the entry). As IncidentOpened's.
	Tenants []cloison.TenantID `json:"tenants,omitempty"`
}

func (IncidentUpdated) Kind() Kind { return KindIncidentUpdated }
func (p IncidentUpdated) validate() error {
	return firstErr(CheckName("incident", string(p.Incident)), checkCount("version", p.Version), checkNames("tenants", p.Tenants))
}

// RegisterSettingsSet records a new version of the organisation and privacy
// officer the register names (RegisterSettings): identifiers only, the
// names and phone numbers are in the register row whose canonical JSON
// ContentDigest hashes.
type RegisterSettingsSet struct {
	Version       int64  `json:"version"`
	ContentDigest Digest `json:"content_digest"`
}

func (RegisterSettingsSet) Kind() Kind { return KindRegisterSettings }
func (p RegisterSettingsSet) validate() error {
	return checkCount("version", p.Version)
}

// IncidentPurged records the explicit removal of a register entry whose
// retention period ended.
type IncidentPurged struct {
	Incident          Name   `json:"incident"`
	Versions          int64  `json:"versions"`
	Notices           int64  `json:"notices"`
	LastContentDigest Digest `json:"last_content_digest"`
	RetainUntil       Day    `json:"retain_until"`
	// Tenants the purged entry affected (every version's). As
	// IncidentOpened's.
	Tenants []cloison.TenantID `json:"tenants,omitempty"`
}

func (IncidentPurged) Kind() Kind { return KindIncidentPurged }
func (p IncidentPurged) validate() error {
	return firstErr(CheckName("incident", string(p.Incident)), checkCount("versions", p.Versions),
		checkCount("notices", p.Notices), checkDay("retain_until", p.RetainUntil, false), checkNames("tenants", p.Tenants))
}

// NoticeSent records a notice about an incident: its recipient and the digest
// of what was sent.
type NoticeSent struct {
	Incident      Name          `json:"incident"`
	Notice        int64         `json:"notice"`
	Recipient     RecipientKind `json:"recipient"`
	RecipientID   Name          `json:"recipient_id,omitempty"` // tenant id or authority, when one
	ContentDigest Digest        `json:"content_digest"`
	// RecordDigest is the SHA-256 of the notice's canonical register record
	// (NoticeRecord: recipient, method, dates and text); absent in events
	// written before it existed.
	RecordDigest *Digest `json:"record_digest,omitempty"`
}

func (NoticeSent) Kind() Kind { return KindNoticeSent }
func (p NoticeSent) validate() error {
	return firstErr(CheckName("incident", string(p.Incident)), checkCount("notice", p.Notice),
		p.Recipient.check(), checkOptName("recipient_id", string(p.RecipientID)))
}

// TenantOp is what happened to a tenant.
type TenantOp string

// Tenant operations.
const (
	TenantCreated  TenantOp = "created"
	TenantUpdated  TenantOp = "updated"
	TenantDisabled TenantOp = "disabled"
)

// TenantChange records a tenant's lifecycle step (the tenant is the event's).
type TenantChange struct {
	Op           TenantOp `json:"op"`
	Tier         Name     `json:"tier,omitempty"`
	ConfigDigest Digest   `json:"config_digest"`
	// State is SHA-256 of the tenant row's state document (RowState):
	// what the row is after this event. Events written before live rows
	// were bound to their events have none.
	State *Digest `json:"state,omitempty"`
}

func (p TenantChange) Kind() Kind { return Kind("tenant." + string(p.Op)) }
func (p TenantChange) validate() error {
	switch p.Op {
	case TenantCreated, TenantUpdated, TenantDisabled:
	default:
		return fmt.Errorf("%w: tenant op %q", ErrInvalidEvent, p.Op)
	}
	return checkOptName("tier", string(p.Tier))
}

// KeyOp is what happened to a signing key.
type KeyOp string

// Key operations.
const (
	KeyCreated KeyOp = "created"
	KeyRotated KeyOp = "rotated"
	KeyRevoked KeyOp = "revoked"
)

// KeyChange records a signing key's lifecycle step.
type KeyChange struct {
	Op              KeyOp  `json:"op"`
	Key             Name   `json:"key"`     // key id
	Purpose         Name   `json:"purpose"` // jwt, checkpoint, manifest
	PublicKeyDigest Digest `json:"public_key_digest"`
	// State is SHA-256 of the signing_keys row's state document
	// (RowState), for jwt keys; nil for keys kept outside the database.
	State *Digest `json:"state,omitempty"`
}

func (p KeyChange) Kind() Kind { return Kind("key." + string(p.Op)) }
func (p KeyChange) validate() error {
	switch p.Op {
	case KeyCreated, KeyRotated, KeyRevoked:
	default:
		return fmt.Errorf("%w: key op %q", ErrInvalidEvent, p.Op)
	}
	return firstErr(CheckName("key", string(p.Key)), CheckName("purpose", string(p.Purpose)))
}

// ExportCreated records a compliance export and the digest of its manifest.
type ExportCreated struct {
	Export         Name   `json:"export"`
	FromSeq        int64  `json:"from_seq"`
	ToSeq          int64  `json:"to_seq"`
	Files          int64  `json:"files"`
	ManifestDigest Digest `json:"manifest_digest"`
}

func (ExportCreated) Kind() Kind { return KindExportCreated }
func (p ExportCreated) validate() error {
	return firstErr(CheckName("export", string(p.Export)), checkCount("from_seq", p.FromSeq),
		checkCount("to_seq", p.ToSeq), checkCount("files", p.Files))
}

// PolicyReloaded records a policy bundle swapped in through the admin API:
// the bundle's digest, how many files it has, and who reloaded it.
type PolicyReloaded struct {
	Revision Digest `json:"revision"` // SHA-256 over the bundle's sorted file names and sources
	Files    int64  `json:"files"`
	Actor    Name   `json:"actor"`
}

func (PolicyReloaded) Kind() Kind { return KindPolicyReloaded }
func (p PolicyReloaded) validate() error {
	return firstErr(checkCount("files", p.Files), CheckName("actor", string(p.Actor)))
}

// ModelLoaded records a model an admin loaded on a running node (its
// pool's capacity.attestation precedes it): the node, the model id
// requests name, the SHA-256 of its file and the memory it holds (weights
// and KV arena, what the node's budget counts).
type ModelLoaded struct {
	Node   Name   `json:"node"`
	Model  Name   `json:"model"`
	Digest Digest `json:"digest"`
	Bytes  int64  `json:"bytes"`
	Actor  Name   `json:"actor"`
}

func (ModelLoaded) Kind() Kind { return KindModelLoaded }
func (p ModelLoaded) validate() error {
	return firstErr(CheckName("node", string(p.Node)), CheckName("model", string(p.Model)), checkCount("bytes", p.Bytes),
		CheckName("actor", string(p.Actor)))
}

// ModelUnloaded records a model an admin unloaded from a running node:
// requests naming it are refused from then on.
type ModelUnloaded struct {
	Node   Name   `json:"node"`
	Model  Name   `json:"model"`
	Digest Digest `json:"digest"`
	Actor  Name   `json:"actor"`
}

func (ModelUnloaded) Kind() Kind { return KindModelUnloaded }
func (p ModelUnloaded) validate() error {
	return firstErr(CheckName("node", string(p.Node)), CheckName("model", string(p.Model)), CheckName("actor", string(p.Actor)))
}

// AdapterRegistered records a LoRA adapter an admin registered on a node
// for the event's tenant (the event's tenant column: never in the public
// log): its name (requested as "<model>:<name>"), the SHA-256 of its file,
// and the model it adapts with that model's digest. Never the file's
// contents.
type AdapterRegistered struct {
	Node        Name   `json:"node"`
	Name        Name   `json:"name"`
	Digest      Digest `json:"digest"`
	Model       Name   `json:"model"`
	ModelDigest Digest `json:"model_digest"`
	Rank        int64  `json:"rank"`
	Actor       Name   `json:"actor"`
	// Path is the file, relative to the node's model directory, that a
	// restarted node registers again (its digest checked against Digest);
	// absent from events written before nodes restored registrations.
	Path Name `json:"path,omitempty"`
}

func (AdapterRegistered) Kind() Kind { return KindAdapterRegistered }
func (p AdapterRegistered) validate() error {
	return firstErr(CheckName("node", string(p.Node)), CheckName("name", string(p.Name)), CheckName("model", string(p.Model)),
		checkCount("rank", p.Rank), CheckName("actor", string(p.Actor)), checkOptName("path", string(p.Path)))
}

// AdapterUnregistered records an adapter an admin removed from the event's
// tenant: requests naming it are refused from then on.
type AdapterUnregistered struct {
	Node   Name   `json:"node"`
	Name   Name   `json:"name"`
	Digest Digest `json:"digest"`
	Model  Name   `json:"model"`
	Actor  Name   `json:"actor"`
}

func (AdapterUnregistered) Kind() Kind { return KindAdapterUnregistered }
func (p AdapterUnregistered) validate() error {
	return firstErr(CheckName("node", string(p.Node)), CheckName("name", string(p.Name)), CheckName("model", string(p.Model)),
		CheckName("actor", string(p.Actor)))
}

// PolicyRefusals summarises the requests of the event's tenant that were
// refused before service during one window, by stage and code, instead of
// one row each: a flood of refused requests costs the ledger one event per
// tenant and flush, not one per request. Like every event it is a leaf of
// the hash chain, so the signed checkpoints cover it.
type PolicyRefusals struct {
	// FromMicros and ToMicros bound the window (Unix microseconds): every
	// refusal counted happened at or after From and before To.
	FromMicros int64 `json:"from_unix_micros"`
	ToMicros   int64 `json:"to_unix_micros"`
	// Total is the sum of the counts.
	Total int64 `json:"total"`
	// Counts are sorted by stage, then code, one entry per pair, none zero.
	Counts []RefusalCount `json:"counts"`
}

// RefusalCount is how many requests one stage refused with one code.
type RefusalCount struct {
	Stage Name         `json:"stage"` // policy, isolation, limits, quota, admission
	Code  cloison.Code `json:"code"`
	Count int64        `json:"count"`
}

// MaxRefusalCounts bounds the entries of one PolicyRefusals event.
const MaxRefusalCounts = 256

func (PolicyRefusals) Kind() Kind { return KindPolicyRefusals }
func (p PolicyRefusals) validate() error {
	err := firstErr(checkCount("from_unix_micros", p.FromMicros), checkCount("to_unix_micros", p.ToMicros),
		checkCount("total", p.Total))
	if err != nil {
		return err
	}
	if p.ToMicros < p.FromMicros {
		return fmt.Errorf("%w: the window ends before it starts", ErrInvalidEvent)
	}
	if len(p.Counts) == 0 || len(p.Counts) > MaxRefusalCounts {
		return fmt.Errorf("%w: counts has %d entries (want 1 to %d)", ErrInvalidEvent, len(p.Counts), MaxRefusalCounts)
	}
	var sum int64
	for i, c := range p.Counts {
		if err := firstErr(CheckName("counts.stage", string(c.Stage)), CheckName("counts.code", string(c.Code)),
			checkCount("counts.count", c.Count)); err != nil {
			return err
		}
		if c.Count == 0 {
			return fmt.Errorf("%w: counts[%d] is zero", ErrInvalidEvent, i)
		}
		if i > 0 {
			prev := p.Counts[i-1]
			if prev.Stage > c.Stage || prev.Stage == c.Stage && prev.Code >= c.Code {
				return fmt.Errorf("%w: counts are not sorted by stage and code, or repeat one", ErrInvalidEvent)
			}
		}
		sum += c.Count
	}
	if sum != p.Total {
		return fmt.Errorf("%w: total %d, counts sum to %d", ErrInvalidEvent, p.Total, sum)
	}
	return nil
}

// ClientOp is what happened to an API client.
type ClientOp string

// API client operations.
const (
	ClientCreated ClientOp = "created"
	ClientRevoked ClientOp = "revoked"
)

// ClientChange records an API client's lifecycle step (the tenant is the
// event's): its id (the JWT subject) and the scopes it holds.
type ClientChange struct {
	Op     ClientOp `json:"op"`
	Client Name     `json:"client"`
	Scopes []Name   `json:"scopes"`
	// State is SHA-256 of the api_clients row's state document
	// (RowState): what the row is after this event.
	State *Digest `json:"state,omitempty"`
}

func (p ClientChange) Kind() Kind { return Kind("client." + string(p.Op)) }
func (p ClientChange) validate() error {
	switch p.Op {
	case ClientCreated, ClientRevoked:
	default:
		return fmt.Errorf("%w: client op %q", ErrInvalidEvent, p.Op)
	}
	return firstErr(CheckName("client", string(p.Client)), checkNames("scopes", p.Scopes))
}

// TokenRevoked records one bearer token put on the revocation list, by its
// jti, until it expires.
type TokenRevoked struct {
	Token   Name `json:"token"`  // the jti
	Issuer  Name `json:"issuer"` // the iss it was issued under
	Expires Day  `json:"expires"`
}

func (TokenRevoked) Kind() Kind { return KindTokenRevoked }
func (p TokenRevoked) validate() error {
	return firstErr(CheckName("token", string(p.Token)), CheckName("issuer", string(p.Issuer)),
		checkDay("expires", p.Expires, false))
}

func checkNames[T ~string](field string, xs []T) error {
	if len(xs) > 4096 {
		return fmt.Errorf("%w: %s has more than 4096 entries", ErrInvalidEvent, field)
	}
	for i, x := range xs {
		if err := CheckName(fmt.Sprintf("%s[%d]", field, i), string(x)); err != nil {
			return err
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
