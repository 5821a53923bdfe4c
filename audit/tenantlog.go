package audit

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"

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
// log's key under a note key name equal to that origin (TenantSigner): the
// tenant's verifier key is derived from the published one
// (TenantVerifierKey), and the origin line and key name keep the logs
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

// TenantSigner returns the note signer of tenant t's log: the log's key
// under the note key name TenantOrigin(origin, t), so that the tenant
// checkpoint's key name is its origin (C2SP tlog-checkpoint).
//
// Errors: those of TenantOrigin and TreeSigner.
func TenantSigner(origin Name, key ed25519.PrivateKey, t cloison.TenantID) (note.Signer, error) {
	o, err := TenantOrigin(origin, t)
	if err != nil {
		return nil, err
	}
	return TreeSigner(o, key)
}

// TenantVerifierKey returns the note verifier key of tenant t's log
// derived from the log's published verifier key vkey: the same Ed25519
// key under the name TenantOrigin(vkey's name, t). Anyone holding the
// published key derives it; nothing else is published.
//
// Errors: ErrBadSignature for a vkey that is not an Ed25519 note verifier
// key; those of TenantOrigin.
func TenantVerifierKey(vkey string, t cloison.TenantID) (string, error) {
	name, pub, err := parseVerifierKey(vkey)
	if err != nil {
		return "", err
	}
	o, err := TenantOrigin(Name(name), t)
	if err != nil {
		return "", err
	}
	return TreeVerifierKey(o, pub)
}

// parseVerifierKey splits an Ed25519 note verifier key
// (name+hash+base64(0x01 ‖ key)) after checking it with note.NewVerifier.
func parseVerifierKey(vkey string) (string, ed25519.PublicKey, error) {
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return "", nil, fmt.Errorf("%w: verifier key: %v", ErrBadSignature, err)
	}
	// The base64 key may itself hold '+': name and hash are the first two
	// fields, the key all the rest.
	parts := strings.SplitN(vkey, "+", 3)
	if len(parts) != 3 {
		return "", nil, fmt.Errorf("%w: verifier key: not an Ed25519 note key", ErrBadSignature)
	}
	raw, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || raw[0] != 1 {
		return "", nil, fmt.Errorf("%w: verifier key: not an Ed25519 note key", ErrBadSignature)
	}
	return v.Name(), ed25519.PublicKey(raw[1:]), nil
}

// SignTenantHead signs h, a head of tenant t's log, with the tenant log's
// signer s (TenantSigner): h.Origin must be s's name and end in
// TenantOriginSep and t.
//
// Errors: ErrInvalidEvent for another origin or signer; ErrEmptyLedger for
// size 0.
func SignTenantHead(s note.Signer, t cloison.TenantID, h TreeHead) ([]byte, error) {
	if t == "" || !strings.HasSuffix(string(h.Origin), TenantOriginSep+string(t)) {
		return nil, fmt.Errorf("%w: origin %q is not tenant %q's", ErrInvalidEvent, h.Origin, t)
	}
	base := strings.TrimSuffix(string(h.Origin), TenantOriginSep+string(t))
	if want, err := TenantOrigin(Name(base), t); err != nil || want != h.Origin {
		return nil, fmt.Errorf("%w: origin %q is not tenant %q's", ErrInvalidEvent, h.Origin, t)
	}
	if s.Name() != string(h.Origin) {
		return nil, fmt.Errorf("%w: signer %q is not origin %q", ErrInvalidEvent, s.Name(), h.Origin)
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

// OpenTenantHead checks msg's signature and parses it as a head of tenant
// t's log (origin TenantOrigin(vkey's name, t)). vkey is the log's
// published verifier key; the note is checked with the tenant key derived
// from it (TenantVerifierKey), or, for tenant checkpoints signed before
// their key was named after their origin, with vkey itself: both are the
// same Ed25519 key, and the origin line is the same. A global checkpoint,
// or another tenant's, is refused.
//
// Errors: those of OpenTreeHead.
func OpenTenantHead(msg []byte, vkey string, t cloison.TenantID) (TreeHead, error) {
	name, pub, err := parseVerifierKey(vkey)
	if err != nil {
		return TreeHead{}, err
	}
	origin, err := TenantOrigin(Name(name), t)
	if err != nil {
		return TreeHead{}, fmt.Errorf("%w: checkpoint: %v", ErrMalformed, err)
	}
	tkey, err := TreeVerifierKey(origin, pub)
	if err != nil {
		return TreeHead{}, fmt.Errorf("%w: checkpoint: %v", ErrMalformed, err)
	}
	n, err := openNoteAny(msg, tkey, vkey)
	if err != nil {
		return TreeHead{}, err
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
