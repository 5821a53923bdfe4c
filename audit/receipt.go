package audit

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/cloison/cloison"
)

// Receipts (receipt.go): what a node hands a client with every
// acknowledged request, the role of a signed certificate timestamp in
// Certificate Transparency (RFC 6962 s. 3): the log key's promise that the
// entry is in a signed checkpoint of the log by a deadline.

// ReceiptDomain is the first line of every receipt's signed text. No
// checkpoint (whose second line is a decimal size) and no cosignature
// (whose first line is "cosignature/v1") has this text, so a receipt's
// signature can never be replayed as either, although the log key signs
// all of them.
const ReceiptDomain = "cloison-receipt/v1"

// MaxMergeDelay is the longest the log key promises an acknowledged entry
// stays out of a signed checkpoint: a receipt's deadline is its time plus
// this. Integration (IntegrationBound, 1 s), the next tree note (about a
// second) and the witnesses' round (about a second) take seconds; the
// minute covers retries and another node's integrator taking over the
// staged rows of a node that died. A node down longer than this, alone,
// breaks its promises, and verifiers say so: a broken promise is what a
// receipt exists to show.
const MaxMergeDelay = time.Minute

// ErrReceiptBroken is matched by *ReceiptsError: an entry a receipt
// promised is not in the verified log although its deadline has passed.
var ErrReceiptBroken = cloison.NewError(cloison.CodeConflict, "audit: a receipt's entry is not in the log by its deadline")

// Receipt is the signed statement of one acknowledged entry. It binds what
// is known when the request is acknowledged: the entry's leaf hash (the
// same in the global log and, for an entry naming only its tenant, in the
// tenant's log: TenantLeaf), its kind, tenant and request, the time, and
// the deadline. It carries no log position: the entry is staged when the
// node answers, and its position is given by the integrator later (the
// staging row's id is the database's, which no outsider can check). A
// verifier finds the position by the leaf hash in a log it has verified.
type Receipt struct {
	Origin   Name // the log (its key name)
	Tenant   cloison.TenantID
	Request  cloison.RequestID
	Kind     Kind
	Leaf     tlog.Hash
	Time     time.Time // when the node acknowledged the entry (whole seconds, UTC)
	Deadline time.Time // Time + MaxMergeDelay
}

// NewReceipt is the receipt of rec (a record as the ledger writer returned
// it: its canonical payload is the leaf) for request, acknowledged at now.
//
// Errors: ErrInvalidEvent for a record without payload or a name outside
// the ledger's alphabet.
func NewReceipt(origin Name, rec Record, request cloison.RequestID, now time.Time) (Receipt, error) {
	if len(rec.Payload) == 0 {
		return Receipt{}, fmt.Errorf("%w: a receipt needs the entry's payload", ErrInvalidEvent)
	}
	t := now.UTC().Truncate(time.Second)
	r := Receipt{Origin: origin, Tenant: rec.Tenant, Request: request, Kind: rec.Kind, Leaf: LeafHash(rec),
		Time: t, Deadline: t.Add(MaxMergeDelay)}
	return r, r.check()
}

func (r Receipt) check() error {
	return firstErr(CheckName("origin", string(r.Origin)), CheckName("tenant", string(r.Tenant)),
		CheckName("request", string(r.Request)), CheckName("kind", string(r.Kind)))
}

// text is the signed body: one field a line, in this order.
func (r Receipt) text() string {
	return fmt.Sprintf("%s\norigin %s\ntenant %s\nrequest %s\nkind %s\nleaf %s\ntime %d\ndeadline %d\n",
		ReceiptDomain, r.Origin, r.Tenant, r.Request, r.Kind, base64.StdEncoding.EncodeToString(r.Leaf[:]),
		r.Time.Unix(), r.Deadline.Unix())
}

// SignReceipt signs r with the log's note signer (TreeSigner: key name =
// origin) and returns it as a client carries it: the signed note in
// standard base64, one line, fit for an HTTP header or a gRPC trailer.
//
// Errors: ErrInvalidEvent for a receipt whose names are invalid or whose
// origin is not the signer's name; the signer's error.
func SignReceipt(signer note.Signer, r Receipt) (string, error) {
	if err := r.check(); err != nil {
		return "", err
	}
	if signer.Name() != string(r.Origin) {
		return "", fmt.Errorf("%w: receipt origin %q, signer %q", ErrInvalidEvent, r.Origin, signer.Name())
	}
	msg, err := note.Sign(&note.Note{Text: r.text()}, signer)
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(msg), nil
}

// OpenReceipt checks an encoded receipt against the published verifier
// key (TreeVerifierKey; several: the current and earlier log keys) and
// returns what it states. The origin must be the name of the key that
// signed it.
//
// Errors: ErrMalformed (not base64, not a receipt's text, a verifier key
// that does not parse); ErrBadSignature (no valid signature by those
// keys).
func OpenReceipt(enc string, verifierKeys ...string) (Receipt, error) {
	msg, err := base64.StdEncoding.DecodeString(strings.TrimSpace(enc))
	if err != nil {
		return Receipt{}, fmt.Errorf("%w: receipt: not base64", ErrMalformed)
	}
	var vs []note.Verifier
	for _, k := range verifierKeys {
		v, err := note.NewVerifier(k)
		if err != nil {
			return Receipt{}, fmt.Errorf("%w: verifier key: %v", ErrMalformed, err)
		}
		vs = append(vs, v)
	}
	n, err := note.Open(msg, note.VerifierList(vs...))
	if err != nil {
		var unknown *note.UnverifiedNoteError
		var inv *note.InvalidSignatureError
		if errors.As(err, &unknown) || errors.As(err, &inv) {
			return Receipt{}, fmt.Errorf("%w: receipt: %v", ErrBadSignature, err)
		}
		return Receipt{}, fmt.Errorf("%w: receipt: %v", ErrMalformed, err)
	}
	r, err := parseReceipt(n.Text)
	if err != nil {
		return Receipt{}, err
	}
	if string(r.Origin) != n.Sigs[0].Name {
		return Receipt{}, fmt.Errorf("%w: receipt of log %q under the key of %q", ErrBadSignature, r.Origin, n.Sigs[0].Name)
	}
	return r, nil
}

// parseReceipt reads a receipt's text strictly: the text it renders back
// must be the text signed.
func parseReceipt(text string) (Receipt, error) {
	bad := func(why string) (Receipt, error) {
		return Receipt{}, fmt.Errorf("%w: receipt: %s", ErrMalformed, why)
	}
	lines := strings.Split(text, "\n")
	if len(lines) != 9 || lines[0] != ReceiptDomain || lines[8] != "" {
		return bad("not a " + ReceiptDomain + " text")
	}
	field := func(i int, name string) (string, bool) {
		v, ok := strings.CutPrefix(lines[i], name+" ")
		return v, ok
	}
	var r Receipt
	var vals [7]string
	for i, name := range []string{"origin", "tenant", "request", "kind", "leaf", "time", "deadline"} {
		v, ok := field(i+1, name)
		if !ok {
			return bad("line " + strconv.Itoa(i+2) + " is not " + name)
		}
		vals[i] = v
	}
	r.Origin, r.Tenant, r.Request, r.Kind = Name(vals[0]), cloison.TenantID(vals[1]), cloison.RequestID(vals[2]), Kind(vals[3])
	leaf, err := base64.StdEncoding.DecodeString(vals[4])
	if err != nil || len(leaf) != len(r.Leaf) {
		return bad("leaf")
	}
	copy(r.Leaf[:], leaf)
	ts, err1 := strconv.ParseInt(vals[5], 10, 64)
	dl, err2 := strconv.ParseInt(vals[6], 10, 64)
	if err1 != nil || err2 != nil || dl < ts {
		return bad("time")
	}
	r.Time, r.Deadline = time.Unix(ts, 0).UTC(), time.Unix(dl, 0).UTC()
	if err := r.check(); err != nil || r.text() != text {
		return bad("not canonical")
	}
	return r, nil
}

// ReadReceipts reads a file of encoded receipts, one a line (blank lines
// and lines starting with # skipped), each checked by OpenReceipt.
//
// Errors: OpenReceipt's, naming the line.
func ReadReceipts(b []byte, verifierKeys ...string) ([]Receipt, error) {
	var out []Receipt
	for i, line := range bytes.Split(b, []byte("\n")) {
		s := strings.TrimSpace(string(line))
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		r, err := OpenReceipt(s, verifierKeys...)
		if err != nil {
			return nil, fmt.Errorf("receipts line %d: %w", i+1, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// ReceiptReport is the outcome of checking receipts against a verified
// log: Included (found at a position of the verified tree), Pending (not
// found, deadline not passed), Missing (not found past the deadline: the
// log broke its promise, or its tail was cut).
type ReceiptReport struct {
	Included []ReceiptAt
	Pending  []Receipt
	Missing  []Receipt
}

// ReceiptAt is a receipt with the position (1-based) at which its leaf was
// found.
type ReceiptAt struct {
	Receipt
	Pos uint64
}

// Err is nil when no receipt is missing, otherwise a *ReceiptsError.
func (r ReceiptReport) Err() error {
	if len(r.Missing) == 0 {
		return nil
	}
	return &ReceiptsError{Missing: r.Missing}
}

func (r ReceiptReport) String() string {
	return fmt.Sprintf("receipts: %d included, %d pending (deadline not passed), %d missing", len(r.Included), len(r.Pending), len(r.Missing))
}

// CheckReceipts sorts receipts by what a verified log holds: found(leaf)
// gives the leaf's position in the verified tree (the caller recomputed
// that tree from its leaves, or checked an inclusion proof), now is the
// verifier's clock. A receipt of another origin is missing: it promised
// an entry in a log this is not.
func CheckReceipts(rs []Receipt, origin Name, now time.Time, found func(tlog.Hash) (uint64, bool)) ReceiptReport {
	var rep ReceiptReport
	for _, r := range rs {
		if r.Origin == origin {
			if pos, ok := found(r.Leaf); ok {
				rep.Included = append(rep.Included, ReceiptAt{Receipt: r, Pos: pos})
				continue
			}
		}
		if now.Before(r.Deadline) {
			rep.Pending = append(rep.Pending, r)
			continue
		}
		rep.Missing = append(rep.Missing, r)
	}
	return rep
}

// ReceiptsError names every receipt whose entry the verified log lacks
// past its deadline. errors.Is(err, ErrReceiptBroken) holds for it.
type ReceiptsError struct {
	Missing []Receipt
}

func (e *ReceiptsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "audit: %d receipted entries are not in the log past their deadline:", len(e.Missing))
	for _, r := range e.Missing {
		fmt.Fprintf(&b, "\n  request %s (tenant %s, %s, leaf %s, acknowledged %s, due %s)", r.Request, r.Tenant, r.Kind,
			base64.StdEncoding.EncodeToString(r.Leaf[:]), r.Time.Format(time.RFC3339), r.Deadline.Format(time.RFC3339))
	}
	return b.String()
}

// Unwrap lets cloison.ErrorCode find the conflict code.
func (e *ReceiptsError) Unwrap() error { return ErrReceiptBroken }
