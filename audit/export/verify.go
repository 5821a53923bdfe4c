package export

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/cloison/cloison/audit"
)

// File names inside an export directory.
const (
	LedgerJSONL = "ledger.jsonl"
	LedgerCSV   = "ledger.csv"
	RegisterCSV = "register.csv"
	NoticesCSV  = "notices.csv"
	RegisterPDF = "register.pdf"
)

// Report is what an offline verification found.
type Report struct {
	Manifest Manifest
	Ledger   *audit.Result // nil when the export has no ledger range
}

// HashFile returns a file's size and SHA-256.
func HashFile(path string) (int64, audit.Digest, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, audit.Digest{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return 0, audit.Digest{}, err
	}
	var d audit.Digest
	copy(d[:], h.Sum(nil))
	return n, d, nil
}

// VerifyDir checks an export directory offline, with nothing but trusted
// public keys: the manifest's signature; that the directory holds exactly
// the files the manifest lists, each with its size and SHA-256; that
// ledger.jsonl re-hashes into an unbroken chain from the manifest's prev
// hash at From-1 to its head at To; and that the embedded checkpoint (signed
// by the ledger's checkpoint key) matches the chain at its size.
//
// manifestKeys verify the manifest, checkpointKeys the checkpoint; they may
// be the same set.
func VerifyDir(dir string, manifestKeys, checkpointKeys map[string]ed25519.PublicKey) (Report, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return Report{}, fmt.Errorf("%w: %v", ErrVerify, err)
	}
	m, err := ParseManifest(b)
	if err != nil {
		return Report{}, err
	}
	if err := m.Verify(manifestKeys); err != nil {
		return Report{}, err
	}
	rep := Report{Manifest: m}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return rep, err
	}
	var present []string
	for _, e := range entries {
		if e.Name() != ManifestName {
			present = append(present, e.Name())
		}
	}
	var listed []string
	for _, f := range m.Files {
		listed = append(listed, f.Name)
		size, d, err := HashFile(filepath.Join(dir, f.Name))
		if err != nil {
			return rep, fmt.Errorf("%w: %s: %v", ErrVerify, f.Name, err)
		}
		if size != f.Size || d != f.SHA256 {
			return rep, fmt.Errorf("%w: %s has size %d and SHA-256 %s, the manifest says %d and %s", ErrVerify, f.Name, size, d, f.Size, f.SHA256)
		}
	}
	slices.Sort(present)
	if !slices.Equal(present, listed) {
		return rep, fmt.Errorf("%w: directory holds %v, the manifest lists %v", ErrVerify, present, listed)
	}
	if m.To == 0 {
		return rep, nil
	}
	if !slices.Contains(listed, LedgerJSONL) {
		return rep, fmt.Errorf("%w: ledger range %d..%d without %s", ErrVerify, m.From, m.To, LedgerJSONL)
	}
	f, err := os.Open(filepath.Join(dir, LedgerJSONL))
	if err != nil {
		return rep, err
	}
	defer f.Close()
	v := audit.NewVerifier(audit.Head{Seq: m.From - 1, Hash: m.Prev}, checkpointKeys)
	if m.Checkpoint != nil {
		if m.Checkpoint.Size < m.From || m.Checkpoint.Size > m.To {
			return rep, fmt.Errorf("%w: checkpoint size %d outside the range %d..%d", ErrVerify, m.Checkpoint.Size, m.From, m.To)
		}
		if err := v.AddCheckpoint(*m.Checkpoint, "manifest"); err != nil {
			return rep, err
		}
	}
	if err := ReadLedgerJSONL(f, v.Add); err != nil {
		return rep, err
	}
	res, err := v.Finish()
	if err != nil {
		return rep, err
	}
	if res.Head.Seq != m.To || res.Head.Hash != m.Head {
		var be = &audit.BreakError{Seq: res.Head.Seq + 1, Reason: audit.ReasonRangeEnd,
			Detail: fmt.Sprintf("export ends at seq %d (%s), the manifest says %d (%s)", res.Head.Seq, res.Head.Hash, m.To, m.Head)}
		return rep, errors.Join(ErrVerify, be)
	}
	rep.Ledger = &res
	return rep, nil
}
