package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
)

// The ledger is also an RFC 6962 Merkle tree (golang.org/x/mod/sumdb/tlog):
// leaf n (0-based) is tlog.RecordHash of the canonical payload of the event
// at seq n+1 — the same bytes the hash chain hashes. A tree head is
// published as a C2SP tlog-checkpoint signed note:
//
//	<origin>\n<tree size, decimal>\n<root, standard base64>\n
//	\n
//	— <origin> <base64(key hash ‖ Ed25519 signature)>\n
//
// signed by an Ed25519 note key whose name is the origin. Anyone holding
// the verifier key (TreeVerifierKey) can check it with note.Open, and check
// proofs against it with tlog.CheckRecord and tlog.CheckTree; the helpers
// below do exactly that and name the reason when they refuse.

// Errors of tree verification. Each is a failure, never a warning.
var (
	// ErrNoCheckpoint: no signed tree head was given or stored.
	ErrNoCheckpoint = cloison.NewError(cloison.CodeNotFound, "audit: no signed checkpoint")
	// ErrEmptyLedger: a checkpoint or proof request for an empty tree.
	ErrEmptyLedger = cloison.NewError(cloison.CodeNotFound, "audit: empty ledger")
	// ErrSmallerTree: a checkpoint smaller than one already trusted (a
	// truncated or rolled-back log).
	ErrSmallerTree = cloison.NewError(cloison.CodeConflict, "audit: tree is smaller than a trusted checkpoint")
	// ErrFork: two checkpoints that no append-only log can both have
	// signed: same size and another root, or a consistency proof that
	// fails (a rewritten entry, a rollback then new entries).
	ErrFork = cloison.NewError(cloison.CodeConflict, "audit: tree is not an extension of a trusted checkpoint")
	// ErrNotIncluded: an inclusion proof that does not prove the record
	// at that index in the checkpoint's tree (a rewritten or absent entry).
	ErrNotIncluded = cloison.NewError(cloison.CodeConflict, "audit: record is not in the checkpoint's tree")
)

// TreeHead is the content of a tree checkpoint note.
type TreeHead struct {
	Origin Name
	Size   uint64
	Root   tlog.Hash
}

// LeafHash is the tree's leaf for one record: tlog.RecordHash(payload).
func LeafHash(r Record) tlog.Hash { return tlog.RecordHash(r.Payload) }

// TreeNoteText returns the C2SP tlog-checkpoint body of h.
func (h TreeHead) TreeNoteText() string {
	return fmt.Sprintf("%s\n%d\n%s\n", h.Origin, h.Size, base64.StdEncoding.EncodeToString(h.Root[:]))
}

// TreeVerifierKey returns the published note verifier key of pub for
// origin ("<origin>+<key hash>+<base64 key>").
//
// Errors: ErrInvalidEvent for an origin that cannot name a note key (it
// must be a Name without '+').
func TreeVerifierKey(origin Name, pub ed25519.PublicKey) (string, error) {
	if err := checkNoteName(origin); err != nil {
		return "", err
	}
	vkey, err := note.NewEd25519VerifierKey(string(origin), pub)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	return vkey, nil
}

// TreeSigner returns a note signer named origin for key.
//
// Errors: ErrInvalidEvent for an origin that cannot name a note key.
func TreeSigner(origin Name, key ed25519.PrivateKey) (note.Signer, error) {
	vkey, err := TreeVerifierKey(origin, key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	// A note private key is PRIVATE+KEY+<name>+<hash>+base64(alg ‖ seed),
	// with the same name and hash as the verifier key.
	parts := strings.Split(vkey, "+")
	skey := "PRIVATE+KEY+" + parts[0] + "+" + parts[1] + "+" + base64.StdEncoding.EncodeToString(append([]byte{1}, key.Seed()...))
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	return s, nil
}

func checkNoteName(origin Name) error {
	if err := CheckName("origin", string(origin)); err != nil {
		return err
	}
	if strings.Contains(string(origin), "+") {
		return fmt.Errorf("%w: origin %q: a note key name has no '+'", ErrInvalidEvent, origin)
	}
	return nil
}

// SignTreeHead returns the signed note of h.
//
// Errors: ErrInvalidEvent for an origin that cannot name a note key or that
// is not the signer's name; ErrEmptyLedger for size 0.
func SignTreeHead(s note.Signer, h TreeHead) ([]byte, error) {
	if h.Size == 0 {
		return nil, ErrEmptyLedger
	}
	if err := checkNoteName(h.Origin); err != nil {
		return nil, err
	}
	if s.Name() != string(h.Origin) {
		return nil, fmt.Errorf("%w: signer %q is not origin %q", ErrInvalidEvent, s.Name(), h.Origin)
	}
	msg, err := note.Sign(&note.Note{Text: h.TreeNoteText()}, s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidEvent, err)
	}
	return msg, nil
}

// OpenTreeHead checks msg's signature with the verifier key vkey (its name
// is the origin) and parses the tree head. The note must carry a valid
// signature by that key and say exactly the three checkpoint lines, with
// the key's name as origin.
//
// Errors: ErrNoCheckpoint for an empty msg; ErrBadSignature for a note not
// signed by vkey (or a bad vkey); ErrMalformed for a body that is not a
// checkpoint of that origin; ErrEmptyLedger for a tree of size 0.
func OpenTreeHead(msg []byte, vkey string) (TreeHead, error) {
	n, name, err := openNote(msg, vkey)
	if err != nil {
		return TreeHead{}, err
	}
	return ParseTreeHead(n.Text, Name(name))
}

// openNote checks msg's signature by vkey and returns the note and the
// key's name.
func openNote(msg []byte, vkey string) (*note.Note, string, error) {
	if len(bytes.TrimSpace(msg)) == 0 {
		return nil, "", ErrNoCheckpoint
	}
	v, err := note.NewVerifier(vkey)
	if err != nil {
		return nil, "", fmt.Errorf("%w: verifier key: %v", ErrBadSignature, err)
	}
	n, err := note.Open(msg, note.VerifierList(v))
	if err != nil {
		var ue *note.UnverifiedNoteError
		var ie *note.InvalidSignatureError
		if errors.As(err, &ue) || errors.As(err, &ie) {
			return nil, "", fmt.Errorf("%w: checkpoint: %v", ErrBadSignature, err)
		}
		return nil, "", fmt.Errorf("%w: checkpoint: %v", ErrMalformed, err)
	}
	return n, v.Name(), nil
}

// openNoteAny checks msg's signature by any of vkeys (Ed25519 note keys)
// and returns the note.
func openNoteAny(msg []byte, vkeys ...string) (*note.Note, error) {
	if len(bytes.TrimSpace(msg)) == 0 {
		return nil, ErrNoCheckpoint
	}
	var vs []note.Verifier
	for _, k := range vkeys {
		v, err := note.NewVerifier(k)
		if err != nil {
			return nil, fmt.Errorf("%w: verifier key: %v", ErrBadSignature, err)
		}
		vs = append(vs, v)
	}
	n, err := note.Open(msg, note.VerifierList(vs...))
	if err != nil {
		var ue *note.UnverifiedNoteError
		var ie *note.InvalidSignatureError
		if errors.As(err, &ue) || errors.As(err, &ie) {
			return nil, fmt.Errorf("%w: checkpoint: %v", ErrBadSignature, err)
		}
		return nil, fmt.Errorf("%w: checkpoint: %v", ErrMalformed, err)
	}
	return n, nil
}

// ParseTreeHead parses a checkpoint body strictly: the origin line equal to
// origin, a canonical decimal size, a 32-byte root in standard base64, and
// nothing else (this log writes no extension lines). It checks no
// signature (see OpenTreeHead).
//
// Errors: ErrMalformed; ErrEmptyLedger for size 0.
func ParseTreeHead(text string, origin Name) (TreeHead, error) {
	bad := func(format string, args ...any) (TreeHead, error) {
		return TreeHead{}, fmt.Errorf("%w: checkpoint: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
	lines := strings.Split(text, "\n")
	if len(lines) != 4 || lines[3] != "" {
		return bad("want 3 lines")
	}
	if lines[0] != string(origin) {
		return bad("origin %q is not %q", lines[0], origin)
	}
	size, err := parseUint(lines[1])
	if err != nil || size > 1<<62 {
		return bad("bad size")
	}
	root, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(root) != tlog.HashSize || base64.StdEncoding.EncodeToString(root) != lines[2] {
		return bad("bad root")
	}
	h := TreeHead{Origin: origin, Size: size}
	copy(h.Root[:], root)
	if size == 0 {
		return h, ErrEmptyLedger
	}
	return h, nil
}

// VerifyInclusion checks that record is entry seq (1-based) of the tree
// that the signed checkpoint cp describes, using proof (from
// Store.InclusionProof for cp's size). It returns the verified tree head.
//
// Errors: those of OpenTreeHead; ErrNotIncluded when seq is 0 or beyond the
// tree, when record's seq is not seq, or when the proof fails.
func VerifyInclusion(cp []byte, vkey string, record Record, proof tlog.RecordProof) (TreeHead, error) {
	h, err := OpenTreeHead(cp, vkey)
	if err != nil {
		return TreeHead{}, err
	}
	return h, checkInclusion(h, record.Seq, LeafHash(record), proof)
}

// checkInclusion checks that leaf is at position pos (1-based) of h's tree.
func checkInclusion(h TreeHead, pos uint64, leaf tlog.Hash, proof tlog.RecordProof) error {
	if pos == 0 || pos > h.Size {
		return fmt.Errorf("%w: entry %d is outside a tree of size %d", ErrNotIncluded, pos, h.Size)
	}
	if err := tlog.CheckRecord(proof, int64(h.Size), h.Root, int64(pos-1), leaf); err != nil {
		return fmt.Errorf("%w: entry %d in tree of size %d: %v", ErrNotIncluded, pos, h.Size, err)
	}
	return nil
}

// VerifyConsistency checks that the signed checkpoint newer extends the
// trusted signed checkpoint older (both by vkey), using proof (from
// Store.ConsistencyProof(older size, newer size)). It returns the newer
// tree head, which the caller may then trust.
//
// Errors: ErrNoCheckpoint when either is missing; the other errors of
// OpenTreeHead; ErrSmallerTree when newer is smaller than older; ErrFork
// when they have the same size and different roots, or the proof fails.
func VerifyConsistency(vkey string, older, newer []byte, proof tlog.TreeProof) (TreeHead, error) {
	o, err := OpenTreeHead(older, vkey)
	if err != nil {
		return TreeHead{}, fmt.Errorf("trusted %w", err)
	}
	n, err := OpenTreeHead(newer, vkey)
	if err != nil {
		return TreeHead{}, err
	}
	return n, checkConsistency(o, n, proof)
}

// checkConsistency checks that n extends the trusted o.
func checkConsistency(o, n TreeHead, proof tlog.TreeProof) error {
	switch {
	case n.Size < o.Size:
		return fmt.Errorf("%w: size %d after trusted size %d", ErrSmallerTree, n.Size, o.Size)
	case n.Size == o.Size && n.Root != o.Root:
		return fmt.Errorf("%w: two roots at size %d", ErrFork, n.Size)
	}
	if err := tlog.CheckTree(proof, int64(n.Size), n.Root, int64(o.Size), o.Root); err != nil {
		return fmt.Errorf("%w: size %d does not extend trusted size %d: %v", ErrFork, n.Size, o.Size, err)
	}
	return nil
}
