package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// A log must never sign a tree inconsistent with one it signed before
// (C2SP tlog-checkpoint). The database cannot be the memory of what was
// signed: whoever holds it can rewrite the events through audit_sequence,
// delete audit_checkpoints and tlog_checkpoints, and restart the node. So
// before it signs, the store proves that the tree (and the chain) it is
// about to sign extend every tree it knows from OUTSIDE the database:
//
//   - the checkpoints in Config.CheckpointDir: the chain checkpoints
//     (WriteCheckpointFile) and the latest tree note
//     (TreeCheckpointFileName), written there before the database row;
//   - Config.TrustedTrees: what the caller learnt elsewhere, in cloisond
//     each witness's latest cosigned checkpoint, asked of the witness at
//     start (audit/witness Client.Latest);
//   - the latest tree note stored in the database that the store's key
//     signed (a rollback that kept it is caught sooner).
//
// Signing a tree head h:
//
//	for each anchor a:  h.Size ≥ a.Size, and tlog.CheckTree(ProveTree(h, a)) from the stored tiles
//	sign; write the note to CheckpointDir; store it; a := h
//
// and a chain head: the stored event at the anchor's seq has the anchor's
// hash. A failure refuses, for good: the store signs nothing more (SignTree,
// Checkpoint, TreeCheckpoint and CosignedCheckpoint answer the
// *SignRefusedError), logs it at error level, counts it (Stats.SignRefusals)
// and writes an incident file into CheckpointDir, outside the database the
// attacker holds. Appends go on (the record of what happens next is
// evidence too), but whatever needs a checkpoint fails closed: the served
// checkpoint and proofs, the witnesses' cosignatures, the exports. A
// restart does not clear it: the anchors are read again.

// ErrSigningRefused: the ledger's tree or chain does not extend a
// checkpoint this log signed before (its state directory) or a witness
// cosigned; the store refuses to sign. It is the code of every
// *SignRefusedError.
var ErrSigningRefused = cloison.NewError(cloison.CodeUnavailable,
	"audit/postgres: the ledger contradicts a checkpoint signed before; no checkpoint is signed")

// TrustedTree is a tree head of this log known outside its database, and
// where it was learnt ("witness NAME", a file name).
type TrustedTree struct {
	audit.TreeHead
	Source string
}

// SignRefusedError is the store's refusal to sign: the head it was asked
// to sign (Size, Root for a tree; Seq for a chain head) contradicts Anchor.
// errors.Is holds for ErrSigningRefused and for the reason (audit.ErrFork,
// audit.ErrSmallerTree).
type SignRefusedError struct {
	What   string // "tree" or "chain"
	Anchor TrustedTree
	Size   uint64
	Root   tlog.Hash
	At     time.Time
	Reason error // audit.ErrFork or audit.ErrSmallerTree, wrapped with detail
}

func (e *SignRefusedError) Error() string {
	return fmt.Sprintf("audit/postgres: refusing to sign the %s of size %d: it contradicts size %d from %s: %v",
		e.What, e.Size, e.Anchor.Size, e.Anchor.Source, e.Reason)
}

// Unwrap gives ErrSigningRefused and the reason.
func (e *SignRefusedError) Unwrap() []error { return []error{ErrSigningRefused, e.Reason} }

// ErrorCode is ErrSigningRefused's.
func (e *SignRefusedError) ErrorCode() cloison.Code { return cloison.CodeUnavailable }

// TreeCheckpointFileName is the file in CheckpointDir holding the latest
// tree note (C2SP tlog-checkpoint) the store signed, replaced atomically
// by a larger one. It does not end in ".checkpoint": LoadCheckpointFiles
// reads chain checkpoints only.
func TreeCheckpointFileName(origin audit.Name) string {
	return strings.NewReplacer("/", "_", ":", "_").Replace(string(origin)) + ".tree-note"
}

// chainAnchor is the latest chain checkpoint in CheckpointDir.
type chainAnchor struct {
	seq    uint64
	hash   audit.Digest
	source string
}

// loadAnchors reads what the store knows of its own past outside the
// database, before anything is signed. Called by Open with a signer.
func (s *Store) loadAnchors(ctx context.Context) error {
	var trees []TrustedTree
	trees = append(trees, s.cfg.TrustedTrees...)
	if dir := s.cfg.CheckpointDir; dir != "" {
		path := filepath.Join(dir, TreeCheckpointFileName(s.cfg.Origin))
		b, err := os.ReadFile(path)
		switch {
		case errors.Is(err, os.ErrNotExist):
		case err != nil:
			return fmt.Errorf("audit/postgres: %w", err)
		default:
			h, err := stateTreeHead(b, s.verifierKey, s.cfg.Origin)
			if err != nil {
				return fmt.Errorf("audit/postgres: %s: %w", path, err)
			}
			trees = append(trees, TrustedTree{h, path})
			s.fileSize = h.Size
		}
		files, err := LoadCheckpointFiles(dir)
		if err != nil {
			return err
		}
		for _, f := range files {
			// The node's own directory: a checkpoint of this origin is
			// one it signed, under this key or one it rotated from.
			if f.Origin != s.cfg.Origin {
				continue
			}
			if s.chainAnchor == nil || f.Size > s.chainAnchor.seq {
				s.chainAnchor = &chainAnchor{seq: f.Size, hash: f.Head, source: f.Source}
			}
		}
	}
	if msg, err := s.TreeCheckpoint(ctx); err == nil {
		if h, err := audit.OpenTreeHead(msg, s.verifierKey); err == nil {
			trees = append(trees, TrustedTree{h, "the database's latest tree note"})
		}
	} else if !errors.Is(err, audit.ErrNoCheckpoint) {
		return err
	}
	s.anchors = trees
	return nil
}

// stateTreeHead reads the tree note file: signed by the current key, or,
// after a rotation of the log key, by an earlier one (the node wrote it
// into its own directory; its tree is what it signed all the same).
func stateTreeHead(b []byte, vkey string, origin audit.Name) (audit.TreeHead, error) {
	if h, err := audit.OpenTreeHead(b, vkey); err == nil {
		return h, nil
	}
	i := bytes.Index(b, []byte("\n\n"))
	if i < 0 {
		return audit.TreeHead{}, fmt.Errorf("%w: not a signed note", audit.ErrMalformed)
	}
	return audit.ParseTreeHead(string(b[:i+1]), origin)
}

// proveTree checks that h extends every anchor, refusing for good if not.
// A database error is returned as is: it proves nothing either way.
func (s *Store) proveTree(ctx context.Context, h audit.TreeHead) error {
	s.noteMu.Lock()
	anchors, refused := s.anchors, s.refused
	s.noteMu.Unlock()
	if refused != nil {
		return refused
	}
	for _, a := range anchors {
		var why error
		switch {
		case h.Size < a.Size:
			why = fmt.Errorf("%w: size %d after size %d", audit.ErrSmallerTree, h.Size, a.Size)
		case h.Size == a.Size:
			if h.Root != a.Root {
				why = fmt.Errorf("%w: two roots at size %d", audit.ErrFork, h.Size)
			}
		default:
			proof, err := tlog.ProveTree(int64(h.Size), int64(a.Size), &treeReader{ctx: ctx, q: s.scan})
			if err != nil {
				return translate(err)
			}
			if err := tlog.CheckTree(proof, int64(h.Size), h.Root, int64(a.Size), a.Root); err != nil {
				why = fmt.Errorf("%w: size %d does not extend size %d: %v", audit.ErrFork, h.Size, a.Size, err)
			}
		}
		if why != nil {
			return s.refuse(&SignRefusedError{What: "tree", Anchor: a, Size: h.Size, Root: h.Root, At: time.Now().UTC(), Reason: why})
		}
	}
	return nil
}

// signedTree makes h, just signed and written, the only tree anchor: it
// extends every earlier one.
func (s *Store) signedTree(h audit.TreeHead) {
	s.noteMu.Lock()
	defer s.noteMu.Unlock()
	for _, a := range s.anchors {
		if a.Size > h.Size {
			return // a concurrent signing went further
		}
	}
	s.anchors = []TrustedTree{{h, "signed by this store"}}
}

// proveChain checks that the stored chain at the chain anchor's seq still
// has the anchor's hash and that head does not end before it.
func (s *Store) proveChain(ctx context.Context, head audit.Head) error {
	s.noteMu.Lock()
	a, refused := s.chainAnchor, s.refused
	s.noteMu.Unlock()
	if refused != nil {
		return refused
	}
	if a == nil {
		return nil
	}
	refuse := func(why error) error {
		return s.refuse(&SignRefusedError{What: "chain", Anchor: TrustedTree{TreeHead: audit.TreeHead{Origin: s.cfg.Origin, Size: a.seq}, Source: a.source},
			Size: head.Seq, At: time.Now().UTC(), Reason: why})
	}
	if head.Seq < a.seq {
		return refuse(fmt.Errorf("%w: chain head %d before checkpoint %d", audit.ErrSmallerTree, head.Seq, a.seq))
	}
	var hash []byte
	if err := s.scan.QueryRow(ctx, "SELECT hash FROM audit_events WHERE seq = $1", int64(a.seq)).Scan(&hash); err != nil {
		return translate(err)
	}
	if string(hash) != string(a.hash[:]) {
		return refuse(fmt.Errorf("%w: the event at seq %d does not have the checkpointed chain hash", audit.ErrFork, a.seq))
	}
	return nil
}

// signedChain makes head the chain anchor.
func (s *Store) signedChain(c audit.Checkpoint, source string) {
	s.noteMu.Lock()
	defer s.noteMu.Unlock()
	if s.chainAnchor == nil || c.Size > s.chainAnchor.seq {
		s.chainAnchor = &chainAnchor{seq: c.Size, hash: c.Head, source: source}
	}
}

// refuse records e (the first refusal stays: later calls answer it), logs
// it, counts it, writes the incident file and calls
// Config.OnSigningRefused. It returns the refusal in force.
func (s *Store) refuse(e *SignRefusedError) error {
	s.noteMu.Lock()
	s.signRefusals++
	first := s.refused == nil
	if first {
		s.refused = e
	}
	cur := s.refused
	s.noteMu.Unlock()
	if !first {
		return cur
	}
	s.cfg.Logger.Error("audit: REFUSING TO SIGN: the ledger contradicts a checkpoint signed before (rewritten, rolled back or truncated database)",
		"what", e.What, "size", e.Size, "anchor_size", e.Anchor.Size, "anchor_source", e.Anchor.Source, "err", e.Reason)
	if s.cfg.CheckpointDir != "" {
		if path, err := writeRefusal(s.cfg.CheckpointDir, s.cfg.Origin, e); err != nil {
			s.cfg.Logger.Error("audit: the signing refusal's incident file could not be written", "err", err)
		} else {
			s.cfg.Logger.Error("audit: signing refusal recorded", "incident_file", path)
		}
	}
	if s.cfg.OnSigningRefused != nil {
		s.alarms.Add(1)
		go func() {
			defer s.alarms.Done()
			s.cfg.OnSigningRefused(s, e)
		}()
	}
	return cur
}

// refusalRecord is the incident file's content: what the store was asked
// to sign and what it contradicts.
type refusalRecord struct {
	Incident     string    `json:"incident"`
	Origin       string    `json:"origin"`
	At           time.Time `json:"at"`
	What         string    `json:"what"`
	Size         uint64    `json:"size"`
	Root         string    `json:"root,omitempty"`
	AnchorSize   uint64    `json:"anchor_size"`
	AnchorRoot   string    `json:"anchor_root,omitempty"`
	AnchorSource string    `json:"anchor_source"`
	Reason       string    `json:"reason"`
}

// RefusalFilePrefix begins the name of every incident file a refusal
// writes into CheckpointDir.
const RefusalFilePrefix = "signing-refused-"

func writeRefusal(dir string, origin audit.Name, e *SignRefusedError) (string, error) {
	rec := refusalRecord{Incident: "ledger.signing_refused", Origin: string(origin), At: e.At, What: e.What, Size: e.Size,
		AnchorSize: e.Anchor.Size, AnchorSource: e.Anchor.Source, Reason: e.Reason.Error()}
	if e.What == "tree" {
		rec.Root, rec.AnchorRoot = e.Root.String(), e.Anchor.Root.String()
	}
	b, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s%s.json", RefusalFilePrefix, e.At.Format("20060102T150405.000000000Z"))
	return filepath.Join(dir, name), writeFileDurably(dir, name, append(b, '\n'))
}

// writeTreeNote replaces the tree note file in dir by msg (size h.Size)
// when it is larger than the one there.
func (s *Store) writeTreeNote(h audit.TreeHead, msg []byte) error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	if h.Size <= s.fileSize {
		return nil
	}
	if err := writeFileDurably(s.cfg.CheckpointDir, TreeCheckpointFileName(s.cfg.Origin), msg); err != nil {
		return err
	}
	s.fileSize = h.Size
	return nil
}

// writeFileDurably writes dir/name: temporary file, fsync, rename, fsync
// of the directory.
func writeFileDurably(dir, name string, b []byte) error {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("audit/postgres: checkpoint dir: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".write-*")
	if err != nil {
		return fmt.Errorf("audit/postgres: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("audit/postgres: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("audit/postgres: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("audit/postgres: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, name)); err != nil {
		return fmt.Errorf("audit/postgres: %w", err)
	}
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("audit/postgres: %w", err)
	}
	defer d.Close()
	return d.Sync()
}

// SigningRefused returns the refusal in force (nil: none).
func (s *Store) SigningRefused() error {
	s.noteMu.Lock()
	defer s.noteMu.Unlock()
	if s.refused == nil {
		return nil
	}
	return s.refused
}

// proveCommitted proves the committed global tree against the anchors
// (an empty ledger has nothing to prove).
func (s *Store) proveCommitted(ctx context.Context) error {
	h, err := s.committedTreeHead(ctx)
	if errors.Is(err, audit.ErrEmptyLedger) {
		return nil
	}
	if err != nil {
		return err
	}
	return s.proveTree(ctx, h)
}

// proveAtOpen proves the committed tree and chain against the anchors
// once at start, so that a restarted node over a rewritten database
// refuses at once, not at its first checkpoint.
func (s *Store) proveAtOpen(ctx context.Context) error {
	h, err := s.committedTreeHead(ctx)
	if errors.Is(err, audit.ErrEmptyLedger) {
		h, err = audit.TreeHead{Origin: s.cfg.Origin}, nil
	}
	if err != nil {
		return err
	}
	if err := s.proveTree(ctx, h); err != nil {
		return err
	}
	head, err := headOn(ctx, s.scan)
	if err != nil {
		return err
	}
	return s.proveChain(ctx, head)
}
