package audit

import (
	"time"

	"golang.org/x/mod/sumdb/tlog"
)

// TenantLogEntry is one leaf of a tenant's log as the tenant reads it:
// its position (1-based) and the leaf's exact bytes, as hashed into the
// log (tlog.RecordHash(Leaf) is leaf Pos-1 of the tenant tree). Kind and
// Actor are read from the leaf itself; nothing else of the global entry (its seq,
// its chain hashes, its tenant column, which may name another tenant) is
// carried.
type TenantLogEntry struct {
	Pos   uint64
	Kind  Kind
	Actor Name
	Leaf  []byte
}

// TenantEntry is one entry of a tenant's log with what proves it: its
// position among the tenant's entries, the size of the tenant log it is
// proven in, the tenant checkpoint of that size (signed now) and the
// inclusion proof, checkable offline with VerifyTenantInclusion.
type TenantEntry struct {
	Seq        uint64 // global ledger seq (operator view only; never sent to a tenant)
	Position   uint64
	Size       uint64
	Payload    []byte // canonical JSON, verbatim
	Checkpoint []byte
	Proof      tlog.RecordProof
	OccurredAt time.Time
	Completed  RequestCompleted
}
