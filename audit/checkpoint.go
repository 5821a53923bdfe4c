package audit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Checkpoint is a signed statement "the ledger called Origin had Size events
// and its head hash was Head at Time". Checkpoints are stored in the
// database and copied to a directory outside it; an edit, a rewrite or a
// truncation of the chain below a checkpoint's size then contradicts a
// signature that only the key holder can produce.
//
// Text form (every line ends with "\n"; the first five lines are signed):
//
//	cloison audit checkpoint v1
//	origin <Name>
//	size <decimal, no leading zeros>
//	head <64 lowercase hex>
//	time <RFC 3339 UTC, as time.RFC3339Nano writes it>
//	sig <key id: 16 lowercase hex> <standard base64 Ed25519 signature>
type Checkpoint struct {
	Origin    Name
	Size      uint64
	Head      Digest
	Time      time.Time
	KeyID     string
	Signature []byte
}

const checkpointHeader = "cloison audit checkpoint v1"

// KeyID names a public key: the first 8 bytes of its SHA-256, in hex.
func KeyID(pub ed25519.PublicKey) string {
	s := sha256.Sum256(pub)
	return hex.EncodeToString(s[:8])
}

// LegacyOrigin is the origin every deployment had by default before
// DefaultOrigin: a ledger that recorded it keeps it.
const LegacyOrigin Name = "cloison"

// DefaultOrigin returns the origin of a deployment that configures none and
// whose ledger has signed nothing yet: "cloison/" and the KeyID of its log
// key, so that two deployments never share an origin (and a witness or
// monitor following both never mixes their checkpoints).
func DefaultOrigin(logKey ed25519.PublicKey) Name {
	return Name(string(LegacyOrigin) + "/" + KeyID(logKey))
}

// SignCheckpoint returns a checkpoint of head signed by key.
func SignCheckpoint(key ed25519.PrivateKey, origin Name, head Head, at time.Time) (Checkpoint, error) {
	if err := CheckName("origin", string(origin)); err != nil {
		return Checkpoint{}, err
	}
	c := Checkpoint{Origin: origin, Size: head.Seq, Head: head.Hash, Time: at.UTC(), KeyID: KeyID(key.Public().(ed25519.PublicKey))}
	c.Signature = ed25519.Sign(key, c.Body())
	return c, nil
}

// Body returns the signed lines.
func (c Checkpoint) Body() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\norigin %s\nsize %d\nhead %s\ntime %s\n", checkpointHeader, c.Origin, c.Size, c.Head, c.Time.UTC().Format(time.RFC3339Nano))
	return []byte(b.String())
}

// Marshal returns the text form.
func (c Checkpoint) Marshal() []byte {
	b := c.Body()
	return fmt.Appendf(b, "sig %s %s\n", c.KeyID, base64.StdEncoding.EncodeToString(c.Signature))
}

// Verify checks the signature with the key whose KeyID the checkpoint names.
func (c Checkpoint) Verify(keys map[string]ed25519.PublicKey) error {
	pub, ok := keys[c.KeyID]
	if !ok {
		return fmt.Errorf("%w: checkpoint size %d signed by unknown key %s", ErrBadSignature, c.Size, c.KeyID)
	}
	if !ed25519.Verify(pub, c.Body(), c.Signature) {
		return fmt.Errorf("%w: checkpoint size %d", ErrBadSignature, c.Size)
	}
	return nil
}

// KeySet indexes public keys by KeyID.
func KeySet(pubs ...ed25519.PublicKey) map[string]ed25519.PublicKey {
	m := make(map[string]ed25519.PublicKey, len(pubs))
	for _, p := range pubs {
		m[KeyID(p)] = p
	}
	return m
}

// ParseCheckpoint parses the text form strictly: exactly the six lines in
// order, canonical numbers, lowercase hex, and a time that re-formats to the
// same text, so that Parse then Marshal returns the input byte for byte.
// It does not check the signature (see Verify).
func ParseCheckpoint(b []byte) (Checkpoint, error) {
	var c Checkpoint
	bad := func(format string, args ...any) (Checkpoint, error) {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint: %s", ErrMalformed, fmt.Sprintf(format, args...))
	}
	if len(b) > 4096 {
		return bad("too long")
	}
	if !bytes.HasSuffix(b, []byte("\n")) {
		return bad("missing final newline")
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	if len(lines) != 6 {
		return bad("want 6 lines, got %d", len(lines))
	}
	if lines[0] != checkpointHeader {
		return bad("bad header")
	}
	field := func(i int, name string) (string, bool) {
		v, ok := strings.CutPrefix(lines[i], name+" ")
		return v, ok && v != ""
	}
	origin, ok := field(1, "origin")
	if !ok || CheckName("origin", origin) != nil {
		return bad("bad origin line")
	}
	c.Origin = Name(origin)
	size, ok := field(2, "size")
	if !ok {
		return bad("bad size line")
	}
	n, err := parseUint(size)
	if err != nil {
		return bad("size: %v", err)
	}
	c.Size = n
	head, ok := field(3, "head")
	if !ok {
		return bad("bad head line")
	}
	if c.Head, err = ParseDigest(head); err != nil {
		return bad("head: %v", err)
	}
	ts, ok := field(4, "time")
	if !ok {
		return bad("bad time line")
	}
	if c.Time, err = time.Parse(time.RFC3339Nano, ts); err != nil || c.Time.UTC().Format(time.RFC3339Nano) != ts {
		return bad("time %q is not canonical RFC 3339 UTC", ts)
	}
	c.Time = c.Time.UTC()
	sig, ok := field(5, "sig")
	if !ok {
		return bad("bad sig line")
	}
	keyID, sigB64, ok := strings.Cut(sig, " ")
	if !ok || !isLowerHex(keyID, 16) {
		return bad("bad key id")
	}
	c.KeyID = keyID
	s, err := base64.StdEncoding.Strict().DecodeString(sigB64)
	if err != nil || len(s) != ed25519.SignatureSize || base64.StdEncoding.EncodeToString(s) != sigB64 {
		return bad("bad signature encoding")
	}
	c.Signature = s
	return c, nil
}

// parseUint accepts decimal digits without sign or leading zeros.
func parseUint(s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.TrimLeft(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a canonical decimal", s)
	}
	return strconv.ParseUint(s, 10, 64)
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
