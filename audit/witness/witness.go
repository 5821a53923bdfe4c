package witness

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
	"github.com/cloison/cloison/audit"
)

// Errors of AddCheckpoint, each with the HTTP status the C2SP tlog-witness
// protocol gives it (StatusOf).
var (
	// ErrBadRequest (400): a body that is not an add-checkpoint request, an
	// old size above the checkpoint's, a proof given from size 0.
	ErrBadRequest = cloison.NewError(cloison.CodeInvalid, "witness: malformed add-checkpoint request")
	// ErrUnknownLog (404): a checkpoint whose origin the witness is not
	// configured for.
	ErrUnknownLog = cloison.NewError(cloison.CodeNotFound, "witness: unknown log")
	// ErrBadSignature (403): no signature by a trusted key of the origin
	// verifies.
	ErrBadSignature = cloison.NewError(cloison.CodePermissionDenied, "witness: checkpoint not signed by the log's key")
	// ErrBadProof (422): the consistency proof from the size the witness
	// last cosigned does not verify: the checkpoint is not an extension of
	// it (a fork, a rewritten log).
	ErrBadProof = cloison.NewError(cloison.CodeConflict, "witness: consistency proof does not verify")
)

// ConflictError (409) is a request whose old size is not the size the
// witness last cosigned (Size), or a checkpoint of that same size with
// another root (SameSize: a fork). errors.Is(err, audit.ErrFork) holds for
// the latter.
type ConflictError struct {
	Size     uint64 // the size of the latest checkpoint the witness cosigned
	SameSize bool   // the checkpoint has Size leaves and another root
}

func (e *ConflictError) Error() string {
	if e.SameSize {
		return fmt.Sprintf("witness: another root at the cosigned size %d", e.Size)
	}
	return fmt.Sprintf("witness: old size is not the cosigned size %d", e.Size)
}

// ErrorCode is CodeConflict.
func (e *ConflictError) ErrorCode() cloison.Code { return cloison.CodeConflict }

// Is makes a same-size conflict an audit.ErrFork.
func (e *ConflictError) Is(target error) bool { return e.SameSize && target == audit.ErrFork }

// StatusOf returns the HTTP status of an AddCheckpoint error.
func StatusOf(err error) int {
	var ce *ConflictError
	switch {
	case err == nil:
		return http.StatusOK
	case errors.As(err, &ce):
		return http.StatusConflict
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnknownLog), errors.Is(err, ErrNothingCosigned):
		return http.StatusNotFound
	case errors.Is(err, ErrBadSignature):
		return http.StatusForbidden
	case errors.Is(err, ErrBadProof):
		return http.StatusUnprocessableEntity
	}
	return http.StatusInternalServerError
}

// MaxRequestBytes bounds an add-checkpoint body: 63 proof lines and a note
// with a few dozen signatures fit in far less.
const MaxRequestBytes = 64 << 10

// MaxProofLines is the most consistency proof lines a request may carry.
const MaxProofLines = 63

// Config configures a Witness.
type Config struct {
	// Name is the witness's key name (a schema-less URL, e.g.
	// "witness.example.org/w1"): its cosignature lines carry it.
	Name string
	// Key is the witness's own Ed25519 key; it signs nothing else.
	Key ed25519.PrivateKey
	// Logs are the note verifier keys of the logs it witnesses (what
	// audit.TreeVerifierKey publishes); a log's origin is its key name,
	// and a log may have several keys.
	Logs []string
	// StatePath is the file holding, for each log, the latest checkpoint
	// cosigned. It is replaced atomically (write, fsync, rename, fsync
	// directory) before any cosignature leaves. A witness whose state file
	// is lost must get a new key, never restart empty with the old one.
	StatePath string
	// Logger receives refused requests (evidence of a misbehaving log)
	// and state errors. Nil: slog.Default().
	Logger *slog.Logger
	// Now timestamps cosignatures (nil: time.Now).
	Now func() time.Time
}

// treeState is what the witness remembers of one log.
type treeState struct {
	Size uint64 `json:"size"`
	Root string `json:"root"` // standard base64
	// Note is the log's signed checkpoint it cosigned last (the log's
	// signatures only), served by GET /cosigned-checkpoint. Absent in a
	// state written before it was kept: that log's checkpoint is served
	// once the witness cosigns again.
	Note string `json:"note,omitempty"`
}

type stateFile struct {
	Version int                  `json:"version"`
	Logs    map[string]treeState `json:"logs"`
}

// Witness is a C2SP tlog-witness: an http.Handler serving POST
// /add-checkpoint. It is safe for concurrent use; requests for one witness
// are serialised from the state check to the state write, so two requests
// can never roll each other back.
type Witness struct {
	name   string
	signer note.Signer
	vkey   string
	logs   map[string]note.Verifiers // origin → its keys
	path   string
	log    *slog.Logger

	mu    sync.Mutex // guards state and the state file
	state map[string]treeState
}

// New returns a witness with cfg, loading its state file (absent: a new
// witness that has cosigned nothing).
//
// Errors: cloison.CodeInvalid for a bad name, key or log key, or a state
// file that does not parse (a witness never guesses its state); the
// file's read error.
func New(cfg Config) (*Witness, error) {
	if cfg.StatePath == "" {
		return nil, cloison.NewError(cloison.CodeInvalid, "witness: a state file is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	signer, err := audit.NewCosigner(cfg.Name, cfg.Key, cfg.Now)
	if err != nil {
		return nil, err
	}
	vkey, err := audit.CosignerVerifierKey(cfg.Name, cfg.Key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	if len(cfg.Logs) == 0 {
		return nil, cloison.NewError(cloison.CodeInvalid, "witness: no log to witness")
	}
	logs := map[string]note.Verifiers{}
	byOrigin := map[string][]note.Verifier{}
	for _, k := range cfg.Logs {
		v, err := note.NewVerifier(k)
		if err != nil {
			return nil, cloison.Errorf(cloison.CodeInvalid, "witness: log key %q: %v", k, err)
		}
		byOrigin[v.Name()] = append(byOrigin[v.Name()], v)
	}
	for o, vs := range byOrigin {
		logs[o] = note.VerifierList(vs...)
	}
	w := &Witness{name: cfg.Name, signer: signer, vkey: vkey, logs: logs, path: cfg.StatePath, log: cfg.Logger,
		state: map[string]treeState{}}
	b, err := os.ReadFile(cfg.StatePath)
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		var sf stateFile
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&sf); err != nil || sf.Version != 1 {
			return nil, cloison.Errorf(cloison.CodeInvalid, "witness: state file %s does not parse", cfg.StatePath)
		}
		for o, st := range sf.Logs {
			if _, err := parseRoot(st.Root); err != nil || st.Size == 0 {
				return nil, cloison.Errorf(cloison.CodeInvalid, "witness: state file %s: bad entry for %q", cfg.StatePath, o)
			}
			w.state[o] = st
		}
	}
	return w, nil
}

// VerifierKey returns the witness's published cosignature vkey
// (audit.CosignerVerifierKey), what verifiers pass to
// audit.VerifyCosigned.
func (w *Witness) VerifierKey() string { return w.vkey }

// Size returns the size of the latest checkpoint of origin the witness
// cosigned (0: none).
func (w *Witness) Size(origin string) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state[origin].Size
}

// CosignedCheckpointPath is the witness's answer to "what is the latest
// tree of this log you cosigned": GET CosignedCheckpointPath?origin=O. It
// is not part of C2SP tlog-witness (which only accepts submissions); the
// verifiers that must not trust the log's database ask it (Client.Latest).
const CosignedCheckpointPath = "/cosigned-checkpoint"

// ServeHTTP serves POST /add-checkpoint and GET /cosigned-checkpoint.
func (w *Witness) ServeHTTP(rw http.ResponseWriter, r *http.Request) {
	if r.URL.Path == CosignedCheckpointPath {
		w.serveLatest(rw, r)
		return
	}
	if r.URL.Path != "/add-checkpoint" {
		http.NotFound(rw, r)
		return
	}
	if r.Method != http.MethodPost {
		rw.Header().Set("Allow", http.MethodPost)
		http.Error(rw, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, MaxRequestBytes))
	if err != nil {
		http.Error(rw, "request body too large or unreadable", http.StatusBadRequest)
		return
	}
	cosig, err := w.AddCheckpoint(body)
	var ce *ConflictError
	if errors.As(err, &ce) {
		rw.Header().Set("Content-Type", "text/x.tlog.size")
		rw.WriteHeader(http.StatusConflict)
		fmt.Fprintf(rw, "%d\n", ce.Size)
		return
	}
	if err != nil {
		status := StatusOf(err)
		if status == http.StatusInternalServerError {
			w.log.Error("witness: add-checkpoint", "err", err)
			http.Error(rw, "internal error", status)
			return
		}
		// The sentinel's message only: no detail of the witness's state.
		http.Error(rw, publicMessage(err), status)
		return
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = rw.Write(cosig)
}

// serveLatest answers GET /cosigned-checkpoint?origin=O with the log's
// checkpoint it cosigned last, cosigned again now: the fresh timestamp says
// that at this time it had seen no larger tree of the log. 404: an unknown
// origin, or nothing cosigned yet.
func (w *Witness) serveLatest(rw http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		rw.Header().Set("Allow", http.MethodGet)
		http.Error(rw, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	msg, err := w.Latest(r.URL.Query().Get("origin"))
	if err != nil {
		http.Error(rw, publicMessage(err), StatusOf(err))
		return
	}
	rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = rw.Write(msg)
}

// ErrNothingCosigned (404): the witness has cosigned no checkpoint of the
// log (or none since it began keeping them).
var ErrNothingCosigned = cloison.NewError(cloison.CodeNotFound, "witness: no cosigned checkpoint of this log")

// Latest returns the checkpoint of origin the witness cosigned last, with
// the log's signatures and a cosignature made now.
//
// Errors: ErrUnknownLog; ErrNothingCosigned; a signing error.
func (w *Witness) Latest(origin string) ([]byte, error) {
	keys, ok := w.logs[origin]
	if !ok {
		return nil, ErrUnknownLog
	}
	w.mu.Lock()
	st := w.state[origin]
	w.mu.Unlock()
	if st.Note == "" {
		return nil, ErrNothingCosigned
	}
	n, err := note.Open([]byte(st.Note), keys)
	if err != nil {
		return nil, fmt.Errorf("witness: stored checkpoint of %q: %w", origin, err)
	}
	return note.Sign(&note.Note{Text: n.Text, Sigs: n.Sigs}, w.signer)
}

func publicMessage(err error) string {
	for _, s := range []*cloison.Error{ErrBadRequest, ErrUnknownLog, ErrBadSignature, ErrBadProof, ErrNothingCosigned} {
		if errors.Is(err, s) {
			return s.Message
		}
	}
	return "refused"
}

// request is a parsed add-checkpoint body.
type request struct {
	old   uint64
	proof tlog.TreeProof
	note  []byte
}

// parseRequest parses an add-checkpoint body: "old <size>\n", at most 63
// base64 hash lines, an empty line, then the signed checkpoint.
func parseRequest(body []byte) (request, error) {
	bad := func(why string) (request, error) {
		return request{}, fmt.Errorf("%w: %s", ErrBadRequest, why)
	}
	head, n, ok := bytes.Cut(body, []byte("\n\n"))
	if !ok {
		return bad("no empty line before the checkpoint")
	}
	lines := strings.Split(string(head), "\n")
	size, ok := strings.CutPrefix(lines[0], "old ")
	if !ok {
		return bad("no old size line")
	}
	old, err := parseSize(size)
	if err != nil {
		return bad("bad old size")
	}
	if len(lines)-1 > MaxProofLines {
		return bad("too many proof lines")
	}
	r := request{old: old, note: n}
	for _, l := range lines[1:] {
		h, err := parseRoot(l)
		if err != nil {
			return bad("bad proof line")
		}
		r.proof = append(r.proof, h)
	}
	if old == 0 && len(r.proof) > 0 {
		return bad("a proof from size 0")
	}
	return r, nil
}

// parseSize parses a decimal without leading zeros.
func parseSize(s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') || strings.Trim(s, "0123456789") != "" {
		return 0, errors.New("not a canonical decimal")
	}
	n, err := strconv.ParseUint(s, 10, 63)
	return n, err
}

func parseRoot(s string) (tlog.Hash, error) {
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != tlog.HashSize {
		return tlog.Hash{}, errors.New("not a base64 hash")
	}
	var h tlog.Hash
	copy(h[:], b)
	return h, nil
}

// checkpoint is the part of a C2SP checkpoint a witness checks: origin,
// size, root; extension lines are cosigned but not interpreted.
type checkpoint struct {
	origin string
	size   uint64
	root   tlog.Hash
}

func parseCheckpoint(text string) (checkpoint, error) {
	lines := strings.SplitN(text, "\n", 4)
	if len(lines) < 4 {
		return checkpoint{}, fmt.Errorf("%w: checkpoint has fewer than 3 lines", ErrBadRequest)
	}
	size, err := parseSize(lines[1])
	if err != nil {
		return checkpoint{}, fmt.Errorf("%w: checkpoint size", ErrBadRequest)
	}
	root, err := parseRoot(lines[2])
	if err != nil {
		return checkpoint{}, fmt.Errorf("%w: checkpoint root", ErrBadRequest)
	}
	return checkpoint{origin: lines[0], size: size, root: root}, nil
}

// AddCheckpoint handles one add-checkpoint body and returns the
// cosignature line(s) to answer with. It cosigns only a checkpoint signed
// by a trusted key of its origin, whose old size is the size it last
// cosigned (0 for a log it never cosigned), and that the consistency proof
// shows to extend it; the new state is durable before it returns.
//
// Errors: ErrBadRequest, ErrUnknownLog, ErrBadSignature, *ConflictError,
// ErrBadProof (see StatusOf); a state write error (500, nothing cosigned).
func (w *Witness) AddCheckpoint(body []byte) ([]byte, error) {
	r, err := parseRequest(body)
	if err != nil {
		return nil, err
	}
	origin, _, _ := strings.Cut(string(r.note), "\n")
	keys, ok := w.logs[origin]
	if !ok {
		return nil, ErrUnknownLog
	}
	n, err := note.Open(r.note, keys)
	if err != nil {
		var ue *note.UnverifiedNoteError
		var ie *note.InvalidSignatureError
		if errors.As(err, &ue) || errors.As(err, &ie) {
			return nil, ErrBadSignature
		}
		return nil, fmt.Errorf("%w: checkpoint note", ErrBadRequest)
	}
	cp, err := parseCheckpoint(n.Text)
	if err != nil {
		return nil, err
	}
	if cp.origin != origin {
		return nil, fmt.Errorf("%w: origin", ErrBadRequest)
	}
	if cp.size == 0 {
		return nil, fmt.Errorf("%w: an empty tree", ErrBadRequest)
	}
	if r.old > cp.size {
		return nil, fmt.Errorf("%w: old size above the checkpoint's", ErrBadRequest)
	}

	// From the state check to the state write, one request at a time.
	w.mu.Lock()
	defer w.mu.Unlock()
	known := w.state[origin]
	if r.old != known.Size {
		return nil, &ConflictError{Size: known.Size}
	}
	if known.Size > 0 {
		kroot, _ := parseRoot(known.Root)
		switch {
		case cp.size == known.Size && cp.root != kroot:
			w.refused(origin, r, "another root at the cosigned size")
			return nil, &ConflictError{Size: known.Size, SameSize: true}
		case cp.size == known.Size && len(r.proof) > 0:
			return nil, fmt.Errorf("%w: a proof between equal sizes", ErrBadRequest)
		case cp.size > known.Size:
			if err := tlog.CheckTree(r.proof, int64(cp.size), cp.root, int64(known.Size), kroot); err != nil {
				w.refused(origin, r, "consistency proof does not verify")
				return nil, ErrBadProof
			}
		}
	}
	logSigned, err := note.Sign(&note.Note{Text: n.Text, Sigs: n.Sigs})
	if err != nil {
		return nil, err
	}
	next := treeState{Size: cp.size, Root: base64.StdEncoding.EncodeToString(cp.root[:]), Note: string(logSigned)}
	if next != known {
		if err := w.persist(origin, next); err != nil {
			return nil, err
		}
	}
	signed, err := note.Sign(&note.Note{Text: n.Text}, w.signer)
	if err != nil {
		return nil, err
	}
	// The cosignature is the one line note.Sign appended.
	i := bytes.LastIndex(signed, []byte("\n\n"))
	return signed[i+2:], nil
}

// refused logs a request refused by a correctly signed checkpoint: it may
// be the evidence that the log misbehaved.
func (w *Witness) refused(origin string, r request, why string) {
	w.log.Warn("witness refused a signed checkpoint", "origin", origin, "old", r.old, "reason", why, "checkpoint", string(r.note))
}

// persist writes the state with origin at next, atomically, and only then
// updates the state in memory. Called with w.mu held.
func (w *Witness) persist(origin string, next treeState) error {
	sf := stateFile{Version: 1, Logs: map[string]treeState{}}
	for o, st := range w.state {
		sf.Logs[o] = st
	}
	sf.Logs[origin] = next
	b, err := json.MarshalIndent(sf, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(w.path, append(b, '\n')); err != nil {
		return fmt.Errorf("witness: state file: %w", err)
	}
	w.state[origin] = next
	return nil
}

// writeAtomic replaces path with b: a temporary file in the same
// directory, fsynced, renamed over path, and the directory fsynced, so a
// crash leaves the old state or the new one, never a torn one.
func writeAtomic(path string, b []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // after a successful rename: nothing to remove
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
