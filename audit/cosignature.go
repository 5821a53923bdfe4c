package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"

	"github.com/cloison/cloison"
)

// Witness cosignatures (C2SP tlog-cosignature, cosignature/v1, Ed25519).
// A cosignature is a note signature line on a tree checkpoint:
//
//	— <witness name> base64(key hash ‖ u64 timestamp ‖ Ed25519 signature)
//
// where key hash = SHA-256(<name> ‖ "\n" ‖ 0x04 ‖ public key)[:4] and the
// signature is over
//
//	cosignature/v1\ntime <timestamp>\n<checkpoint body>
//
// A witness's published key is a vkey "<name>+<key hash, 8 hex>+base64(0x04
// ‖ public key)" (CosignerVerifierKey). A cosignature says: at that time,
// this was the largest tree the witness had seen of that log, and the witness
// had checked it consistent with every smaller one it had seen (it cosigns
// only with a consistency proof from the last size it cosigned).

// cosignatureAlg is the signed-note signature type of Ed25519 cosignatures.
const cosignatureAlg = 0x04

// ErrTooFewCosignatures: a checkpoint that does not carry the required
// number of valid cosignatures from distinct trusted witnesses.
var ErrTooFewCosignatures = cloison.NewError(cloison.CodeConflict, "audit: checkpoint lacks the required witness cosignatures")

// ErrStaleCosignature: a cosignature older than the verifier's bound. A
// cosignature kept by the log survives a rollback of the log's database;
// only a recent one (or the witness asked) says the log has not been
// rolled back since.
var ErrStaleCosignature = cloison.NewError(cloison.CodeConflict, "audit: witness cosignature older than the verifier's bound")

func cosignerHash(name string, pub ed25519.PublicKey) uint32 {
	h := sha256.New()
	h.Write([]byte(name))
	h.Write([]byte{'\n', cosignatureAlg})
	h.Write(pub)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

func checkCosignerName(name string) error {
	if name == "" || strings.ContainsAny(name, "+ \t\r\n") || strings.ContainsRune(name, '—') {
		return fmt.Errorf("%w: witness name %q", ErrInvalidEvent, name)
	}
	return nil
}

// CosignerVerifierKey returns the published vkey of a witness named name
// with public key pub.
//
// Errors: ErrInvalidEvent for a name that cannot name a note key (empty,
// spaces or '+') or a key that is not an Ed25519 public key.
func CosignerVerifierKey(name string, pub ed25519.PublicKey) (string, error) {
	if err := checkCosignerName(name); err != nil {
		return "", err
	}
	if len(pub) != ed25519.PublicKeySize {
		return "", fmt.Errorf("%w: witness key is not an Ed25519 public key", ErrInvalidEvent)
	}
	return fmt.Sprintf("%s+%08x+%s", name, cosignerHash(name, pub),
		base64.StdEncoding.EncodeToString(append([]byte{cosignatureAlg}, pub...))), nil
}

// cosignedMessage is what a cosignature/v1 signs over the note text.
func cosignedMessage(t uint64, text string) []byte {
	return []byte("cosignature/v1\ntime " + strconv.FormatUint(t, 10) + "\n" + text)
}

type cosigner struct {
	name string
	hash uint32
	key  ed25519.PrivateKey
	now  func() time.Time
}

func (c *cosigner) Name() string    { return c.name }
func (c *cosigner) KeyHash() uint32 { return c.hash }

func (c *cosigner) Sign(msg []byte) ([]byte, error) {
	t := c.now().Unix()
	if t < 0 {
		return nil, fmt.Errorf("%w: clock before 1970", ErrInvalidEvent)
	}
	sig := binary.BigEndian.AppendUint64(make([]byte, 0, 8+ed25519.SignatureSize), uint64(t))
	return append(sig, ed25519.Sign(c.key, cosignedMessage(uint64(t), string(msg)))...), nil
}

// NewCosigner returns a note signer that writes cosignature/v1 signatures
// named name with key, timestamped by now (time.Now when nil). note.Sign
// with it on a checkpoint's body gives the witness's cosignature line.
//
// Errors: those of CosignerVerifierKey.
func NewCosigner(name string, key ed25519.PrivateKey, now func() time.Time) (note.Signer, error) {
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("%w: witness key is not an Ed25519 private key", ErrInvalidEvent)
	}
	pub := key.Public().(ed25519.PublicKey)
	if _, err := CosignerVerifierKey(name, pub); err != nil {
		return nil, err
	}
	if now == nil {
		now = time.Now
	}
	return &cosigner{name: name, hash: cosignerHash(name, pub), key: key, now: now}, nil
}

// CosignatureVerifier is a note.Verifier of one witness's cosignature/v1
// lines. Cosignatures with a timestamp above 2^63-1 are refused.
type CosignatureVerifier struct {
	name string
	hash uint32
	pub  ed25519.PublicKey
}

// Name is the witness's name.
func (v *CosignatureVerifier) Name() string { return v.name }

// KeyHash is the cosignature key hash.
func (v *CosignatureVerifier) KeyHash() uint32 { return v.hash }

// Verify checks sig (timestamp ‖ signature) on the note text msg.
func (v *CosignatureVerifier) Verify(msg, sig []byte) bool {
	_, ok := v.verify(msg, sig)
	return ok
}

func (v *CosignatureVerifier) verify(msg, sig []byte) (time.Time, bool) {
	if len(sig) != 8+ed25519.SignatureSize {
		return time.Time{}, false
	}
	t := binary.BigEndian.Uint64(sig)
	if t > math.MaxInt64 {
		return time.Time{}, false
	}
	return time.Unix(int64(t), 0).UTC(), ed25519.Verify(v.pub, cosignedMessage(t, string(msg)), sig[8:])
}

// NewCosignatureVerifier parses a witness vkey (CosignerVerifierKey).
//
// Errors: ErrBadSignature for a vkey that is not an Ed25519 cosignature
// key (malformed, another algorithm, a key hash that does not match).
func NewCosignatureVerifier(vkey string) (*CosignatureVerifier, error) {
	bad := func(why string) (*CosignatureVerifier, error) {
		return nil, fmt.Errorf("%w: witness key: %s", ErrBadSignature, why)
	}
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash16, key64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || checkCosignerName(name) != nil || len(hash16) != 8 {
		return bad("want <name>+<hash>+<key>")
	}
	hash, err := strconv.ParseUint(hash16, 16, 32)
	if err != nil {
		return bad("bad key hash")
	}
	key, err := base64.StdEncoding.Strict().DecodeString(key64)
	if err != nil || len(key) != 1+ed25519.PublicKeySize {
		return bad("bad key")
	}
	if key[0] != cosignatureAlg {
		return bad("not an Ed25519 cosignature (0x04) key")
	}
	pub := ed25519.PublicKey(key[1:])
	if uint32(hash) != cosignerHash(name, pub) {
		return bad("key hash does not match the key")
	}
	return &CosignatureVerifier{name: name, hash: uint32(hash), pub: pub}, nil
}

// Cosignature is one valid witness cosignature found on a checkpoint.
type Cosignature struct {
	Witness string    // the witness's key name
	Time    time.Time // its timestamp (seconds)
}

// VerifyCosigned checks the checkpoint msg: the log's signature by logKey
// (as OpenTreeHead does) and at least k valid cosignatures by distinct
// witnesses among witnessKeys (CheckCosignatures). It returns the tree head
// and the cosignatures that verified, also on ErrTooFewCosignatures (so
// the caller can say which witnesses signed). k = 0 checks only the log's
// signature.
//
// Errors: those of OpenTreeHead; those of CheckCosignatures.
func VerifyCosigned(msg []byte, logKey string, witnessKeys []string, k int) (TreeHead, []Cosignature, error) {
	h, err := OpenTreeHead(msg, logKey)
	if err != nil {
		return h, nil, err
	}
	got, err := CheckCosignatures(msg, witnessKeys, k)
	return h, got, err
}

// CheckCosignatures checks that the signed note msg carries at least k
// valid cosignatures on its text by distinct witnesses among witnessKeys
// (vkeys, CosignerVerifierKey), and returns those that verified. It does
// not check the log's own signature: VerifyCosigned does both. Signature
// lines by unknown keys are ignored; an invalid cosignature by a known
// witness does not count; a witness listed twice, or signing twice, counts
// once.
//
// Errors: ErrBadSignature for a witness key that does not parse;
// ErrInvalidEvent for k < 0 or k above the number of distinct witnesses
// given; ErrMalformed for a msg that is not a signed note;
// ErrTooFewCosignatures.
func CheckCosignatures(msg []byte, witnessKeys []string, k int) ([]Cosignature, error) {
	seen := map[string]bool{}
	var vs []*CosignatureVerifier
	for _, wk := range witnessKeys {
		v, err := NewCosignatureVerifier(wk)
		if err != nil {
			return nil, err
		}
		id := fmt.Sprintf("%s+%08x", v.name, v.hash)
		if seen[id] {
			continue
		}
		seen[id] = true
		vs = append(vs, v)
	}
	if k < 0 || k > len(vs) {
		return nil, fmt.Errorf("%w: %d cosignatures required of %d distinct witnesses", ErrInvalidEvent, k, len(vs))
	}
	text, sigs, err := splitNote(msg)
	if err != nil {
		return nil, err
	}
	var got []Cosignature
	for _, v := range vs {
		if t, ok := findCosignature(v, text, sigs); ok {
			got = append(got, Cosignature{Witness: v.name, Time: t})
		}
	}
	if len(got) < k {
		return got, fmt.Errorf("%w: %d valid of %d required", ErrTooFewCosignatures, len(got), k)
	}
	return got, nil
}

// splitNote returns a signed note's text (with its final newline) and its
// signature lines. OpenTreeHead has already checked the note's form.
func splitNote(msg []byte) (string, []string, error) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return "", nil, fmt.Errorf("%w: checkpoint: not a signed note", ErrMalformed)
	}
	lines := strings.Split(strings.TrimSuffix(string(msg[i+2:]), "\n"), "\n")
	return string(msg[:i+1]), lines, nil
}

// findCosignature returns the time of the first valid cosignature by v
// among the note's signature lines.
func findCosignature(v *CosignatureVerifier, text string, lines []string) (time.Time, bool) {
	for _, line := range lines {
		rest, ok := strings.CutPrefix(line, "— ")
		if !ok {
			continue
		}
		name, b64, ok := strings.Cut(rest, " ")
		if !ok || name != v.name {
			continue
		}
		sig, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil || len(sig) < 4 || binary.BigEndian.Uint32(sig) != v.hash {
			continue
		}
		if t, ok := v.verify([]byte(text), sig[4:]); ok {
			return t, true
		}
	}
	return time.Time{}, false
}

// AddCosignatures returns the checkpoint msg with the signature lines
// lines (a witness's add-checkpoint answer, "— ..." lines each ending in
// "\n") appended, skipping lines msg already carries. It checks only the
// lines' form; VerifyCosigned checks them.
//
// Errors: ErrMalformed for a msg that is not a signed note or a line that
// is not a signature line.
func AddCosignatures(msg []byte, lines []byte) ([]byte, error) {
	_, have, err := splitNote(msg)
	if err != nil {
		return nil, err
	}
	known := map[string]bool{}
	for _, l := range have {
		known[l] = true
	}
	out := append([]byte(nil), msg...)
	for _, l := range strings.SplitAfter(string(lines), "\n") {
		if l == "" {
			continue
		}
		line := strings.TrimSuffix(l, "\n")
		if !strings.HasSuffix(l, "\n") || !strings.HasPrefix(line, "— ") || strings.Count(line, " ") != 2 {
			return nil, fmt.Errorf("%w: not a signature line", ErrMalformed)
		}
		if known[line] {
			continue
		}
		known[line] = true
		out = append(out, l...)
	}
	return out, nil
}
