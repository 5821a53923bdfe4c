package export

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Sentinel errors.
var (
	// ErrMalformedManifest: a manifest that does not parse.
	ErrMalformedManifest = cloison.NewError(cloison.CodeInvalid, "export: malformed manifest")
	// ErrVerify: an export that does not match its manifest (file missing,
	// extra, altered) or whose manifest signature fails.
	ErrVerify = cloison.NewError(cloison.CodeConflict, "export: verification failed")
)

// ManifestName is the manifest's file name inside an export directory.
const ManifestName = "manifest.txt"

// File is one exported file.
type File struct {
	Name   string
	Size   int64
	SHA256 audit.Digest
}

// Manifest describes an export and is signed with Ed25519. Text form (every
// line ends with "\n"; all lines but the last are signed):
//
//	cloison export manifest v1
//	created <RFC 3339 UTC>
//	origin <ledger Name>
//	ledger <from> <to>            (0 0: no ledger range)
//	prev <hash at from-1>
//	head <hash at to>
//	checkpoint <base64 of the signed tree note> | checkpoint none
//	                              (a C2SP tlog-checkpoint note of size <to>;
//	                              VerifyDir refuses none)
//	file <sha256> <size> <name>   (one per file, sorted by name)
//	sig <key id> <base64 signature>
type Manifest struct {
	Created    time.Time
	Origin     audit.Name
	From, To   uint64
	Prev, Head audit.Digest
	// Checkpoint is the signed note (C2SP tlog-checkpoint) of the ledger's
	// Merkle tree at size To; nil is written "checkpoint none".
	Checkpoint []byte
	Files      []File
	KeyID      string
	Signature  []byte
}

const manifestHeader = "cloison export manifest v1"

var fileName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$`)

// Body returns the signed part.
func (m Manifest) Body() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\ncreated %s\norigin %s\nledger %d %d\nprev %s\nhead %s\n", manifestHeader,
		m.Created.UTC().Format(time.RFC3339Nano), m.Origin, m.From, m.To, m.Prev, m.Head)
	if m.Checkpoint == nil {
		b.WriteString("checkpoint none\n")
	} else {
		fmt.Fprintf(&b, "checkpoint %s\n", base64.StdEncoding.EncodeToString(m.Checkpoint))
	}
	for _, f := range m.Files {
		fmt.Fprintf(&b, "file %s %d %s\n", f.SHA256, f.Size, f.Name)
	}
	return b.Bytes()
}

// Marshal returns the text form.
func (m Manifest) Marshal() []byte {
	return fmt.Appendf(m.Body(), "sig %s %s\n", m.KeyID, base64.StdEncoding.EncodeToString(m.Signature))
}

// Sign sorts the files and signs the manifest with key.
func (m *Manifest) Sign(key ed25519.PrivateKey) error {
	slices.SortFunc(m.Files, func(a, b File) int { return strings.Compare(a.Name, b.Name) })
	for i, f := range m.Files {
		if !fileName.MatchString(f.Name) || f.Name == ManifestName || (i > 0 && m.Files[i-1].Name == f.Name) {
			return fmt.Errorf("%w: file name %q", ErrMalformedManifest, f.Name)
		}
	}
	m.Created = m.Created.UTC()
	m.KeyID = audit.KeyID(key.Public().(ed25519.PublicKey))
	m.Signature = ed25519.Sign(key, m.Body())
	return nil
}

// Verify checks the signature against trusted keys.
func (m Manifest) Verify(keys map[string]ed25519.PublicKey) error {
	pub, ok := keys[m.KeyID]
	if !ok {
		return fmt.Errorf("%w: manifest signed by unknown key %s", ErrVerify, m.KeyID)
	}
	if !ed25519.Verify(pub, m.Body(), m.Signature) {
		return fmt.Errorf("%w: manifest signature does not verify", ErrVerify)
	}
	return nil
}

// ParseManifest parses the text form strictly, so that Marshal returns the
// input byte for byte. It does not check the signature.
func ParseManifest(b []byte) (Manifest, error) {
	var m Manifest
	bad := func(format string, args ...any) (Manifest, error) {
		return Manifest{}, fmt.Errorf("%w: %s", ErrMalformedManifest, fmt.Sprintf(format, args...))
	}
	if len(b) > 1<<20 {
		return bad("too long")
	}
	if !bytes.HasSuffix(b, []byte("\n")) {
		return bad("missing final newline")
	}
	lines := strings.Split(string(b[:len(b)-1]), "\n")
	if len(lines) < 8 || lines[0] != manifestHeader {
		return bad("bad header or too few lines")
	}
	field := func(i int, name string) (string, bool) {
		v, ok := strings.CutPrefix(lines[i], name+" ")
		return v, ok && v != ""
	}
	v, ok := field(1, "created")
	t, err := time.Parse(time.RFC3339Nano, v)
	if !ok || err != nil || t.UTC().Format(time.RFC3339Nano) != v {
		return bad("bad created line")
	}
	m.Created = t.UTC()
	v, ok = field(2, "origin")
	if !ok || audit.CheckName("origin", v) != nil {
		return bad("bad origin line")
	}
	m.Origin = audit.Name(v)
	v, ok = field(3, "ledger")
	from, to, ok2 := strings.Cut(v, " ")
	if !ok || !ok2 {
		return bad("bad ledger line")
	}
	if m.From, err = parseUint(from); err != nil {
		return bad("ledger from: %v", err)
	}
	if m.To, err = parseUint(to); err != nil {
		return bad("ledger to: %v", err)
	}
	if m.To < m.From || (m.From == 0) != (m.To == 0) {
		return bad("ledger range %d..%d", m.From, m.To)
	}
	for i, name := range []string{"prev", "head"} {
		v, ok := field(4+i, name)
		d, err := audit.ParseDigest(v)
		if !ok || err != nil {
			return bad("bad %s line", name)
		}
		if i == 0 {
			m.Prev = d
		} else {
			m.Head = d
		}
	}
	v, ok = field(6, "checkpoint")
	if !ok {
		return bad("bad checkpoint line")
	}
	if v != "none" {
		raw, err := base64.StdEncoding.Strict().DecodeString(v)
		if err != nil || len(raw) == 0 || base64.StdEncoding.EncodeToString(raw) != v {
			return bad("checkpoint encoding")
		}
		m.Checkpoint = raw
	}
	last := len(lines) - 1
	for i := 7; i < last; i++ {
		v, ok := field(i, "file")
		parts := strings.SplitN(v, " ", 3)
		if !ok || len(parts) != 3 {
			return bad("bad file line %d", i+1)
		}
		d, err := audit.ParseDigest(parts[0])
		if err != nil {
			return bad("file digest: %v", err)
		}
		size, err := parseUint(parts[1])
		if err != nil || size > 1<<62 {
			return bad("file size: %v", err)
		}
		if !fileName.MatchString(parts[2]) || parts[2] == ManifestName || (len(m.Files) > 0 && m.Files[len(m.Files)-1].Name >= parts[2]) {
			return bad("file name %q (names are unique, sorted, [A-Za-z0-9._-])", parts[2])
		}
		m.Files = append(m.Files, File{Name: parts[2], Size: int64(size), SHA256: d})
	}
	v, ok = field(last, "sig")
	keyID, sig, ok2 := strings.Cut(v, " ")
	if !ok || !ok2 || len(keyID) != 16 || strings.Trim(keyID, "0123456789abcdef") != "" {
		return bad("bad sig line")
	}
	s, err := base64.StdEncoding.Strict().DecodeString(sig)
	if err != nil || len(s) != ed25519.SignatureSize || base64.StdEncoding.EncodeToString(s) != sig {
		return bad("bad signature encoding")
	}
	m.KeyID, m.Signature = keyID, s
	return m, nil
}

func parseUint(s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.Trim(s, "0123456789") != "" {
		return 0, fmt.Errorf("%q is not a canonical decimal", s)
	}
	return strconv.ParseUint(s, 10, 64)
}
