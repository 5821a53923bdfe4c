package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"testing"
	"time"
)

var eventKey = ed25519.NewKeyFromSeed([]byte("cloison-audit-event-signing-key!"))

func eventKeys() map[string]ed25519.PublicKey {
	return KeySet(eventKey.Public().(ed25519.PublicKey))
}

// A signed kind is signed inside its envelope; the signature verifies with
// the log key only, over the envelope without it, and any change of the
// signed bytes, another key or a missing signature is refused. Kinds of
// the request path stay unsigned.
func TestEventSignature(t *testing.T) {
	signer := NewEventSigner(eventKey)
	at := time.Unix(1_800_000_000, 0)
	notice := Event{OccurredAt: at, Actor: "admin:elise", Payload: NoticeSent{Incident: "inc-1", Notice: 1, Recipient: RecipientCAI}}
	b, err := signer.Canonical(notice)
	if err != nil {
		t.Fatal(err)
	}
	if !IsCanonical(b) || !bytes.Contains(b, []byte(`"sig":"`)) {
		t.Fatalf("signed payload %s: want canonical, with sig", b)
	}
	if id, err := VerifyEventSignature(b, eventKeys()); err != nil || id != KeyID(eventKey.Public().(ed25519.PublicKey)) {
		t.Fatalf("VerifyEventSignature: %q, %v", id, err)
	}
	env, err := DecodeEnvelope(b)
	if err != nil || env.Sig == "" {
		t.Fatalf("DecodeEnvelope: %+v %v", env, err)
	}
	other := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	forged := bytes.Replace(b, []byte(`"admin:elise"`), []byte(`"admin:ernst"`), 1)
	for name, c := range map[string]struct {
		payload []byte
		keys    map[string]ed25519.PublicKey
	}{
		"edited actor":  {forged, eventKeys()},
		"untrusted key": {b, KeySet(other.Public().(ed25519.PublicKey))},
	} {
		if _, err := VerifyEventSignature(c.payload, c.keys); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: got %v, want ErrBadSignature", name, err)
		}
	}
	// The signature is over the domain: a plain Ed25519 signature of the
	// unsigned envelope (what a checkpoint-style signer would make) fails.
	unsigned, _ := notice.Canonical()
	if id, err := VerifyEventSignature(unsigned, eventKeys()); id != "" || err != nil {
		t.Errorf("unsigned: got %q, %v, want no signature and no error", id, err)
	}
	if !ed25519.Verify(eventKey.Public().(ed25519.PublicKey), append([]byte(EventSigDomain), unsigned...), sigBytes(t, env.Sig)) {
		t.Error("the signature is not over EventSigDomain ‖ the unsigned envelope")
	}
	req := Event{OccurredAt: at, Actor: "engine:n", Tenant: "a", Payload: RequestCompleted{Request: "r", Model: "m", Tier: "always"}}
	rb, err := signer.Canonical(req)
	if err != nil || bytes.Contains(rb, []byte(`"sig"`)) {
		t.Errorf("request.completed: %s %v, want unsigned", rb, err)
	}
	if RequiresSignature(KindRequestCompleted) || !RequiresSignature(KindTenantUpdated) || !RequiresSignature(KindSigningBegan) {
		t.Error("SignedKinds: request.completed must stay unsigned, tenant.updated and ledger.signing_began signed")
	}
}

func sigBytes(t *testing.T, sig string) []byte {
	t.Helper()
	_, b64, _ := bytes.Cut([]byte(sig), []byte(":"))
	out, err := base64.StdEncoding.DecodeString(string(b64))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// The Verifier's signature and time rules on a chain built in memory:
// before signing began unsigned admin events pass; from the first signed
// event on an unsigned one is named, a backdated entry is named (a stated
// time is not), and every break is reported, not only the first.
func TestVerifierSignatureRules(t *testing.T) {
	signer := NewEventSigner(eventKey)
	now := time.Unix(1_800_000_000, 0).UTC()
	var h Head
	var recs []Record
	add := func(e Event, sign bool, recordedAt time.Time) uint64 {
		t.Helper()
		r, err := h.Next(e)
		if err != nil {
			t.Fatal(err)
		}
		if sign {
			if r.Payload, err = signer.Canonical(e); err != nil {
				t.Fatal(err)
			}
			r = Rechain(r, h)
		}
		r.RecordedAt = recordedAt
		recs = append(recs, r)
		h = r.Head()
		return r.Seq
	}
	tenant := func(at time.Time) Event {
		return Event{OccurredAt: at, Actor: "admin:a", Tenant: "t", Payload: TenantChange{Op: TenantUpdated, ConfigDigest: Digest{1}}}
	}
	add(tenant(now), false, now) // legacy: before signing began
	add(Event{OccurredAt: now, Actor: "engine:n", Payload: SigningBegan{Seq: 2, Key: Name(KeyID(eventKey.Public().(ed25519.PublicKey)))}}, true, now)
	add(tenant(now), true, now)
	unsigned := add(tenant(now), false, now)
	backdated := add(tenant(now.Add(-time.Hour)), true, now)
	add(Event{OccurredAt: now.Add(-72 * time.Hour), Actor: "admin:a", Payload: NoticeSent{Incident: "inc-1", Notice: 1, Recipient: RecipientCAI}}, true, now)
	add(Event{OccurredAt: now, Actor: "engine:n", Tenant: "t", Payload: RequestCompleted{Request: "r", Model: "m", Tier: "always"}}, false, now)

	v := NewVerifier(Head{}, eventKeys())
	for _, r := range recs {
		_ = v.Add(r)
	}
	res, err := v.Finish()
	var bs *Breaks
	if !errors.As(err, &bs) || len(bs.All) != 2 {
		t.Fatalf("got %v, want two breaks", err)
	}
	if b := bs.All[0]; b.Seq != unsigned || b.Reason != ReasonSignature {
		t.Errorf("first break: got seq %d %s, want %d %s", b.Seq, b.Reason, unsigned, ReasonSignature)
	}
	if b := bs.All[1]; b.Seq != backdated || b.Reason != ReasonBackdated {
		t.Errorf("second break: got seq %d %s, want %d %s", b.Seq, b.Reason, backdated, ReasonBackdated)
	}
	if res.SignedFrom != 2 || res.Signed != 4 || res.Events != uint64(len(recs)) {
		t.Errorf("result: %+v, want signing from seq 2, 4 signed, %d events", res, len(recs))
	}
	var be *BreakError
	if !errors.As(err, &be) || be.Seq != unsigned || !errors.Is(err, ErrChainBroken) {
		t.Errorf("errors.As finds %v, want the first break", be)
	}
}
