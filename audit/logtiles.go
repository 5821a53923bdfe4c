package audit

import (
	"encoding/binary"
	"fmt"

	"golang.org/x/mod/sumdb/tlog"
)

// The served log (C2SP tlog-tiles, see doc.go "The served log"): the
// global tree's tiles as stored, and its entry bundles built here from the
// entries' canonical payloads. A tenant's entry is served as its leaf hash
// only (ServedEntry); a monitor reads a bundle with CutServedEntry.

// ServedHashLen is the length of a served entry that is a leaf hash, not
// a payload: no canonical payload is that short (an envelope alone is
// longer), so the length tells the two apart.
const ServedHashLen = tlog.HashSize

// MaxServedEntry is the largest entry a bundle can hold (a big-endian
// uint16 length prefix).
const MaxServedEntry = 1<<16 - 1

// publicKinds are the kinds whose entries are served in full when they
// name no tenant: facts about the deployment (its nodes' capacity, its
// signing keys, its policy bundle, its exports, its register's
// organisation), never a tenant's traffic. Every other kind, and any kind
// added later, is served as a hash (fail closed).
var publicKinds = map[Kind]bool{
	KindCapacityAttestation: true,
	KindKeyCreated:          true,
	KindKeyRotated:          true,
	KindKeyRevoked:          true,
	KindPolicyReloaded:      true,
	KindExportCreated:       true,
	KindRegisterSettings:    true,
	KindModelLoaded:         true,
	KindModelUnloaded:       true,
}

// ServedPublic reports whether rec is served in full in the public log:
// its kind is a deployment fact (publicKinds), it has no tenant column and
// names no tenant (TenantsNamed). A payload that does not decode is not.
func ServedPublic(rec Record) bool {
	// The columns decide only for a hash (never wrong to serve); a payload
	// is served in full only once decoded and checked itself.
	if rec.Tenant != "" || (rec.Kind != "" && !publicKinds[rec.Kind]) {
		return false
	}
	env, err := DecodeEnvelope(rec.Payload)
	if err != nil || env.Tenant != "" || !publicKinds[env.Kind] {
		return false
	}
	named, ok := TenantsNamed(rec)
	return ok && len(named) == 0
}

// ServedEntry returns rec as the public log serves it: its canonical
// payload (the leaf's preimage) when ServedPublic and short enough for a
// bundle (MaxServedEntry), otherwise its leaf hash (ServedHashLen bytes),
// which is what the level-0 tile already shows.
func ServedEntry(rec Record) []byte {
	if !ServedPublic(rec) || len(rec.Payload) > MaxServedEntry {
		h := LeafHash(rec)
		return h[:]
	}
	return rec.Payload
}

// AppendBundleEntry appends entry to an entry bundle (C2SP tlog-tiles: a
// big-endian uint16 length, then the bytes).
//
// Errors: ErrInvalidEvent for an entry longer than MaxServedEntry.
func AppendBundleEntry(bundle, entry []byte) ([]byte, error) {
	if len(entry) > MaxServedEntry {
		return nil, fmt.Errorf("%w: bundle entry of %d bytes", ErrInvalidEvent, len(entry))
	}
	bundle = binary.BigEndian.AppendUint16(bundle, uint16(len(entry)))
	return append(bundle, entry...), nil
}

// CutServedEntry reads the first entry of a served bundle and returns it,
// the leaf hash it stands for, and the rest: a served entry of
// ServedHashLen bytes is that leaf hash, any other is a payload whose leaf
// hash is tlog.RecordHash. It has the signature of torchwood's
// WithCutEntry, so a standard tile client checks every entry of a bundle
// against the tree (a payload by hashing it, a hash by comparing it).
//
// Errors: ErrMalformed for a truncated bundle.
func CutServedEntry(bundle []byte) (entry []byte, leaf tlog.Hash, rest []byte, err error) {
	if len(bundle) < 2 {
		return nil, tlog.Hash{}, nil, fmt.Errorf("%w: entry bundle: truncated length", ErrMalformed)
	}
	n := int(binary.BigEndian.Uint16(bundle))
	if len(bundle) < 2+n {
		return nil, tlog.Hash{}, nil, fmt.Errorf("%w: entry bundle: entry of %d bytes truncated", ErrMalformed, n)
	}
	entry, rest = bundle[2:2+n], bundle[2+n:]
	if n == ServedHashLen {
		copy(leaf[:], entry)
	} else {
		leaf = tlog.RecordHash(entry)
	}
	return entry, leaf, rest, nil
}
