package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Event signatures: the events that state an actor's decision, a change of
// the register or of the deployment's principals are signed by the node
// with the log key, so that whoever can only write the database (the
// runtime role's credentials, a DBA without the key) cannot add one that a
// verifier accepts. See the package documentation for the argument.

// EventSigDomain prefixes the bytes an event signature covers, so that a
// signature over an event can never be taken for a checkpoint's, a tree
// note's or a cosignature's (each has its own domain).
const EventSigDomain = "cloison-event/v1\n"

// ClockTolerance bounds how far an event's own time (occurred_at, set by
// the writer) may be from the database's clock when the event was
// sequenced (recorded_at, clock_timestamp() in audit_sequence): beyond it,
// after signing began, verification reports the entry (ReasonBackdated).
// Writers stamp events when they build them and integrate them within
// IntegrationBound, so the bound covers the clock skew between a node and
// the database (NTP keeps it within milliseconds), a commit retried after a
// failover and a request path paused by the garbage collector, with room.
const ClockTolerance = 5 * time.Minute

// StatedTimeKinds are the kinds whose occurred_at is not the writer's
// clock when it appends: a notice.sent's is the date the notice was sent
// (the register's sent_at, checked against the incident by the register,
// and by export verification against the notice's record), which may be
// days before it is recorded; an export.created's is the manifest's
// creation time, and the export is ledgered once written, which for a
// large ledger takes longer than the tolerance. They are exempt from the
// ClockTolerance check; being SignedKinds, only the key holder can write
// one.
var StatedTimeKinds = map[Kind]bool{KindNoticeSent: true, KindExportCreated: true}

// SignedKinds is the one table of the kinds that must carry a valid event
// signature once signing began (RequiresSignature), each with why. Kinds
// absent from it are the request path's high-volume records (one per
// request or refusal window): their content is the tenant's, bound to the
// tenant's own receipts and logs, and signing each would add an Ed25519
// verification per request to every full verification of the ledger.
var SignedKinds = map[Kind]string{
	KindIsolationViolation:   "a detection: opens a register entry",
	KindTransferVerification: "a detection: opens a register entry",
	KindCapacityAttestation:  "a node's statement of what it serves",
	KindIncidentOpened:       "register change",
	KindIncidentUpdated:      "register change",
	KindIncidentPurged:       "register change (deletion after retention)",
	KindNoticeSent:           "register change: a notice and its date",
	KindTenantCreated:        "tenant change (admin action)",
	KindTenantUpdated:        "tenant change (admin action)",
	KindTenantDisabled:       "tenant change (admin action)",
	KindKeyCreated:           "key change",
	KindKeyRotated:           "key change",
	KindKeyRevoked:           "key change",
	KindExportCreated:        "compliance action",
	KindPolicyReloaded:       "admin action",
	KindClientCreated:        "client change (admin action)",
	KindClientRevoked:        "client change (admin action)",
	KindTokenRevoked:         "admin action",
	KindRegisterSettings:     "register change",
	KindReportReceived:       "opens a register entry",
	KindRequestReplayed:      "compliance action: decides a register entry",
	KindSigningBegan:         "where signatures become required",
	KindModelLoaded:          "admin action: what a node serves",
	KindModelUnloaded:        "admin action: what a node serves",
	KindAdapterRegistered:    "admin action: what a tenant is served",
	KindAdapterUnregistered:  "admin action: what a tenant is served",
}

// RequiresSignature reports whether events of kind k must be signed
// (SignedKinds).
func RequiresSignature(k Kind) bool {
	_, ok := SignedKinds[k]
	return ok
}

// EventSigner signs the events of the SignedKinds with the deployment's log
// key (purpose checkpoint): every node holds it, and the verifier already
// trusts its public key. The zero or nil EventSigner signs nothing.
type EventSigner struct {
	key ed25519.PrivateKey
	id  string
}

// NewEventSigner returns a signer for key (nil: a signer that signs
// nothing, for read-only stores and tools without the key).
func NewEventSigner(key ed25519.PrivateKey) *EventSigner {
	if key == nil {
		return &EventSigner{}
	}
	return &EventSigner{key: key, id: KeyID(key.Public().(ed25519.PublicKey))}
}

// CanSign reports whether s holds a key.
func (s *EventSigner) CanSign() bool { return s != nil && s.key != nil }

// Canonical returns e's canonical bytes, signed when its kind requires a
// signature and s holds a key; otherwise e.Canonical(). A writer without
// the key writes a signed kind unsigned: verification names it once
// signing began (production writers hold the key: node.Open, and every
// cloisonctl command that appends).
func (s *EventSigner) Canonical(e Event) ([]byte, error) {
	if !s.CanSign() || !RequiresSignature(e.Kind()) {
		return e.Canonical()
	}
	return e.canonicalSigned(s.key, s.id)
}

// Prepare is Event.Prepare with Canonical's signature.
func (s *EventSigner) Prepare(e Event) (Record, error) {
	rec, err := e.Prepare()
	if err != nil || !s.CanSign() || !RequiresSignature(e.Kind()) {
		return rec, err
	}
	if rec.Payload, err = e.canonicalSigned(s.key, s.id); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// canonicalSigned signs EventSigDomain ‖ the canonical envelope without
// its signature, and returns the canonical envelope with it ("sig":
// "<key id>:<standard base64 Ed25519 signature>"). Inside the envelope the
// signature is under the chain hash and the tree leaf like every field.
func (e Event) canonicalSigned(key ed25519.PrivateKey, id string) ([]byte, error) {
	unsigned, err := e.Canonical()
	if err != nil {
		return nil, err
	}
	env, err := decodeRawEnvelope(unsigned)
	if err != nil {
		return nil, err
	}
	env.Sig = id + ":" + base64.StdEncoding.EncodeToString(ed25519.Sign(key, signedBytes(unsigned)))
	return MarshalCanonical(env)
}

func signedBytes(unsigned []byte) []byte {
	return append([]byte(EventSigDomain), unsigned...)
}

func decodeRawEnvelope(payload []byte) (envelope, error) {
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.DisallowUnknownFields()
	var env envelope
	if err := dec.Decode(&env); err != nil {
		return envelope{}, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	return env, nil
}

// Event signature errors.
var (
	// ErrUnsigned: an event of a kind that must be signed carries no
	// signature.
	ErrUnsigned = fmt.Errorf("%w: event carries no signature", ErrBadSignature)
)

// VerifyEventSignature checks the signature inside a canonical ledger
// payload against keys (KeyID → public key: the trusted log keys). It
// returns the signing key's id, "" and nil for a payload with no
// signature, and ErrBadSignature (wrapped, naming why) for a signature that
// does not parse, names an untrusted key or does not verify. Whether a
// payload without signature is acceptable is the caller's question
// (RequiresSignature, and whether signing began).
func VerifyEventSignature(payload []byte, keys map[string]ed25519.PublicKey) (string, error) {
	env, err := decodeRawEnvelope(payload)
	if err != nil {
		return "", err
	}
	if env.Sig == "" {
		return "", nil
	}
	id, b64, ok := strings.Cut(env.Sig, ":")
	if !ok {
		return "", fmt.Errorf("%w: event signature %q does not parse", ErrBadSignature, env.Sig)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return "", fmt.Errorf("%w: event signature does not parse", ErrBadSignature)
	}
	pub, ok := keys[id]
	if !ok {
		return "", fmt.Errorf("%w: event signed by unknown key %s", ErrBadSignature, id)
	}
	env.Sig = ""
	unsigned, err := MarshalCanonical(env)
	if err != nil {
		return "", err
	}
	if !ed25519.Verify(pub, signedBytes(unsigned), sig) {
		return "", fmt.Errorf("%w: event signature by %s does not verify", ErrBadSignature, id)
	}
	return id, nil
}

// SigningBegan marks where event signatures become required: from its own
// seq on, every event of the SignedKinds carries a valid signature. It
// states its own seq, and is signed: nobody without the key can place one
// elsewhere, and the writer places it under the ledger lock, where the seq
// is known (audit/postgres Store.BeginSigning).
type SigningBegan struct {
	Seq int64 `json:"seq"` // the seq this event is at
	Key Name  `json:"key"` // KeyID of the log key that signs from here
}

func (SigningBegan) Kind() Kind { return KindSigningBegan }
func (p SigningBegan) validate() error {
	if p.Seq < 1 || p.Seq > 1<<53 {
		return fmt.Errorf("%w: signing_began seq %d out of range", ErrInvalidEvent, p.Seq)
	}
	return CheckName("key", string(p.Key))
}
