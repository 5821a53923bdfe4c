package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/cloison/cloison"
)

// Kind names an event kind: "family.action", lowercase.
type Kind string

// Event kinds. Each has exactly one payload type (see Payload).
const (
	KindPolicyDecision       Kind = "policy.decision"
	KindAdmissionRejected    Kind = "admission.rejected"
	KindRequestCompleted     Kind = "request.completed"
	KindIsolationViolation   Kind = "isolation.violation"
	KindTransferVerification Kind = "transfer.verification_failed"
	KindCapacityAttestation  Kind = "capacity.attestation"
	KindIncidentOpened       Kind = "incident.opened"
	KindIncidentUpdated      Kind = "incident.updated"
	KindIncidentPurged       Kind = "incident.purged"
	KindNoticeSent           Kind = "notice.sent"
	KindTenantCreated        Kind = "tenant.created"
	KindTenantUpdated        Kind = "tenant.updated"
	KindTenantDisabled       Kind = "tenant.disabled"
	KindKeyCreated           Kind = "key.created"
	KindKeyRotated           Kind = "key.rotated"
	KindKeyRevoked           Kind = "key.revoked"
	KindExportCreated        Kind = "export.created"
	KindPolicyReloaded       Kind = "policy.reloaded"
	KindPolicyRefusals       Kind = "policy.refusals"
	KindClientCreated        Kind = "client.created"
	KindClientRevoked        Kind = "client.revoked"
	KindTokenRevoked         Kind = "token.revoked"
	KindRegisterSettings     Kind = "register.settings_set"
	KindReportReceived       Kind = "report.received"
	KindRequestReplayed      Kind = "request.replayed"
	KindResponseStored       Kind = "response.stored"
	KindResponseDeleted      Kind = "response.deleted"
	KindSigningBegan         Kind = "ledger.signing_began"
	KindModelLoaded          Kind = "model.loaded"
	KindModelUnloaded        Kind = "model.unloaded"
	KindAdapterRegistered    Kind = "adapter.registered"
	KindAdapterUnregistered  Kind = "adapter.unregistered"
)

// Kinds lists every kind the ledger accepts, in a stable order.
var Kinds = []Kind{
	KindPolicyDecision, KindAdmissionRejected, KindRequestCompleted, KindIsolationViolation,
	KindTransferVerification, KindCapacityAttestation, KindIncidentOpened, KindIncidentUpdated,
	KindIncidentPurged, KindNoticeSent, KindTenantCreated, KindTenantUpdated, KindTenantDisabled,
	KindKeyCreated, KindKeyRotated, KindKeyRevoked, KindExportCreated, KindPolicyReloaded,
	KindPolicyRefusals,
	KindClientCreated, KindClientRevoked, KindTokenRevoked, KindRegisterSettings,
	KindReportReceived, KindRequestReplayed, KindResponseStored, KindResponseDeleted,
	KindSigningBegan, KindModelLoaded, KindModelUnloaded,
	KindAdapterRegistered, KindAdapterUnregistered,
}

// Digest is a SHA-256 value. It marshals as 64 lowercase hex digits.
type Digest [32]byte

// Sum returns the SHA-256 of b.
func Sum(b []byte) Digest { return sha256.Sum256(b) }

func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// IsZero reports whether d is all zeros (the genesis prev_hash).
func (d Digest) IsZero() bool { return d == Digest{} }

// MarshalText encodes d as lowercase hex.
func (d Digest) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText accepts exactly 64 lowercase hex digits.
func (d *Digest) UnmarshalText(b []byte) error {
	p, err := ParseDigest(string(b))
	if err != nil {
		return err
	}
	*d = p
	return nil
}

// ParseDigest parses 64 lowercase hex digits.
func ParseDigest(s string) (Digest, error) {
	var d Digest
	if len(s) != 64 {
		return d, fmt.Errorf("%w: digest must be 64 hex digits", ErrMalformed)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return d, fmt.Errorf("%w: digest must be lowercase hex", ErrMalformed)
		}
	}
	_, err := hex.Decode(d[:], []byte(s))
	return d, err
}

// Name is an identifier the ledger may hold: 1 to 128 characters from
// [A-Za-z0-9._:/@+-]. No spaces, no punctuation of prose: a Name can carry a
// model name, a policy revision or an actor, never a sentence of a prompt.
type Name string

// MaxNameLen bounds identifiers stored in the ledger.
const MaxNameLen = 128

// CheckName returns ErrTextNotAllowed unless s is a valid Name. Empty is
// refused; optional fields check emptiness before calling.
func CheckName(field, s string) error {
	if s == "" {
		return fmt.Errorf("%w: %s is empty", ErrInvalidEvent, field)
	}
	if len(s) > MaxNameLen {
		return fmt.Errorf("%w: %s is longer than %d characters", ErrTextNotAllowed, field, MaxNameLen)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '/' || c == '@' || c == '+' || c == '-'
		if !ok {
			return fmt.Errorf("%w: %s holds %q, only identifiers are allowed", ErrTextNotAllowed, field, c)
		}
	}
	return nil
}

func checkOptName(field, s string) error {
	if s == "" {
		return nil
	}
	return CheckName(field, s)
}

func checkCount(field string, n int64) error {
	// 2^53: beyond it a JSON number is not exact in every reader (I-JSON).
	if n < 0 || n > 1<<53 {
		return fmt.Errorf("%w: %s = %d out of range", ErrInvalidEvent, field, n)
	}
	return nil
}

// Event is what a caller appends: when it happened, who it concerns, who did
// it and a typed payload. The ledger assigns seq, hashes and recorded_at.
type Event struct {
	OccurredAt time.Time        // truncated to microseconds (PostgreSQL precision), stored in UTC
	Tenant     cloison.TenantID // empty for platform events
	Actor      Name             // "engine:node-1", "admin:alice", "system"
	Payload    Payload
}

// Kind returns the kind of the event's payload.
func (e Event) Kind() Kind {
	if e.Payload == nil {
		return ""
	}
	return e.Payload.Kind()
}

// envelope is the JSON object whose canonical bytes are stored and hashed.
// Every column of a ledger row except seq and the hashes is a copy of one of
// its fields, so editing a column is caught as a disagreement.
type envelope struct {
	V          int             `json:"v"`
	Kind       Kind            `json:"kind"`
	OccurredAt string          `json:"occurred_at"`
	Tenant     string          `json:"tenant,omitempty"`
	Actor      string          `json:"actor"`
	Data       json.RawMessage `json:"data"`
	// Sig is the event signature (eventsig.go), on the SignedKinds only.
	Sig string `json:"sig,omitempty"`
}

// TimeFormat is how times appear inside ledger payloads: UTC, microseconds.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// Canonical validates e and returns the exact bytes the ledger stores for it:
// the RFC 8785 canonical JSON of its envelope.
func (e Event) Canonical() ([]byte, error) {
	if e.Payload == nil {
		return nil, fmt.Errorf("%w: nil payload", ErrInvalidEvent)
	}
	if e.OccurredAt.IsZero() {
		return nil, fmt.Errorf("%w: occurred_at is zero", ErrInvalidEvent)
	}
	if err := checkOptName("tenant", string(e.Tenant)); err != nil {
		return nil, err
	}
	if err := CheckName("actor", string(e.Actor)); err != nil {
		return nil, err
	}
	if err := e.Payload.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", e.Payload.Kind(), err)
	}
	data, err := json.Marshal(e.Payload)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	return MarshalCanonical(envelope{
		V:          1,
		Kind:       e.Payload.Kind(),
		OccurredAt: e.OccurredAt.UTC().Truncate(time.Microsecond).Format(TimeFormat),
		Tenant:     string(e.Tenant),
		Actor:      string(e.Actor),
		Data:       data,
	})
}

// Envelope is a decoded ledger payload.
type Envelope struct {
	Kind       Kind
	OccurredAt time.Time
	Tenant     cloison.TenantID
	Actor      Name
	Data       json.RawMessage // canonical JSON of the typed payload
	Sig        string          // "<key id>:<base64>", or "" (VerifyEventSignature)
}

// DecodeEnvelope checks that payload is canonical JSON of a version-1
// envelope with a known kind and returns its fields.
func DecodeEnvelope(payload []byte) (Envelope, error) {
	if !IsCanonical(payload) {
		return Envelope{}, fmt.Errorf("%w: payload bytes are not their canonical form", ErrNotCanonical)
	}
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var env envelope
	if err := dec.Decode(&env); err != nil {
		return Envelope{}, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	if env.V != 1 {
		return Envelope{}, fmt.Errorf("%w: envelope version %d", ErrInvalidEvent, env.V)
	}
	if NewPayload(env.Kind) == nil {
		return Envelope{}, fmt.Errorf("%w: unknown kind %q", ErrInvalidEvent, env.Kind)
	}
	t, err := time.Parse(TimeFormat, env.OccurredAt)
	if err != nil {
		return Envelope{}, fmt.Errorf("%w: occurred_at: %v", ErrInvalidEvent, err)
	}
	return Envelope{Kind: env.Kind, OccurredAt: t, Tenant: cloison.TenantID(env.Tenant), Actor: Name(env.Actor), Data: env.Data, Sig: env.Sig}, nil
}

// DecodePayload decodes an envelope's data into its typed payload.
func (e Envelope) DecodePayload() (Payload, error) {
	p := NewPayload(e.Kind)
	if p == nil {
		return nil, fmt.Errorf("%w: unknown kind %q", ErrInvalidEvent, e.Kind)
	}
	dec := json.NewDecoder(bytes.NewReader(e.Data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrInvalidEvent, e.Kind, err)
	}
	return p, nil
}
