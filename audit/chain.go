package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"time"

	"github.com/cloison/cloison"
)

// DomainTag prefixes every event hash so a ledger hash can never be confused
// with a hash computed for another purpose. audit/postgres's insert trigger
// recomputes the same formula in SQL.
const DomainTag = "CLOISON-AUDIT-EVENT-V1"

// HashEvent returns SHA-256(DomainTag ‖ seq as 8 big-endian bytes ‖ prev ‖
// SHA-256(payload)).
func HashEvent(seq uint64, prev Digest, payload []byte) Digest {
	inner := sha256.Sum256(payload)
	var buf [len(DomainTag) + 8 + 32 + 32]byte
	n := copy(buf[:], DomainTag)
	binary.BigEndian.PutUint64(buf[n:], seq)
	n += 8
	n += copy(buf[n:], prev[:])
	copy(buf[n:], inner[:])
	return sha256.Sum256(buf[:])
}

// Head is the end of a chain: the last sequence number and its hash. The
// zero Head is the empty chain (seq 0, hash all zeros), which the first
// event (seq 1) extends.
type Head struct {
	Seq  uint64
	Hash Digest
}

// Record is one ledger row.
type Record struct {
	Seq        uint64
	PrevHash   Digest
	Hash       Digest
	Kind       Kind
	Tenant     cloison.TenantID
	Actor      Name
	OccurredAt time.Time
	RecordedAt time.Time // set by the database (clock_timestamp()); not hashed
	Payload    []byte    // canonical JSON envelope; the hashed bytes
}

// Head returns the chain head that r ends.
func (r Record) Head() Head { return Head{Seq: r.Seq, Hash: r.Hash} }

// Next computes the record that appends e after h. It is pure: the caller
// stores the record and, once stored, uses its Head for the next one.
func (h Head) Next(e Event) (Record, error) {
	payload, err := e.Canonical()
	if err != nil {
		return Record{}, err
	}
	seq := h.Seq + 1
	return Record{
		Seq:        seq,
		PrevHash:   h.Hash,
		Hash:       HashEvent(seq, h.Hash, payload),
		Kind:       e.Payload.Kind(),
		Tenant:     e.Tenant,
		Actor:      e.Actor,
		OccurredAt: e.OccurredAt.UTC().Truncate(time.Microsecond),
		Payload:    payload,
	}, nil
}

// Rechain returns the record that puts an already canonical payload at seq
// after prev. audit/postgres uses it to place events whose bytes were
// computed before the chain head was known.
func Rechain(r Record, h Head) Record {
	r.Seq = h.Seq + 1
	r.PrevHash = h.Hash
	r.Hash = HashEvent(r.Seq, h.Hash, r.Payload)
	return r
}

// Prepare validates e and returns its record without a place in the chain
// (Seq, PrevHash and Hash unset). Canonicalising is the costly part of an
// append; callers do it before taking the writer lock and place the record
// with Rechain once the head is known.
func (e Event) Prepare() (Record, error) {
	payload, err := e.Canonical()
	if err != nil {
		return Record{}, err
	}
	return Record{
		Kind:       e.Payload.Kind(),
		Tenant:     e.Tenant,
		Actor:      e.Actor,
		OccurredAt: e.OccurredAt.UTC().Truncate(time.Microsecond),
		Payload:    payload,
	}, nil
}
