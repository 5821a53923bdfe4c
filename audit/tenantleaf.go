package audit

import (
	"encoding/json"
	"slices"

	"github.com/cloison/cloison"
)

// Which ledger entries a tenant log holds, and as what leaf (doc.go,
// "Tenant logs"). An entry belongs to tenant t's log when it names t: its
// tenant column, an isolation violation's affected_tenants, the tenants an
// incident event affects (IncidentOpened/Updated/Purged.Tenants), the
// tenant a notice was sent to. Its leaf there is
//
//   - the entry's own canonical payload, verbatim (the same leaf hash as in
//     the global tree), when t is the only tenant it names;
//   - otherwise a TenantView: a redacted copy written for t alone, which
//     counts the other tenants (other_tenants) without naming them, keeps
//     only fields that say nothing of them, and names the global entry by
//     its chain hash (entry). An auditor holding the ledger finds the entry
//     with that hash and recomputes the view (TenantLeaf is a pure function
//     of the entry and t); a tenant cannot open the hash (it covers the
//     previous entry's hash, which it never sees), so the hash does not
//     confirm a guess at the other tenants' ids, as a digest of the payload
//     would. Kinds with no redaction below never enter a log that way
//     (fail closed).
//
// TenantViewVersion is the "view" member of every redacted leaf: no ledger
// envelope has that member, so a tenant never mistakes a view for an
// entry's own payload or the reverse.
const TenantViewVersion = "tenant-redacted/v1"

// TenantView is the redacted leaf of an entry that names tenant t and
// others, in t's log. Its canonical JSON (RFC 8785) is the leaf.
type TenantView struct {
	View         string           `json:"view"`  // TenantViewVersion
	Entry        Digest           `json:"entry"` // the global entry's chain hash (Record.Hash)
	Kind         Kind             `json:"kind"`
	OccurredAt   string           `json:"occurred_at"` // as in the entry (TimeFormat)
	Actor        Name             `json:"actor"`
	Tenant       cloison.TenantID `json:"tenant"`        // t
	OtherTenants int64            `json:"other_tenants"` // the other tenants the entry names, counted
	Data         json.RawMessage  `json:"data"`          // the kind's redacted fields
}

// Redacted payloads: what t may read of an entry that names others too.
type (
	// isolation.violation: the request only when it is t's own (the
	// entry's tenant is t); no affected_requests (not tied to tenants).
	violationView struct {
		Request           cloison.RequestID `json:"request,omitempty"`
		Invariant         Name              `json:"invariant"`
		Page              int64             `json:"page"`
		Epoch             int64             `json:"epoch"`
		WithheldResponses int64             `json:"withheld_responses"`
		Incident          Name              `json:"incident,omitempty"`
	}
	// incident.opened and incident.updated: no content digest, which
	// hashes a version naming the other tenants.
	incidentView struct {
		Incident Name  `json:"incident"`
		Source   Name  `json:"source,omitempty"`
		Version  int64 `json:"version"`
	}
	// incident.purged: no digest either.
	purgeView struct {
		Incident    Name  `json:"incident"`
		Versions    int64 `json:"versions"`
		Notices     int64 `json:"notices"`
		RetainUntil Day   `json:"retain_until"`
	}
)

// TenantsNamed returns the tenants entry rec names (each once, in order of
// appearance): its tenant column, then those of its payload. ok is false
// for an entry that does not decode (it then belongs to no tenant log).
func TenantsNamed(rec Record) (tenants []cloison.TenantID, ok bool) {
	env, p, err := decodeEntry(rec)
	if err != nil {
		return nil, false
	}
	return tenantsOf(env, p), true
}

func decodeEntry(rec Record) (Envelope, Payload, error) {
	env, err := DecodeEnvelope(rec.Payload)
	if err != nil {
		return Envelope{}, nil, err
	}
	p, err := env.DecodePayload()
	return env, p, err
}

func tenantsOf(env Envelope, p Payload) []cloison.TenantID {
	var out []cloison.TenantID
	add := func(ts ...cloison.TenantID) {
		for _, t := range ts {
			if t != "" && !slices.Contains(out, t) {
				out = append(out, t)
			}
		}
	}
	add(env.Tenant)
	switch e := p.(type) {
	case *IsolationViolation:
		add(e.AffectedTenants...)
	case *IncidentOpened:
		add(e.Tenants...)
	case *IncidentUpdated:
		add(e.Tenants...)
	case *IncidentPurged:
		add(e.Tenants...)
	case *NoticeSent:
		if e.Recipient == RecipientTenant {
			add(cloison.TenantID(e.RecipientID))
		}
	}
	return out
}

// TenantLeaf returns the leaf entry rec contributes to tenant t's log, and
// false when it contributes none (it does not name t, does not decode, or
// names others too and its kind has no redaction). It reads the hashed
// payload and the chain hash only, so whoever holds the ledger recomputes
// every tenant log exactly.
func TenantLeaf(rec Record, t cloison.TenantID) ([]byte, bool) {
	if t == "" {
		return nil, false
	}
	env, p, err := decodeEntry(rec)
	if err != nil {
		return nil, false
	}
	named := tenantsOf(env, p)
	if !slices.Contains(named, t) {
		return nil, false
	}
	return tenantLeaf(rec, env, p, named, t)
}

// TenantLeafOf is one tenant's leaf of an entry.
type TenantLeafOf struct {
	Tenant cloison.TenantID
	Leaf   []byte
}

// TenantLeaves returns the leaf rec contributes to the log of each tenant
// it names, in TenantsNamed order (TenantLeaf for each, decoding rec
// once).
func TenantLeaves(rec Record) []TenantLeafOf {
	env, p, err := decodeEntry(rec)
	if err != nil {
		return nil
	}
	named := tenantsOf(env, p)
	var out []TenantLeafOf
	for _, t := range named {
		if l, ok := tenantLeaf(rec, env, p, named, t); ok {
			out = append(out, TenantLeafOf{Tenant: t, Leaf: l})
		}
	}
	return out
}

func tenantLeaf(rec Record, env Envelope, p Payload, named []cloison.TenantID, t cloison.TenantID) ([]byte, bool) {
	if len(named) == 1 {
		return rec.Payload, true
	}
	var data any
	switch e := p.(type) {
	case *IsolationViolation:
		v := violationView{Invariant: e.Invariant, Page: e.Page, Epoch: e.Epoch, WithheldResponses: e.WithheldResponses, Incident: e.Incident}
		if env.Tenant == t {
			v.Request = e.Request
		}
		data = v
	case *IncidentOpened:
		data = incidentView{Incident: e.Incident, Source: e.Source, Version: e.Version}
	case *IncidentUpdated:
		data = incidentView{Incident: e.Incident, Version: e.Version}
	case *IncidentPurged:
		data = purgeView{Incident: e.Incident, Versions: e.Versions, Notices: e.Notices, RetainUntil: e.RetainUntil}
	default:
		return nil, false
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, false
	}
	leaf, err := MarshalCanonical(TenantView{View: TenantViewVersion, Entry: rec.Hash, Kind: env.Kind,
		OccurredAt: env.OccurredAt.UTC().Format(TimeFormat), Actor: env.Actor, Tenant: t,
		OtherTenants: int64(len(named) - 1), Data: raw})
	if err != nil {
		return nil, false
	}
	return leaf, true
}

// DecodeTenantView parses a redacted leaf; ok is false for any other leaf
// (an entry's own payload).
func DecodeTenantView(leaf []byte) (TenantView, bool) {
	var v TenantView
	if err := json.Unmarshal(leaf, &v); err != nil || v.View != TenantViewVersion || !IsCanonical(leaf) {
		return TenantView{}, false
	}
	return v, true
}
