package audit

import (
	"fmt"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
)

// A tenant's log (see doc.go, "Tenant logs") holds the ledger entries that
// name the tenant, in ledger order, as an RFC 6962 tree of its own: leaf i
// (0-based) is tlog.RecordHash of TenantLeaf of the tenant's (i+1)-th
// entry — the entry's canonical payload (the same leaf hash as in the
// global tree) when it names no other tenant, a redacted TenantView bound
// to it by its chain hash otherwise. Its positions are not global sequence
// numbers, and every hash of its proofs is computed from the tenant's own
// leaves, so neither reveals another tenant's entry or how many there
// were between two of the tenant's own. Its heads are C2SP checkpoint
// notes whose origin is TenantOrigin(log origin, tenant), signed by the
// log's key under the log's key name: the published verifier key checks
// the global and every tenant checkpoint, and the origin line keeps them
// apart.

// TenantOriginSep joins the log origin and a tenant id into the tenant
// log's origin.
const TenantOriginSep = "/tenant/"

// TenantOrigin returns the origin of tenant t's log in the log origin.
//
// Errors: ErrInvalidEvent for an origin that cannot name a note key or a
// tenant id that is not an identifier.
func TenantOrigin(origin Name, t cloison.TenantID) (Name, error) {
	if err := checkNoteName(origin); err != nil {
		return "", err
	}
	if t == "" {
		return "", fmt.Errorf("%w: empty tenant", ErrInvalidEvent)
	}
	o := Name(string(origin) + TenantOriginSep + string(t))
	if err := CheckName("tenant origin", string(o)); err != nil {
		return "", err
	}
	return o, nil
}

// TenantVisible reports whether tenant t may read rec's own payload: its
// tenant is t and it names no other tenant (TenantsNamed), so its leaf in
// t's log is the payload itself. Entries that name t with others enter t's
// log as redacted views (TenantLeaf), which this excludes; so do entries
// without a tenant column (incident events), whose payload t reads only
// through its log.
func TenantVisible(rec Record, t cloison.TenantID) bool {
	env, err := DecodeEnvelope(rec.Payload)
	if err != nil || t == "" || env.Tenant != t {
		return false
	}
	named, ok := TenantsNamed(rec)
	return ok && len(named) == 1
}

// MemTree is an RFC 6962 tree held in memory (its tlog stored hashes): a
// tenant log recomputed from a ledger (by an auditor, or a test). It is not safe for
// concurrent use while appending.
type MemTree struct {
	hashes []tlog.Hash // tlog.StoredHashIndex order
	size   int64
}

// ReadHashes implements tlog.HashReader.
func (m *MemTree) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	for i, x := range indexes {
		if x < 0 || x >= int64(len(m.hashes)) {
			return nil, fmt.Errorf("%w: tree hash %d is beyond a tree of size %d", ErrNotIncluded, x, m.size)
		}
		out[i] = m.hashes[x]
	}
	return out, nil
}

// Append adds the leaf of payload (tlog.RecordHash) and returns its
// 1-based position.
func (m *MemTree) Append(payload []byte) (uint64, error) {
	hs, err := tlog.StoredHashes(m.size, payload, m)
	if err != nil {
		return 0, err
	}
	m.hashes = append(m.hashes, hs...)
	m.size++
	return uint64(m.size), nil
}

// Size returns the number of leaves.
func (m *MemTree) Size() uint64 { return uint64(m.size) }

// Head returns the tree head at size (≤ Size) named origin.
//
// Errors: ErrEmptyLedger for size 0; ErrNotIncluded beyond Size.
func (m *MemTree) Head(origin Name, size uint64) (TreeHead, error) {
	if size == 0 {
		return TreeHead{}, ErrEmptyLedger
	}
	if size > m.Size() {
		return TreeHead{}, fmt.Errorf("%w: size %d beyond %d", ErrNotIncluded, size, m.size)
	}
	root, err := tlog.TreeHash(int64(size), m)
	return TreeHead{Origin: origin, Size: size, Root: root}, err
}

// ProveRecord returns the inclusion proof of position pos (1-based) in the
// tree of size size.
func (m *MemTree) ProveRecord(pos, size uint64) (tlog.RecordProof, error) {
	if pos == 0 || pos > size || size > m.Size() {
		return nil, fmt.Errorf("%w: position %d in a tree of size %d (of %d)", ErrNotIncluded, pos, size, m.size)
	}
	return tlog.ProveRecord(int64(size), int64(pos)-1, m)
}

// ProveTree returns the consistency proof from size old to size size.
func (m *MemTree) ProveTree(old, size uint64) (tlog.TreeProof, error) {
	if old == 0 || old > size || size > m.Size() {
		return nil, fmt.Errorf("%w: size %d to size %d (of %d)", ErrNotIncluded, old, size, m.size)
	}
	return tlog.ProveTree(int64(size), int64(old), m)
}

// SignTenantHead signs h, a head of tenant t's log, with the log's signer s
// (whose name is the log origin): h.Origin must be TenantOrigin(s.Name(), t).
//
// Errors: ErrInvalidEvent for another origin; ErrEmptyLedger for size 0.
func SignTenantHead(s note.Signer, t cloison.TenantID, h TreeHead) ([]byte, error) {
	want, err := TenantOrigin(Name(s.Name()), t)
	if err != nil {
		return nil, err
	}
	if h.Origin != want {
		return nil, fmt.Errorf("%w: origin %q is not %q", ErrInvalidEvent, h.Origin, want)
	}
	if h.Size == 0 {
		return nil, ErrEmptyLedger
	}
	msg, err := note.Sign(&note.Note{Text: h.TreeNoteText()}, s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	return msg, nil
}

// OpenTenantHead checks msg's signature with the log's verifier key vkey
// and parses it as a head of tenant t's log (origin TenantOrigin(key
// name, t)). A global checkpoint, or another tenant's, is refused.
//
// Errors: those of OpenTreeHead.
func OpenTenantHead(msg []byte, vkey string, t cloison.TenantID) (TreeHead, error) {
	n, name, err := openNote(msg, vkey)
	if err != nil {
		return TreeHead{}, err
	}
	origin, err := TenantOrigin(Name(name), t)
	if err != nil {
		return TreeHead{}, fmt.Errorf("%w: checkpoint: %v", ErrMalformed, err)
	}
	return ParseTreeHead(n.Text, origin)
}

// VerifyTenantInclusion checks that payload is at position pos (1-based)
// of tenant t's log as the signed tenant checkpoint cp describes.
//
// Errors: those of OpenTenantHead; ErrNotIncluded.
func VerifyTenantInclusion(cp []byte, vkey string, t cloison.TenantID, pos uint64, payload []byte, proof tlog.RecordProof) (TreeHead, error) {
	h, err := OpenTenantHead(cp, vkey, t)
	if err != nil {
		return TreeHead{}, err
	}
	return h, checkInclusion(h, pos, tlog.RecordHash(payload), proof)
}

// VerifyTenantConsistency checks that the signed tenant checkpoint newer
// extends the trusted one older, both of tenant t's log.
//
// Errors: as VerifyConsistency.
func VerifyTenantConsistency(vkey string, t cloison.TenantID, older, newer []byte, proof tlog.TreeProof) (TreeHead, error) {
	o, err := OpenTenantHead(older, vkey, t)
	if err != nil {
		return TreeHead{}, fmt.Errorf("trusted %w", err)
	}
	n, err := OpenTenantHead(newer, vkey, t)
	if err != nil {
		return TreeHead{}, err
	}
	return n, checkConsistency(o, n, proof)
}
