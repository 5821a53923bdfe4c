package export

import (
	"bytes"
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
	// TreePrefix holds, for an export starting after seq 1, the hashes of
	// the complete Merkle subtrees covering the entries before it.
	TreePrefix = "tree-prefix.txt"
)

// Report is what an offline verification found.
type Report struct {
	Manifest  Manifest
	Ledger    *audit.Result // nil when the export has no ledger range
	Tree      audit.TreeHead
	Note      []byte // the verified checkpoint note
	Incidents int    // register entries checked
	// SettingsChecked: the register settings the PDF's header shows are
	// held to their ledger event, in the range or by its inclusion proof
	// (false: none set; settings that are not held to it fail).
	SettingsChecked bool
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

// VerifyDir is VerifyDirTrusted without a trusted checkpoint.
func VerifyDir(dir string, manifestKeys, checkpointKeys map[string]ed25519.PublicKey) (Report, error) {
	return VerifyDirTrusted(dir, manifestKeys, checkpointKeys, nil)
}

// VerifyDirTrusted checks an export directory offline, with nothing but
// trusted public keys:
//
//   - the manifest's signature, and that the directory holds exactly the
//     files the manifest lists, each with its size and SHA-256;
//   - that ledger.jsonl re-hashes into an unbroken chain from the
//     manifest's prev hash at From-1 to its head at To;
//   - that the embedded checkpoint, a C2SP signed note of the Merkle tree
//     checked with the note verifier key of a checkpoint key and the
//     manifest's origin, is at the export's end (size To) and that its root
//     is the one recomputed from the exported entries (and, for From > 1,
//     the complete subtree hashes of tree-prefix.txt); "checkpoint none"
//     is refused;
//   - when trusted (a note this verifier kept) is given: that the export's
//     tree extends it, by recomputing the tree's root at the trusted size
//     from the same entries (a smaller tree is audit.ErrSmallerTree,
//     another root audit.ErrFork);
//   - every register.jsonl record against the exported ledger entries
//     (VerifyRegisterJSONL), register.csv and notices.csv byte for byte
//     against what register.jsonl gives, and register.pdf byte for byte
//     against its rendering from register.jsonl and the manifest
//     (RenderRegisterPDF).
//
// manifestKeys verify the manifest, checkpointKeys the checkpoint; they may
// be the same set. Report.Tree is the verified tree head and Report.Note
// the export's note, for the caller to keep as its next trusted state.
func VerifyDirTrusted(dir string, manifestKeys, checkpointKeys map[string]ed25519.PublicKey, trusted []byte) (Report, error) {
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
		return rep, fmt.Errorf("%w: %w: the export has no ledger range", ErrVerify, audit.ErrEmptyLedger)
	}
	if m.Checkpoint == nil {
		return rep, fmt.Errorf("%w: %w: the manifest says checkpoint none; an export must embed the signed checkpoint of its end", ErrVerify, audit.ErrNoCheckpoint)
	}
	for _, name := range []string{LedgerJSONL, RegisterJSONL} {
		if !slices.Contains(listed, name) {
			return rep, fmt.Errorf("%w: ledger range %d..%d without %s", ErrVerify, m.From, m.To, name)
		}
	}
	head, vkey, err := openNote(m.Checkpoint, m.Origin, checkpointKeys)
	if err != nil {
		return rep, fmt.Errorf("%w: embedded checkpoint: %w", ErrVerify, err)
	}
	if head.Size != m.To {
		return rep, fmt.Errorf("%w: the embedded checkpoint covers %d entries, the export ends at %d", ErrVerify, head.Size, m.To)
	}
	var old audit.TreeHead
	if trusted != nil {
		if old, err = audit.OpenTreeHead(trusted, vkey); err != nil {
			return rep, fmt.Errorf("%w: trusted checkpoint: %w", ErrVerify, err)
		}
		if old.Size > head.Size {
			return rep, fmt.Errorf("%w: %w: the export's tree has %d entries, the trusted checkpoint %d", ErrVerify, audit.ErrSmallerTree, head.Size, old.Size)
		}
		if old.Size+1 < m.From {
			return rep, fmt.Errorf("%w: the trusted checkpoint (size %d) precedes the export's range %d..%d; export from seq %d or earlier", ErrVerify, old.Size, m.From, m.To, old.Size+1)
		}
	}
	tree := &frontier{}
	if m.From > 1 {
		if err := tree.readPrefix(dir, m.From-1); err != nil {
			return rep, err
		}
	}
	checkOld := func() error {
		if trusted != nil && tree.size == old.Size && tree.root() != old.Root {
			return fmt.Errorf("%w: %w: the export's entries 1..%d hash to another root than the trusted checkpoint's", ErrVerify, audit.ErrFork, old.Size)
		}
		return nil
	}
	if err := checkOld(); err != nil {
		return rep, err
	}
	f, err := os.Open(filepath.Join(dir, LedgerJSONL))
	if err != nil {
		return rep, err
	}
	defer f.Close()
	v := audit.NewVerifier(audit.Head{Seq: m.From - 1, Hash: m.Prev}, checkpointKeys)
	events := map[uint64]audit.Record{}
	err = ReadLedgerJSONL(f, func(r audit.Record) error {
		_ = v.Add(r) // every break is kept: Finish returns them all
		if r.Seq != tree.size+1 {
			return fmt.Errorf("%w: ledger entry %d follows tree size %d", ErrVerify, r.Seq, tree.size)
		}
		tree.push(audit.LeafHash(r))
		if err := checkOld(); err != nil {
			return err
		}
		if env, err := audit.DecodeEnvelope(r.Payload); err == nil && IsRegisterKind(env.Kind) {
			events[r.Seq] = r
		}
		return nil
	})
	if err != nil {
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
	if tree.size != head.Size || tree.root() != head.Root {
		return rep, fmt.Errorf("%w: %w: the exported entries hash to another Merkle root than the embedded checkpoint's", ErrVerify, audit.ErrFork)
	}
	rep.Ledger, rep.Tree, rep.Note = &res, head, m.Checkpoint
	rf, err := os.Open(filepath.Join(dir, RegisterJSONL))
	if err != nil {
		return rep, err
	}
	defer rf.Close()
	rhead, files, err := VerifyRegisterJSONL(rf, events, m.From, head)
	if err != nil {
		return rep, err
	}
	rep.Incidents, rep.SettingsChecked = len(files), rhead.SettingsChecked
	for name, write := range map[string]func(io.Writer, []audit.IncidentFile) error{RegisterCSV: WriteRegisterCSV, NoticesCSV: WriteNoticesCSV} {
		if !slices.Contains(listed, name) {
			continue
		}
		var want bytes.Buffer
		if err := write(&want, files); err != nil {
			return rep, err
		}
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return rep, err
		}
		if !bytes.Equal(got, want.Bytes()) {
			return rep, fmt.Errorf("%w: %s does not match %s (edited after export)", ErrVerify, name, RegisterJSONL)
		}
	}
	// The PDF is what an inspector reads: it is rendered again from the
	// verified records and the manifest, and must be those bytes.
	if !slices.Contains(listed, RegisterPDF) {
		return rep, fmt.Errorf("%w: ledger range %d..%d without %s", ErrVerify, m.From, m.To, RegisterPDF)
	}
	var want bytes.Buffer
	if err := RenderRegisterPDF(&want, m, rhead.RegisterHead, files); err != nil {
		return rep, err
	}
	got, err := os.ReadFile(filepath.Join(dir, RegisterPDF))
	if err != nil {
		return rep, err
	}
	if !bytes.Equal(got, want.Bytes()) {
		return rep, fmt.Errorf("%w: %s is not the rendering of %s (edited after export)", ErrVerify, RegisterPDF, RegisterJSONL)
	}
	return rep, nil
}

// openNote opens a tree note with the verifier key of whichever key of
// keys signed it, for origin.
func openNote(msg []byte, origin audit.Name, keys map[string]ed25519.PublicKey) (audit.TreeHead, string, error) {
	err := error(audit.ErrBadSignature)
	ids := make([]string, 0, len(keys))
	for id := range keys {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		vkey, kerr := audit.TreeVerifierKey(origin, keys[id])
		if kerr != nil {
			return audit.TreeHead{}, "", kerr
		}
		h, oerr := audit.OpenTreeHead(msg, vkey)
		if oerr == nil {
			return h, vkey, nil
		}
		err = oerr
	}
	return audit.TreeHead{}, "", err
}
